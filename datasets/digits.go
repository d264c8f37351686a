package datasets

import (
	"bufio"
	"bytes"
	"compress/gzip"
	_ "embed"
	"fmt"
	"io"
	"math/rand/v2"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/tensor"
)

//go:embed digits.csv.gz
var digitsGz []byte

// DigitsTest is the number of digits held out for testing (20%).
const DigitsTest = 360

// Digits returns the embedded digits, shuffled once with a fixed seed and
// split into 1,437 training and 360 test examples, as 8x8x1 images.
func Digits() (trainSet, testSet *data.Examples, err error) {
	zr, err := gzip.NewReader(bytes.NewReader(digitsGz))
	if err != nil {
		return nil, nil, fmt.Errorf("datasets: embedded digits.csv.gz: %w", err)
	}
	all, err := ParseDigits(zr, "digits.csv.gz")
	if err != nil {
		return nil, nil, err
	}
	// A fixed permutation, so the held-out 20% is the same in every run
	// and the classes are mixed in both parts.
	perm := rand.New(rand.NewPCG(1998, 8)).Perm(all.N)
	shuffled := &data.Examples{Name: all.Name, Shape: all.Shape, N: all.N, Scale: all.Scale, Classes: all.Classes,
		Pixels: make([]uint8, len(all.Pixels)), Labels: make([]int32, all.N)}
	for i, j := range perm {
		copy(shuffled.Pixels[i*64:(i+1)*64], all.Pixels[j*64:(j+1)*64])
		shuffled.Labels[i] = all.Labels[j]
	}
	n := all.N - DigitsTest
	return shuffled.Slice("digits/train", 0, n), shuffled.Slice("digits/test", n, all.N), nil
}

// ParseDigits reads rows of 64 pixel values (0..16) and a label (0..9),
// comma separated. name is used in errors, which give the line and the
// byte offset of the bad field.
func ParseDigits(r io.Reader, name string) (*data.Examples, error) {
	e := &data.Examples{Name: "digits", Shape: tensor.Shape{8, 8, 1}, Scale: 1.0 / 16, Classes: 10}
	br := bufio.NewReaderSize(r, 64<<10)
	var off int64
	for line := 1; ; line++ {
		row, err := br.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			return nil, formatError(name, off, line, "line longer than 64 KiB")
		}
		if len(row) == 0 && err == io.EOF {
			break
		}
		if err != nil && err != io.EOF {
			return nil, formatError(name, off, line, err.Error())
		}
		if err := parseDigitsRow(e, row, name, off, line); err != nil {
			return nil, err
		}
		off += int64(len(row))
		if err == io.EOF {
			break
		}
	}
	if e.N == 0 {
		return nil, formatError(name, 0, 1, "no rows")
	}
	return e, nil
}

func parseDigitsRow(e *data.Examples, row []byte, name string, off int64, line int) error {
	row = bytes.TrimRight(row, "\r\n")
	if len(row) == 0 {
		return nil // blank line
	}
	field, start := 0, 0
	for i := 0; i <= len(row); i++ {
		if i < len(row) && row[i] != ',' {
			continue
		}
		v, ok := smallInt(row[start:i])
		at := off + int64(start)
		switch {
		case !ok:
			return formatError(name, at, line, fmt.Sprintf("field %d is %q, not an integer", field+1, row[start:i]))
		case field < 64 && v > 16:
			return formatError(name, at, line, fmt.Sprintf("pixel %d is %d, outside 0..16", field+1, v))
		case field == 64 && v > 9:
			return formatError(name, at, line, fmt.Sprintf("label is %d, outside 0..9", v))
		case field > 64:
			return formatError(name, at, line, "more than 65 fields")
		}
		if field < 64 {
			e.Pixels = append(e.Pixels, uint8(v))
		} else {
			e.Labels = append(e.Labels, int32(v))
		}
		field++
		start = i + 1
	}
	if field != 65 {
		e.Pixels = e.Pixels[:e.N*64]
		return formatError(name, off, line, fmt.Sprintf("%d fields, want 65 (64 pixels and a label)", field))
	}
	e.N++
	return nil
}

// smallInt parses a non-negative decimal of at most 3 digits.
func smallInt(b []byte) (int, bool) {
	b = bytes.TrimSpace(b)
	if len(b) == 0 || len(b) > 3 {
		return 0, false
	}
	v := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	return v, true
}

// formatError is bad input at byte offset of name, on line (counted from 1).
func formatError(name string, offset int64, line int, msg string) *data.FormatError {
	return &data.FormatError{Format: "csv", File: name, Offset: offset, Msg: fmt.Sprintf("line %d: %s", line, msg)}
}
