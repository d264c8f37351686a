package checkpoint

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"unicode/utf8"

	"github.com/headroom-ml/headroom/tensor"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Load reads and validates the checkpoint at path. It reads the header length,
// then the header (at most 100 MB), checks every field and the data layout
// against the file size, and only then reads each tensor into its own buffer,
// so a corrupt file never makes it allocate more than the file holds. A file
// that is not a valid checkpoint gives a *FormatError naming path and offset.
func Load(path string) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: load: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: load: %w", err)
	}
	if fi.IsDir() {
		return nil, fmt.Errorf("checkpoint: load %s: is a directory", path)
	}
	return Parse(f, fi.Size(), path)
}

// Parse reads a checkpoint of size bytes from r; name is the file name used in
// errors. It is the core of Load. Every error it returns is a *FormatError.
func Parse(r io.ReaderAt, size int64, name string) (*File, error) {
	p := &parser{r: r, size: size, file: name}
	if err := p.readLayout(); err != nil {
		return nil, err
	}
	f := &File{Meta: p.meta, Entries: make([]Entry, 0, len(p.infos)), index: make(map[string]int, len(p.infos))}
	crc := uint32(0)
	for _, t := range p.infos {
		buf := alignedBytes(int(t.end - t.begin))
		if err := p.readAt(buf, p.dataStart+t.begin); err != nil {
			return nil, err
		}
		crc = crc32.Update(crc, castagnoli, buf)
		tt, err := tensor.FromBytes(t.dtype, t.shape, buf)
		if err != nil { // unreachable: readLayout checked rank and size
			return nil, p.errf(t.at, "tensor %q: %v", t.name, err)
		}
		f.index[t.name] = len(f.Entries)
		f.Entries = append(f.Entries, Entry{Name: t.name, Tensor: tt})
	}
	if err := p.checkCRC(crc); err != nil {
		return nil, err
	}
	return f, nil
}

// verify validates like Parse but streams the data section through the
// checksum in bounded chunks instead of materializing tensors; Latest uses it.
func verify(r io.ReaderAt, size int64, name string) (map[string]string, error) {
	p := &parser{r: r, size: size, file: name}
	if err := p.readLayout(); err != nil {
		return nil, err
	}
	buf := make([]byte, min(1<<20, size-p.dataStart))
	crc := uint32(0)
	for off := p.dataStart; off < size; {
		n := int(min(int64(len(buf)), size-off))
		if err := p.readAt(buf[:n], off); err != nil {
			return nil, err
		}
		crc = crc32.Update(crc, castagnoli, buf[:n])
		off += int64(n)
	}
	if err := p.checkCRC(crc); err != nil {
		return nil, err
	}
	return p.meta, nil
}

// tensorInfo is one tensor's header entry, checked.
type tensorInfo struct {
	name       string
	at         int64 // file offset of the entry's key in the header
	dtype      tensor.DType
	shape      tensor.Shape
	begin, end int64 // data_offsets, relative to the data section
	nbytes     int64 // shape size * dtype size
}

type parser struct {
	r         io.ReaderAt
	size      int64
	file      string
	hdr       []byte
	dataStart int64 // 8 + header length
	meta      map[string]string
	metaAt    int64
	infos     []tensorInfo // sorted by data offset after readLayout
}

