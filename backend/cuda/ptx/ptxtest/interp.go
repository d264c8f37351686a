package ptxtest

import (
	"fmt"
	"sync"

	"github.com/headroom-ml/headroom/backend/cuda/ptx"
	"github.com/headroom-ml/headroom/backend/cuda/ptx/interp"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/tensor"
)

// Interpreter returns a Device that runs kernels, as their exact text, in
// the PTX interpreter (package interp) over buffers 4 KiB apart (an access
// past one never lands in the next: the interpreter reports it), and
// products with the host's float32 GEMM (kernels.MatMul; 16-bit operands
// widened exactly), as cuBLAS computes them.
func Interpreter(arch ptx.Arch) Device { return &interpDevice{arch: arch} }

type interpDevice struct {
	arch ptx.Arch
	bufs []interp.Buffer
}

func (d *interpDevice) Arch() ptx.Arch { return d.arch }

func (d *interpDevice) Alloc(name string, data []byte) (uint64, error) {
	addr := uint64(1 << 32)
	if n := len(d.bufs); n > 0 {
		last := d.bufs[n-1]
		addr = (last.Addr + uint64(len(last.Data)) + 8191) &^ 4095
	}
	d.bufs = append(d.bufs, interp.Buffer{Name: name, Addr: addr, Data: append([]byte(nil), data...)})
	return addr, nil
}

func (d *interpDevice) bytesAt(a uint64, n int) ([]byte, error) {
	for _, b := range d.bufs {
		if a >= b.Addr && a-b.Addr+uint64(n) <= uint64(len(b.Data)) {
			return b.Data[a-b.Addr : a-b.Addr+uint64(n)], nil
		}
	}
	return nil, fmt.Errorf("%d bytes at %#x lie outside every buffer", n, a)
}

func (d *interpDevice) Read(dst []byte, addr uint64) error {
	b, err := d.bytesAt(addr, len(dst))
	if err != nil {
		return err
	}
	copy(dst, b)
	return nil
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

func (d *interpDevice) Launch(k *ptx.Kernel, grid int, args []uint64) error {
	p, err := program(k)
	if err != nil {
		return err
	}
	return p.Run(interp.Launch{Grid: grid, Block: k.Block, Args: args, Buffers: d.bufs})
}

func (d *interpDevice) Gemm(g *ptx.Gemm, c, a, b uint64) error {
	es := g.In.Size()
	operand := func(addr uint64, n int) ([]float32, error) {
		raw, err := d.bytesAt(addr, n*es)
		if err != nil {
			return nil, fmt.Errorf("a product's operand: %w", err)
		}
		t, err := tensor.FromBytes(g.In, tensor.Shape{n}, raw)
		if err != nil {
			return nil, err
		}
		out := make([]float32, n)
		for i := range out {
			out[i] = float32(t.Float64At(i))
		}
		return out, nil
	}
	av, err := operand(a, g.M*g.K)
	if err != nil {
		return err
	}
	bv, err := operand(b, g.K*g.N)
	if err != nil {
		return err
	}
	cb, err := d.bytesAt(c, g.M*g.N*4)
	if err != nil {
		return fmt.Errorf("a product's result: %w", err)
	}
	kernels.MatMul(tensor.As[float32](cb), av, bv, g.M, g.N, g.K, g.TransA, g.TransB, g.Accumulate)
	return nil
}

func (d *interpDevice) Free() error { d.bufs = nil; return nil }
