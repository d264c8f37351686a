package ptx

import (
	"fmt"
	"hash/fnv"
	"math"
	"strings"

	"github.com/headroom-ml/headroom/tensor"
)

// Kernel is one generated kernel: a PTX module holding one .entry, as the
// driver loads it (cuModuleLoadData) and ptxas assembles it.
type Kernel struct {
	// Name is the entry's name: the op's family and a hash of the module's
	// body, so that two instructions with the same kernel share it.
	Name string
	// Text is the whole module: .version, .target, .address_size and the
	// entry.
	Text string
	// Params is how many parameters the entry takes: each a .u64 device
	// address (an operand's start), in the order of the launch's Args.
	Params int
	// Block is the threads of each block (x only); Shared the bytes of
	// static shared memory the entry declares.
	Block, Shared int
}

// The register kinds of a kernel, each declared as one vector of
// registers (%p<N>, %rs<N>, ...): the renderer writes every value to a new
// register (loops reuse theirs) and leaves allocation to ptxas.
type regKind uint8

const (
	kPred regKind = iota
	kB16
	kB32
	kB64
	kF32
	kF64
	numRegKinds
)

var (
	regPrefix = [numRegKinds]string{"%p", "%rs", "%r", "%rd", "%f", "%fd"}
	regDecl   = [numRegKinds]string{".pred", ".b16", ".b32", ".b64", ".f32", ".f64"}
)

// builder writes one kernel.
type builder struct {
	arch   Arch
	family string // the op family, the first part of the kernel's name
	note   string // a comment: what the kernel computes
	params int
	block  int
	shared int
	body   strings.Builder
	regs   [numRegKinds]int
	labels int
}

func newBuilder(arch Arch, family string, block int) *builder {
	return &builder{arch: arch, family: family, block: block}
}

// reg returns a new register of kind k.
func (b *builder) reg(k regKind) string {
	b.regs[k]++
	return fmt.Sprintf("%s%d", regPrefix[k], b.regs[k])
}

func (b *builder) pred() string { return b.reg(kPred) }
func (b *builder) r16() string  { return b.reg(kB16) }
func (b *builder) r32() string  { return b.reg(kB32) }
func (b *builder) r64() string  { return b.reg(kB64) }
func (b *builder) f32() string  { return b.reg(kF32) }
func (b *builder) f64() string  { return b.reg(kF64) }

// ins writes one instruction: op and its operands.
func (b *builder) ins(op string, operands ...string) {
	b.body.WriteString("\t")
	b.body.WriteString(op)
	if len(operands) > 0 {
		b.body.WriteString(" ")
		b.body.WriteString(strings.Join(operands, ", "))
	}
	b.body.WriteString(";\n")
}

// guarded writes one instruction that runs where predicate p is true (or
// false, when not is set).
func (b *builder) guarded(p string, not bool, op string, operands ...string) {
	if not {
		b.body.WriteString("\t@!" + p + " ")
	} else {
		b.body.WriteString("\t@" + p + " ")
	}
	b.body.WriteString(op)
	if len(operands) > 0 {
		b.body.WriteString(" " + strings.Join(operands, ", "))
	}
	b.body.WriteString(";\n")
}

// comment writes a comment line.
func (b *builder) comment(format string, args ...any) {
	b.body.WriteString("\t// " + fmt.Sprintf(format, args...) + "\n")
}

// newLabel returns a new label name; place it with label.
func (b *builder) newLabel() string {
	b.labels++
	return fmt.Sprintf("L%d", b.labels)
}

func (b *builder) label(l string) { b.body.WriteString(l + ":\n") }

// bra branches to l where p is true (not: false), always when p is "".
func (b *builder) bra(p string, not bool, l string) {
	if p == "" {
		b.ins("bra.uni", l)
		return
	}
	b.guarded(p, not, "bra", l)
}

// Immediates.

func u32i(v int) string     { return fmt.Sprintf("%d", v) }
func f32i(v float32) string { return fmt.Sprintf("0f%08X", math.Float32bits(v)) }
func f64i(v float64) string { return fmt.Sprintf("0d%016X", math.Float64bits(v)) }
func addr(r string, off int) string {
	if off == 0 {
		return "[" + r + "]"
	}
	return fmt.Sprintf("[%s+%d]", r, off)
}

