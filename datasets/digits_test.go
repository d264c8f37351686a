package datasets

import (
	"errors"
	"strings"
	"testing"

	"github.com/headroom-ml/headroom/data"
)

func TestDigits(t *testing.T) {
	tr, te, err := Digits()
	if err != nil {
		t.Fatal(err)
	}
	if tr.N != 1437 || te.N != 360 {
		t.Fatalf("split %d/%d, want 1437/360", tr.N, te.N)
	}
	if err := tr.Validate(); err != nil {
		t.Fatal(err)
	}
	var counts [10]int
	for _, l := range te.Labels {
		counts[l]++
	}
	for c, n := range counts {
		if n < 20 {
			t.Errorf("class %d has %d test examples: the split is not mixed", c, n)
		}
	}
}

func TestParseDigitsErrors(t *testing.T) {
	row := strings.Repeat("1,", 64) + "3\n"
	cases := []struct {
		name, in, want string
		offset         int64
	}{
		{"letter", row + strings.Repeat("1,", 10) + "x," + strings.Repeat("1,", 53) + "3\n", "field 11", int64(len(row) + 20)},
		{"pixel range", strings.Repeat("1,", 5) + "17," + strings.Repeat("1,", 58) + "3\n", "pixel 6 is 17", 10},
		{"label range", strings.Repeat("1,", 64) + "12\n", "label is 12", 128},
		{"short row", row + "1,2,3\n", "3 fields", int64(len(row))},
		{"empty", "", "no rows", 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseDigits(strings.NewReader(c.in), "d.csv")
			var fe *data.FormatError
			if !errors.As(err, &fe) {
				t.Fatalf("got %v, want *data.FormatError", err)
			}
			if !strings.Contains(err.Error(), c.want) || fe.File != "d.csv" || fe.Offset != c.offset {
				t.Errorf("got %q (offset %d), want %q at offset %d", err, fe.Offset, c.want, c.offset)
			}
		})
	}
}

func FuzzParseDigits(f *testing.F) {
	f.Add(strings.Repeat("1,", 64) + "3\n")
	f.Add(strings.Repeat("16,", 64) + "9\r\n\n" + strings.Repeat("0,", 64) + "0")
	f.Add("1,2\n,,")
	f.Fuzz(func(t *testing.T, in string) {
		e, err := ParseDigits(strings.NewReader(in), "fuzz.csv")
		if err != nil {
			var fe *data.FormatError
			if !errors.As(err, &fe) || fe.Offset < 0 || fe.Offset > int64(len(in)) {
				t.Fatalf("error %v is not a *data.FormatError with an offset inside the input", err)
			}
			return
		}
		if err := e.Validate(); err != nil {
			t.Fatalf("parsed data does not validate: %v", err)
		}
	})
}
