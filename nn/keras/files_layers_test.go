package keras

import (
	"archive/zip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The files of ../shared/keras-files (Keras models others saved, with
// their exact parameter counts in EXPECTED.tsv) whose only obstacle was a
// layer, an operation node or a dimension of unknown size, read here
// through the config.json of their .keras archive (the archive is read
// from ../shared, never copied into the project). Reading the files
// themselves, HDF5 included, is the file reader's (files.go).

// keraszipConfig returns the config.json of the .keras archive at path.
func keraszipConfig(t *testing.T, path string) []byte {
	t.Helper()
	zr, err := zip.OpenReader(path)
	if err != nil {
		t.Fatalf("the shared Keras files are needed (CI clones them beside the repo): %v", err)
	}
	defer zr.Close()
	for _, f := range zr.File {
		if f.Name != "config.json" {
			continue
		}
		rc, err := f.Open()
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	t.Fatalf("%s holds no config.json", path)
	return nil
}

func TestSharedKerasFilesLayers(t *testing.T) {
	dir := filepath.Join(filepath.Dir(sharedDir(t)), "keras-files")
	want := map[string]map[string]string{}
	for _, row := range readTSV(t, filepath.Join(dir, "EXPECTED.tsv")) {
		want[row["file"]] = row
	}
	for _, tc := range []struct {
		file string
		opts []Option
	}{
		{file: "k310_stock_transformer_fp16.keras"},                              // keras.src.ops.numpy Add nodes, a float16 policy
		{file: "k392_lstm_forecast_nonetime.keras", opts: []Option{WithSeq(30)}}, // (None, None, 1)
	} {
		t.Run(tc.file, func(t *testing.T) {
			row, ok := want[tc.file]
			if !ok {
				t.Fatalf("EXPECTED.tsv has no row for %s", tc.file)
			}
			m, err := Parse(keraszipConfig(t, filepath.Join(dir, tc.file)), tc.file, tc.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if got := itoa(m.Params); got != row["total_params"] {
				t.Errorf("total params: got %s, want %s", got, row["total_params"])
			}
			if got := itoa(m.TrainableParams); got != row["trainable_params"] {
				t.Errorf("trainable params: got %s, want %s", got, row["trainable_params"])
			}
		})
	}
	// a weights-only file's architecture JSON: BatchNormalization over axis
	// 1 of NHWC input (its rows)
	t.Run("k231_carnd_bnaxis1_arch.json", func(t *testing.T) {
		row := want["k231_carnd_bnaxis1_weights.h5"]
		b, err := os.ReadFile(filepath.Join(dir, "k231_carnd_bnaxis1_arch.json"))
		if err != nil {
			t.Fatal(err)
		}
		m, err := Parse(b, "k231")
		if err != nil {
			t.Fatal(err)
		}
		if itoa(m.Params) != row["total_params"] || itoa(m.TrainableParams) != row["trainable_params"] {
			t.Errorf("got %d params (%d trainable), want %s (%s)", m.Params, m.TrainableParams, row["total_params"], row["trainable_params"])
		}
	})
	t.Run("k392 without a length", func(t *testing.T) {
		_, err := Parse(keraszipConfig(t, filepath.Join(dir, "k392_lstm_forecast_nonetime.keras")), "k392", nil...)
		var ke *Error
		if !errors.As(err, &ke) || !strings.Contains(err.Error(), "--input-shape input_layer=Tx1, or --seq T") {
			t.Fatalf("got %v, want an *Error that asks for --input-shape or --seq", err)
		}
	})
}
