package data

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/gif"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/headroom-ml/headroom/tensor"
)

func TestDetectFormat(t *testing.T) {
	dir := t.TempDir()
	imgs := filepath.Join(dir, "imgs")
	os.MkdirAll(filepath.Join(imgs, "cat"), 0o755)
	os.WriteFile(filepath.Join(imgs, "cat", "a.PNG"), nil, 0o644)
	txt := filepath.Join(dir, "txt")
	os.MkdirAll(txt, 0o755)
	os.WriteFile(filepath.Join(txt, "a.go"), nil, 0o644)
	for _, tc := range []struct{ name, want string }{
		{"a.csv", "csv"}, {"a.CSV.gz", "csv"}, {"a.tsv", "csv"}, {"x.npy", "npy"}, {"d.npz", "npz"},
		{"r.tfrecord", "tfrecord"}, {"r.tfrecords.gz", "tfrecord"}, {"train-images-idx3-ubyte.gz", "idx"},
		{"book.txt", "text"}, {"imgs", "images"}, {"txt", "text"}, {"model.bin", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, tc.name)
			if _, err := os.Stat(p); err != nil {
				os.WriteFile(p, nil, 0o644)
			}
			got, err := DetectFormat(p)
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), "--format") {
					t.Errorf("got %q, %v; want an error pointing to --format", got, err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestSourceCSV(t *testing.T) {
	// the label column, class names, is in the middle
	path := writeFile(t, "iris.csv", []byte("sepal,species,petal\n1.5,virginica,2\n0.5, setosa ,-1\n3,versicolor,4e1\n2,setosa,0\n"))
	s := &Source{Path: path, Preprocessing: Preprocessing{Label: "species"}}
	e, err := s.Load("iris")
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(s.ClassNames, []string{"setosa", "versicolor", "virginica"}) || s.Classes != 3 || e.Classes != 3 {
		t.Errorf("got classes %q (%d), want the sorted names", s.ClassNames, s.Classes)
	}
	if !slices.Equal(s.Columns, []string{"sepal", "petal"}) || s.Format != "csv" || !s.Shape.Equal(tensor.Shape{2}) {
		t.Errorf("got columns %q, format %q, shape %v", s.Columns, s.Format, s.Shape)
	}
	if !slices.Equal(e.Labels, []int32{2, 0, 1, 0}) || !slices.Equal(e.Floats, []float32{1.5, 2, 0.5, -1, 3, 40, 2, 0}) {
		t.Errorf("got labels %v, features %v", e.Labels, e.Floats)
	}

	// integer labels; the default label column is "label", else the last
	ints := writeFile(t, "ints.csv", []byte("label,a\n3,1\n0,2\n"))
	s = &Source{Path: ints}
	if e, err = s.Load("ints"); err != nil || s.Label != "label" || s.ClassNames != nil || s.Classes != 4 || !slices.Equal(e.Labels, []int32{3, 0}) {
		t.Errorf("integer labels: got label %q, classes %q %d, labels %v, %v", s.Label, s.ClassNames, s.Classes, e, err)
	}
	last := writeFile(t, "last.tsv", []byte("a\tb\tkind\n1\t2\tx\n"))
	s = &Source{Path: last}
	if e, err = s.Load("last"); err != nil || s.Label != "kind" || !slices.Equal(e.Floats, []float32{1, 2}) {
		t.Errorf("last column: got label %q, %v, %v", s.Label, e, err)
	}

	// prediction: the model's columns and classes, the label ignored or absent
	p := &Source{Path: path, Unlabeled: true, Preprocessing: Preprocessing{Columns: []string{"petal", "sepal"}}}
	if e, err = p.Load("p"); err != nil || !slices.Equal(e.Floats, []float32{2, 1.5, -1, 0.5, 40, 3, 0, 2}) || e.Labels != nil {
		t.Errorf("unlabeled with the model's columns: got %v, %v", e, err)
	}
}

func TestSourceCSVErrors(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		src        Preprocessing
		unlabeled  bool
		want       []string
	}{
		{"non_number", "a,b,label\n1,2,x\n3,oops,y\n", Preprocessing{}, false, []string{"line 3", "column 3", "(b)", "oops"}},
		{"ragged_row", "a,b,label\n1,2,x\n3,4\n", Preprocessing{}, false, []string{"line 3", "fields"}},
		{"no_label_column", "a,b\n1,2\n", Preprocessing{Label: "kind"}, false, []string{`"kind"`, "a, b"}},
		{"unknown_class", "a,label\n1,cat\n2,cow\n", Preprocessing{ClassNames: []string{"cat", "dog"}}, false, []string{`"cow"`, "byte 14"}},
		{"class_out_of_range", "a,label\n1,1\n2,5\n", Preprocessing{Classes: 3}, false, []string{`"5"`, "[0, 3)"}},
		{"missing_model_column", "a,label\n1,1\n", Preprocessing{Columns: []string{"a", "z"}}, true, []string{`"z"`}},
		{"header_only", "a,label\n", Preprocessing{}, false, []string{"no rows"}},
		{"empty", "", Preprocessing{}, false, []string{"header"}},
		{"duplicate_column", "a,a,label\n1,2,3\n", Preprocessing{}, false, []string{`"a" appears twice`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := writeFile(t, "d.csv", []byte(tc.body))
			s := &Source{Path: path, Unlabeled: tc.unlabeled, Preprocessing: tc.src}
			_, err := s.Load("d")
			if err == nil {
				t.Fatal("nil error")
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not mention %q", err, w)
				}
			}
		})
	}
}