// param adds a .u64 parameter and returns its value as a global address.
func (b *builder) param() string {
	name := fmt.Sprintf("ARG_%d", b.params)
	b.params++
	p, g := b.r64(), b.r64()
	b.ins("ld.param.u64", p, "["+name+"]")
	b.ins("cvta.to.global.u64", g, p)
	return g
}

// params adds n parameters.
func (b *builder) paramsN(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = b.param()
	}
	return out
}

// special reads a special register (%tid.x, ...) into a new .b32.
func (b *builder) special(name string) string {
	r := b.r32()
	b.ins("mov.u32", r, name)
	return r
}

// globalIndex returns blockIdx.x·blockDim.x + threadIdx.x (u32).
func (b *builder) globalIndex() string {
	c, n, t, i := b.special("%ctaid.x"), b.special("%ntid.x"), b.special("%tid.x"), b.r32()
	b.ins("mad.lo.s32", i, c, n, t)
	return i
}

// exitUnless returns from the kernel unless i < n (u32). Only kernels
// without barriers exit early.
func (b *builder) exitUnless(i string, n int) {
	p := b.pred()
	b.ins("setp.ge.u32", p, i, u32i(n))
	b.guarded(p, false, "ret")
}

// offset returns base + i·size as a global address (i a u32).
func (b *builder) offset(base, i string, size int) string {
	w, a := b.r64(), b.r64()
	b.ins("mul.wide.u32", w, i, u32i(size))
	b.ins("add.s64", a, base, w)
	return a
}

// Integer helpers (u32).

func (b *builder) op32(op, x, y string) string {
	r := b.r32()
	b.ins(op, r, x, y)
	return r
}
func (b *builder) divu(x string, d int) string { return b.op32("div.u32", x, u32i(d)) }
func (b *builder) remu(x string, d int) string { return b.op32("rem.u32", x, u32i(d)) }
func (b *builder) mulu(x string, m int) string { return b.op32("mul.lo.s32", x, u32i(m)) }
func (b *builder) addu(x, y string) string     { return b.op32("add.s32", x, y) }
func (b *builder) madu(x string, m int, y string) string {
	r := b.r32()
	b.ins("mad.lo.s32", r, x, u32i(m), y)
	return r
}

// The element types the kernels move and compute on. Values are computed
// in float32 registers; a 16-bit float is widened when loaded and rounded
// when stored.

// load returns the element of dt at a as a float32 register.
func (b *builder) load(dt tensor.DType, a string) string {
	f := b.f32()
	switch dt {
	case tensor.Float32:
		b.ins("ld.global.f32", f, addr(a, 0))
	case tensor.BFloat16:
		h, w, s := b.r16(), b.r32(), b.r32()
		b.ins("ld.global.u16", h, addr(a, 0))
		b.ins("cvt.u32.u16", w, h)
		b.ins("shl.b32", s, w, "16")
		b.ins("mov.b32", f, s)
	case tensor.Float16:
		h := b.r16()
		b.ins("ld.global.u16", h, addr(a, 0))
		b.ins("cvt.f32.f16", f, h)
	default:
		panic(fmt.Sprintf("ptx: load of %s as float32", dt))
	}
	return f
}

// store writes the float32 register f at a as an element of dt: bfloat16
// rounds to nearest even with NaN kept NaN (tensor.ToBFloat16), float16
// rounds to nearest even (cvt.rn.f16.f32, tensor.ToFloat16).
func (b *builder) store(dt tensor.DType, a, f string) {
	switch dt {
	case tensor.Float32:
		b.ins("st.global.f32", addr(a, 0), f)
	case tensor.BFloat16:
		b.ins("st.global.u16", addr(a, 0), b.toBF16(f))
	case tensor.Float16:
		h := b.r16()
		b.ins("cvt.rn.f16.f32", h, f)
		b.ins("st.global.u16", addr(a, 0), h)
	default:
		panic(fmt.Sprintf("ptx: store of float32 as %s", dt))
	}
}

