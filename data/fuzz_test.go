package data

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/headroom-ml/headroom/mem"
)

// readers are the parsers under fuzzing: each reads a whole file.
var readers = map[string]func(path string) error{
	"csv": func(path string) error {
		_, err := collect(nopT{}, CSV(path, CSVOptions{Header: true}), fuzzConfig, func(Row) int { return 0 })
		return err
	},
	"npy": func(path string) error {
		_, err := collect(nopT{}, NPY(path, ""), fuzzConfig, func(Sample) int { return 0 })
		return err
	},
	"idx": func(path string) error {
		_, err := collect(nopT{}, IDX(path, ""), fuzzConfig, func(Sample) int { return 0 })
		return err
	},
	"tfrecord": func(path string) error {
		ds := Map(TFRecords(path, TFRecordOptions{MaxRecordBytes: 1 << 16}), "parse", func(ctx contextT, r Record) (int, error) {
			ex, err := ParseExampleRecord(r)
			return len(ex.Features), err
		})
		_, err := collect(nopT{}, ds, fuzzConfig, ident[int])
		return err
	},
}

var fuzzConfig = Config{Budget: 4 << 20}

// nopT lets collect run inside a fuzz function without a *testing.T.
type nopT struct{ testing.TB }

func (nopT) Helper() {}

// checkCorrupt runs a reader over data: it must not panic, and any error
// must be a *FormatError naming the file with an offset inside it (past it
// only for gzip, whose offsets count decompressed bytes), or a request the
// budget cannot hold (*mem.OOMError).
func checkCorrupt(t *testing.T, format string, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	err := readers[format](path)
	if err == nil {
		return
	}
	var fe *FormatError
	var oom *mem.OOMError
	switch {
	case errors.As(err, &fe):
		gz := len(data) >= 2 && data[0] == 0x1f && data[1] == 0x8b
		if fe.File != path || fe.Offset < 0 || (!gz && fe.Offset > int64(len(data))) {
			t.Fatalf("%s: got %v (file %q, offset %d), want the file %q and an offset in 0..%d", format, err, fe.File, fe.Offset, path, len(data))
		}
	case errors.As(err, &oom):
	default:
		t.Fatalf("%s: got %T %v, want a *FormatError or *mem.OOMError", format, err, err)
	}
}

// seeds returns valid files of each format.
func seeds(format string) [][]byte {
	switch format {
	case "csv":
		return [][]byte{
			[]byte("a,b\n1,2\n3,4\n"),
			[]byte("a,b\n\"1,5\",2\n\"x\"\"y\",4\n"),
			gzipBytes([]byte("a,b\n1,2\n")),
		}
	case "npy":
		return [][]byte{
			npyFile("<f4", []int{2, 2}, make([]byte, 16)),
			npyFile(">i2", []int{3}, make([]byte, 6)),
			npyFile("|u1", nil, []byte{7}),
		}
	case "idx":
		return [][]byte{
			idxFile(0x08, []uint32{2, 2, 2}, make([]byte, 8)),
			idxFile(0x0E, []uint32{1}, make([]byte, 8)),
			gzipBytes(idxFile(0x08, []uint32{3}, []byte{1, 2, 3})),
		}
	case "tfrecord":
		return [][]byte{
			AppendTFRecord(AppendTFRecord(nil, example(true)), example(false)),
			AppendTFRecord(nil, nil),
		}
	}
	return nil
}

func fuzzFormat(f *testing.F, format string) {
	for _, s := range seeds(format) {
		f.Add(s)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		checkCorrupt(t, format, filepath.Join(dir, "input."+format), data)
	})
}

func FuzzCSV(f *testing.F)      { fuzzFormat(f, "csv") }
func FuzzNPY(f *testing.F)      { fuzzFormat(f, "npy") }
func FuzzIDX(f *testing.F)      { fuzzFormat(f, "idx") }
func FuzzTFRecord(f *testing.F) { fuzzFormat(f, "tfrecord") }

func FuzzParseExample(f *testing.F) {
	f.Add(example(true))
	f.Add(example(false))
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, err := ParseExample(b); err != nil {
			var ee *ExampleError
			if !errors.As(err, &ee) || ee.Offset < 0 || ee.Offset > len(b) {
				t.Fatalf("got %v, want an *ExampleError inside the %d bytes", err, len(b))
			}
		}
	})
}

// TestCorruptInputs is a short, deterministic fuzz run that is part of
// every test run: bit flips, truncations, overwritten bytes and inserted
// garbage on the seed files of every reader.
func TestCorruptInputs(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for format := range readers {
		t.Run(format, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "input."+format)
			for _, seed := range seeds(format) {
				for range 150 {
					b := append([]byte(nil), seed...)
					switch rng.IntN(4) {
					case 0:
						if len(b) > 0 {
							i := rng.IntN(len(b))
							b[i] ^= 1 << rng.IntN(8)
						}
					case 1:
						b = b[:rng.IntN(len(b)+1)]
					case 2:
						if len(b) >= 4 {
							i := rng.IntN(len(b) - 3)
							binary.LittleEndian.PutUint32(b[i:], rng.Uint32())
						}
					case 3:
						i := rng.IntN(len(b) + 1)
						junk := make([]byte, rng.IntN(16))
						for j := range junk {
							junk[j] = byte(rng.Uint32())
						}
						b = append(b[:i], append(junk, b[i:]...)...)
					}
					checkCorrupt(t, format, path, b)
				}
			}
		})
	}
}