func le32(vals ...float32) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
	}
	return b
}

func le64(vals ...int64) []byte {
	var b []byte
	for _, v := range vals {
		b = binary.LittleEndian.AppendUint64(b, uint64(v))
	}
	return b
}

func TestSourceArrays(t *testing.T) {
	x := writeFile(t, "x.npy", npyFile("|u1", []int{3, 2, 2}, []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 255}))
	y := writeFile(t, "y.npy", npyFile("<i8", []int{3}, le64(1, 0, 4)))
	s := &Source{Path: x, Labels: y}
	e, err := s.Load("npy")
	if err != nil {
		t.Fatal(err)
	}
	if e.N != 3 || !e.Shape.Equal(tensor.Shape{2, 2}) || e.Pixels[11] != 255 || e.Scale != 1 || e.Classes != 5 || !slices.Equal(e.Labels, []int32{1, 0, 4}) {
		t.Errorf("npy: got %+v", e)
	}
	if _, err := (&Source{Path: x}).Load("no labels"); err == nil || !strings.Contains(err.Error(), "--labels") {
		t.Errorf("npy without labels: %v, want an error naming --labels", err)
	}

	// npz with float features and targets
	var z bytes.Buffer
	zw := zip.NewWriter(&z)
	for name, body := range map[string][]byte{
		"x.npy": npyFile("<f4", []int{2, 3}, le32(1, 2, 3, 4, 5, 6)),
		"y.npy": npyFile("<f4", []int{2}, le32(0.5, -1)),
	} {
		w, _ := zw.Create(name)
		w.Write(body)
	}
	zw.Close()
	s = &Source{Path: writeFile(t, "d.npz", z.Bytes())}
	if e, err = s.Load("npz"); err != nil || !slices.Equal(e.Floats, []float32{1, 2, 3, 4, 5, 6}) || !slices.Equal(e.Targets, []float32{0.5, -1}) || e.Labels != nil {
		t.Errorf("npz: got %+v, %v", e, err)
	}

	// IDX scales pixels by 1/255 as MNIST readers do
	imgs := writeFile(t, "t-images-idx3-ubyte", idxFile(0x08, []uint32{2, 1, 2}, []byte{0, 255, 7, 8}))
	labels := writeFile(t, "t-labels-idx1-ubyte", idxFile(0x08, []uint32{2}, []byte{9, 3}))
	s = &Source{Path: imgs, Labels: labels}
	if e, err = s.Load("idx"); err != nil || e.Scale != 1.0/255 || !slices.Equal(e.Labels, []int32{9, 3}) || e.Classes != 10 {
		t.Errorf("idx: got %+v, %v", e, err)
	}

	// a header that lies about the data's size
	lie := writeFile(t, "lie.npy", npyFile("<f4", []int{4, 3}, le32(1, 2, 3, 4, 5, 6)))
	_, err = (&Source{Path: lie, Unlabeled: true}).Load("lie")
	if fe := wantFormatError(t, err, lie); fe != nil && !strings.Contains(fe.Msg, "row 2 of 4") {
		t.Errorf("error %q does not name the row", fe)
	}
}

