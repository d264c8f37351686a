package ptx_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/backend/cuda/ptx"
	"github.com/headroom-ml/headroom/backend/cuda/ptx/interp"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// The numerics check: an instruction rendered for the GPU runs, as the
// exact PTX text the driver would load, in the interpreter (package
// interp), its products on a Go GEMM with cuBLAS's semantics, and its
// results are compared with the host's kernel (backend/cpu) on the same
// random inputs. Outputs start as NaN bytes, so an element a kernel
// forgets to write fails the comparison.

var arch = ptx.Arch{SM: 80, Version: 70}

// operand is one input of a case: its dtype and shape and how to fill it.
type operand struct {
	dt    tensor.DType
	shape tensor.Shape
	fill  func(r *rand.Rand, i int) float64 // nil: N(0, 1)
}

// kcase is an instruction to check: it.In are 1..len(ins) and it.Out 0;
// parts are the shapes of live parts (buffers after the inputs).
type kcase struct {
	name  string
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

// hostBuffers returns the case's buffers filled from seed: 0 the output,
// then the inputs, then the parts.
func (c *kcase) hostBuffers(seed uint64) [][]byte {
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
func (c *kcase) instr() compile.Instr {
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
func runHost(c *kcase, bufs [][]byte) ([][]byte, error) {
	it := c.instr()
	if w := cpu.New(1).Lower(&it); w > 0 {
		it.Work = len(bufs)
		bufs = append(bufs, make([]byte, w))
	}
	err := cpu.New(1).Evaluate(&it, bufs)
	return bufs, err
}

// device is the device memory of one run: each buffer at its own
// address, 4 KiB apart, so that an access past one never lands in the
// next.
type device struct {
	bufs []interp.Buffer
}

func (d *device) alloc(name string, data []byte) uint64 {
	addr := uint64(1 << 32)
	if n := len(d.bufs); n > 0 {
		last := d.bufs[n-1]
		addr = (last.Addr + uint64(len(last.Data)) + 8191) &^ 4095
	}
	d.bufs = append(d.bufs, interp.Buffer{Name: name, Addr: addr, Data: data})
	return addr
}

var (
	programsMu sync.Mutex
	programs   = map[string]*interp.Program{}
)

// program parses and decodes a kernel's text once.
func program(k *ptx.Kernel) (*interp.Program, error) {
	programsMu.Lock()
	defer programsMu.Unlock()
	if p := programs[k.Name]; p != nil {
		return p, nil
	}
	m, err := interp.Parse(k.Text)
	if err != nil {
		return nil, err
	}
	p, err := interp.Decode(m, k.Name)
	if err != nil {
		return nil, err
	}
	programs[k.Name] = p
	return p, nil
}

// runDevice runs the case as the GPU would: the rendered steps over device
// buffers (kernels in the interpreter, products in Go). It returns the
// buffers and the error record's flag, position and value.
func runDevice(c *kcase, host [][]byte) ([][]byte, [3]uint32, error) {
	var rec [3]uint32
	it := c.instr()
	inN := make([]int, len(c.ins))
	for i, o := range c.ins {
		inN[i] = o.shape.Size()
	}
	l, err := ptx.Render(arch, &it, inN)
	if err != nil {
		return nil, rec, err
	}
	var d device
	bufs := make([][]byte, len(host))
	addrs := make([]uint64, len(host))
	for i, b := range host {
		bufs[i] = append([]byte(nil), b...)
		if i == 0 || i > len(c.ins) { // outputs start as NaN
			for k := range bufs[i] {
				bufs[i][k] = 0xff
			}
		}
		addrs[i] = d.alloc(fmt.Sprintf("buffer %d", i), bufs[i])
	}
	work := make([]byte, l.Workspace)
	for k := range work {
		work[k] = 0xff
	}
	workAddr := d.alloc("workspace", work)
	errs := make([]byte, ptx.ErrorRecordBytes)
	errAddr := d.alloc("error record", errs)
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
			if err := gemm(&d, s.Gemm, argAddr); err != nil {
				return nil, rec, err
			}
			continue
		}
		p, err := program(s.Kernel)
		if err != nil {
			return nil, rec, fmt.Errorf("%s: %w", s.Kernel.Name, err)
		}
		args := make([]uint64, len(s.Args))
		for k, a := range s.Args {
			args[k] = argAddr(a)
		}
		if err := p.Run(interp.Launch{Grid: s.Grid, Block: s.Kernel.Block, Args: args, Buffers: d.bufs}); err != nil {
			return nil, rec, err
		}
	}
	for k := range rec {
		rec[k] = binary.LittleEndian.Uint32(errs[4*k:])
	}
	return bufs, rec, nil
}

// bytesAt returns the n bytes at device address a.
func (d *device) bytesAt(a uint64, n int) ([]byte, error) {
	for _, b := range d.bufs {
		if a >= b.Addr && a-b.Addr+uint64(n) <= uint64(len(b.Data)) {
			return b.Data[a-b.Addr : a-b.Addr+uint64(n)], nil
		}
	}
	return nil, fmt.Errorf("a product's operand of %d bytes at %#x lies outside every buffer", n, a)
}

// gemm runs a product as cuBLAS does (row-major shapes, float32 sums;
// 16-bit operands widened exactly).
func gemm(d *device, g *ptx.Gemm, addr func(ptx.Arg) uint64) error {
	es := g.In.Size()
	operand := func(a ptx.Arg, n int) ([]float32, error) {
		b, err := d.bytesAt(addr(a), n*es)
		if err != nil {
			return nil, err
		}
		t, err := tensor.FromBytes(g.In, tensor.Shape{n}, b)
		if err != nil {
			return nil, err
		}
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(t.Float64At(i))
		}
		return out, nil
	}
	a, err := operand(g.A, g.M*g.K)
	if err != nil {
		return err
	}
	bm, err := operand(g.B, g.K*g.N)
	if err != nil {
		return err
	}
	cb, err := d.bytesAt(addr(g.C), g.M*g.N*4)
	if err != nil {
		return err
	}
	c := tensor.As[float32](cb)
	kernels.MatMul(c, a, bm, g.M, g.N, g.K, g.TransA, g.TransB, g.Accumulate)
	return nil
}

// check runs c on both and compares the output and the parts.
func check(t *testing.T, c *kcase, seed uint64) {
	t.Helper()
	host := c.hostBuffers(seed)
	want, herr := runHost(c, cloneAll(host))
	got, rec, err := runDevice(c, host)
	if err != nil {
		t.Fatalf("on the GPU: %v", err)
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
// tol absolute, times the largest magnitude for sums of many terms),
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
