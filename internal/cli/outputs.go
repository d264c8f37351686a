package cli

import (
	"encoding/csv"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/internal/atomicfile"
	"github.com/headroom-ml/headroom/tensor"
)

// outputSink writes prediction rows to an .npy or .csv file.
type outputSink struct {
	npy      *data.NPYWriter
	path     string
	file     *atomicfile.Pending // the CSV, committed by close
	csv      *csv.Writer
	names    []string // class names for the CSV header
	files    []string // image files, one per row (a first CSV column)
	row      int
	rowShape tensor.Shape
	header   bool
	record   []string
}

func newOutputSink(path string, names, files []string) (*outputSink, error) {
	return &outputSink{path: path, names: names, files: files}, nil
}

func (s *outputSink) write(o tensor.Tensor) error {
	if s.rowShape == nil {
		s.rowShape = o.Shape()[1:].Clone()
		if strings.EqualFold(filepath.Ext(s.path), ".npy") {
			var err error
			if s.npy, err = data.CreateNPY(s.path, tensor.Float32, s.rowShape); err != nil {
				return err
			}
		} else {
			f, err := atomicfile.Create(atomicfile.OS, s.path, 0o666)
			if err != nil {
				return err
			}
			s.file, s.csv = f, csv.NewWriter(f)
		}
	}
	if s.npy != nil {
		if o.DType() != tensor.Float32 {
			c := tensor.New(tensor.Float32, o.Shape())
			for i := 0; i < o.Len(); i++ {
				c.SetFloat64At(i, o.Float64At(i))
			}
			o = c
		}
		return s.npy.Write(o)
	}
	rows := o.Shape()[0]
	per := o.Len() / max(rows, 1)
	if !s.header {
		s.header = true
		var head []string
		if s.files != nil {
			head = append(head, "file")
		}
		if len(s.names) == per {
			head = append(head, s.names...)
		} else {
			for k := 0; k < per; k++ {
				head = append(head, "out_"+strconv.Itoa(k))
			}
		}
		if err := s.csv.Write(head); err != nil {
			return err
		}
	}
	for r := 0; r < rows; r++ {
		s.record = s.record[:0]
		if s.files != nil {
			s.record = append(s.record, s.files[s.row])
		}
		for k := 0; k < per; k++ {
			s.record = append(s.record, strconv.FormatFloat(o.Float64At(r*per+k), 'g', 9, 32))
		}
		if err := s.csv.Write(s.record); err != nil {
			return err
		}
		s.row++
	}
	return nil
}

func (s *outputSink) close() error {
	if s.npy != nil {
		return s.npy.Close()
	}
	if s.csv == nil {
		return errors.New("no outputs: the data holds no examples")
	}
	s.csv.Flush()
	err := s.csv.Error()
	if err == nil {
		err = s.file.Commit()
	}
	if err != nil {
		s.file.Abort()
		return fmt.Errorf("writing %s: %w", s.path, err)
	}
	return nil
}

func (s *outputSink) abort() {
	if s.npy != nil {
		s.npy.Abort()
	}
	if s.file != nil {
		s.file.Abort()
	}
}