func writeImage(t *testing.T, path string, img image.Image) {
	t.Helper()
	os.MkdirAll(filepath.Dir(path), 0o755)
	var b bytes.Buffer
	var err error
	if strings.HasSuffix(path, ".gif") {
		err = gif.Encode(&b, img, nil)
	} else {
		err = png.Encode(&b, img)
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

func grey(w, h int, v uint8) image.Image {
	m := image.NewGray(image.Rect(0, 0, w, h))
	for i := range m.Pix {
		m.Pix[i] = v
	}
	return m
}

func TestSourceImages(t *testing.T) {
	root := t.TempDir()
	writeImage(t, filepath.Join(root, "dog", "b.png"), grey(4, 4, 200))
	writeImage(t, filepath.Join(root, "cat", "a.gif"), grey(4, 4, 0))
	writeImage(t, filepath.Join(root, "cat", "c.png"), grey(4, 4, 255))
	s := &Source{Path: root, Preprocessing: Preprocessing{Color: "grayscale"}}
	e, err := s.Load("imgs")
	if err != nil {
		t.Fatal(err)
	}
	if s.Format != "images" || !slices.Equal(s.ClassNames, []string{"cat", "dog"}) || !e.Shape.Equal(tensor.Shape{4, 4, 1}) ||
		!slices.Equal(e.Labels, []int32{0, 0, 1}) || e.Pixels[16] != 255 || e.Pixels[32] != 200 || e.Scale != 1.0/255 {
		t.Errorf("got format %q, classes %q, %+v", s.Format, s.ClassNames, e)
	}

	// another size: an error naming the file, unless resized
	writeImage(t, filepath.Join(root, "dog", "d.png"), grey(6, 2, 50))
	if _, err := (&Source{Path: root}).Load("imgs"); err == nil || !strings.Contains(err.Error(), "d.png") || !strings.Contains(err.Error(), "--image-size") {
		t.Errorf("mixed sizes: %v, want an error naming d.png and --image-size", err)
	}
	s = &Source{Path: root, Preprocessing: Preprocessing{ImageSize: [2]int{3, 5}}}
	if e, err = s.Load("imgs"); err != nil || !e.Shape.Equal(tensor.Shape{3, 5, 3}) || s.Color != "rgb" {
		t.Errorf("resized: %+v, %v", e, err)
	}

	// prediction on a flat folder; evaluation against the model's classes
	flat := t.TempDir()
	writeImage(t, filepath.Join(flat, "z.png"), grey(2, 2, 1))
	writeImage(t, filepath.Join(flat, "sub", "a.png"), grey(2, 2, 2))
	p := &Source{Path: flat, Unlabeled: true, Preprocessing: Preprocessing{Color: "grayscale"}}
	if e, err = p.Load("flat"); err != nil || e.N != 2 || e.Pixels[0] != 2 || e.Labels != nil {
		t.Errorf("flat folder: %+v, %v", e, err)
	}
	ev := &Source{Path: root, Preprocessing: Preprocessing{ClassNames: []string{"cat", "cow"}}}
	if _, err := ev.Load("ev"); err == nil || !strings.Contains(err.Error(), "cow") {
		t.Errorf("other classes: %v, want an error naming the model's classes", err)
	}

	// a truncated PNG names the file
	b, _ := os.ReadFile(filepath.Join(root, "cat", "c.png"))
	os.WriteFile(filepath.Join(root, "cat", "c.png"), b[:len(b)/2], 0o644)
	_, err = (&Source{Path: root, Preprocessing: Preprocessing{ImageSize: [2]int{2, 2}}}).Load("imgs")
	wantFormatError(t, err, filepath.Join(root, "cat", "c.png"))
}

// tfExample builds a tf.train.Example with an image (raw bytes), a float
// feature and an int64 label.
func tfExample(img []byte, f float32, label int64) []byte {
	entry := func(key string, kind protowire.Number, list []byte) []byte {
		feat := protowire.AppendBytes(protowire.AppendTag(nil, kind, protowire.BytesType), list)
		e := protowire.AppendString(protowire.AppendTag(nil, 1, protowire.BytesType), key)
		e = protowire.AppendBytes(protowire.AppendTag(e, 2, protowire.BytesType), feat)
		return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), e)
	}
	bl := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), img)
	fl := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), protowire.AppendFixed32(nil, math.Float32bits(f)))
	il := protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), protowire.AppendVarint(nil, uint64(label)))
	var feats []byte
	feats = append(feats, entry("image", 1, bl)...)
	feats = append(feats, entry("size", 2, fl)...)
	feats = append(feats, entry("label", 3, il)...)
	return protowire.AppendBytes(protowire.AppendTag(nil, 1, protowire.BytesType), feats)
}

