package data

import (
	"bufio"
	"compress/gzip"
	"context"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/headroom-ml/headroom/tensor"
)

// maxClassNames bounds the distinct class names of a CSV label column: a
// column with more is not a classification target.
const maxClassNames = 1 << 16

// csvComma is the delimiter of path: a tab for .tsv files, else a comma.
func csvComma(path string) rune {
	if strings.HasSuffix(strings.TrimSuffix(strings.ToLower(path), ".gz"), ".tsv") {
		return '\t'
	}
	return ','
}

// CSVHeader returns the column names of a CSV file's first line (gzip
// detected by its magic bytes).
func CSVHeader(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	if m, _ := br.Peek(2); len(m) == 2 && m[0] == 0x1f && m[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, formatErr("csv", path, 0, err, "bad gzip header")
		}
		defer gz.Close()
		r = gz
	}
	cr := csv.NewReader(io.LimitReader(r, 1<<20))
	cr.Comma = csvComma(path)
	head, err := cr.Read()
	if err == io.EOF {
		return nil, formatErr("csv", path, 0, nil, "empty file: want a header line naming the columns")
	}
	if err != nil {
		return nil, formatErr("csv", path, 0, err, "line 1 (the header)")
	}
	seen := map[string]bool{}
	for i, h := range head {
		h = strings.TrimSpace(h)
		if i == 0 {
			h = strings.TrimPrefix(h, "\ufeff") // a byte-order mark
		}
		if seen[h] {
			return nil, formatErr("csv", path, 0, nil, "line 1: column %q appears twice", h)
		}
		seen[h] = true
		head[i] = h
	}
	return head, nil
}

// csvLayout is which columns of a CSV are features and which is the label.
type csvLayout struct {
	names    []string
	features []int // column indices, in the model's order
	label    int   // -1: none
}

// layout chooses the columns: Label (default "label", else the last
// column) and the features (Columns, or every other column).
func (s *Source) layout() (csvLayout, error) {
	names, err := CSVHeader(s.Path)
	if err != nil {
		return csvLayout{}, err
	}
	l := csvLayout{names: names, label: -1}
	index := func(name string) int {
		for i, n := range names {
			if n == name {
				return i
			}
		}
		return -1
	}
	switch {
	case s.Label != "":
		l.label = index(s.Label)
		if l.label < 0 && !s.Unlabeled {
			return csvLayout{}, fmt.Errorf("data: csv %s has no label column %q (columns: %s)", s.Path, s.Label, strings.Join(names, ", "))
		}
	case index("label") >= 0:
		l.label = index("label")
	case s.Columns == nil && !s.Unlabeled:
		l.label = len(names) - 1
	}
	if l.label >= 0 {
		s.Label = names[l.label]
	}
	if s.Columns == nil {
		for i, n := range names {
			if i != l.label {
				l.features = append(l.features, i)
				s.Columns = append(s.Columns, n)
			}
		}
	} else {
		for _, c := range s.Columns {
			i := index(c)
			if i < 0 {
				return csvLayout{}, fmt.Errorf("data: csv %s has no column %q, which the model reads (columns: %s)", s.Path, c, strings.Join(names, ", "))
			}
			l.features = append(l.features, i)
		}
	}
	if len(l.features) == 0 {
		return csvLayout{}, fmt.Errorf("data: csv %s has no feature columns besides the label %q", s.Path, s.Label)
	}
	return l, nil
}

// scanLabels reads the label column once and sets the classes: integer
// class indices (all labels integers >= 0: Classes is the largest plus
// one) or class names (sorted into ClassNames).
func (s *Source) scanLabels(l csvLayout) error {
	types := make([]tensor.DType, len(l.names)) // all text
	ds := CSV(s.Path, CSVOptions{Header: true, Types: types, Comma: csvComma(s.Path)})
	names := map[string]bool{}
	ints, maxInt := true, int64(-1)
	for r, err := range ds.All(context.Background(), Config{Name: "labels:" + baseName(s.Path)}) {
		if err != nil {
			return err
		}
		v := strings.TrimSpace(r.Values[l.label].Text)
		if !names[v] {
			if len(names) == maxClassNames {
				return formatErr("csv", s.Path, r.Offset, nil, "label column %q has more than %d distinct values: it is not a class label", s.Label, maxClassNames)
			}
			names[v] = true
		}
		if ints {
			if n, err := strconv.ParseInt(v, 10, 32); err == nil && n >= 0 {
				maxInt = max(maxInt, n)
			} else {
				ints = false
			}
		}
	}
	if len(names) == 0 {
		return fmt.Errorf("data: csv %s has a header and no rows", s.Path)
	}
	if ints {
		s.Classes = int(maxInt) + 1
		return nil
	}
	s.ClassNames = s.ClassNames[:0]
	for n := range names {
		s.ClassNames = append(s.ClassNames, n)
	}
	sort.Strings(s.ClassNames)
	s.Classes = len(s.ClassNames)
	return nil
}

// openCSV streams a CSV's rows as samples: X float32 [features], Y the
// int32 class index.
func (s *Source) openCSV() (Dataset[Sample], error) {
	l, err := s.layout()
	if err != nil {
		return Dataset[Sample]{}, err
	}
	useLabel := l.label >= 0 && !s.Unlabeled
	if useLabel && s.ClassNames == nil && s.Classes == 0 {
		if err := s.scanLabels(l); err != nil {
			return Dataset[Sample]{}, err
		}
	}
	types := make([]tensor.DType, len(l.names)) // text: not read as numbers
	for _, i := range l.features {
		types[i] = tensor.Float32
	}
	classIndex := map[string]int32{}
	for i, n := range s.ClassNames {
		classIndex[n] = int32(i)
	}
	path, names, classes := s.Path, s.ClassNames, s.Classes
	ds := CSV(path, CSVOptions{Header: true, Types: types, Comma: csvComma(path)})
	return Map(ds, "csv_example", func(ctx context.Context, r Row) (Sample, error) {
		x, xb, err := NewTensor(ctx, tensor.Float32, tensor.Shape{len(l.features)})
		if err != nil {
			return Sample{}, err
		}
		xs := x.Float32s()
		for k, i := range l.features {
			xs[k] = float32(r.Values[i].Float)
		}
		if !useLabel {
			smp := NewSample(x, tensor.Tensor{}, xb)
			xb.Release()
			return smp, nil
		}
		v := strings.TrimSpace(r.Values[l.label].Text)
		var label int32
		if names != nil {
			c, ok := classIndex[v]
			if !ok {
				xb.Release()
				return Sample{}, formatErr("csv", path, r.Offset, nil, "label %q in column %q is not one of the classes %q", v, l.names[l.label], names)
			}
			label = c
		} else {
			n, err := strconv.ParseInt(v, 10, 32)
			if err != nil || n < 0 || (classes > 0 && int(n) >= classes) {
				xb.Release()
				return Sample{}, formatErr("csv", path, r.Offset, nil, "label %q in column %q is not a class index%s", v, l.names[l.label], classRange(classes))
			}
			label = int32(n)
		}
		y, yb, err := NewTensor(ctx, tensor.Int32, nil)
		if err != nil {
			xb.Release()
			return Sample{}, err
		}
		y.Int32s()[0] = label
		smp := NewSample(x, y, xb, yb)
		xb.Release()
		yb.Release()
		return smp, nil
	}), nil
}
