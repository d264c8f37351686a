package checkpoint

import (
	"fmt"

	"github.com/headroom-ml/headroom/tensor"
)

// maxHeaderSize bounds the JSON header a reader accepts, as the reference
// implementation does (100,000,000 bytes), so a corrupt length field cannot
// make Load allocate gigabytes before it has read anything.
const maxHeaderSize = 100_000_000

// headerAlign is the multiple the writer pads the header to with spaces, so
// the data section starts 8-byte aligned in the file.
const headerAlign = 8

// Metadata keys written by headroom. Values are strings, as the format
// requires; see the package documentation for their encoding.
const (
	KeyStep         = "step"          // optimizer steps taken, decimal int64
	KeyEpoch        = "epoch"         // epochs completed, decimal
	KeyRNGState     = "rng_state"     // random generator state, base64 (std encoding)
	KeyDataPosition = "data_position" // input pipeline position, opaque to this package
	KeyDataCRC32C   = "data_crc32c"   // CRC-32C of the data section, 8 hex digits, set by Save
)

// Entry is one named tensor of a checkpoint. For Save the Tensor is a view
// (often into a runtime arena) whose bytes are copied out; a File from Load
// holds tensors backed by Go memory it allocated.
type Entry struct {
	Name   string
	Tensor tensor.Tensor
}

// File is a checkpoint read from disk: its string metadata and its tensors
// in file (data offset) order.
type File struct {
	Meta    map[string]string
	Entries []Entry

	index map[string]int // name -> position in Entries, built by Parse
}

// Get returns the tensor called name.
func (f *File) Get(name string) (tensor.Tensor, bool) {
	if i, ok := f.index[name]; ok && i < len(f.Entries) && f.Entries[i].Name == name {
		return f.Entries[i].Tensor, true
	}
	for _, e := range f.Entries { // index absent or stale: the caller built or edited Entries
		if e.Name == name {
			return e.Tensor, true
		}
	}
	return tensor.Tensor{}, false
}

// FormatError reports a file that is not a valid checkpoint. Offset is the
// absolute byte offset in the file of the item at fault: 0 for the header
// length, a position inside the JSON header (8 + index) for a header field,
// or a position in the data section for a hole, an overlap or trailing bytes.
// Offset never exceeds the file size.
type FormatError struct {
	File   string
	Offset int64
	Msg    string
	Err    error // underlying cause (an I/O or JSON error), or nil
}

func (e *FormatError) Error() string {
	s := fmt.Sprintf("checkpoint: %s: offset %d: %s", e.File, e.Offset, e.Msg)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *FormatError) Unwrap() error { return e.Err }

// dtypeCodes maps headroom's element types to the safetensors dtype strings.
// rank is the position of the dtype in the reference implementation's Dtype
// enum (BOOL, U8, I8, F8_E5M2, F8_E4M3, I16, U16, F16, BF16, I32, U32, F32,
// F64, I64, U64): its writer orders tensors by descending rank, then by name,
// which keeps every tensor naturally aligned. Save does the same.
var dtypeCodes = [...]struct {
	dtype tensor.DType
	code  string
	rank  int
}{
	{tensor.Bool, "BOOL", 0},
	{tensor.Uint8, "U8", 1},
	{tensor.Float16, "F16", 7},
	{tensor.BFloat16, "BF16", 8},
	{tensor.Int32, "I32", 9},
	{tensor.Float32, "F32", 11},
	{tensor.Float64, "F64", 12},
	{tensor.Int64, "I64", 13},
}

// dtypeCode returns the safetensors code and writer rank of d.
func dtypeCode(d tensor.DType) (code string, rank int, ok bool) {
	for _, c := range dtypeCodes {
		if c.dtype == d {
			return c.code, c.rank, true
		}
	}
	return "", 0, false
}

// parseDType returns the DType of a safetensors code.
func parseDType(code string) (tensor.DType, bool) {
	for _, c := range dtypeCodes {
		if c.code == code {
			return c.dtype, true
		}
	}
	return tensor.Invalid, false
}

// alignedBytes returns n zeroed bytes whose start is 8-byte aligned, so every
// dtype can be viewed in place with tensor.As.
func alignedBytes(n int) []byte {
	if n == 0 {
		return nil
	}
	return tensor.AsBytes(make([]int64, (n+7)/8))[:n]
}