func TestSourceTFRecord(t *testing.T) {
	var file []byte
	file = AppendTFRecord(file, tfExample([]byte{1, 2, 3, 4}, 0.5, 2))
	file = AppendTFRecord(file, tfExample([]byte{5, 6, 7, 8}, 1.5, 0))
	path := writeFile(t, "d.tfrecord", file)
	s := &Source{Path: path, Preprocessing: Preprocessing{Features: "image:bytes:2x2x1"}}
	e, err := s.Load("tf")
	if err != nil {
		t.Fatal(err)
	}
	if !e.Shape.Equal(tensor.Shape{2, 2, 1}) || !slices.Equal(e.Pixels, []uint8{1, 2, 3, 4, 5, 6, 7, 8}) || !slices.Equal(e.Labels, []int32{2, 0}) || s.Label != "label" {
		t.Errorf("bytes feature: got %+v", e)
	}
	s = &Source{Path: path, Preprocessing: Preprocessing{Features: "size:float,image:bytes"}}
	if e, err = s.Load("tf"); err != nil || !slices.Equal(e.Floats, []float32{0.5, 1, 2, 3, 4, 1.5, 5, 6, 7, 8}) {
		t.Errorf("two features: got %+v, %v", e, err)
	}
	for _, tc := range []struct{ spec, want string }{
		{"image:bytes:3x3", "holds 4 values"},
		{"size:int64", "is a float"},
		{"pixels:float", `no feature "pixels"`},
	} {
		_, err := (&Source{Path: path, Preprocessing: Preprocessing{Features: tc.spec}}).Load("tf")
		if fe := wantFormatError(t, err, path); fe != nil && !strings.Contains(fe.Msg, tc.want) {
			t.Errorf("spec %s: error %q does not say %q", tc.spec, fe, tc.want)
		}
	}
	// a bad CRC in the second record names the file and the record's offset
	bad := append([]byte(nil), file...)
	bad[len(bad)-1] ^= 1
	badPath := writeFile(t, "bad.tfrecord", bad)
	_, err = (&Source{Path: badPath, Preprocessing: Preprocessing{Features: "image:bytes"}}).Load("tf")
	if fe := wantFormatError(t, err, badPath); fe != nil && (fe.Offset != int64(len(file)/2) || !strings.Contains(fe.Msg, "checksum")) {
		t.Errorf("bad crc: got %v, want the checksum error at byte %d", fe, len(file)/2)
	}
}

