package keras

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// Acceptance 4 of issue 26: the configs of keras.applications models,
// written by Keras' own builder code (testdata/applications/gen.py runs
// keras/src/applications/*.py of Keras 3 against a stand-in that records
// the layers), give Keras' published parameter counts: the exact totals
// of keras.io's applications table as it printed them (Xception to
// NASNet), and model.summary()'s totals for the later models (rounded to
// the table's 0.1M there). MobileNetV3 builds its input as (None, None,
// 3): it is planned at 224x224, the size its weights are for.
func TestApplications(t *testing.T) {
	for _, tc := range []struct {
		model     string
		params    int
		trainable int // 0: not checked
		opts      []Option
	}{
		{model: "EfficientNetB0", params: 5330571, trainable: 5288548},
		{model: "EfficientNetV2B0", params: 7200312},
		{model: "MobileNet", params: 4253864, trainable: 4231976},
		{model: "MobileNetV2", params: 3538984, trainable: 3504872},
		{model: "MobileNetV3Small", params: 2554968, opts: []Option{WithInputShape("", []int{224, 224, 3})}},
		{model: "MobileNetV3Large", params: 5507432, opts: []Option{WithInputShape("", []int{224, 224, 3})}},
		{model: "ResNet50", params: 25636712, trainable: 25583592},
		{model: "ResNet50V2", params: 25613800},
		{model: "InceptionV3", params: 23851784, trainable: 23817352},
		{model: "InceptionResNetV2", params: 55873736, trainable: 55813192},
		{model: "Xception", params: 22910480, trainable: 22855952},
		{model: "DenseNet121", params: 8062504, trainable: 7978856},
		{model: "NASNetMobile", params: 5326716, trainable: 5289978},
		{model: "ConvNeXtTiny", params: 28589128},
		{model: "ConvNeXtTinyDropPath", params: 28589128}, // StochasticDepth layers
		{model: "VGG16", params: 138357544, trainable: 138357544},
		{model: "EfficientNetB7", params: 66658687},
		{model: "ResNet152V2", params: 60380648},
		{model: "DenseNet201", params: 20242984},
		{model: "NASNetLarge", params: 88949818},
		{model: "VGG19", params: 143667240},
	} {
		t.Run(tc.model, func(t *testing.T) {
			m, err := Parse(readGzip(t, filepath.Join("testdata", "applications", tc.model+".json.gz")), tc.model, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if m.Params != tc.params {
				t.Errorf("total params: got %d, want %d", m.Params, tc.params)
			}
			if tc.trainable != 0 && m.TrainableParams != tc.trainable {
				t.Errorf("trainable params: got %d, want %d", m.TrainableParams, tc.trainable)
			}
		})
	}
}

func readGzip(t *testing.T, path string) []byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
