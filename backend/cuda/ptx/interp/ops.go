package interp

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
)

// The instructions: decode turns a parsed instruction into its function,
// by opcode and type, refusing any it does not know (an unknown opcode,
// modifier or operand kind is an error naming the line).

// typ is an instruction type suffix: kind 'u', 's', 'b', 'f' or 'p'
// (.pred) and width in bits.
type typ struct {
	kind byte
	bits int
}

func parseType(s string) (typ, bool) {
	if s == "pred" {
		return typ{'p', 1}, true
	}
	if len(s) < 2 {
		return typ{}, false
	}
	k := s[0]
	if k != 'u' && k != 's' && k != 'b' && k != 'f' {
		return typ{}, false
	}
	var bits int
	if _, err := fmt.Sscanf(s[1:], "%d", &bits); err != nil {
		return typ{}, false
	}
	switch bits {
	case 8, 16, 32, 64:
	default:
		return typ{}, false
	}
	if k == 'f' && bits != 16 && bits != 32 && bits != 64 {
		return typ{}, false
	}
	return typ{k, bits}, true
}

func (t typ) mask() uint64 {
	if t.bits >= 64 {
		return ^uint64(0)
	}
	return 1<<t.bits - 1
}

// sext sign-extends the low bits of v.
func (t typ) sext(v uint64) int64 {
	sh := 64 - t.bits
	return int64(v<<sh) >> sh
}

func f32(v uint64) float32 { return math.Float32frombits(uint32(v)) }
func f64(v uint64) float64 { return math.Float64frombits(v) }
func b32(f float32) uint64 { return uint64(math.Float32bits(f)) }
func b64(f float64) uint64 { return math.Float64bits(f) }

// decoder is one instruction being decoded.
type decoder struct {
	p      *Program
	f      *Func
	in     *inst
	src    *Inst
	slotOf func(Operand) int
	slots  map[string]int
}

func (d *decoder) errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

// arity checks the operand count.
func (d *decoder) arity(n int) error {
	if len(d.src.Args) != n {
		return d.errorf("%d operands, want %d", len(d.src.Args), n)
	}
	return nil
}

// dst returns the slot of operand k, which must be a declared register.
func (d *decoder) dst(k int) (int, error) {
	o := d.src.Args[k]
	if o.Kind != OpReg {
		return 0, d.errorf("operand %d must be a register", k+1)
	}
	if _, ok := d.f.Regs[o.Name]; !ok {
		return 0, d.errorf("operand %d: %s is not a writable register", k+1, o.Name)
	}
	return d.slots[o.Name], nil
}

// val returns the slot of operand k: a register, special register,
// immediate or the shared array's name.
func (d *decoder) val(k int) (int, error) {
	o := d.src.Args[k]
	if o.Kind == OpMem {
		return 0, d.errorf("operand %d must not be a memory reference", k+1)
	}
	s := d.slotOf(o)
	if s < 0 {
		return 0, d.errorf("operand %d (%s) is not a register, immediate or the shared array", k+1, o.Name)
	}
	return s, nil
}

// regs sets in.d from operand 0 and in.a, in.b, in.c from the values after.
func (d *decoder) regs(n int) error {
	if err := d.arity(n); err != nil {
		return err
	}
	var err error
	if d.in.d, err = d.dst(0); err != nil {
		return err
	}
	ptrs := []*int{&d.in.a, &d.in.b, &d.in.c}
	for k := 1; k < n; k++ {
		if *ptrs[k-1], err = d.val(k); err != nil {
			return err
		}
	}
	return nil
}

// mem sets in.a and in.off from the memory reference of operand k.
func (d *decoder) mem(k int, space byte) error {
	o := d.src.Args[k]
	if o.Kind != OpMem {
		return d.errorf("operand %d must be a memory reference", k+1)
	}
	d.in.off, d.in.space = o.Off, space
	switch {
	case space == 'p':
		s, ok := d.slots["param:"+o.Name]
		if !ok || o.Off != 0 {
			return d.errorf("ld.param reads a parameter, not %s", o.Name)
		}
		d.in.a = s
	case o.Name == d.f.SharedName:
		if space != 's' {
			return d.errorf("the shared array is read with ld.shared and st.shared")
		}
		d.in.a = d.slots["sym:"+o.Name]
	default:
		if _, ok := d.f.Regs[o.Name]; !ok {
			return d.errorf("memory base %s is not a register", o.Name)
		}
		d.in.a = d.slots[o.Name]
	}
	return nil
}

