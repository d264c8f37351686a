package interp

import (
	"fmt"
	"strconv"
	"strings"
)

// The parser reads the subset of PTX the renderer (package ptx) writes:
// the module directives (.version, .target, .address_size), entries with
// .u64 parameters and .maxntid, register vectors (.reg .TYPE %name<N>),
// one .shared byte array, labels, and instructions with an optional
// predicate guard and operands that are registers, special registers
// (%tid.x ...), immediates (decimal, 0fXXXXXXXX float32, 0dXXXX... float64
// bit patterns), labels, the shared array's name, and memory references
// [base] or [base+offset]. Anything else is an error naming the line.

// token is one lexical token and the line it is on.
type token struct {
	text string
	line int
}

// isWord reports whether c continues an identifier, register, number or
// dotted opcode.
func isWord(c byte) bool {
	return c == '_' || c == '.' || c == '%' || c == '$' || (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

// lex splits src into tokens, dropping // comments.
func lex(src string) ([]token, error) {
	var toks []token
	for n, line := range strings.Split(src, "\n") {
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		for i := 0; i < len(line); {
			c := line[i]
			switch {
			case c == ' ' || c == '\t' || c == '\r':
				i++
			case strings.IndexByte("(){}[],;:+@!<>", c) >= 0:
				toks = append(toks, token{string(c), n + 1})
				i++
			case c == '-' || isWord(c):
				j := i + 1
				for j < len(line) && isWord(line[j]) {
					j++
				}
				toks = append(toks, token{line[i:j], n + 1})
				i = j
			default:
				return nil, fmt.Errorf("ptx line %d: unexpected character %q", n+1, c)
			}
		}
	}
	return toks, nil
}

// Module is a parsed PTX module.
type Module struct {
	Version, Target string
	Entries         []*Func
}

// Func is one parsed .entry.
type Func struct {
	Name       string
	Params     []string
	MaxNTid    int
	Regs       map[string]regType // every declared register, by name
	Shared     int                // bytes of the .shared array (0: none)
	SharedName string
	Code       []Inst
	Labels     map[string]int // label -> index of the next instruction
}

// Entry returns the entry named name.
func (m *Module) Entry(name string) (*Func, error) {
	for _, f := range m.Entries {
		if f.Name == name {
			return f, nil
		}
	}
	return nil, fmt.Errorf("ptx: the module has no entry %q", name)
}

// Inst is one parsed instruction.
type Inst struct {
	Guard    string // predicate register, or ""
	GuardNot bool
	Op       string // the opcode with its modifiers, e.g. "ld.global.f32"
	Args     []Operand
	Line     int
	Text     string // as written, for messages
}

// Operand is one instruction operand.
type Operand struct {
	Kind OperandKind
	Name string // a register, special register, label, parameter or symbol
	Imm  uint64 // an immediate's bits (int64 two's complement for integers)
	Off  int64  // a memory reference's offset
}

// OperandKind says what an Operand is.
type OperandKind uint8

// The operand kinds.
const (
	OpReg    OperandKind = iota // %r1, %tid.x
	OpImm                       // 12, -3, 0f3F800000, 0d3FF0000000000000
	OpSymbol                    // a label or the shared array's name
	OpMem                       // [name] or [name+off]
)

// regType is a declared register's type.
type regType uint8

const (
	rPred regType = iota
	rB16
	rB32
	rB64
	rF32
	rF64
)

var regTypes = map[string]regType{".pred": rPred, ".b16": rB16, ".u16": rB16, ".s16": rB16, ".b32": rB32, ".u32": rB32,
	".s32": rB32, ".b64": rB64, ".u64": rB64, ".s64": rB64, ".f32": rF32, ".f64": rF64}

// parser walks the tokens.
type parser struct {
	toks  []token
	i     int
	lines []string // the source lines, for messages
}

func (p *parser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i].text
	}
	return ""
}

func (p *parser) line() int {
	if p.i < len(p.toks) {
		return p.toks[p.i].line
	}
	if len(p.toks) > 0 {
		return p.toks[len(p.toks)-1].line
	}
	return 0
}

func (p *parser) next() string {
	s := p.peek()
	if p.i < len(p.toks) {
		p.i++
	}
	return s
}

func (p *parser) errorf(format string, args ...any) error {
	return fmt.Errorf("ptx line %d: %s", p.line(), fmt.Sprintf(format, args...))
}

func (p *parser) expect(s string) error {
	if got := p.next(); got != s {
		p.i--
		return p.errorf("expected %q, found %q", s, got)
	}
	return nil
}