// toBF16 rounds f to bfloat16 bits (.b16): u + 0x7fff + ((u >> 16) & 1),
// the top half; a NaN keeps its top half with the quiet bit set.
func (b *builder) toBF16(f string) string {
	u, lsb, r, top, nanTop, sel := b.r32(), b.r32(), b.r32(), b.r32(), b.r32(), b.r32()
	b.ins("mov.b32", u, f)
	b.ins("bfe.u32", lsb, u, "16", "1")
	b.ins("add.s32", r, u, lsb)
	b.ins("add.s32", r, r, "32767")
	b.ins("shr.u32", top, r, "16")
	b.ins("shr.u32", nanTop, u, "16")
	b.ins("or.b32", nanTop, nanTop, "64")
	p := b.pred()
	b.ins("setp.nan.f32", p, f, f)
	b.ins("selp.b32", sel, nanTop, top, p)
	h := b.r16()
	b.ins("cvt.u16.u32", h, sel)
	return h
}

// moveElem copies one element of size bytes from src to dst (data
// movement, which never looks at the values).
func (b *builder) moveElem(size int, dst, src string) {
	switch size {
	case 1:
		r := b.r16()
		b.ins("ld.global.u8", r, addr(src, 0))
		b.ins("st.global.u8", addr(dst, 0), r)
	case 2:
		r := b.r16()
		b.ins("ld.global.u16", r, addr(src, 0))
		b.ins("st.global.u16", addr(dst, 0), r)
	case 4:
		r := b.r32()
		b.ins("ld.global.u32", r, addr(src, 0))
		b.ins("st.global.u32", addr(dst, 0), r)
	case 8:
		r := b.r64()
		b.ins("ld.global.u64", r, addr(src, 0))
		b.ins("st.global.u64", addr(dst, 0), r)
	default:
		panic(fmt.Sprintf("ptx: elements of %d bytes", size))
	}
}

// storeZero writes a zero element of size bytes at a.
func (b *builder) storeZero(size int, a string) {
	op := map[int]string{1: "st.global.u8", 2: "st.global.u16", 4: "st.global.u32", 8: "st.global.u64"}[size]
	b.ins(op, addr(a, 0), "0")
}

// namePlaceholder stands for the entry's name while the text is hashed.
const namePlaceholder = "KERNEL_NAME"

// kernel finishes the module: its name is the family and a hash of the
// text (with the note, a comment saying what it computes).
func (b *builder) kernel() *Kernel {
	var body strings.Builder
	body.WriteString("(\n")
	for i := 0; i < b.params; i++ {
		sep := ","
		if i == b.params-1 {
			sep = ""
		}
		fmt.Fprintf(&body, "\t.param .u64 ARG_%d%s\n", i, sep)
	}
	fmt.Fprintf(&body, ")\n.maxntid %d, 1, 1\n{\n", b.block)
	for k := regKind(0); k < numRegKinds; k++ {
		if b.regs[k] > 0 {
			fmt.Fprintf(&body, "\t.reg %s %s<%d>;\n", regDecl[k], regPrefix[k], b.regs[k]+1)
		}
	}
	if b.shared > 0 {
		fmt.Fprintf(&body, "\t.shared .align 16 .b8 smem[%d];\n", b.shared)
	}
	body.WriteString(b.body.String())
	body.WriteString("\tret;\n}\n")
	var t strings.Builder
	t.WriteString("//\n// Generated by headroom (backend/cuda/ptx)")
	if b.note != "" {
		t.WriteString(": " + b.note)
	}
	fmt.Fprintf(&t, "\n//\n\n.version %d.%d\n.target %s\n.address_size 64\n\n.visible .entry %s", b.arch.Version/10, b.arch.Version%10, b.arch.Target(), namePlaceholder)
	t.WriteString(body.String())
	h := fnv.New64a()
	h.Write([]byte(t.String()))
	name := fmt.Sprintf("%s_%016x", b.family, h.Sum64())
	text := strings.Replace(t.String(), namePlaceholder, name, 1)
	return &Kernel{Name: name, Text: text, Params: b.params, Block: b.block, Shared: b.shared}
}