// decode decodes src into in.
func decode(p *Program, f *Func, in *inst, src *Inst, slotOf func(Operand) int, slots map[string]int) error {
	d := &decoder{p: p, f: f, in: in, src: src, slotOf: slotOf, slots: slots}
	parts := strings.Split(src.Op, ".")
	base, mods := parts[0], parts[1:]
	switch base {
	case "bra":
		if len(mods) > 1 || (len(mods) == 1 && mods[0] != "uni") || len(src.Args) != 1 || src.Args[0].Kind != OpSymbol {
			return errors.New("bra takes one label")
		}
		t, ok := f.Labels[src.Args[0].Name]
		if !ok {
			return fmt.Errorf("no label %s", src.Args[0].Name)
		}
		in.target = t
		in.exec = func(t *thread, in *inst) ctl { t.pc = in.target; return ctlJump }
		return nil
	case "ret", "exit":
		if len(mods) > 0 || len(src.Args) > 0 {
			return fmt.Errorf("%s takes nothing", base)
		}
		in.exec = func(*thread, *inst) ctl { return ctlExit }
		return nil
	case "bar", "barrier":
		if len(mods) != 1 || mods[0] != "sync" || len(src.Args) != 1 || src.Args[0].Kind != OpImm || src.Args[0].Imm != 0 {
			return errors.New("only bar.sync 0 is run")
		}
		in.exec = func(*thread, *inst) ctl { return ctlBarrier }
		return nil
	}
	if len(mods) == 0 {
		return fmt.Errorf("unknown instruction %s", src.Op)
	}
	t, ok := parseType(mods[len(mods)-1])
	if !ok {
		return fmt.Errorf("unknown type .%s", mods[len(mods)-1])
	}
	mods = mods[:len(mods)-1]
	switch base {
	case "mov", "cvta":
		if base == "cvta" && strings.Join(mods, ".") != "to.global" {
			return errors.New("only cvta.to.global is run")
		} else if base == "mov" && len(mods) > 0 {
			return errors.New("mov takes no modifier")
		}
		if err := d.regs(2); err != nil {
			return err
		}
		m := t.mask()
		in.exec = func(t *thread, in *inst) ctl { t.regs[in.d] = t.regs[in.a] & m; return ctlNext }
		return nil
	case "ld", "st":
		return d.memory(base == "st", mods, t)
	case "atom", "red":
		return d.atomic(base == "red", mods, t)
	case "setp":
		return d.setp(mods, t)
	case "selp":
		if len(mods) > 0 {
			return errors.New("selp takes no modifier")
		}
		if err := d.regs(4); err != nil {
			return err
		}
		in.exec = func(t *thread, in *inst) ctl {
			if t.regs[in.c] != 0 {
				t.regs[in.d] = t.regs[in.a]
			} else {
				t.regs[in.d] = t.regs[in.b]
			}
			return ctlNext
		}
		return nil
	case "cvt":
		return d.cvt(parts[1:])
	}
	if t.kind == 'f' {
		return d.float(base, mods, t)
	}
	return d.integer(base, mods, t)
}