// Parse parses a module.
func Parse(src string) (*Module, error) {
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks, lines: strings.Split(src, "\n")}
	m := &Module{}
	for p.peek() != "" {
		switch d := p.next(); d {
		case ".version":
			m.Version = p.next()
		case ".target":
			m.Target = p.next()
		case ".address_size":
			if a := p.next(); a != "64" {
				return nil, p.errorf(".address_size %s: only 64 is read", a)
			}
		case ".visible":
			if err := p.expect(".entry"); err != nil {
				return nil, err
			}
			f, err := p.entry()
			if err != nil {
				return nil, err
			}
			m.Entries = append(m.Entries, f)
		default:
			p.i--
			return nil, p.errorf("unexpected %q at module level", d)
		}
	}
	if len(m.Entries) == 0 {
		return nil, fmt.Errorf("ptx: no .entry in the module")
	}
	return m, nil
}

// entry parses an .entry after the keyword.
func (p *parser) entry() (*Func, error) {
	f := &Func{Name: p.next(), Regs: map[string]regType{}, Labels: map[string]int{}, MaxNTid: 1024}
	if f.Name == "" || !isIdent(f.Name) {
		return nil, p.errorf("bad entry name %q", f.Name)
	}
	if err := p.expect("("); err != nil {
		return nil, err
	}
	for p.peek() != ")" {
		if err := p.expect(".param"); err != nil {
			return nil, err
		}
		if t := p.next(); t != ".u64" {
			return nil, p.errorf("parameter of type %s: only .u64 is read", t)
		}
		name := p.next()
		if !isIdent(name) {
			return nil, p.errorf("bad parameter name %q", name)
		}
		f.Params = append(f.Params, name)
		if p.peek() == "," {
			p.next()
		} else if p.peek() != ")" {
			return nil, p.errorf("expected , or ) after a parameter, found %q", p.peek())
		}
	}
	p.next()
	if p.peek() == ".maxntid" {
		p.next()
		dims := [3]int{1, 1, 1}
		for k := 0; k < 3; k++ {
			n, err := strconv.Atoi(p.next())
			if err != nil || n < 1 || n > 1024 {
				return nil, p.errorf("bad .maxntid")
			}
			dims[k] = n
			if k < 2 {
				if p.peek() != "," {
					break
				}
				p.next()
			}
		}
		f.MaxNTid = dims[0] * dims[1] * dims[2]
	}
	if err := p.expect("{"); err != nil {
		return nil, err
	}
	for {
		switch t := p.peek(); t {
		case "":
			return nil, p.errorf("entry %s has no closing }", f.Name)
		case "}":
			p.next()
			return f, f.check()
		case ".reg":
			if err := p.regDecl(f); err != nil {
				return nil, err
			}
		case ".shared":
			if err := p.sharedDecl(f); err != nil {
				return nil, err
			}
		default:
			if err := p.statement(f); err != nil {
				return nil, err
			}
		}
	}
}

// regDecl parses ".reg .TYPE %name<N>;" or ".reg .TYPE %name;".
func (p *parser) regDecl(f *Func) error {
	p.next()
	typ, ok := regTypes[p.next()]
	if !ok {
		p.i--
		return p.errorf("unknown register type %q", p.peek())
	}
	name := p.next()
	if !strings.HasPrefix(name, "%") || !isIdent(name[1:]) {
		return p.errorf("bad register name %q", name)
	}
	if p.peek() == "<" {
		p.next()
		n, err := strconv.Atoi(p.next())
		if err != nil || n < 0 || n > 1<<14 {
			return p.errorf("bad register count")
		}
		if err := p.expect(">"); err != nil {
			return err
		}
		for k := 0; k < n; k++ {
			f.Regs[fmt.Sprintf("%s%d", name, k)] = typ
		}
	} else {
		f.Regs[name] = typ
	}
	return p.expect(";")
}

// sharedDecl parses ".shared [.align N] .b8 name[N];".
func (p *parser) sharedDecl(f *Func) error {
	p.next()
	if p.peek() == ".align" {
		p.next()
		if _, err := strconv.Atoi(p.next()); err != nil {
			return p.errorf("bad .align")
		}
	}
	if err := p.expect(".b8"); err != nil {
		return err
	}
	if f.Shared > 0 {
		return p.errorf("a second .shared array: one is read")
	}
	f.SharedName = p.next()
	if !isIdent(f.SharedName) {
		return p.errorf("bad shared array name %q", f.SharedName)
	}
	if err := p.expect("["); err != nil {
		return err
	}
	n, err := strconv.Atoi(p.next())
	if err != nil || n < 1 || n > 228<<10 {
		return p.errorf("bad shared array size")
	}
	f.Shared = n
	if err := p.expect("]"); err != nil {
		return err
	}
	return p.expect(";")
}

