package onnx_test

import (
	"bytes"
	"fmt"

	"github.com/headroom-ml/headroom/export/onnx"
	"github.com/headroom-ml/headroom/graph"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// Export a model as float and as int8: build its inference graph at the
// calibration batch size, calibrate on a few batches, write both.
func Example() {
	model, _ := nn.ModelByName("cnn", tensor.Shape{28, 28, 1}, 10)
	const batch = 16
	g := graph.New()
	ctx := nn.NewContext(g, false, 0)
	x := g.Input("x", tensor.Float32, append(tensor.Shape{batch}, model.InputShape...))
	logits := model.Forward(ctx, x)

	// the weights would come from training or a checkpoint
	weights := map[string]tensor.Tensor{}
	for _, w := range ctx.Weights {
		weights[w.Attr().Name] = tensor.New(w.DType(), w.Shape())
	}
	m := onnx.Model{
		Graph:    g,
		Inputs:   []*graph.Node{x},
		Outputs:  []onnx.Output{{Name: "logits", Node: logits}},
		Weights:  func(name string) (tensor.Tensor, bool) { t, ok := weights[name]; return t, ok },
		Metadata: map[string]string{"classes": `["t-shirt", "trouser", "..."]`},
	}
	var f32 bytes.Buffer
	if err := onnx.Write(&f32, m, onnx.Options{}); err != nil {
		fmt.Println(err)
		return
	}

	ranges, err := onnx.Calibrate(m, 2, func(i int, inputs map[string]tensor.Tensor) error {
		images := inputs["x"].Float32s() // [16, 28, 28, 1]: fill with calibration batch i
		for j := range images {
			images[j] = float32(j%255) / 255
		}
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	var i8 bytes.Buffer
	if err := onnx.Write(&i8, m, onnx.Options{Int8: &onnx.Int8Options{Ranges: ranges}}); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("int8 model: %.2f of the float one's size\n", float64(i8.Len())/float64(f32.Len()))
	// Output: int8 model: 0.25 of the float one's size
}
