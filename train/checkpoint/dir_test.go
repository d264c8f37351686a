package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func stepNames(steps ...int64) []string {
	var names []string
	for _, s := range steps {
		names = append(names, filepath.Base(StepPath("", s)))
	}
	return names
}

func saveSteps(t *testing.T, dir string, keep int, steps ...int64) {
	t.Helper()
	for _, s := range steps {
		entries, meta := stepEntries(s, 1)
		path, err := SaveStep(dir, s, entries, meta, keep)
		if err != nil {
			t.Fatalf("SaveStep(%d): %v", s, err)
		}
		if want := StepPath(dir, s); path != want {
			t.Fatalf("SaveStep(%d): got path %s, want %s", s, path, want)
		}
	}
}

func TestStepPath(t *testing.T) {
	tests := []struct {
		step int64
		want string
	}{
		{0, "ckpt-0000000000.safetensors"},
		{42, "ckpt-0000000042.safetensors"},
		{12345678901, "ckpt-12345678901.safetensors"},
	}
	for _, tt := range tests {
		if got := filepath.Base(StepPath("d", tt.step)); got != tt.want {
			t.Errorf("StepPath(%d): got %s, want %s", tt.step, got, tt.want)
		}
		if s, ok := parseStepName(tt.want); !ok || s != tt.step {
			t.Errorf("parseStepName(%s): got %d %v, want %d true", tt.want, s, ok, tt.step)
		}
	}
	for _, name := range []string{"ckpt-42.safetensors", "ckpt-00000000042.safetensors", "ckpt-00000000x2.safetensors",
		"ckpt-0000000042.safetensors.tmp-1", ".ckpt-0000000042.safetensors.tmp-abc", "ckpt--000000042.safetensors"} {
		if s, ok := parseStepName(name); ok {
			t.Errorf("parseStepName(%s): got step %d, want no checkpoint name", name, s)
		}
	}
}

func TestSaveStepKeep(t *testing.T) {
	tests := []struct {
		name  string
		pre   []int64 // saved first with keep 0
		keep  int
		steps []int64
		want  []string
	}{
		{"keep 3", nil, 3, []int64{0, 1, 2, 3, 4, 5}, stepNames(3, 4, 5)},
		{"keep 1", nil, 1, []int64{7, 8, 9}, stepNames(9)},
		{"keep 0 keeps all", nil, 0, []int64{1, 2, 3, 4}, stepNames(1, 2, 3, 4)},
		{"keep negative keeps all", nil, -1, []int64{1, 2}, stepNames(1, 2)},
		{"sparse steps", nil, 2, []int64{10, 100, 1000, 10000}, stepNames(1000, 10000)},
		// Resumed from step 4 after steps 5 and 6 were written: the newer
		// files are left alone, the older ones pruned around the new one.
		{"older step keeps newer files", []int64{0, 1, 2, 3, 5, 6}, 2, []int64{4}, stepNames(3, 4, 5, 6)},
		{"rewrite of the same step", []int64{1, 2, 3}, 2, []int64{3}, stepNames(2, 3)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			saveSteps(t, dir, 0, tt.pre...)
			saveSteps(t, dir, tt.keep, tt.steps...)
			if got := dirNames(t, dir); !slices.Equal(got, tt.want) {
				t.Errorf("got files %q, want %q", got, tt.want)
			}
		})
	}
}

