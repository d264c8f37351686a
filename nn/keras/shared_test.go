package keras

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// sharedDir returns ../shared/keras beside the module root (the directory
// holding go.mod), where the project keeps real configs written by others.
func sharedDir(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return filepath.Join(dir, "..", "shared", "keras")
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the package directory")
		}
		dir = parent
	}
}

// readTSV returns the rows of a tab-separated file with a header, as maps
// from column name to value.
func readTSV(t *testing.T, path string) []map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("the shared Keras configs are needed (CI clones them beside the repo): %v", err)
	}
	defer f.Close()
	var header []string
	var rows []map[string]string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if sc.Text() == "" {
			continue
		}
		cols := strings.Split(sc.Text(), "\t")
		if header == nil {
			header = cols
			continue
		}
		if len(cols) != len(header) {
			t.Fatalf("%s: row %q has %d columns, header %d", path, sc.Text(), len(cols), len(header))
		}
		row := map[string]string{}
		for i, h := range header {
			row[h] = cols[i]
		}
		rows = append(rows, row)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return rows
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("bad number %q in a TSV: %v", s, err)
	}
	return n
}

// shapeString renders a shape as the TSVs write it: [48, 48, 1].
func shapeString(s []int) string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = strconv.Itoa(d)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// TestSharedConfigs reads every config in ../shared/keras and compares the
// totals with EXPECTED.tsv and every layer with LAYERS.tsv.
func TestSharedConfigs(t *testing.T) {
	dir := sharedDir(t)
	expected := readTSV(t, filepath.Join(dir, "EXPECTED.tsv"))
	layers := readTSV(t, filepath.Join(dir, "LAYERS.tsv"))

	onDisk, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, row := range expected {
		listed = append(listed, row["file"])
	}
	for _, p := range onDisk {
		if !slices.Contains(listed, filepath.Base(p)) {
			t.Errorf("%s is not listed in EXPECTED.tsv", filepath.Base(p))
		}
	}
	if len(expected) == 0 {
		t.Fatal("EXPECTED.tsv lists no configs")
	}

	for _, want := range expected {
		file := want["file"]
		t.Run(file, func(t *testing.T) {
			m, err := Load(filepath.Join(dir, file))
			if err != nil {
				t.Fatal(err)
			}
			total, trainable := atoi(t, want["total_params"]), atoi(t, want["trainable_params"])
			if m.Params != total {
				t.Errorf("total params: got %d, want %d", m.Params, total)
			}
			if m.TrainableParams != trainable {
				t.Errorf("trainable params: got %d, want %d", m.TrainableParams, trainable)
			}
			if got, want := m.Params-m.TrainableParams, atoi(t, want["non_trainable_params"]); got != want {
				t.Errorf("non-trainable params: got %d, want %d", got, want)
			}
			if got := shapeString(m.Sequential.InputShape); got != want["input_shape"] {
				t.Errorf("input shape: got %s, want %s", got, want["input_shape"])
			}
			if got := shapeString(m.Layers[len(m.Layers)-1].Output); got != want["output_shape"] {
				t.Errorf("output shape: got %s, want %s", got, want["output_shape"])
			}
			// Params from nn's own build, not only the mapping's arithmetic.
			_, nnTotal, err := m.Sequential.Summary()
			if err != nil || nnTotal != total {
				t.Errorf("nn.Sequential.Summary total: got %d (%v), want %d", nnTotal, err, total)
			}

			var rows []map[string]string
			for _, r := range layers {
				if r["file"] == file {
					rows = append(rows, r)
				}
			}
			if len(rows) != len(m.Layers) {
				t.Fatalf("layers: got %d, LAYERS.tsv lists %d", len(m.Layers), len(rows))
			}
			for _, r := range rows {
				i := atoi(t, r["index"])
				if i < 0 || i >= len(m.Layers) {
					t.Fatalf("LAYERS.tsv index %d out of range", i)
				}
				got := m.Layers[i]
				gotRow := fmt.Sprintf("%s %s %s %d %d", got.Class, got.Name, shapeString(got.Output), got.Output.Size(), got.Params)
				wantRow := fmt.Sprintf("%s %s %s %s %s", r["class_name"], r["name"], r["output_shape_per_sample"],
					r["output_elements_per_sample"], r["params"])
				if gotRow != wantRow {
					t.Errorf("layer %d: got %s, want %s", i, gotRow, wantRow)
				}
			}
		})
	}
}