// statement parses a label or an instruction.
func (p *parser) statement(f *Func) error {
	start := p.i
	line := p.line()
	if t := p.peek(); isIdent(t) && p.i+1 < len(p.toks) && p.toks[p.i+1].text == ":" {
		p.i += 2
		if _, dup := f.Labels[t]; dup {
			return p.errorf("label %s defined twice", t)
		}
		f.Labels[t] = len(f.Code)
		return nil
	}
	in := Inst{Line: line}
	if p.peek() == "@" {
		p.next()
		if p.peek() == "!" {
			p.next()
			in.GuardNot = true
		}
		in.Guard = p.next()
	}
	in.Op = p.next()
	if in.Op == "" || !isWordString(in.Op) {
		return p.errorf("expected an instruction, found %q", in.Op)
	}
	for p.peek() != ";" {
		if p.peek() == "" {
			return p.errorf("instruction %s has no ;", in.Op)
		}
		o, err := p.operand()
		if err != nil {
			return err
		}
		in.Args = append(in.Args, o)
		if p.peek() == "," {
			p.next()
		} else if p.peek() != ";" {
			return p.errorf("expected , or ; in %s, found %q", in.Op, p.peek())
		}
	}
	p.next()
	_ = start
	if line >= 1 && line <= len(p.lines) {
		in.Text = strings.TrimSpace(p.lines[line-1])
	}
	f.Code = append(f.Code, in)
	return nil
}

// operand parses one operand.
func (p *parser) operand() (Operand, error) {
	t := p.next()
	switch {
	case t == "[":
		base := p.next()
		if !isWordString(base) {
			return Operand{}, p.errorf("bad memory reference base %q", base)
		}
		o := Operand{Kind: OpMem, Name: base}
		if p.peek() == "+" {
			p.next()
			v, err := strconv.ParseInt(p.next(), 10, 64)
			if err != nil {
				return Operand{}, p.errorf("bad memory offset")
			}
			o.Off = v
		}
		return o, p.expect("]")
	case strings.HasPrefix(t, "%"):
		return Operand{Kind: OpReg, Name: t}, nil
	case strings.HasPrefix(t, "0f") && len(t) == 10:
		v, err := strconv.ParseUint(t[2:], 16, 32)
		if err != nil {
			return Operand{}, p.errorf("bad float32 immediate %q", t)
		}
		return Operand{Kind: OpImm, Imm: v}, nil
	case strings.HasPrefix(t, "0d") && len(t) == 18:
		v, err := strconv.ParseUint(t[2:], 16, 64)
		if err != nil {
			return Operand{}, p.errorf("bad float64 immediate %q", t)
		}
		return Operand{Kind: OpImm, Imm: v}, nil
	case t != "" && (t[0] == '-' || (t[0] >= '0' && t[0] <= '9')):
		v, err := strconv.ParseInt(t, 0, 64)
		if err != nil {
			u, uerr := strconv.ParseUint(t, 0, 64)
			if uerr != nil {
				return Operand{}, p.errorf("bad immediate %q", t)
			}
			return Operand{Kind: OpImm, Imm: u}, nil
		}
		return Operand{Kind: OpImm, Imm: uint64(v)}, nil
	case isIdent(t):
		return Operand{Kind: OpSymbol, Name: t}, nil
	}
	p.i--
	return Operand{}, p.errorf("bad operand %q", t)
}

// check verifies that every register an instruction names is declared and
// every branch target is a label.
func (f *Func) check() error {
	for _, in := range f.Code {
		if in.Guard != "" {
			if t, ok := f.Regs[in.Guard]; !ok || t != rPred {
				return fmt.Errorf("ptx line %d: guard %s is not a declared predicate", in.Line, in.Guard)
			}
		}
		for _, a := range in.Args {
			switch a.Kind {
			case OpReg:
				if _, ok := f.Regs[a.Name]; !ok && specialRegs[a.Name] == 0 {
					return fmt.Errorf("ptx line %d: register %s is not declared", in.Line, a.Name)
				}
			case OpMem:
				if _, ok := f.Regs[a.Name]; !ok && !contains(f.Params, a.Name) && a.Name != f.SharedName {
					return fmt.Errorf("ptx line %d: memory reference to %s, not a register, parameter or the shared array", in.Line, a.Name)
				}
			}
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// isIdent reports whether s is a PTX identifier.
func isIdent(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c == '$' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (i > 0 && c >= '0' && c <= '9')) {
			return false
		}
	}
	return true
}

func isWordString(s string) bool {
	for i := 0; i < len(s); i++ {
		if !isWord(s[i]) {
			return false
		}
	}
	return s != ""
}

// specialRegs are the special registers read (mov.u32 %r, %tid.x), by
// their slot in a thread's registers (see machine).
var specialRegs = map[string]int{"%tid.x": 1, "%ntid.x": 2, "%ctaid.x": 3, "%nctaid.x": 4}
