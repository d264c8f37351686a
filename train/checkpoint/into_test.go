package checkpoint

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/headroom-ml/headroom/tensor"
)

// LoadInto reads each tensor straight into the destination it is given,
// skips the others while checking the whole data's checksum, and reports
// a damaged byte as a *FormatError.
func TestLoadInto(t *testing.T) {
	path := filepath.Join(t.TempDir(), "c.safetensors")
	entries := []Entry{
		{"a", filled(tensor.Float32, tensor.Shape{3, 5}, 1)},
		{"skipped", filled(tensor.Float64, tensor.Shape{IntoBufferBytes/8 + 3}, 2)}, // more than the buffer
		{"b", filled(tensor.Int32, tensor.Shape{7}, 3)},
	}
	if err := Save(path, entries, map[string]string{"k": "v"}); err != nil {
		t.Fatal(err)
	}
	dst := map[string][]byte{}
	meta, err := LoadInto(path, func(name string, dt tensor.DType, shape tensor.Shape) ([]byte, error) {
		if name == "skipped" {
			return nil, nil
		}
		dst[name] = make([]byte, shape.Size()*dt.Size())
		return dst[name], nil
	})
	if err != nil || meta["k"] != "v" {
		t.Fatalf("LoadInto: %v (meta %v)", err, meta)
	}
	for _, e := range []Entry{entries[0], entries[2]} {
		if !bytes.Equal(dst[e.Name], e.Tensor.Bytes()) {
			t.Errorf("%s read wrong", e.Name)
		}
	}
	// a flipped byte in the skipped tensor still fails the checksum
	b, _ := os.ReadFile(path)
	b[len(b)-30-7*4] ^= 0x40
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = LoadInto(path, func(string, tensor.DType, tensor.Shape) ([]byte, error) { return nil, nil })
	var fe *FormatError
	if !errors.As(err, &fe) {
		t.Errorf("a damaged file: %v, want a *FormatError", err)
	}
	// a destination of the wrong size is an error
	if _, err := LoadInto(path, func(_ string, dt tensor.DType, shape tensor.Shape) ([]byte, error) { return make([]byte, 1), nil }); err == nil {
		t.Error("a destination of the wrong size: nil error")
	}
}
