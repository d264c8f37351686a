package ptxtest

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/backend/cuda/ptx"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/tensor"
)

// Device runs rendered steps: the PTX interpreter (Interpreter), or a GPU
// (backend/cuda's tests, on a real or a fake driver). Addresses are
// device addresses.
type Device interface {
	// Arch is what the kernels are rendered for.
	Arch() ptx.Arch
	// Alloc returns the address of a new device buffer holding a copy of
	// data (at least one byte long).
	Alloc(name string, data []byte) (uint64, error)
	// Read copies len(dst) bytes at addr to dst.
	Read(dst []byte, addr uint64) error
	// Launch runs k over grid blocks with the given argument addresses and
	// returns once it is done.
	Launch(k *ptx.Kernel, grid int, args []uint64) error
	// Gemm runs the product with its operands at these addresses.
	Gemm(g *ptx.Gemm, c, a, b uint64) error
	// Free releases every buffer.
	Free() error
}

// operand is one input of a case: its dtype and shape and how to fill it.
type operand struct {
	dt    tensor.DType
	shape tensor.Shape
	fill  func(r *rand.Rand, i int) float64 // nil: N(0, 1)
}

// Case is an instruction to check: it.In are 1..len(ins) and it.Out 0;
// parts are the shapes of live parts (buffers after the inputs).
type Case struct {
	Name  string
	it    compile.Instr
	ins   []operand
	parts []tensor.Shape
	// inPlace: the output is input 0's buffer.
	inPlace bool
	tol     float64 // relative and absolute tolerance (0: 1e-5)
	// wantErr: the instruction must report bad data (the host's error,
	// the GPU's error record).
	wantErr bool
}

// Op returns the case's op.
func (c *Case) Op() string { return c.it.Op.String() }

// hostBuffers returns the case's buffers filled from seed: 0 the output,
// then the inputs, then the parts.
func (c *Case) hostBuffers(seed uint64) [][]byte {
	r := rand.New(rand.NewPCG(seed, 7))
	bufs := [][]byte{make([]byte, tensor.Shape(c.it.Shape).Size()*c.it.DType.Size())}
	for _, o := range c.ins {
		t := tensor.New(o.dt, o.shape)
		for i := 0; i < t.Len(); i++ {
			v := r.NormFloat64()
			if o.fill != nil {
				v = o.fill(r, i)
			}
			t.SetFloat64At(i, v)
		}
		bufs = append(bufs, t.Bytes())
	}
	for _, s := range c.parts {
		bufs = append(bufs, make([]byte, s.Size()*c.it.DType.Size()))
	}
	return bufs
}

// instr returns the case's instruction over hostBuffers' numbering.
func (c *Case) instr() compile.Instr {
	it := c.it
	it.Out, it.Work = 0, -1
	it.In = make([]int, len(c.ins))
	for i := range it.In {
		it.In[i] = 1 + i
	}
	if c.inPlace {
		it.Out = 1
	}
	if len(c.parts) > 0 || len(it.Parts) > 0 {
		parts := make([]int, max(len(it.Parts), len(c.parts)))
		for i := range parts {
			parts[i] = -1
			if i < len(c.parts) {
				parts[i] = 1 + len(c.ins) + i
			}
		}
		it.Parts = parts
	}
	return it
}

// runHost runs the case on the host's kernel and returns the buffers.
func runHost(c *Case, bufs [][]byte) ([][]byte, error) {
	it := c.instr()
	if w := cpu.New(1).Lower(&it); w > 0 {
		it.Work = len(bufs)
		bufs = append(bufs, make([]byte, w))
	}
	err := cpu.New(1).Evaluate(&it, bufs)
	return bufs, err
}

