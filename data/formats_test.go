package data

import (
	"archive/zip"
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/tensor"
)

func writeFile(t testing.TB, name string, b []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func gzipBytes(b []byte) []byte {
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	w.Write(b)
	w.Close()
	return z.Bytes()
}

func TestFixedLengthRecords(t *testing.T) {
	body := []byte("HEADaaaabbbbccccFOOT")
	path := writeFile(t, "f.bin", body)
	got, err := collect(t, FixedLengthRecords(path, 4, RecordOptions{HeaderBytes: 4, FooterBytes: 4}), Config{},
		func(r Record) string { return fmt.Sprint(string(r.Data), "@", r.Offset) })
	if want := []string{"aaaa@4", "bbbb@8", "cccc@12"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}
	_, err = collect(t, FixedLengthRecords(path, 3, RecordOptions{}), Config{}, ident[Record])
	if fe := wantFormatError(t, err, path); fe.Offset != 18 {
		t.Errorf("got offset %d, want 18 (the partial record)", fe.Offset)
	}
	got, err = collect(t, FixedLengthRecords(path, 3, RecordOptions{}), Config{OnError: Skip},
		func(r Record) string { return string(r.Data) })
	if err != nil || len(got) != 6 {
		t.Errorf("skip: got %v, %v; want 6 whole records", got, err)
	}
}

func TestCSV(t *testing.T) {
	text := "name,x,count,ok\n" +
		"\"Smith, J\",1.5,3,true\n" +
		"\"say \"\"hi\"\"\",-2,4,false\n" +
		"\"two\nlines\",1e3,5,1\n"
	opt := CSVOptions{Header: true, Types: []tensor.DType{tensor.Invalid, tensor.Float32, tensor.Int64, tensor.Bool}}
	type row struct {
		name  string
		x     float64
		count int64
		ok    int64
		off   int64
	}
	conv := func(r Row) row {
		return row{r.Values[0].Text, r.Values[1].Float, r.Values[2].Int, r.Values[3].Int, r.Offset}
	}
	want := []row{{"Smith, J", 1.5, 3, 1, 16}, {`say "hi"`, -2, 4, 0, 38}, {"two\nlines", 1000, 5, 1, 62}}
	for _, gz := range []bool{false, true} {
		b := []byte(text)
		if gz {
			b = gzipBytes(b)
		}
		path := writeFile(t, "t.csv", b)
		got, err := collect(t, CSV(path, opt), Config{}, conv)
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("gzip=%v: got %v, %v; want %v", gz, got, err, want)
		}
	}
	path := writeFile(t, "t.csv", []byte(text))
	s, err := collect(t, Map(CSV(path, opt), "row", CSVToSample("count")), Config{},
		func(s Sample) string { return fmt.Sprint(s.X, s.X.Float32s(), s.Y, s.Y.Int64s()) })
	if want := "float32[2] [1.5 1] int64[] [3]"; err != nil || s[0] != want {
		t.Errorf("CSVToSample: got %v, %v; want %q first", s, err, want)
	}
}

func TestCSVErrors(t *testing.T) {
	tests := []struct {
		name, text string
		off        int64
		good       int // rows read before the error; also the rows kept under Skip
		skipped    int
	}{
		{"bad number", "a,b\n1,2\n3,x\n5,6\n", 8, 1, 1},
		{"field count", "a,b\n1,2\n3\n5,6\n", 8, 1, 1},
		{"bare quote", "a,b\n1,2\n3,4\"\n5,6\n", 8, 1, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, "e.csv", []byte(tt.text))
			got, err := collect(t, CSV(path, CSVOptions{Header: true}), Config{}, ident[Row])
			fe := wantFormatError(t, err, path)
			if fe.Offset != tt.off || len(got) != tt.good {
				t.Errorf("got %d rows and offset %d (%v), want %d and %d", len(got), fe.Offset, err, tt.good, tt.off)
			}
			got, err = collect(t, CSV(path, CSVOptions{Header: true}), Config{OnError: Skip}, ident[Row])
			if err != nil || len(got) != 3-tt.skipped {
				t.Errorf("skip: got %d rows, %v; want %d", len(got), err, 3-tt.skipped)
			}
		})
	}
	long := writeFile(t, "long.csv", bytes.Repeat([]byte("1,"), 1000))
	_, err := collect(t, CSV(long, CSVOptions{MaxLineBytes: 100}), Config{}, ident[Row])
	wantFormatError(t, err, long)
}