func TestParseFeatures(t *testing.T) {
	got, err := ParseFeatures("image:bytes:28x28x1, extra:int64 ,w:float:3")
	want := []FeatureSpec{{"image", BytesKind, tensor.Shape{28, 28, 1}}, {"extra", Int64Kind, nil}, {"w", FloatKind, tensor.Shape{3}}}
	if err != nil || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	for _, bad := range []string{"", "x", "x:float:0", "x:complex", "x:float:2x-1", "x:float,x:int64", ":float", "x:float:1:2", "a:float:99999x99999"} {
		if _, err := ParseFeatures(bad); err == nil {
			t.Errorf("ParseFeatures(%q): nil error", bad)
		}
	}
}

func FuzzParseFeatures(f *testing.F) {
	for _, s := range []string{"image:bytes:28x28x1,label:int64", "a:float", "x:float:2x3x4x5x6x7x8x9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		fs, err := ParseFeatures(spec)
		if err != nil {
			return
		}
		for _, x := range fs {
			if x.Key == "" || x.Shape.Size() > maxFeatureElems || x.Kind < BytesKind || x.Kind > Int64Kind {
				t.Fatalf("ParseFeatures(%q) = %v: a spec it should have refused", spec, fs)
			}
		}
	})
}

// FuzzSourceCSV: a CSV data set either loads or fails with an error that
// names the file, never panics.
func FuzzSourceCSV(f *testing.F) {
	for _, s := range []string{"a,label,b\n1,x,2\n3,y,4\n", "label\n1\n", "a,b\n\"1\",2\n", "\ufeffa,b\n1,2\n3\n"} {
		f.Add([]byte(s))
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, body []byte) {
		path := filepath.Join(dir, "f.csv")
		if err := os.WriteFile(path, body, 0o644); err != nil {
			t.Fatal(err)
		}
		s := &Source{Path: path}
		e, err := s.Load("f")
		if err != nil {
			var fe *FormatError
			if !errors.As(err, &fe) && !strings.Contains(err.Error(), path) {
				t.Fatalf("error %q names neither the file nor a position", err)
			}
			return
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("loaded examples do not validate: %v", err)
		}
	})
}

func TestSplitValidation(t *testing.T) {
	e := &Examples{Name: "d", Shape: tensor.Shape{2}, N: 10, Classes: 10}
	for i := 0; i < 10; i++ {
		e.Floats = append(e.Floats, float32(i), float32(-i))
		e.Labels = append(e.Labels, int32(i))
	}
	tr, va, err := SplitValidation(e, 0.2, 7)
	if err != nil {
		t.Fatal(err)
	}
	if tr.N != 8 || va.N != 2 {
		t.Fatalf("got %d and %d examples, want 8 and 2", tr.N, va.N)
	}
	seen := map[int32]bool{}
	for i, l := range e.Labels {
		if e.Floats[2*i] != float32(l) || e.Floats[2*i+1] != -float32(l) || seen[l] {
			t.Fatalf("after the shuffle example %d is %v with label %d: rows and labels must move together, once each", i, e.Floats[2*i:2*i+2], l)
		}
		seen[l] = true
	}
	if slices.IsSorted(e.Labels) {
		t.Error("the examples were not shuffled")
	}
	// the same seed gives the same split
	f := &Examples{Name: "d", Shape: tensor.Shape{2}, N: 10, Classes: 10}
	for i := 0; i < 10; i++ {
		f.Floats = append(f.Floats, float32(i), float32(-i))
		f.Labels = append(f.Labels, int32(i))
	}
	_, va2, _ := SplitValidation(f, 0.2, 7)
	if !slices.Equal(va.Labels, va2.Labels) {
		t.Errorf("seed 7 twice: validation labels %v and %v", va.Labels, va2.Labels)
	}
	for _, frac := range []float64{0, 1, 0.05, -0.2} {
		if _, _, err := SplitValidation(e, frac, 1); err == nil {
			t.Errorf("split %v of 10: nil error", frac)
		}
	}
}