// runDevice runs the case on dev as the GPU would: its rendered steps
// over device buffers. Outputs, parts and the workspace start as NaN
// bytes, so an element a kernel forgets to write fails the comparison. It
// returns the buffers and the error record's flag, position and value.
func runDevice(dev Device, c *Case, host [][]byte) (out [][]byte, rec [3]uint32, err error) {
	defer func() {
		if ferr := dev.Free(); err == nil {
			err = ferr
		}
	}()
	it := c.instr()
	inN := make([]int, len(c.ins))
	for i, o := range c.ins {
		inN[i] = o.shape.Size()
	}
	l, err := ptx.Render(dev.Arch(), &it, inN)
	if err != nil {
		return nil, rec, err
	}
	addrs := make([]uint64, len(host))
	for i, b := range host {
		b = append([]byte(nil), b...)
		if i == 0 || i > len(c.ins) {
			fillNaN(b)
		}
		if addrs[i], err = dev.Alloc(fmt.Sprintf("buffer %d", i), padded(b)); err != nil {
			return nil, rec, err
		}
	}
	work := make([]byte, l.Workspace)
	fillNaN(work)
	workAddr, err := dev.Alloc("workspace", padded(work))
	if err != nil {
		return nil, rec, err
	}
	errAddr, err := dev.Alloc("error record", make([]byte, ptx.ErrorRecordBytes))
	if err != nil {
		return nil, rec, err
	}
	argAddr := func(a ptx.Arg) uint64 {
		switch a.Role {
		case ptx.RoleOut:
			return addrs[it.Out] + uint64(a.Offset)
		case ptx.RoleIn:
			return addrs[it.In[a.Index]] + uint64(a.Offset)
		case ptx.RolePart:
			return addrs[it.Parts[a.Index]] + uint64(a.Offset)
		case ptx.RoleWork:
			return workAddr + uint64(a.Offset)
		}
		return errAddr + uint64(a.Offset)
	}
	for _, s := range l.Steps {
		if s.Gemm != nil {
			if err := dev.Gemm(s.Gemm, argAddr(s.Gemm.C), argAddr(s.Gemm.A), argAddr(s.Gemm.B)); err != nil {
				return nil, rec, err
			}
			continue
		}
		args := make([]uint64, len(s.Args))
		for k, a := range s.Args {
			args[k] = argAddr(a)
		}
		if err := dev.Launch(s.Kernel, s.Grid, args); err != nil {
			return nil, rec, fmt.Errorf("kernel %s: %w", s.Kernel.Name, err)
		}
	}
	out = make([][]byte, len(host))
	for i, b := range host {
		out[i] = make([]byte, len(b))
		if err := dev.Read(out[i], addrs[i]); err != nil {
			return nil, rec, err
		}
	}
	rb := make([]byte, ptx.ErrorRecordBytes)
	if err := dev.Read(rb, errAddr); err != nil {
		return nil, rec, err
	}
	for k := range rec {
		rec[k] = uint32(rb[4*k]) | uint32(rb[4*k+1])<<8 | uint32(rb[4*k+2])<<16 | uint32(rb[4*k+3])<<24
	}
	return out, rec, nil
}

func fillNaN(b []byte) {
	for k := range b {
		b[k] = 0xff
	}
}

// padded returns b, or one byte for an empty buffer (a device buffer has
// at least one).
func padded(b []byte) []byte {
	if len(b) == 0 {
		return []byte{0}
	}
	return b
}

// Check runs c on dev and on the host for two random fills and compares
// the output and the parts (or, for a case of bad data, that both report
// it).
func Check(t *testing.T, dev Device, c *Case) {
	t.Helper()
	for seed := uint64(1); seed <= 2; seed++ {
		check(t, dev, c, seed)
	}
}

func check(t *testing.T, dev Device, c *Case, seed uint64) {
	t.Helper()
	host := c.hostBuffers(seed)
	want, herr := runHost(c, cloneAll(host))
	got, rec, err := runDevice(dev, c, host)
	if err != nil {
		t.Fatalf("on the device: %v", err)
	}
	if c.wantErr {
		var re interface{ Error() string }
		if herr == nil || !errors.As(herr, &re) {
			t.Errorf("the host reports no bad data")
		}
		if rec[0] != 1 {
			t.Errorf("the error record holds %v, want the flag set", rec)
		}
		return
	}
	if herr != nil {
		t.Fatalf("on the host: %v", herr)
	}
	if rec[0] != 0 {
		t.Errorf("the error record reports bad data: %v", rec)
	}
	it := c.instr()
	outs := []int{it.Out}
	for i := range c.parts {
		outs = append(outs, 1+len(c.ins)+i)
	}
	tol := c.tol
	if tol == 0 {
		tol = 1e-5
	}
	for k, b := range outs {
		compare(t, fmt.Sprintf("output %d", k), c.it.DType, got[b], want[b], tol)
	}
}

func cloneAll(bufs [][]byte) [][]byte {
	out := make([][]byte, len(bufs))
	for i, b := range bufs {
		out[i] = append([]byte(nil), b...)
	}
	return out
}

// compare compares two buffers of dt: floats within tol relative (and
// tol/10 absolute, times the largest magnitude, for sums of many terms),
// NaN for NaN and Inf for Inf; other dtypes exactly.
func compare(t *testing.T, what string, dt tensor.DType, got, want []byte, tol float64) {
	t.Helper()
	n := len(want) / dt.Size()
	g, _ := tensor.FromBytes(dt, tensor.Shape{n}, got)
	w, _ := tensor.FromBytes(dt, tensor.Shape{n}, want)
	scale := 0.0
	for i := 0; i < n; i++ {
		if v := math.Abs(w.Float64At(i)); v > scale && !math.IsInf(v, 0) {
			scale = v
		}
	}
	bad := 0
	for i := 0; i < n; i++ {
		x, y := g.Float64At(i), w.Float64At(i)
		ok := x == y || (math.IsNaN(x) && math.IsNaN(y))
		if !ok && dt.IsFloat() && !math.IsNaN(x) && !math.IsNaN(y) && !math.IsInf(y, 0) {
			ok = math.Abs(x-y) <= tol*math.Abs(y)+tol*max(scale, 1)*1e-1
		}
		if !ok {
			bad++
			if bad <= 5 {
				t.Errorf("%s element %d of %d: got %v, want %v", what, i, n, x, y)
			}
		}
	}
	if bad > 5 {
		t.Errorf("%s: %d of %d elements differ", what, bad, n)
	}
}