// memory decodes ld and st: .param (ld .u64 only), .global, .shared, with
// .volatile accepted.
func (d *decoder) memory(store bool, mods []string, t typ) error {
	var space byte
	for _, m := range mods {
		switch m {
		case "global":
			space = 'g'
		case "shared":
			space = 's'
		case "param":
			space = 'p'
		case "volatile":
		default:
			return fmt.Errorf("unknown modifier .%s", m)
		}
	}
	if space == 0 {
		return errors.New("a load or store names its state space (.global, .shared or .param)")
	}
	in := d.in
	in.width = t.bits / 8
	if err := d.arity(2); err != nil {
		return err
	}
	if store {
		if space == 'p' {
			return errors.New("st.param is not run")
		}
		if err := d.mem(0, space); err != nil {
			return err
		}
		var err error
		if in.b, err = d.val(1); err != nil {
			return err
		}
		in.exec = storeExec
		return nil
	}
	var err error
	if in.d, err = d.dst(0); err != nil {
		return err
	}
	if err := d.mem(1, space); err != nil {
		return err
	}
	if space == 'p' {
		if t.bits != 64 {
			return errors.New("parameters are .u64")
		}
		in.exec = func(t *thread, in *inst) ctl { t.regs[in.d] = t.regs[in.a]; return ctlNext }
		return nil
	}
	signed := t.kind == 's'
	in.exec = func(th *thread, in *inst) ctl {
		b, c := th.access(in, false)
		if c != ctlNext {
			return c
		}
		var v uint64
		switch in.width {
		case 1:
			v = uint64(b[0])
		case 2:
			v = uint64(binary.LittleEndian.Uint16(b))
		case 4:
			v = uint64(binary.LittleEndian.Uint32(b))
		default:
			v = binary.LittleEndian.Uint64(b)
		}
		if signed {
			v = uint64(typ{'s', in.width * 8}.sext(v))
		}
		th.regs[in.d] = v
		return ctlNext
	}
	return nil
}

// access returns the bytes in's memory reference touches.
func (t *thread) access(in *inst, write bool) ([]byte, ctl) {
	a := t.regs[in.a] + uint64(in.off)
	if in.space == 's' {
		return t.sharedBytes(in, a, in.width, write)
	}
	return t.global(in, a, in.width)
}

func storeExec(t *thread, in *inst) ctl {
	b, c := t.access(in, true)
	if c != ctlNext {
		return c
	}
	v := t.regs[in.b]
	switch in.width {
	case 1:
		b[0] = byte(v)
	case 2:
		binary.LittleEndian.PutUint16(b, uint16(v))
	case 4:
		binary.LittleEndian.PutUint32(b, uint32(v))
	default:
		binary.LittleEndian.PutUint64(b, v)
	}
	return ctlNext
}

// atomic decodes atom.global.cas.b32, atom.global.add.f32 and
// red.global.add.f32: global memory only, serialized across blocks.
func (d *decoder) atomic(red bool, mods []string, t typ) error {
	if len(mods) != 2 || mods[0] != "global" {
		return errors.New("atomics run on .global memory: atom.global.OP.T")
	}
	in := d.in
	in.width = t.bits / 8
	op := mods[1]
	switch {
	case op == "cas" && t.bits == 32 && !red:
		if err := d.arity(4); err != nil {
			return err
		}
		var err error
		if in.d, err = d.dst(0); err != nil {
			return err
		}
		if err := d.mem(1, 'g'); err != nil {
			return err
		}
		if in.b, err = d.val(2); err != nil {
			return err
		}
		if in.c, err = d.val(3); err != nil {
			return err
		}
		in.exec = func(th *thread, in *inst) ctl {
			th.blk.atomMu.Lock()
			defer th.blk.atomMu.Unlock()
			b, c := th.access(in, true)
			if c != ctlNext {
				return c
			}
			old := binary.LittleEndian.Uint32(b)
			if old == uint32(th.regs[in.b]) {
				binary.LittleEndian.PutUint32(b, uint32(th.regs[in.c]))
			}
			th.regs[in.d] = uint64(old)
			return ctlNext
		}
		return nil
	case op == "add" && t == typ{'f', 32}:
		k := 0
		if !red {
			if err := d.arity(3); err != nil {
				return err
			}
			var err error
			if in.d, err = d.dst(0); err != nil {
				return err
			}
			k = 1
		} else if err := d.arity(2); err != nil {
			return err
		}
		if err := d.mem(k, 'g'); err != nil {
			return err
		}
		var err error
		if in.b, err = d.val(k + 1); err != nil {
			return err
		}
		in.exec = func(th *thread, in *inst) ctl {
			th.blk.atomMu.Lock()
			defer th.blk.atomMu.Unlock()
			b, c := th.access(in, true)
			if c != ctlNext {
				return c
			}
			old := binary.LittleEndian.Uint32(b)
			binary.LittleEndian.PutUint32(b, math.Float32bits(math.Float32frombits(old)+f32(th.regs[in.b])))
			if !red {
				th.regs[in.d] = uint64(old)
			}
			return ctlNext
		}
		return nil
	}
	return fmt.Errorf("atomic .%s.%c%d is not run", op, t.kind, t.bits)
}

