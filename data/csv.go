package data

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/headroom-ml/headroom/tensor"
)

// CSVOptions configure CSV.
type CSVOptions struct {
	// Header says that the first line names the columns (the default in
	// tf.data's make_csv_dataset; here it must be set explicitly).
	Header bool
	// Names names the columns when there is no header, or renames them.
	Names []string
	// Types gives each column's type: Float32, Float64, Int32, Int64, Uint8
	// or Bool parse the field; tensor.Invalid (the zero DType) keeps it as
	// text. Nil: every column is Float32.
	Types []tensor.DType
	// Comma is the field delimiter (',' when zero).
	Comma rune
	// MaxLineBytes bounds a line (a longer one is a *FormatError); <= 0:
	// 1 MiB.
	MaxLineBytes int
	BufferSize   int // read buffer; <= 0: DefaultBufferSize
}

// Value is one typed CSV field: Float for Float32 and Float64 columns, Int
// for integer and Bool columns, Text for text columns.
type Value struct {
	Float float64
	Int   int64
	Text  string
}

// Row is one CSV record. Names and Types are shared by every row of a pass.
type Row struct {
	Names  []string
	Types  []tensor.DType
	Values []Value
	File   string
	Offset int64 // byte offset of the record in the (decompressed) file
}

// Column returns the index of the named column, or -1.
func (r Row) Column(name string) int {
	for i, n := range r.Names {
		if n == name {
			return i
		}
	}
	return -1
}

// CSV returns the records of a CSV file with typed columns: RFC 4180 quoting
// (quoted fields may hold the delimiter, quotes doubled and newlines), an
// optional header, gzip-compressed files detected by their magic bytes. A
// malformed line, a field that does not parse as its column's type, or a
// record with the wrong number of fields is a *FormatError at the record's
// offset; under the Skip policy the record is skipped.
func CSV(path string, opt CSVOptions) Dataset[Row] {
	name := fmt.Sprintf("csv(%s)", baseName(path))
	return newDataset(name, kindSource, func(p *pipeline, st *stage) (iterator[Row], error) {
		fr, err := openFile(p.ctx, p.arena.pool(name), path, opt.BufferSize, true, true)
		if err != nil {
			return nil, err
		}
		it, err := newCSVIter(p, st, fr, path, opt)
		if err != nil {
			fr.close()
			return nil, err
		}
		return it, nil
	})
}

type csvIter struct {
	p     *pipeline
	st    *stage
	fr    *fileReader
	r     *csv.Reader
	path  string
	names []string
	types []tensor.DType
	done  bool
}

// lineLimit fails a read once a line grows past max bytes, so that a file
// without newlines cannot make encoding/csv buffer it whole.
type lineLimit struct {
	r    *fileReader
	max  int
	line int
}

var errLongLine = errors.New("line too long")

func (l *lineLimit) Read(p []byte) (int, error) {
	n, err := l.r.Read(p)
	if i := bytes.LastIndexByte(p[:n], '\n'); i >= 0 {
		l.line = n - 1 - i
	} else {
		l.line += n
	}
	if l.line > l.max {
		return n, errLongLine
	}
	return n, err
}

func newCSVIter(p *pipeline, st *stage, fr *fileReader, path string, opt CSVOptions) (*csvIter, error) {
	max := opt.MaxLineBytes
	if max <= 0 {
		max = 1 << 20
	}
	r := csv.NewReader(&lineLimit{r: fr, max: max})
	r.ReuseRecord = true
	if opt.Comma != 0 {
		r.Comma = opt.Comma
	}
	it := &csvIter{p: p, st: st, fr: fr, r: r, path: path, names: opt.Names, types: opt.Types}
	if opt.Header {
		head, err := r.Read()
		if err != nil && err != io.EOF {
			return nil, it.parseErr(0, err)
		}
		if it.names == nil {
			it.names = append([]string(nil), head...)
		}
		r.FieldsPerRecord = len(head)
	}
	if it.types != nil && it.names != nil && len(it.types) != len(it.names) {
		return nil, fmt.Errorf("data: csv %s: %d column types for %d columns", path, len(it.types), len(it.names))
	}
	return it, nil
}

func (it *csvIter) parseErr(off int64, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return formatErr("csv", it.path, off, nil, "line %d, column %d: %v", pe.Line, pe.Column, pe.Err)
	}
	if errors.Is(err, errLongLine) {
		return formatErr("csv", it.path, off, nil, "line longer than the limit")
	}
	if isFormat(err) {
		return err
	}
	return formatErr("csv", it.path, off, err, "read error")
}

