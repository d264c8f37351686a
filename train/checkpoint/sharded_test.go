package checkpoint

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/headroom-ml/headroom/tensor"
)

func TestShardedNames(t *testing.T) {
	for _, tc := range []struct {
		path string
		step int64
		part bool
	}{
		{PartPath("", 7, 0, 2), 7, true},
		{PartPath("", 12345678901, 2, 3), 12345678901, true},
		{IndexPath("", 7), 7, false},
	} {
		name := filepath.Base(tc.path)
		if tc.part {
			if s, ok := parsePartName(name); !ok || s != tc.step {
				t.Errorf("parsePartName(%q) = %d, %v; want %d", name, s, ok, tc.step)
			}
		} else if s, ok := parseIndexName(name); !ok || s != tc.step {
			t.Errorf("parseIndexName(%q) = %d, %v; want %d", name, s, ok, tc.step)
		}
		if !isStepName(name) {
			t.Errorf("%q is not a checkpoint's name", name)
		}
	}
	for _, bad := range []string{"ckpt-0000000007-00003-of-00002.safetensors", "ckpt-0000000007-1-of-2.safetensors",
		"ckpt-0000000007-00000-of-00002.safetensors", "ckpt-7-00001-of-00002.safetensors", "ckpt-0000000007.index.json"} {
		if _, ok := parsePartName(bad); ok {
			t.Errorf("parsePartName(%q) accepts it", bad)
		}
		if _, ok := parseIndexName(bad); ok {
			t.Errorf("parseIndexName(%q) accepts it", bad)
		}
	}
	if got := filepath.Base(PartPath("", 7, 0, 2)); got != "ckpt-0000000007-00001-of-00002.safetensors" {
		t.Errorf("PartPath: %s", got)
	}
}

// saveSharded writes a sharded checkpoint of step with two parts: "a" in
// part 0, "b" in part 1.
func saveSharded(t *testing.T, dir string, step int64, keep int) string {
	t.Helper()
	a := tensor.FromSlice(tensor.Shape{2}, []float32{1, float32(step)})
	b := tensor.FromSlice(tensor.Shape{3}, []float32{3, 4, float32(step)})
	meta := map[string]string{"epoch": "1"}
	pa, err := SavePart(dir, step, 0, 2, []Entry{{Name: "a", Tensor: a}}, meta)
	if err != nil {
		t.Fatal(err)
	}
	pb, err := SavePart(dir, step, 1, 2, []Entry{{Name: "b", Tensor: b}}, meta)
	if err != nil {
		t.Fatal(err)
	}
	path, err := SaveIndex(dir, step, map[string]string{"a": pa, "b": pb}, meta, keep)
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// TestShardedCheckpoint: parts and an index load as one checkpoint
// (LoadInto, Meta, Latest); a step without its index, or with a damaged or
// missing part, is passed over; keeping n removes whole older checkpoints
// and parts left without an index.
func TestShardedCheckpoint(t *testing.T) {
	dir := t.TempDir()
	saveSharded(t, dir, 5, 0)
	path := saveSharded(t, dir, 9, 0)
	got, step, err := Latest(dir)
	if err != nil || got != path || step != 9 {
		t.Fatalf("Latest: %s, %d, %v; want %s, 9", got, step, err, path)
	}
	if m, err := Meta(path); err != nil || m["epoch"] != "1" || m[KeyStep] != "9" {
		t.Errorf("Meta: %v, %v", m, err)
	}
	vals := map[string][]float32{}
	if _, err := LoadInto(path, func(name string, dt tensor.DType, shape tensor.Shape) ([]byte, error) {
		vals[name] = make([]float32, shape.Size())
		return tensor.AsBytes(vals[name]), nil
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(vals["a"], []float32{1, 9}) || !slices.Equal(vals["b"], []float32{3, 4, 9}) {
		t.Errorf("loaded %v", vals)
	}
	// a part damaged: the step is passed over, the one before loads
	part := PartPath(dir, 9, 1, 2)
	b, _ := os.ReadFile(part)
	b[len(b)-1] ^= 0xff
	os.WriteFile(part, b, 0o666)
	if got, step, skipped, err := LatestSkipping(dir); err != nil || step != 5 || len(skipped) != 1 || got != IndexPath(dir, 5) {
		t.Errorf("with a damaged part: %s, %d, %v, %v; want step 5 and one skipped", got, step, skipped, err)
	}
	// parts without their index (a killed writer) are no checkpoint
	os.Remove(part)
	os.Remove(IndexPath(dir, 9))
	if _, step, err := Latest(dir); err != nil || step != 5 {
		t.Errorf("parts without an index: step %d, %v; want 5", step, err)
	}
	// keep 2: step 12 and 5 remain; 9's orphaned part is removed
	saveSharded(t, dir, 12, 2)
	saveSharded(t, dir, 14, 2)
	des, _ := os.ReadDir(dir)
	var names []string
	for _, de := range des {
		names = append(names, de.Name())
	}
	want := []string{filepath.Base(PartPath("", 12, 0, 2)), filepath.Base(PartPath("", 12, 1, 2)), filepath.Base(IndexPath("", 12)),
		filepath.Base(PartPath("", 14, 0, 2)), filepath.Base(PartPath("", 14, 1, 2)), filepath.Base(IndexPath("", 14))}
	slices.Sort(want)
	if !slices.Equal(names, want) {
		t.Errorf("after keeping 2: %v, want %v", names, want)
	}
	// a missing part
	os.Remove(PartPath(dir, 14, 0, 2))
	if _, step, err := Latest(dir); err != nil || step != 12 {
		t.Errorf("with a missing part: step %d, %v; want 12", step, err)
	}
	os.Remove(PartPath(dir, 12, 0, 2))
	if _, _, err := Latest(dir); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("no checkpoint loads: got %v, want an error that is not ErrNotExist", err)
	}
}