// npyFile builds a version-1 .npy file.
func npyFile(descr string, shape []int, data []byte) []byte {
	dims := ""
	for _, d := range shape {
		dims += fmt.Sprintf("%d, ", d)
	}
	h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, dims)
	for (10+len(h)+1)%64 != 0 {
		h += " "
	}
	h += "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), byte(len(h)), byte(len(h)>>8))
	return append(append(b, h...), data...)
}

func TestNPY(t *testing.T) {
	f32 := make([]byte, 0, 24)
	for _, v := range []float32{1, 2, 3, 4, 5, 6} {
		f32 = binary.LittleEndian.AppendUint32(f32, math.Float32bits(v))
	}
	beI16 := []byte{0xff, 0xfe, 0x00, 0x07, 0x80, 0x00} // -2, 7, -32768 big endian
	u8 := []byte{10, 20, 30}
	tests := []struct {
		name, descr string
		shape       []int
		data        []byte
		want        []string
	}{
		{"float32 matrix", "<f4", []int{3, 2}, f32, []string{"float32[2] [1 2]", "float32[2] [3 4]", "float32[2] [5 6]"}},
		{"big-endian int16 widened", ">i2", []int{3}, beI16, []string{"int32[] [-2]", "int32[] [7]", "int32[] [-32768]"}},
		{"uint8", "|u1", []int{3}, u8, []string{"uint8[] [10]", "uint8[] [20]", "uint8[] [30]"}},
		{"0-d", "<f4", nil, f32[:4], []string{"float32[] [1]"}},
	}
	show := func(s Sample) string { return fmtTensor(s.X) }
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, "a.npy", npyFile(tt.descr, tt.shape, tt.data))
			got, err := collect(t, NPY(path, ""), Config{}, show)
			if err != nil || !slices.Equal(got, tt.want) {
				t.Errorf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
	// pairs, npz (stored and deflated), and errors
	x := writeFile(t, "x.npy", npyFile("<f4", []int{3, 2}, f32))
	y := writeFile(t, "y.npy", npyFile("|u1", []int{3}, u8))
	got, err := collect(t, NPY(x, y), Config{}, func(s Sample) string { return fmtTensor(s.X) + " " + fmtTensor(s.Y) })
	if want := "float32[2] [3 4] uint8[] [20]"; err != nil || len(got) != 3 || got[1] != want {
		t.Errorf("pair: got %v, %v; want %q second", got, err, want)
	}
	for _, method := range []uint16{zip.Store, zip.Deflate} {
		var z bytes.Buffer
		zw := zip.NewWriter(&z)
		for name, b := range map[string][]byte{"x.npy": npyFile("<f4", []int{3, 2}, f32), "y.npy": npyFile("|u1", []int{3}, u8)} {
			w, _ := zw.CreateHeader(&zip.FileHeader{Name: name, Method: method})
			w.Write(b)
		}
		zw.Close()
		path := writeFile(t, "a.npz", z.Bytes())
		got, err := collect(t, NPZ(path, "x", "y"), Config{}, func(s Sample) string { return fmtTensor(s.X) + " " + fmtTensor(s.Y) })
		if err != nil || len(got) != 3 || got[2] != "float32[2] [5 6] uint8[] [30]" {
			t.Errorf("npz method %d: got %v, %v", method, got, err)
		}
	}
	shortFile := npyFile("<f4", []int{3, 2}, f32[:20])
	short := writeFile(t, "short.npy", shortFile)
	_, err = collect(t, NPY(short, ""), Config{}, ident[Sample])
	if fe, want := wantFormatError(t, err, short), int64(len(shortFile)-20+16); fe.Offset != want {
		t.Errorf("got offset %d, want %d (the third row)", fe.Offset, want)
	}
	for name, b := range map[string][]byte{
		"magic":   []byte("\x93NUMPZ\x01\x00\x04\x00{}  "),
		"descr":   npyFile("<c8", []int{1}, make([]byte, 8)),
		"fortran": []byte(string(npyFile("<f4", []int{1, 1}, f32[:4]))[:10] + "{'descr': '<f4', 'fortran_order': True, 'shape': (1, 1), }"),
	} {
		path := writeFile(t, name+".npy", b)
		_, err := collect(t, NPY(path, ""), Config{}, ident[Sample])
		wantFormatError(t, err, path)
	}
}