func (it *csvIter) next(ctx context.Context) (Row, error) {
	for !it.done {
		off := it.r.InputOffset()
		rec, err := it.r.Read()
		if err == io.EOF {
			it.done = true
			break
		}
		if err == nil {
			var row Row
			if row, err = it.row(rec, off); err == nil {
				return row, nil
			}
		} else {
			var pe *csv.ParseError
			if !errors.As(err, &pe) {
				it.done = true // a read error or an over-long line: no next record
			}
			err = it.parseErr(off, err)
		}
		if !it.p.skip(it.st, err) {
			it.done = true
			return Row{}, err
		}
	}
	return Row{}, io.EOF
}

func (it *csvIter) close() { it.fr.close() }

func (it *csvIter) row(rec []string, off int64) (Row, error) {
	if it.names == nil {
		it.names = make([]string, len(rec))
		for i := range rec {
			it.names[i] = "c" + strconv.Itoa(i)
		}
		it.r.FieldsPerRecord = len(rec)
	}
	if it.types == nil {
		it.types = make([]tensor.DType, len(it.names))
		for i := range it.types {
			it.types[i] = tensor.Float32
		}
	}
	if len(rec) != len(it.names) {
		return Row{}, formatErr("csv", it.path, off, nil, "%d fields, want %d", len(rec), len(it.names))
	}
	vals := make([]Value, len(rec))
	for i, f := range rec {
		v, err := parseField(f, it.types[i])
		if err != nil {
			line, col := it.r.FieldPos(i)
			return Row{}, formatErr("csv", it.path, off, nil, "line %d, column %d (%s): %v", line, col, it.names[i], err)
		}
		vals[i] = v
	}
	return Row{Names: it.names, Types: it.types, Values: vals, File: it.path, Offset: off}, nil
}

func parseField(f string, t tensor.DType) (Value, error) {
	s := strings.TrimSpace(f)
	switch t {
	case tensor.Invalid:
		return Value{Text: f}, nil
	case tensor.Float32, tensor.Float64, tensor.Float16, tensor.BFloat16:
		bits := 64
		if t != tensor.Float64 {
			bits = 32
		}
		x, err := strconv.ParseFloat(s, bits)
		return Value{Float: x}, err
	case tensor.Int32, tensor.Int64, tensor.Uint8:
		bits := map[tensor.DType]int{tensor.Int32: 32, tensor.Int64: 64, tensor.Uint8: 8}[t]
		if t == tensor.Uint8 {
			x, err := strconv.ParseUint(s, 10, bits)
			return Value{Int: int64(x)}, err
		}
		x, err := strconv.ParseInt(s, 10, bits)
		return Value{Int: x}, err
	case tensor.Bool:
		x, err := strconv.ParseBool(s)
		if x {
			return Value{Int: 1}, err
		}
		return Value{}, err
	}
	return Value{}, fmt.Errorf("unsupported column type %v", t)
}

// CSVToSample returns a Map function that turns a Row into a Sample: X is a
// Float32 vector of every numeric column but label, Y a scalar of the label
// column's type (Float32 for Float64 and 16-bit floats, Int32 for Uint8 and
// Bool). With label "" Y is absent. Text columns are left out of X.
func CSVToSample(label string) func(ctx context.Context, r Row) (Sample, error) {
	return func(ctx context.Context, r Row) (Sample, error) {
		li := -1
		if label != "" {
			if li = r.Column(label); li < 0 {
				return Sample{}, fmt.Errorf("data: csv %s: no column %q", r.File, label)
			}
		}
		nx := 0
		for i, t := range r.Types {
			if i != li && t != tensor.Invalid {
				nx++
			}
		}
		x, xb, err := NewTensor(ctx, tensor.Float32, tensor.Shape{nx})
		if err != nil {
			return Sample{}, err
		}
		xs, k := x.Float32s(), 0
		for i, t := range r.Types {
			if i == li || t == tensor.Invalid {
				continue
			}
			if t.IsFloat() {
				xs[k] = float32(r.Values[i].Float)
			} else {
				xs[k] = float32(r.Values[i].Int)
			}
			k++
		}
		var y tensor.Tensor
		var yb *Block
		if li >= 0 {
			t := r.Types[li]
			switch t {
			case tensor.Invalid:
				xb.Release()
				return Sample{}, fmt.Errorf("data: csv %s: label column %q is text", r.File, label)
			case tensor.Float64, tensor.Float16, tensor.BFloat16:
				t = tensor.Float32
			case tensor.Uint8, tensor.Bool:
				t = tensor.Int32
			}
			if y, yb, err = NewTensor(ctx, t, nil); err != nil {
				xb.Release()
				return Sample{}, err
			}
			if t.IsFloat() {
				y.SetFloat64At(0, r.Values[li].Float)
			} else {
				y.SetFloat64At(0, float64(r.Values[li].Int))
				if t == tensor.Int64 {
					y.Int64s()[0] = r.Values[li].Int
				}
			}
		}
		s := NewSample(x, y, xb, yb)
		xb.Release()
		yb.Release()
		return s, nil
	}
}