func TestSaveStepMetadata(t *testing.T) {
	dir := t.TempDir()
	entries, meta := stepEntries(5, 1)
	meta[KeyStep] = "4"
	if _, err := SaveStep(dir, 5, entries, meta, 0); err == nil || !strings.Contains(err.Error(), `"4"`) {
		t.Errorf("got %v, want an error about metadata step \"4\"", err)
	}
	if _, err := SaveStep(dir, -1, entries, nil, 0); err == nil {
		t.Errorf("step -1: got no error, want one")
	}
	delete(meta, KeyStep)
	path, err := SaveStep(dir, 5, entries, meta, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := meta[KeyStep]; ok {
		t.Errorf("SaveStep changed the caller's map: got %q", meta)
	}
	checkStepFile(t, path, 5, 1)
}

func TestSaveStepRemovesStaleTemporaries(t *testing.T) {
	dir := t.TempDir()
	stale := []string{".ckpt-0000000003.safetensors.tmp-abc", ".ckpt-0000000009.safetensors.tmp-1"}
	other := []string{".hidden", "notes.txt", "ckpt-7.safetensors"}
	for _, n := range append(slices.Clone(stale), other...) {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("partial"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	saveSteps(t, dir, 2, 4)
	want := append(slices.Clone(other), stepNames(4)...)
	slices.Sort(want)
	if got := dirNames(t, dir); !slices.Equal(got, want) {
		t.Errorf("got files %q, want %q", got, want)
	}
}

func TestLatest(t *testing.T) {
	truncate := func(t *testing.T, p string) {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, fi.Size()/2); err != nil {
			t.Fatal(err)
		}
	}
	flip := func(t *testing.T, p string) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-100] ^= 1
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	renameTo := func(step int64) func(*testing.T, string) {
		return func(t *testing.T, p string) {
			if err := os.Rename(p, StepPath(filepath.Dir(p), step)); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name     string
		steps    []int64
		damage   map[int64]func(*testing.T, string) // applied to the file of each step
		wantStep int64
		wantErr  string // "notexist", "format", or "" for success
	}{
		{name: "newest", steps: []int64{1, 2, 30}, wantStep: 30},
		{name: "newest truncated", steps: []int64{1, 2, 3}, damage: map[int64]func(*testing.T, string){3: truncate}, wantStep: 2},
		{name: "newest bit flipped", steps: []int64{1, 2, 3}, damage: map[int64]func(*testing.T, string){3: flip}, wantStep: 2},
		{name: "two newest damaged", steps: []int64{1, 2, 3}, damage: map[int64]func(*testing.T, string){3: flip, 2: truncate}, wantStep: 1},
		{name: "step metadata disagrees with name", steps: []int64{1, 2}, damage: map[int64]func(*testing.T, string){2: renameTo(9)}, wantStep: 1},
		{name: "all damaged", steps: []int64{1, 2}, damage: map[int64]func(*testing.T, string){1: flip, 2: truncate}, wantErr: "format"},
		{name: "empty", wantErr: "notexist"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			saveSteps(t, dir, 0, tt.steps...)
			for s, damage := range tt.damage {
				damage(t, StepPath(dir, s))
			}
			// Files that are not checkpoints are ignored.
			os.WriteFile(filepath.Join(dir, "ckpt-99.safetensors"), []byte("x"), 0o644)
			os.Mkdir(filepath.Join(dir, "ckpt-0000000100.safetensors"), 0o755)
			path, step, err := Latest(dir)
			switch tt.wantErr {
			case "":
				if err != nil {
					t.Fatalf("Latest: %v", err)
				}
				if step != tt.wantStep || path != StepPath(dir, tt.wantStep) {
					t.Fatalf("got %s step %d, want step %d", path, step, tt.wantStep)
				}
				checkStepFile(t, path, step, 1)
			case "notexist":
				if !errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("got %v, want an error wrapping fs.ErrNotExist", err)
				}
			case "format":
				var fe *FormatError
				if !errors.As(err, &fe) || errors.Is(err, fs.ErrNotExist) {
					t.Fatalf("got %v, want a *FormatError that does not wrap fs.ErrNotExist", err)
				}
				if !strings.Contains(err.Error(), dir) {
					t.Errorf("got %v, want it to name %s", err, dir)
				}
			}
		})
	}
	t.Run("missing directory", func(t *testing.T) {
		if _, _, err := Latest(filepath.Join(t.TempDir(), "none")); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("got %v, want an error wrapping fs.ErrNotExist", err)
		}
	})
}

func ExampleSaveStep() {
	dir, _ := os.MkdirTemp("", "ckpt")
	defer os.RemoveAll(dir)
	for step := int64(100); step <= 400; step += 100 {
		entries, meta := stepEntries(step, 1)
		if _, err := SaveStep(dir, step, entries, meta, 2); err != nil {
			fmt.Println(err)
		}
	}
	path, step, err := Latest(dir)
	if err != nil {
		fmt.Println(err)
		return
	}
	f, _ := Load(path)
	fmt.Println(filepath.Base(path), step, f.Meta[KeyStep], f.Meta[KeyEpoch])
	// Output: ckpt-0000000400.safetensors 400 400 40
}