func fmtTensor(x tensor.Tensor) string {
	vals := make([]float64, x.Len())
	for i := range vals {
		vals[i] = x.Float64At(i)
	}
	s := fmt.Sprint(vals)
	return x.String() + " " + s
}

func idxFile(code byte, dims []uint32, data []byte) []byte {
	b := []byte{0, 0, code, byte(len(dims))}
	for _, d := range dims {
		b = binary.BigEndian.AppendUint32(b, d)
	}
	return append(b, data...)
}

func TestIDX(t *testing.T) {
	images := idxFile(0x08, []uint32{3, 2, 2}, []byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	labels := idxFile(0x08, []uint32{3}, []byte{7, 8, 9})
	floats := idxFile(0x0D, []uint32{2}, []byte{0x3f, 0x80, 0, 0, 0xc0, 0, 0, 0}) // 1, -2
	for _, gz := range []bool{false, true} {
		im, lb := images, labels
		if gz {
			im, lb = gzipBytes(im), gzipBytes(lb)
		}
		ip, lp := writeFile(t, "images-idx3-ubyte", im), writeFile(t, "labels-idx1-ubyte", lb)
		got, err := collect(t, IDX(ip, lp), Config{}, func(s Sample) string { return fmtTensor(s.X) + " " + fmtTensor(s.Y) })
		want := []string{"uint8[2, 2] [1 2 3 4] uint8[] [7]", "uint8[2, 2] [5 6 7 8] uint8[] [8]", "uint8[2, 2] [9 10 11 12] uint8[] [9]"}
		if err != nil || !slices.Equal(got, want) {
			t.Errorf("gzip=%v: got %v, %v; want %v", gz, got, err, want)
		}
	}
	fp := writeFile(t, "f-idx1", floats)
	got, err := collect(t, IDX(fp, ""), Config{}, func(s Sample) string { return fmtTensor(s.X) })
	if want := []string{"float32[] [1]", "float32[] [-2]"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("float32: got %v, %v; want %v", got, err, want)
	}
	trunc := writeFile(t, "t-idx3", images[:len(images)-2])
	_, err = collect(t, IDX(trunc, ""), Config{}, ident[Sample])
	if fe := wantFormatError(t, err, trunc); fe.Offset != 16+8 {
		t.Errorf("got offset %d, want 24 (the third image)", fe.Offset)
	}
	short := writeFile(t, "l-idx1", idxFile(0x08, []uint32{2}, []byte{1, 2}))
	_, err = collect(t, IDX(writeFile(t, "i", images), short), Config{}, ident[Sample])
	if err == nil {
		t.Errorf("got no error for 3 images and 2 labels")
	}
}

// TestHugeRowIsBudgeted: a header that declares an enormous row of a
// stored format that needs converting (big-endian int16 here) must not
// allocate that row, or its conversion scratch, on the Go heap (the fuzzer
// found 1.6 GB allocated for a 12-byte file, enough to kill a fuzzing
// worker). A plain file's size shows the row cannot be there: a
// *FormatError at the row's offset. A gzip stream's size is unknown until
// it ends: the row is asked of the budget and refused (*mem.OOMError).
func TestHugeRowIsBudgeted(t *testing.T) {
	header := idxFile(0x0B, []uint32{0x30303030, 0x30303030}, nil)
	for _, gz := range []bool{false, true} {
		data := header
		if gz {
			data = gzipBytes(header)
		}
		path := writeFile(t, "huge-idx2", data)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		_, err := collect(t, IDX(path, ""), Config{Budget: 4 << 20}, ident[Sample])
		runtime.ReadMemStats(&after)
		if gz {
			var oom *mem.OOMError
			if !errors.As(err, &oom) {
				t.Errorf("gzip: got %v, want a *mem.OOMError", err)
			}
		} else if fe := wantFormatError(t, err, path); fe.Offset != 12 || !strings.Contains(err.Error(), "truncated at row 0") {
			t.Errorf("got %v, want the row at offset 12 to be reported truncated", err)
		}
		if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
			t.Errorf("gzip=%v: reading the header allocated %d bytes outside the 4 MiB budget", gz, grew)
		}
	}
}