func (p *parser) errf(off int64, format string, args ...any) *FormatError {
	return &FormatError{File: p.file, Offset: off, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) readAt(b []byte, off int64) error {
	n, err := p.r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return &FormatError{File: p.file, Offset: off + int64(n), Msg: fmt.Sprintf("reading %d bytes", len(b)), Err: err}
}

// readLayout reads and checks the header and the data layout, reading no
// tensor data.
func (p *parser) readLayout() error {
	if p.size < 8 {
		return p.errf(0, "file has %d bytes, too few for the 8-byte header length", max(p.size, 0))
	}
	var lenField [8]byte
	if err := p.readAt(lenField[:], 0); err != nil {
		return err
	}
	n := binary.LittleEndian.Uint64(lenField[:])
	if n > maxHeaderSize {
		return p.errf(0, "header length %d exceeds the limit of %d bytes", n, maxHeaderSize)
	}
	if int64(n) > p.size-8 {
		return p.errf(0, "header length %d runs past the end of the file (%d bytes)", n, p.size)
	}
	p.hdr = make([]byte, n)
	if err := p.readAt(p.hdr, 8); err != nil {
		return err
	}
	p.dataStart = 8 + int64(n)
	if err := p.parseHeader(); err != nil {
		return err
	}
	return p.checkLayout()
}

// parseHeader decodes the JSON header token by token, so duplicate names,
// non-string metadata and malformed entries are caught where they occur.
func (p *parser) parseHeader() error {
	for i := 0; i < len(p.hdr); {
		r, w := utf8.DecodeRune(p.hdr[i:])
		if r == utf8.RuneError && w == 1 {
			return p.errf(8+int64(i), "header is not valid UTF-8")
		}
		i += w
	}
	if len(p.hdr) == 0 || p.hdr[0] != '{' {
		return p.errf(8, "header does not start with '{'")
	}
	dec := json.NewDecoder(bytes.NewReader(p.hdr))
	dec.UseNumber()
	if _, err := p.delim(dec, '{', 8); err != nil {
		return err
	}
	seen := make(map[string]bool)
	for dec.More() {
		at := p.keyAt(dec)
		key, err := p.key(dec)
		if err != nil {
			return err
		}
		if seen[key] {
			return p.errf(at, "name %q appears twice in the header", key)
		}
		seen[key] = true
		if key == "__metadata__" {
			err = p.parseMeta(dec, at)
		} else {
			err = p.parseEntry(dec, key, at)
		}
		if err != nil {
			return err
		}
	}
	if _, err := p.delim(dec, '}', 8); err != nil {
		return err
	}
	for i := dec.InputOffset(); i < int64(len(p.hdr)); i++ {
		switch p.hdr[i] {
		case ' ', '\t', '\n', '\r': // padding; the format pads with spaces
		default:
			return p.errf(8+i, "header has %q after its JSON object", p.hdr[i])
		}
	}
	if p.meta == nil {
		p.meta = make(map[string]string)
	}
	return nil
}

// parseMeta reads the __metadata__ value: null or an object of strings.
func (p *parser) parseMeta(dec *json.Decoder, at int64) error {
	tok, err := p.token(dec)
	if err != nil {
		return err
	}
	if tok == nil {
		return nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return p.errf(at, "__metadata__ is not an object of strings")
	}
	p.meta, p.metaAt = make(map[string]string), at
	for dec.More() {
		kat := p.keyAt(dec)
		k, err := p.key(dec)
		if err != nil {
			return err
		}
		tok, err := p.token(dec)
		if err != nil {
			return err
		}
		v, ok := tok.(string)
		if !ok {
			return p.errf(kat, "__metadata__ value of %q is not a string (the format allows only strings)", k)
		}
		if _, dup := p.meta[k]; dup {
			return p.errf(kat, "__metadata__ key %q appears twice", k)
		}
		p.meta[k] = v
	}
	_, err = p.delim(dec, '}', at)
	return err
}

// parseEntry reads one tensor's {"dtype", "shape", "data_offsets"} object.
// Other fields are skipped, as the reference reader does.
func (p *parser) parseEntry(dec *json.Decoder, name string, at int64) error {
	if _, err := p.delim(dec, '{', at); err != nil {
		return p.errf(at, "tensor %q: entry is not an object", name)
	}
	t := tensorInfo{name: name, at: at}
	var haveDType, haveShape, haveOffsets bool
	for dec.More() {
		field, err := p.key(dec)
		if err != nil {
			return err
		}
		switch field {
		case "dtype":
			if haveDType {
				return p.errf(at, "tensor %q: dtype appears twice", name)
			}
			haveDType = true
			tok, err := p.token(dec)
			if err != nil {
				return err
			}
			code, ok := tok.(string)
			if !ok {
				return p.errf(at, "tensor %q: dtype is not a string", name)
			}
			if t.dtype, ok = parseDType(code); !ok {
				return p.errf(at, "tensor %q: dtype %q is not supported (want F32, F64, F16, BF16, I32, I64, U8 or BOOL)", name, code)
			}
		case "shape":
			if haveShape {
				return p.errf(at, "tensor %q: shape appears twice", name)
			}
			haveShape = true
			dims, err := p.ints(dec, name, "shape", at)
			if err != nil {
				return err
			}
			t.shape = make(tensor.Shape, len(dims))
			for i, d := range dims {
				t.shape[i] = int(d)
			}
		case "data_offsets":
			if haveOffsets {
				return p.errf(at, "tensor %q: data_offsets appears twice", name)
			}
			haveOffsets = true
			offs, err := p.ints(dec, name, "data_offsets", at)
			if err != nil {
				return err
			}
			if len(offs) != 2 {
				return p.errf(at, "tensor %q: data_offsets has %d numbers, want 2", name, len(offs))
			}
			t.begin, t.end = offs[0], offs[1]
		default:
			if err := p.skip(dec); err != nil {
				return err
			}
		}
	}
	if _, err := p.delim(dec, '}', at); err != nil {
		return err
	}
	switch {
	case !haveDType:
		return p.errf(at, "tensor %q: no dtype", name)
	case !haveShape:
		return p.errf(at, "tensor %q: no shape", name)
	case !haveOffsets:
		return p.errf(at, "tensor %q: no data_offsets", name)
	}
	// Element count and byte size, multiplied left to right with overflow
	// checks, as the reference reader does.
	n := int64(1)
	for _, d := range t.shape {
		if d != 0 && n > math.MaxInt64/int64(d) {
			return p.errf(at, "tensor %q: shape %v overflows", name, t.shape)
		}
		n *= int64(d)
	}
	if es := int64(t.dtype.Size()); n > math.MaxInt64/es {
		return p.errf(at, "tensor %q: shape %v overflows", name, t.shape)
	}
	t.nbytes = n * int64(t.dtype.Size())
	p.infos = append(p.infos, t)
	return nil
}

// checkLayout checks that the tensors tile the data section exactly: sorted
// by offset, each starts where the previous ended, holds shape*dtype bytes,
// and the last ends at the end of the file (no holes, no overlaps, no
// trailing bytes).
func (p *parser) checkLayout() error {
	slices.SortStableFunc(p.infos, func(a, b tensorInfo) int {
		return cmp.Or(cmp.Compare(a.begin, b.begin), cmp.Compare(a.end, b.end))
	})
	dataLen := p.size - p.dataStart
	var next int64
	prev := ""
	for _, t := range p.infos {
		switch {
		case t.end < t.begin:
			return p.errf(t.at, "tensor %q: data_offsets [%d, %d] end before they begin", t.name, t.begin, t.end)
		case t.end > dataLen:
			return p.errf(t.at, "tensor %q: data_offsets [%d, %d] run past the end of the file: the data section holds %d bytes (file offsets %d to %d)",
				t.name, t.begin, t.end, dataLen, p.dataStart, p.size)
		case t.end-t.begin != t.nbytes:
			return p.errf(t.at, "tensor %q: %v%v needs %d bytes, data_offsets [%d, %d] hold %d",
				t.name, t.dtype, t.shape, t.nbytes, t.begin, t.end, t.end-t.begin)
		case t.begin > next:
			return p.errf(p.dataStart+next, "data bytes [%d, %d) belong to no tensor (a hole before tensor %q)", next, t.begin, t.name)
		case t.begin < next:
			return p.errf(p.dataStart+t.begin, "tensor %q data [%d, %d) overlaps tensor %q, which ends at %d", t.name, t.begin, t.end, prev, next)
		}
		next, prev = t.end, t.name
	}
	if next != dataLen {
		return p.errf(p.dataStart+next, "%d bytes after the last tensor belong to no tensor", dataLen-next)
	}
	return nil
}

// checkCRC compares the data section's checksum with the data_crc32c
// metadata, when present (files from other writers may not have it).
func (p *parser) checkCRC(got uint32) error {
	v, ok := p.meta[KeyDataCRC32C]
	if !ok {
		return nil
	}
	b, err := hex.DecodeString(v)
	if err != nil || len(b) != 4 {
		return p.errf(p.metaAt, "__metadata__ %s is %q, want 8 hex digits", KeyDataCRC32C, v)
	}
	if want := binary.BigEndian.Uint32(b); got != want {
		return p.errf(p.dataStart, "data section checksum is %08x, the header says %08x: the data is corrupt", got, want)
	}
	return nil
}

// keyAt returns the file offset of the next object key: the decoder stands
// after the previous token, before any separator and whitespace.
func (p *parser) keyAt(dec *json.Decoder) int64 {
	i := dec.InputOffset()
	for i < int64(len(p.hdr)) {
		switch p.hdr[i] {
		case ' ', '\t', '\n', '\r', ',':
			i++
			continue
		}
		break
	}
	return 8 + i
}

// token returns the next JSON token, turning decoder errors into FormatErrors
// at the position the decoder reached.
func (p *parser) token(dec *json.Decoder) (json.Token, error) {
	tok, err := dec.Token()
	if err == nil {
		return tok, nil
	}
	off := dec.InputOffset()
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = se.Offset
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return nil, &FormatError{File: p.file, Offset: 8 + int64(len(p.hdr)), Msg: "header JSON ends early", Err: err}
	}
	return nil, &FormatError{File: p.file, Offset: 8 + min(max(off, 0), int64(len(p.hdr))), Msg: "header is not valid JSON", Err: err}
}

