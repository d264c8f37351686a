package onnx

import (
	"fmt"
	goruntime "runtime"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/tensor"
)

// runGraph runs m's graph on headroom's CPU runtime once per batch: fill
// writes batch i into the model's inputs (by Input name), then each reads
// the values of keep, in order. It is the package's only use of compile
// and runtime (Calibrate's, and the tests' reference outputs).
func runGraph(m Model, keep []*graph.Node, batches int,
	fill func(i int, inputs map[string]tensor.Tensor) error,
	each func(i int, vals []tensor.Tensor) error) error {
	host := cpu.New(goruntime.GOMAXPROCS(0))
	defer host.Close()
	opt := compile.Options{Name: "onnx", Target: host}
	for i, n := range keep {
		opt.Outputs = append(opt.Outputs, compile.Output{Name: fmt.Sprintf("keep%d", i), Node: n})
	}
	p, err := compile.Compile(m.Graph, opt)
	if err != nil {
		return fmt.Errorf("onnx: compiling the graph: %w", err)
	}
	e := runtime.NewEngine(host, 0)
	defer e.Close()
	s, err := e.Open(p)
	if err != nil {
		return fmt.Errorf("onnx: loading the graph: %w", err)
	}
	defer s.Close()
	x, _ := s.Program(p.Name)
	if m.Weights == nil && len(p.Variables) > 0 {
		return fmt.Errorf("onnx: no weights given (need %q)", p.Variables[0].Name)
	}
	if err := e.SetValues(m.Weights, nil); err != nil {
		return fmt.Errorf("onnx: %w", err)
	}
	inputs := map[string]tensor.Tensor{}
	for _, n := range modelInputs(m) {
		t, err := x.Input(n.Attr().Name)
		if err != nil {
			return fmt.Errorf("onnx: %w", err)
		}
		inputs[n.Attr().Name] = t
	}
	vals := make([]tensor.Tensor, len(keep))
	for i := range keep {
		if vals[i], err = x.Output(fmt.Sprintf("keep%d", i)); err != nil {
			return fmt.Errorf("onnx: %w", err)
		}
	}
	for b := 0; b < batches; b++ {
		if err := fill(b, inputs); err != nil {
			return fmt.Errorf("onnx: batch %d: %w", b, err)
		}
		if err := x.Run(); err != nil {
			return fmt.Errorf("onnx: batch %d: %w", b, err)
		}
		if err := each(b, vals); err != nil {
			return err
		}
	}
	return nil
}
