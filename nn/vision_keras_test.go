package nn_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
)

// The vision layers checked against real models written by others: the
// TensorFlow.js configs in ../shared/keras-functional whose parameter
// counts come from their weights manifests (EXPECTED.tsv). The models are
// rebuilt here from each config's layers with a minimal reading of the
// fields these layers use (the Keras importer proper is nn/keras's).

type tfjsLayer struct {
	ClassName    string          `json:"class_name"`
	Config       json.RawMessage `json:"config"`
	InboundNodes [][][]any       `json:"inbound_nodes"`
}

type tfjsModel struct {
	ModelTopology struct {
		ModelConfig struct {
			Config struct {
				Layers       []tfjsLayer `json:"layers"`
				InputLayers  [][]any     `json:"input_layers"`
				OutputLayers [][]any     `json:"output_layers"`
			} `json:"config"`
		} `json:"model_config"`
	} `json:"modelTopology"`
}

type kerasFields struct {
	Name            string  `json:"name"`
	BatchInputShape []*int  `json:"batch_input_shape"`
	Filters         int     `json:"filters"`
	Units           int     `json:"units"`
	KernelSize      [2]int  `json:"kernel_size"`
	Strides         [2]int  `json:"strides"`
	PoolSize        [2]int  `json:"pool_size"`
	Size            [2]int  `json:"size"`
	Padding         any     `json:"padding"`
	DilationRate    [2]int  `json:"dilation_rate"`
	Activation      string  `json:"activation"`
	UseBias         *bool   `json:"use_bias"`
	OutputPadding   []int   `json:"output_padding"`
	DepthMultiplier int     `json:"depth_multiplier"`
	TargetShape     []int   `json:"target_shape"`
	Axis            any     `json:"axis"`
	Momentum        float64 `json:"momentum"`
	Epsilon         float64 `json:"epsilon"`
	Center          *bool   `json:"center"`
	ScaleBN         *bool   `json:"scale"`
	Rate            float64 `json:"rate"`
	Interpolation   string  `json:"interpolation"`
}

// kerasLayer returns the nn layer for one config entry.
func kerasLayer(t *testing.T, class string, f kerasFields) any {
	t.Helper()
	same := f.Padding == "same"
	noBias := f.UseBias != nil && !*f.UseBias
	switch class {
	case "Conv2D":
		return &nn.Conv2D{LayerName: f.Name, Filters: f.Filters, Kernel: f.KernelSize, Strides: f.Strides, Same: same,
			Activation: f.Activation, NoBias: noBias, DilationRate: f.DilationRate}
	case "DepthwiseConv2D":
		return &nn.DepthwiseConv2D{LayerName: f.Name, Kernel: f.KernelSize, Strides: f.Strides, Same: same,
			DepthMultiplier: f.DepthMultiplier, DilationRate: f.DilationRate, Activation: f.Activation, NoBias: noBias}
	case "Conv2DTranspose":
		return &nn.Conv2DTranspose{LayerName: f.Name, Filters: f.Filters, Kernel: f.KernelSize, Strides: f.Strides, Same: same,
			OutputPadding: f.OutputPadding, DilationRate: f.DilationRate, Activation: f.Activation, NoBias: noBias}
	case "MaxPooling2D":
		return &nn.Pool2D{LayerName: f.Name, Max: true, Pool: f.PoolSize, Strides: f.Strides, Same: same}
	case "Dense":
		return &nn.Dense{LayerName: f.Name, Units: f.Units, Activation: f.Activation, NoBias: noBias}
	case "Reshape":
		return &nn.Reshape{LayerName: f.Name, TargetShape: f.TargetShape}
	case "UpSampling2D":
		return &nn.UpSampling2D{LayerName: f.Name, Size: f.Size, Interpolation: f.Interpolation}
	case "ZeroPadding2D":
		var p [2][2]int
		for i, pair := range f.Padding.([]any) {
			for j, v := range pair.([]any) {
				p[i][j] = int(v.(float64))
			}
		}
		return &nn.ZeroPadding2D{LayerName: f.Name, Padding: p}
	case "BatchNormalization":
		return &nn.BatchNormalization{LayerName: f.Name, Momentum: f.Momentum, Epsilon: f.Epsilon,
			NoCenter: f.Center != nil && !*f.Center, NoScale: f.ScaleBN != nil && !*f.ScaleBN}
	case "Activation":
		return &nn.Activation{LayerName: f.Name, Fn: f.Activation}
	case "GlobalAveragePooling2D":
		return &nn.GlobalAveragePooling2D{LayerName: f.Name}
	case "Dropout":
		return &nn.Dropout{LayerName: f.Name, Rate: f.Rate}
	case "Concatenate":
		axis := -1
		if a, ok := f.Axis.(float64); ok {
			axis = int(a)
		}
		return &nn.Concatenate{LayerName: f.Name, Axis: axis}
	}
	t.Fatalf("layer class %s is not read by this test", class)
	return nil
}

