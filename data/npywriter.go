package data

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"

	"github.com/headroom-ml/headroom/internal/atomicfile"
	"github.com/headroom-ml/headroom/tensor"
)

// NPYWriter writes an .npy file (version 1.0, little endian) row by row,
// for outputs whose number of rows is known only at the end: the header
// leaves room for any row count and Close writes the real one. The file is
// written atomically (package atomicfile): a temporary file beside path,
// committed by Close, so path holds either its old content or the complete
// new array.
type NPYWriter struct {
	path     string
	f        *atomicfile.Pending
	w        *bufio.Writer
	dtype    tensor.DType
	rowShape tensor.Shape
	rowBytes int
	hlen     int
	rows     int64
}

var npyDescrs = map[tensor.DType]string{tensor.Float32: "<f4", tensor.Float64: "<f8", tensor.Int32: "<i4",
	tensor.Int64: "<i8", tensor.Uint8: "|u1", tensor.Bool: "|b1"}

// CreateNPY starts an .npy file at path for rows of dtype and rowShape.
func CreateNPY(path string, dtype tensor.DType, rowShape tensor.Shape) (*NPYWriter, error) {
	if _, ok := npyDescrs[dtype]; !ok {
		return nil, fmt.Errorf("data: npy %s: cannot write %s", path, dtype)
	}
	f, err := atomicfile.Create(atomicfile.OS, path, 0o666)
	if err != nil {
		return nil, fmt.Errorf("data: npy %s: %w", path, err)
	}
	n := &NPYWriter{path: path, f: f, w: bufio.NewWriterSize(f, 1<<20), dtype: dtype,
		rowShape: rowShape.Clone(), rowBytes: rowShape.Size() * dtype.Size()}
	h := n.header(-1)
	n.hlen = len(h)
	if _, err := n.w.Write(h); err != nil {
		n.abort()
		return nil, fmt.Errorf("data: npy %s: %w", path, err)
	}
	return n, nil
}

// header returns the magic, the version and the padded dictionary for
// rows rows (-1: room for the largest row count).
func (n *NPYWriter) header(rows int64) []byte {
	dims := []string{strconv.FormatInt(rows, 10)}
	if rows < 0 {
		dims[0] = strings.Repeat(" ", 20)
	}
	for _, d := range n.rowShape {
		dims = append(dims, strconv.Itoa(d))
	}
	shape := strings.Join(dims, ", ")
	if len(dims) == 1 {
		shape += ","
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", npyDescrs[n.dtype], shape)
	width := len(dict)
	if rows >= 0 { // as long as the first header: pad the count
		width = n.hlen - 11
	}
	dict += strings.Repeat(" ", max(0, width-len(dict)))
	total := 10 + len(dict) + 1
	pad := (64 - total%64) % 64
	if rows >= 0 {
		pad = 0
	}
	dict += strings.Repeat(" ", pad) + "\n"
	h := append([]byte("\x93NUMPY\x01\x00"), byte(len(dict)), byte(len(dict)>>8))
	return append(h, dict...)
}

// Write appends rows (batch first, dtype and row shape as created).
func (n *NPYWriter) Write(rows tensor.Tensor) error {
	if rows.DType() != n.dtype || rows.Shape().Rank() == 0 || !rows.Shape()[1:].Equal(n.rowShape) {
		return fmt.Errorf("data: npy %s: rows %s%v, want %s[N %v]", n.path, rows.DType(), rows.Shape(), n.dtype, n.rowShape)
	}
	if _, err := n.w.Write(rows.Bytes()); err != nil {
		return fmt.Errorf("data: npy %s: %w", n.path, err)
	}
	n.rows += int64(rows.Shape()[0])
	return nil
}

// Close writes the row count into the header and commits the file to path.
// On an error path is left as it was (see atomicfile for a failed fsync of
// the directory).
func (n *NPYWriter) Close() error {
	err := n.w.Flush()
	if err == nil {
		_, err = n.f.WriteAt(n.header(n.rows), 0)
	}
	if err != nil {
		n.abort()
		return fmt.Errorf("data: npy %s: %w", n.path, err)
	}
	if err := n.f.Commit(); err != nil {
		return fmt.Errorf("data: npy %s: %w", n.path, err)
	}
	return nil
}

// Abort drops the file being written; path is left as it was.
func (n *NPYWriter) Abort() { n.abort() }

func (n *NPYWriter) abort() { n.f.Abort() }