func (p *parser) key(dec *json.Decoder) (string, error) {
	tok, err := p.token(dec)
	if err != nil {
		return "", err
	}
	k, ok := tok.(string)
	if !ok { // unreachable: the decoder rejects non-string keys
		return "", p.errf(8+dec.InputOffset(), "header object key is not a string")
	}
	return k, nil
}

// delim reads the delimiter want; at is the offset to report if another
// token comes instead.
func (p *parser) delim(dec *json.Decoder, want json.Delim, at int64) (json.Delim, error) {
	tok, err := p.token(dec)
	if err != nil {
		return 0, err
	}
	if d, ok := tok.(json.Delim); !ok || d != want {
		return 0, p.errf(at, "header: want %q, got %v", want, tok)
	}
	return want, nil
}

// ints reads an array of non-negative integers (shape or data_offsets).
func (p *parser) ints(dec *json.Decoder, name, field string, at int64) ([]int64, error) {
	if _, err := p.delim(dec, '[', at); err != nil {
		return nil, p.errf(at, "tensor %q: %s is not an array", name, field)
	}
	var out []int64
	for dec.More() {
		tok, err := p.token(dec)
		if err != nil {
			return nil, err
		}
		num, ok := tok.(json.Number)
		if !ok {
			return nil, p.errf(at, "tensor %q: %s holds %v, want non-negative integers", name, field, tok)
		}
		v, err := strconv.ParseInt(string(num), 10, 64)
		if err != nil || v < 0 || num[0] == '-' {
			return nil, p.errf(at, "tensor %q: %s holds %s, want non-negative integers", name, field, num)
		}
		if len(out) == tensor.MaxRank { // no valid field is longer: stop before it grows
			return nil, p.errf(at, "tensor %q: %s has more than %d numbers (the maximum rank)", name, field, tensor.MaxRank)
		}
		out = append(out, v)
	}
	if _, err := p.delim(dec, ']', at); err != nil {
		return nil, err
	}
	return out, nil
}

// skip reads and discards one JSON value.
func (p *parser) skip(dec *json.Decoder) error {
	depth := 0
	for {
		tok, err := p.token(dec)
		if err != nil {
			return err
		}
		if d, ok := tok.(json.Delim); ok {
			if d == '{' || d == '[' {
				depth++
			} else {
				depth--
			}
		}
		if depth == 0 {
			return nil
		}
	}
}
