package checkpoint

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/headroom-ml/headroom/tensor"
)

// benchEntries is a checkpoint of n float32 MiB in 8 tensors.
func benchEntries(mib int) []Entry {
	var entries []Entry
	for i := range 8 {
		entries = append(entries, Entry{Name: fmt.Sprintf("layer%d/kernel", i), Tensor: filled(tensor.Float32, tensor.Shape{mib * 32, 1024}, i)})
	}
	return entries
}

func benchSave(b *testing.B, mib int) {
	entries := benchEntries(mib)
	path := filepath.Join(b.TempDir(), "b.safetensors")
	b.SetBytes(int64(mib) << 20)
	for b.Loop() {
		if err := Save(path, entries, map[string]string{KeyStep: "1"}); err != nil {
			b.Fatal(err)
		}
	}
}

func benchLoad(b *testing.B, mib int) {
	path := filepath.Join(b.TempDir(), "b.safetensors")
	if err := Save(path, benchEntries(mib), nil); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(mib) << 20)
	for b.Loop() {
		if _, err := Load(path); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkSave(b *testing.B) {
	b.Run("1MiB", func(b *testing.B) { benchSave(b, 1) })
	b.Run("64MiB", func(b *testing.B) { benchSave(b, 64) })
}

func BenchmarkLoad(b *testing.B) {
	b.Run("1MiB", func(b *testing.B) { benchLoad(b, 1) })
	b.Run("64MiB", func(b *testing.B) { benchLoad(b, 64) })
}