// buildTFJS rebuilds the functional model of a TensorFlow.js config and
// returns it with its output tensors.
func buildTFJS(t *testing.T, path string) (*nn.Functional, []*nn.Tensor) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the shared Keras configs are needed (CI clones them beside the repo): %v", err)
	}
	var m tfjsModel
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	cfg := m.ModelTopology.ModelConfig.Config
	tensors := map[string]*nn.Tensor{}
	for _, l := range cfg.Layers {
		var f kerasFields
		if err := json.Unmarshal(l.Config, &f); err != nil {
			t.Fatalf("%s: %v", l.ClassName, err)
		}
		if l.ClassName == "InputLayer" {
			shape := tensor.Shape{}
			for _, d := range f.BatchInputShape[1:] {
				shape = append(shape, *d)
			}
			tensors[f.Name] = nn.NewInput(f.Name, shape)
			continue
		}
		var ins []*nn.Tensor
		for _, in := range l.InboundNodes[0] {
			x, ok := tensors[in[0].(string)]
			if !ok {
				t.Fatalf("layer %s reads %v, not built yet", f.Name, in[0])
			}
			ins = append(ins, x)
		}
		tensors[f.Name] = nn.Apply(kerasLayer(t, l.ClassName, f), ins...)
	}
	var ins, outs []*nn.Tensor
	for _, in := range cfg.InputLayers {
		ins = append(ins, tensors[in[0].(string)])
	}
	for _, o := range cfg.OutputLayers {
		outs = append(outs, tensors[o[0].(string)])
	}
	model, err := nn.NewFunctional(filepath.Base(path), ins, outs)
	if err != nil {
		t.Fatal(err)
	}
	return model, outs
}

func TestVisionLayersOnRealConfigs(t *testing.T) {
	dir := sharedKerasFunctional(t)
	tests := []struct {
		file             string
		total, trainable int
		out              tensor.Shape
	}{
		// weights manifest: 220,199 = 214,727 trainable + 5,472 BN moving statistics
		{"tfjs_mobilenet025_emotion64_model.json", 220199, 214727, tensor.Shape{7}},
		{"tfjs_unet128_model.json", 1761877, 1761877, tensor.Shape{128, 128, 1}},
		{"tfjs_cvae_quickdraw_2input_model.json", 62721, 62721, tensor.Shape{28, 28, 1}},
	}
	for _, tc := range tests {
		t.Run(strings.TrimSuffix(tc.file, ".json"), func(t *testing.T) {
			m, outs := buildTFJS(t, filepath.Join(dir, tc.file))
			total, trainable, err := nn.Params(m)
			if err != nil {
				t.Fatal(err)
			}
			if total != tc.total || trainable != tc.trainable {
				t.Errorf("params: got %d (%d trainable), want %d (%d trainable) as the weights manifest", total, trainable, tc.total, tc.trainable)
			}
			if got := outs[0].Shape; !got.Equal(tc.out) {
				t.Errorf("output shape: got %v, want %v", got, tc.out)
			}
		})
	}
}

// sharedKerasFunctional returns ../shared/keras-functional beside the
// module root.
func sharedKerasFunctional(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "..", "shared", "keras-functional")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the package directory")
		}
		dir = parent
	}
}