func TestImageFolder(t *testing.T) {
	root := t.TempDir()
	write := func(class, name string, img image.Image, enc func(*os.File, image.Image) error) {
		os.MkdirAll(filepath.Join(root, class), 0o755)
		f, err := os.Create(filepath.Join(root, class, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := enc(f, img); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	pngEnc := func(f *os.File, m image.Image) error { return png.Encode(f, m) }
	jpgEnc := func(f *os.File, m image.Image) error { return jpeg.Encode(f, m, &jpeg.Options{Quality: 100}) }
	solid := func(w, h int, c color.RGBA) image.Image {
		m := image.NewRGBA(image.Rect(0, 0, w, h))
		for i := 0; i < len(m.Pix); i += 4 {
			m.Pix[i], m.Pix[i+1], m.Pix[i+2], m.Pix[i+3] = c.R, c.G, c.B, c.A
		}
		return m
	}
	write("cat", "a.png", solid(4, 3, color.RGBA{200, 10, 20, 255}), pngEnc)
	write("cat", "b.jpg", solid(8, 8, color.RGBA{0, 0, 255, 255}), jpgEnc)
	write("dog", "c.png", solid(2, 2, color.RGBA{1, 2, 3, 255}), pngEnc)
	os.WriteFile(filepath.Join(root, "dog", "notes.txt"), []byte("not an image"), 0o644)
	os.WriteFile(filepath.Join(root, "dog", "broken.png"), []byte("not a png"), 0o644)

	if c, _ := ClassNames(root); !slices.Equal(c, []string{"cat", "dog"}) {
		t.Errorf("got classes %v", c)
	}
	ds, err := ImageFolder(root, ImageOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := collect(t, ds, Config{OnError: Skip}, func(s Sample) string {
		px := s.X.Uint8s()
		return fmt.Sprint(s.X, px[:3], s.Y.Int32s()[0])
	})
	want := []string{"uint8[3, 4, 3] [200 10 20] 0", "uint8[8, 8, 3] [0 0 254] 0", "uint8[2, 2, 3] [1 2 3] 1"}
	if err != nil || len(got) != 3 || got[0] != want[0] || got[2] != want[2] || got[1][:15] != want[1][:15] {
		t.Errorf("got %v, %v; want %v (JPEG values approximately)", got, err, want)
	}
	_, err = collect(t, ds, Config{}, ident[Sample])
	wantFormatError(t, err, filepath.Join(root, "dog", "broken.png"))

	grey, _ := ImageFolder(root, ImageOptions{Channels: 1, Height: 5, Width: 5})
	g, err := collect(t, grey.Take(1), Config{}, func(s Sample) string { return fmt.Sprint(s.X, s.X.Uint8s()[12]) })
	// BT.601 luma of (200, 10, 20): 0.299*200 + 0.587*10 + 0.114*20 = 67.95
	if err != nil || g[0] != "uint8[5, 5, 1] 68" {
		t.Errorf("grey resized: got %v, %v; want uint8[5, 5, 1] 68", g, err)
	}
}
