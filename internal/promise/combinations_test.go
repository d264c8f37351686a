package promise

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// A sampled combination is one run: a model kind, a data path and flags.
// The sample is a fixed table (sampleRows), not a random draw, so a
// failure names a run anyone can repeat.

// modelKinds are the model kinds a user trains, each with the data paths
// it trains on in the sample (cycled over its rows), in a fixed order: a
// kind's place offsets its precisions (below).
var modelKinds = []struct {
	name string
	data []string
}{
	{"mlp", []string{"digits", "csv", "synthetic-stream", "synthetic"}},
	{"cnn", []string{"images", "images-augment", "fashion-mnist-stream", "npy"}},
	{"resnet", []string{"npy", "digits", "images-augment"}},
	{"unet", []string{"shapes"}},
	{"gpt", []string{"text", "go-src"}},
	{"lstm", []string{"go-src", "text"}},
	{"keras", []string{"digits"}}, // the functional Keras config (--keras), made for the 8x8 digits
}

// dataPaths are the ways data reach a run: built-in in memory, built-in
// streamed, the user's files (--data; with --validation-split 0.2), text.
var dataPaths = []string{"digits", "synthetic", "shapes", "go-src", "fashion-mnist-stream", "synthetic-stream",
	"csv", "npy", "images", "images-augment", "text"}

// A row's flags are a structural flag and a precision. Row i of model kind
// m takes structures[i%3] and precisions[(i+m)%3], so each kind meets each
// structural flag and, over the kinds, each structural flag meets each
// precision.
var structures = [][]string{{"--accumulate", "2"}, {"--remat"}, {"--fit-to-budget", "--budget", "96MiB"}}

var precisions = [][]string{nil, {"--precision", "mixed_bfloat16"}, {"--precision", "mixed_float16"}}

// sampleRow is one sampled run.
type sampleRow struct {
	model, data string
	flags       []string
}

// name is the row's subtest name: "gpt_text_accumulate_2_precision_mixed_bfloat16".
func (r sampleRow) name() string {
	return fmt.Sprintf("%s_%s_%s", r.model, r.data, strings.ReplaceAll(strings.Join(r.flags, "_"), "--", ""))
}

// sampleRows is the sample: for each model kind, as many rows as the larger
// of its data paths and the three structural flags.
func sampleRows() []sampleRow {
	var rows []sampleRow
	for m, k := range modelKinds {
		n := max(len(k.data), len(structures))
		for i := 0; i < n; i++ {
			flags := append(append([]string{}, structures[i%len(structures)]...), precisions[(i+m)%len(precisions)]...)
			rows = append(rows, sampleRow{model: k.name, data: k.data[i%len(k.data)], flags: flags})
		}
	}
	return rows
}

// args are the command line of row r, its files in u.
func (r sampleRow) args(t *testing.T, u *userData) []string {
	args := []string{"train", "--threads", "2", "--epochs", "1", "--max-steps", "8", "--seed", "1"}
	if r.model == "keras" {
		args = append(args, "--keras", u.keras)
	} else {
		args = append(args, "--model", r.model)
	}
	valSplit := []string{"--validation-split", "0.2"}
	switch r.data {
	case "digits", "shapes":
		args = append(args, "--dataset", r.data, "--batch", "16")
	case "synthetic":
		args = append(args, "--dataset", "synthetic", "--batch", "32")
	case "synthetic-stream":
		args = append(args, "--dataset", "synthetic", "--stream", "--batch", "32")
	case "fashion-mnist-stream":
		args = append(args, "--dataset", "fashion-mnist", "--stream", "--batch", "32")
	case "go-src":
		args = append(args, "--dataset", "go-src", "--seq", "32", "--batch", "8")
	case "text":
		args = append(args, "--text", u.text, "--seq", "32", "--batch", "8")
	case "csv":
		args = append(append(args, "--data", u.csv, "--label", "label", "--batch", "16"), valSplit...)
	case "npy":
		args = append(append(args, "--data", u.npyX, "--labels", u.npyY, "--batch", "16"), valSplit...)
	case "images":
		args = append(append(args, "--data", u.images, "--batch", "16"), valSplit...)
	case "images-augment":
		args = append(append(args, "--data", u.images, "--augment", "flip,crop", "--batch", "16"), valSplit...)
	default:
		t.Fatalf("unknown data path %q", r.data)
	}
	return append(args, r.flags...)
}

// userData are the user's files the sample trains on.
type userData struct {
	images, csv, npyX, npyY, text, keras string
}

func newUserData(t *testing.T) *userData {
	u := &userData{images: imageFolder(t, 16, 32), csv: csvFile(t, 300), text: textFile(t), keras: kerasConfig(t)}
	u.npyX, u.npyY = npyFiles(t, 240)
	return u
}

// sampledFlags are the flags (with their values) the sample must use.
var sampledFlags = []string{"--accumulate 2", "--remat", "--precision mixed_bfloat16", "--precision mixed_float16",
	"--fit-to-budget", "--validation-split 0.2", "--augment flip,crop", "--stream"}

// TestSampleCovers checks the sample itself: every model kind, every data
// path and every flag is in it, each model kind meets each structural
// flag, and each structural flag meets each precision.
func TestSampleCovers(t *testing.T) {
	rows := sampleRows()
	files := &userData{images: "IMGS", csv: "CSV", npyX: "X", npyY: "Y", text: "TEXT", keras: "KERAS"}
	seen := map[string]bool{}
	for _, r := range rows {
		line := strings.Join(r.args(t, files), " ") + " "
		precision := "float32"
		if i := slices.Index(r.flags, "--precision"); i >= 0 {
			precision = r.flags[i+1]
		}
		structure := r.flags[0]
		for _, k := range []string{"model " + r.model, "data " + r.data, r.model + " with " + structure, structure + " with " + precision} {
			seen[k] = true
		}
		for _, f := range sampledFlags {
			if strings.Contains(line, f+" ") {
				seen["flag "+f] = true
			}
		}
	}
	var want []string
	for _, k := range modelKinds {
		want = append(want, "model "+k.name)
		for _, s := range structures {
			want = append(want, k.name+" with "+s[0])
		}
	}
	for _, d := range dataPaths {
		want = append(want, "data "+d)
	}
	for _, s := range structures {
		for _, p := range []string{"float32", "mixed_bfloat16", "mixed_float16"} {
			want = append(want, s[0]+" with "+p)
		}
	}
	for _, f := range sampledFlags {
		want = append(want, "flag "+f)
	}
	var missing []string
	for _, w := range want {
		if !seen[w] {
			missing = append(missing, w)
		}
	}
	if len(missing) > 0 {
		t.Errorf("the sample of %d runs lacks: %s", len(rows), strings.Join(missing, "; "))
	}
}

// TestSampledCombinations runs the sample: each run trains (status 0),
// prints its plan before step 1, plans exactly what it measures and
// reports a positive samples_per_sec.
func TestSampledCombinations(t *testing.T) {
	u := newUserData(t)
	rows := sampleRows()
	for i, r := range rows {
		t.Logf("sample %2d: headroom %s", i+1, strings.Join(r.args(t, u), " "))
	}
	for _, r := range rows {
		t.Run(r.name(), func(t *testing.T) {
			if r.data == "fashion-mnist-stream" {
				fashionMNIST(t)
			}
			trained(t, headroom(t, r.args(t, u)...))
		})
	}
}
