package data

import (
	"archive/zip"
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// NPY returns the rows of the array in an .npy file (NumPy's format, versions
// 1 to 3) as samples: X = x[i]. With yPath set, Y = y[i] from a second .npy
// file of as many rows. A 0-d array is one sample. Numeric dtypes are read
// as the same headroom dtype (float16/32/64, int32/64, uint8, bool) or
// widened (int8 and int16 and uint16 to int32, uint32 to int64); big-endian
// data is swapped. Fortran-order arrays of rank > 1 are refused. The file is
// streamed a row at a time.
func NPY(xPath, yPath string) Dataset[Sample] {
	name := fmt.Sprintf("npy(%s)", baseName(xPath))
	return arrayPairs(name, xPath, yPath, openNPY)
}

// arrayPairs is a source of samples from an array file (X) and, when
// yPath is set, a second one of as many rows (Y), each opened by open.
func arrayPairs(name, xPath, yPath string, open func(context.Context, *pool, string) (*arrayStream, error)) Dataset[Sample] {
	return newDataset(name, kindSource, func(p *pipeline, st *stage) (iterator[Sample], error) {
		pool := p.arena.pool(name)
		x, err := open(p.ctx, pool, xPath)
		if err != nil {
			return nil, err
		}
		closers := []func(){x.fr.close}
		var y *arrayStream
		if yPath != "" {
			if y, err = open(p.ctx, pool, yPath); err != nil {
				x.fr.close()
				return nil, err
			}
			closers = append(closers, y.fr.close)
		}
		it, err := newPairIter(p, st, x, y, closers...)
		if err != nil {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
			return nil, err
		}
		return it, nil
	})
}

func openNPY(ctx context.Context, pool *pool, path string) (*arrayStream, error) {
	fr, err := openFile(ctx, pool, path, 0, false, true)
	if err != nil {
		return nil, err
	}
	s, err := readNPYHeader(fr, pool, path)
	if err != nil {
		fr.close()
		return nil, err
	}
	return s, nil
}

// NPZ returns samples from two arrays of an .npz archive (NumPy's savez or
// savez_compressed): X from the entry named x ("x" or "x.npy"), Y from the
// entry named y, or no Y when y is "". Entries are streamed (decompressed
// on the fly); errors name "archive.npz[entry.npy]".
func NPZ(path, x, y string) Dataset[Sample] {
	name := fmt.Sprintf("npz(%s)", baseName(path))
	return newDataset(name, kindSource, func(p *pipeline, st *stage) (iterator[Sample], error) {
		zr, err := zip.OpenReader(path)
		if err != nil {
			return nil, fmt.Errorf("data: npz %s: %w", path, err)
		}
		pool := p.arena.pool(name)
		closers := []func(){func() { zr.Close() }}
		fail := func(err error) (iterator[Sample], error) {
			for i := len(closers) - 1; i >= 0; i-- {
				closers[i]()
			}
			return nil, err
		}
		open := func(entry string) (*arrayStream, error) {
			if !strings.HasSuffix(entry, ".npy") {
				entry += ".npy"
			}
			for _, f := range zr.File {
				if f.Name != entry {
					continue
				}
				rc, err := f.Open()
				if err != nil {
					return nil, formatErr("npz", path, 0, err, "entry %s", entry)
				}
				ename := path + "[" + entry + "]"
				fr, err := newFileReader(p.ctx, pool, rc, 0, false, true, ename, rc)
				if err != nil {
					return nil, err
				}
				s, err := readNPYHeader(fr, pool, ename)
				if err != nil {
					fr.close()
					return nil, err
				}
				closers = append(closers, fr.close)
				return s, nil
			}
			return nil, fmt.Errorf("data: npz %s has no entry %s", path, entry)
		}
		xs, err := open(x)
		if err != nil {
			return fail(err)
		}
		var ys *arrayStream
		if y != "" {
			if ys, err = open(y); err != nil {
				return fail(err)
			}
		}
		it, err := newPairIter(p, st, xs, ys, closers...)
		if err != nil {
			return fail(err)
		}
		return it, nil
	})
}

// readNPYHeader parses the magic, version, and the header dictionary, e.g.
// {'descr': '<f4', 'fortran_order': False, 'shape': (60000, 28, 28), }
// (numpy/lib/format.py).
func readNPYHeader(fr *fileReader, pool *pool, name string) (*arrayStream, error) {
	var pre [10]byte
	if _, err := fr.readFull(pre[:8]); err != nil {
		return nil, formatErr("npy", name, 0, err, "no header")
	}
	if string(pre[:6]) != "\x93NUMPY" {
		return nil, formatErr("npy", name, 0, nil, "bad magic %q", pre[:6])
	}
	var hlen int
	switch pre[6] {
	case 1:
		if _, err := fr.readFull(pre[8:10]); err != nil {
			return nil, formatErr("npy", name, 8, err, "truncated header length")
		}
		hlen = int(binary.LittleEndian.Uint16(pre[8:10]))
	case 2, 3:
		var l [4]byte
		if _, err := fr.readFull(l[:]); err != nil {
			return nil, formatErr("npy", name, 8, err, "truncated header length")
		}
		if n := binary.LittleEndian.Uint32(l[:]); n > 1<<20 {
			return nil, formatErr("npy", name, 8, nil, "header of %d bytes is too long", n)
		} else {
			hlen = int(n)
		}
	default:
		return nil, formatErr("npy", name, 6, nil, "unsupported version %d.%d", pre[6], pre[7])
	}
	hoff := fr.off
	h := make([]byte, hlen)
	if _, err := fr.readFull(h); err != nil {
		return nil, formatErr("npy", name, hoff, err, "truncated header")
	}
	descr, fortran, shape, err := parseNPYDict(string(h))
	if err != nil {
		return nil, formatErr("npy", name, hoff, nil, "header %q: %v", h, err)
	}
	if fortran && len(shape) > 1 {
		return nil, formatErr("npy", name, hoff, nil, "Fortran-order arrays are not supported")
	}
	elem, err := parseDescr(descr)
	if err != nil {
		return nil, formatErr("npy", name, hoff, nil, "%v", err)
	}
	return newArrayStream("npy", fr, pool, name, elem, shape)
}

// parseDescr reads a NumPy type string such as "<f4", "|u1" or ">i8".
func parseDescr(d string) (elemFormat, error) {
	if len(d) < 3 {
		return elemFormat{}, fmt.Errorf("bad descr %q", d)
	}
	f := elemFormat{kind: d[1]}
	switch d[0] {
	case '<', '|', '=':
	case '>':
		f.big = true
	default:
		return elemFormat{}, fmt.Errorf("bad byte order in descr %q", d)
	}
	n, err := strconv.Atoi(d[2:])
	if err != nil || n < 1 || n > 8 {
		return elemFormat{}, fmt.Errorf("bad size in descr %q", d)
	}
	f.size = n
	if f.size == 1 {
		f.big = false
	}
	if _, err := f.outDType(); err != nil {
		return elemFormat{}, fmt.Errorf("descr %q: %v", d, err)
	}
	return f, nil
}

// parseNPYDict extracts descr, fortran_order and shape from the header's
// Python dict literal.
func parseNPYDict(h string) (descr string, fortran bool, shape []int64, err error) {
	h = strings.TrimSpace(h)
	if !strings.HasPrefix(h, "{") || !strings.HasSuffix(h, "}") {
		return "", false, nil, fmt.Errorf("not a dict")
	}
	value := func(key string) (string, bool) {
		for _, q := range []string{"'", "\""} {
			if i := strings.Index(h, q+key+q); i >= 0 {
				rest := strings.TrimSpace(h[i+len(key)+2:])
				if !strings.HasPrefix(rest, ":") {
					return "", false
				}
				return strings.TrimSpace(rest[1:]), true
			}
		}
		return "", false
	}
	v, ok := value("descr")
	if !ok || len(v) < 2 || (v[0] != '\'' && v[0] != '"') {
		return "", false, nil, fmt.Errorf("no descr string")
	}
	end := strings.IndexByte(v[1:], v[0])
	if end < 0 {
		return "", false, nil, fmt.Errorf("unterminated descr")
	}
	descr = v[1 : 1+end]
	if v, ok = value("fortran_order"); !ok {
		return "", false, nil, fmt.Errorf("no fortran_order")
	}
	switch {
	case strings.HasPrefix(v, "True"):
		fortran = true
	case strings.HasPrefix(v, "False"):
	default:
		return "", false, nil, fmt.Errorf("bad fortran_order")
	}
	if v, ok = value("shape"); !ok || !strings.HasPrefix(v, "(") {
		return "", false, nil, fmt.Errorf("no shape tuple")
	}
	end = strings.IndexByte(v, ')')
	if end < 0 {
		return "", false, nil, fmt.Errorf("unterminated shape")
	}
	for _, f := range strings.Split(v[1:end], ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		d, err := strconv.ParseInt(strings.TrimSuffix(f, "L"), 10, 64)
		if err != nil || d < 0 {
			return "", false, nil, fmt.Errorf("bad dimension %q", f)
		}
		shape = append(shape, d)
	}
	return descr, fortran, shape, nil
}
