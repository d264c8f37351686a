package ptx

import (
	"fmt"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/tensor"
)

// Role says which operand of an instruction an argument addresses.
type Role uint8

// The roles.
const (
	RoleOut   Role = iota // the output
	RoleIn                // input Index
	RolePart              // part Index+1 of a multi-output op (its buffer: Instr.Parts[Index] >= 0)
	RoleWork              // the instruction's workspace
	RoleError             // the instruction's error record (see ErrorRecordBytes)
)

// Arg is a launch argument: the address Offset bytes into an operand.
type Arg struct {
	Role   Role
	Index  int
	Offset int64
}

func (a Arg) String() string {
	s := [...]string{"out", "in", "part", "work", "error"}[a.Role]
	if a.Role == RoleIn || a.Role == RolePart {
		s += fmt.Sprint(a.Index)
	}
	if a.Offset != 0 {
		s += fmt.Sprintf("+%d", a.Offset)
	}
	return s
}

// Gemm is a matrix product on cuBLAS with the row-major shapes of
// kernels.MatMul: C [M, N] (float32) = op(A) [M, K] · op(B) [K, N], or
// C += when Accumulate; A and B are of dtype In (float32, or bfloat16 or
// float16 with float32 products and sums).
type Gemm struct {
	M, N, K        int
	TransA, TransB bool
	Accumulate     bool
	In             tensor.DType
	A, B, C        Arg
}

// Step is one thing an instruction does on the device, in order: a
// kernel launch of Grid blocks of Kernel.Block threads with Args (one per
// parameter), or a product on cuBLAS.
type Step struct {
	Kernel *Kernel
	Grid   int
	Args   []Arg
	Gemm   *Gemm
}

// Lowered is an instruction rendered for a GPU: its steps and the bytes
// of workspace they need (compile.Target.Lower's answer). Checks is set
// when a kernel may find bad data (a label or index out of range) and
// writes it to the instruction's error record.
type Lowered struct {
	Steps     []Step
	Workspace int64
	Checks    bool
}

// ErrorRecordBytes is the size of an instruction's error record in device
// memory: three int32 (a flag, the position of the bad element, its value)
// and padding. A kernel that finds bad data writes 1 to the flag with an
// atomic compare-and-swap and, when it was first, the position and value;
// the backend reads the records after each run.
const ErrorRecordBytes = 16

// Kernels returns the distinct kernels of the steps, in order.
func (l *Lowered) Kernels() []*Kernel {
	var out []*Kernel
	seen := map[string]bool{}
	for _, s := range l.Steps {
		if s.Kernel != nil && !seen[s.Kernel.Name] {
			seen[s.Kernel.Name] = true
			out = append(out, s.Kernel)
		}
	}
	return out
}

// Block is the threads per block of the elementwise and data-movement
// kernels (one element per thread) and of the row kernels (a row per
// block, its columns strided over the threads).
const Block = 256

// maxElems bounds the elements of one instruction: indices are 32-bit.
const maxElems = 1<<31 - 1

// renderer renders the instructions of one op.
type renderer struct {
	// dtypes reports whether the op runs with output dtype out and first
	// operand dtype in (compile.Target.Supports).
	dtypes func(out, in tensor.DType) bool
	render func(r *req) error
}

var renderers [graph.NumOps]renderer

func register(op graph.Op, r renderer) {
	if renderers[op].render != nil {
		panic(fmt.Sprintf("ptx: op %s registered twice", op))
	}
	renderers[op] = r
}

// Supports reports whether instructions of op with output dtype out and
// first operand dtype in are rendered.
func Supports(op graph.Op, out, in tensor.DType) bool {
	if op >= graph.NumOps || renderers[op].render == nil {
		return false
	}
	return renderers[op].dtypes(out, in)
}

// req is one instruction being rendered.
type req struct {
	arch Arch
	it   *compile.Instr
	inN  []int // the inputs' element counts (nil: only the workspace is asked)
	out  Lowered
}

// inLen returns input i's element count, or 1 when it is not known (the
// instruction is lowered for its workspace only, and its kernels are not
// used).
func (r *req) inLen(i int) int {
	if i < len(r.inN) {
		return r.inN[i]
	}
	return 1
}

// Render renders it for arch: the kernels and products that compute it.
// inN are the element counts of its inputs (the program's buffers In[i]),
// which a few kernels need (a gather's table rows, a scatter's indices);
// nil when only the workspace is asked (Target.Lower, before buffers
// exist), when the kernels are not to be run. An op or dtype the renderer
// does not write, or a geometry it does not take, is an error naming the
// op and its owner.
func Render(arch Arch, it *compile.Instr, inN []int) (l *Lowered, err error) {
	if it.Op >= graph.NumOps || renderers[it.Op].render == nil || !renderers[it.Op].dtypes(it.DType, it.InDType) {
		return nil, fmt.Errorf("ptx: no kernel for %s on %s (from %s) (%s, built at %s)", it.Op, it.DType, it.InDType, it.Owner, it.Site)
	}
	if n := tensor.Shape(it.Shape).Size(); n > maxElems {
		return nil, fmt.Errorf("ptx: %s (%s): %d elements, more than 32-bit indices reach", it.Op, it.Owner, n)
	}
	r := &req{arch: arch, it: it, inN: inN}
	defer func() {
		if p := recover(); p != nil { // a renderer's bug: an error naming the op, never a panic across packages
			l, err = nil, fmt.Errorf("ptx: rendering %s (%s): %v", it.Op, it.Owner, p)
		}
	}()
	if err := renderers[it.Op].render(r); err != nil {
		return nil, fmt.Errorf("ptx: %s (%s, built at %s): %w", it.Op, it.Owner, it.Site, err)
	}
	return &r.out, nil
}

// launch appends a launch of k over grid blocks (none when grid is 0:
// nothing to compute).
func (r *req) launch(k *Kernel, grid int, args ...Arg) {
	if len(args) != k.Params {
		panic(fmt.Sprintf("kernel %s takes %d arguments, given %d", k.Name, k.Params, len(args)))
	}
	if grid > 0 {
		r.out.Steps = append(r.out.Steps, Step{Kernel: k, Grid: grid, Args: args})
	}
}

// gemm appends a product.
func (r *req) gemm(g Gemm) { r.out.Steps = append(r.out.Steps, Step{Gemm: &g}) }

// work reserves n bytes of workspace (256-byte aligned) and returns their
// offset in it.
func (r *req) work(n int64) int64 {
	off := (r.out.Workspace + 255) &^ 255
	r.out.Workspace = off + n
	return off
}

// The arguments.
func out() Arg                 { return Arg{Role: RoleOut} }
func in(i int) Arg             { return Arg{Role: RoleIn, Index: i} }
func work(off int64) Arg       { return Arg{Role: RoleWork, Offset: off} }
func errRecord() Arg           { return Arg{Role: RoleError} }
func (a Arg) at(off int64) Arg { a.Offset += off; return a }

// partOrWork returns part i's argument, or bytes of workspace when nothing
// reads the part.
func (r *req) partOrWork(i int, bytes int64) Arg {
	if i < len(r.it.Parts) && r.it.Parts[i] >= 0 {
		return Arg{Role: RolePart, Index: i}
	}
	return work(r.work(bytes))
}

// blocks returns the blocks of Block threads that cover n elements.
func blocks(n int) int { return (n + Block - 1) / Block }

// dtype sets.
func isF32(dt tensor.DType) bool { return dt == tensor.Float32 }
func only32(out, in tensor.DType) bool {
	return out == tensor.Float32 && (in == tensor.Float32 || in == tensor.Invalid)
}