// setp decodes setp.CMP.T p, a, b.
func (d *decoder) setp(mods []string, t typ) error {
	if len(mods) != 1 {
		return errors.New("setp.CMP.T")
	}
	if err := d.regs(3); err != nil {
		return err
	}
	cmp := mods[0]
	in := d.in
	b2u := func(b bool) uint64 {
		if b {
			return 1
		}
		return 0
	}
	if t.kind == 'f' {
		if t.bits == 16 {
			return errors.New("setp on .f16 is not run")
		}
		get := func(v uint64) float64 { return f64(v) }
		if t.bits == 32 {
			get = func(v uint64) float64 { return float64(f32(v)) }
		}
		var f func(x, y float64) bool
		un := func(g func(x, y float64) bool) func(x, y float64) bool {
			return func(x, y float64) bool { return x != x || y != y || g(x, y) }
		}
		ord := map[string]func(x, y float64) bool{
			"eq": func(x, y float64) bool { return x == y }, "ne": func(x, y float64) bool { return x == x && y == y && x != y },
			"lt": func(x, y float64) bool { return x < y }, "le": func(x, y float64) bool { return x <= y },
			"gt": func(x, y float64) bool { return x > y }, "ge": func(x, y float64) bool { return x >= y },
			"num": func(x, y float64) bool { return x == x && y == y }, "nan": func(x, y float64) bool { return x != x || y != y },
		}
		if g, ok := ord[cmp]; ok {
			f = g
		} else if g, ok := ord[strings.TrimSuffix(cmp, "u")]; ok && strings.HasSuffix(cmp, "u") && cmp != "nan" && cmp != "num" {
			if cmp == "neu" {
				f = func(x, y float64) bool { return !(x == y) }
			} else {
				f = un(g)
			}
		} else {
			return fmt.Errorf("unknown comparison .%s", cmp)
		}
		in.exec = func(th *thread, in *inst) ctl {
			th.regs[in.d] = b2u(f(get(th.regs[in.a]), get(th.regs[in.b])))
			return ctlNext
		}
		return nil
	}
	m := t.mask()
	signed := t.kind == 's'
	var f func(x, y uint64) bool
	cmpU := map[string]func(x, y uint64) bool{
		"eq": func(x, y uint64) bool { return x == y }, "ne": func(x, y uint64) bool { return x != y },
		"lo": func(x, y uint64) bool { return x < y }, "ls": func(x, y uint64) bool { return x <= y },
		"hi": func(x, y uint64) bool { return x > y }, "hs": func(x, y uint64) bool { return x >= y },
	}
	switch {
	case cmpU[cmp] != nil:
		f = cmpU[cmp]
	case signed:
		sf := map[string]func(x, y int64) bool{"lt": func(x, y int64) bool { return x < y }, "le": func(x, y int64) bool { return x <= y },
			"gt": func(x, y int64) bool { return x > y }, "ge": func(x, y int64) bool { return x >= y }}[cmp]
		if sf == nil {
			return fmt.Errorf("unknown comparison .%s", cmp)
		}
		f = func(x, y uint64) bool { return sf(t.sext(x), t.sext(y)) }
	default:
		f = map[string]func(x, y uint64) bool{"lt": cmpU["lo"], "le": cmpU["ls"], "gt": cmpU["hi"], "ge": cmpU["hs"]}[cmp]
		if f == nil {
			return fmt.Errorf("unknown comparison .%s", cmp)
		}
	}
	in.exec = func(th *thread, in *inst) ctl {
		th.regs[in.d] = b2u(f(th.regs[in.a]&m, th.regs[in.b]&m))
		return ctlNext
	}
	return nil
}
