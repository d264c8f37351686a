package checkpoint

import (
	"fmt"
	"hash/crc32"
	"os"

	"github.com/headroom-ml/headroom/tensor"
)

// IntoBufferBytes is the buffer LoadInto streams tensors it is not given a
// destination for through (for the checksum), and so the most memory it
// takes besides the destinations.
const IntoBufferBytes = 1 << 20

// LoadInto reads the checkpoint at path straight into memory the caller
// owns, instead of materializing every tensor as Load does: for each
// tensor, in file order, dst returns the bytes to read it into (its size in
// bytes; nil: skip it) or an error. The data's CRC-32C is checked over
// what was read; a mismatch is a *FormatError found only after the bytes
// were written, so callers that must not see damaged data verify the file
// first (Latest and LatestSkipping do). It returns the metadata. A
// sharded checkpoint's index (IsIndex) is read part by part, in order, and
// its metadata returned.
func LoadInto(path string, dst func(name string, dtype tensor.DType, shape tensor.Shape) ([]byte, error)) (map[string]string, error) {
	if IsIndex(path) {
		return loadIndexInto(path, dst)
	}
	return loadFileInto(path, dst)
}

func loadFileInto(path string, dst func(name string, dtype tensor.DType, shape tensor.Shape) ([]byte, error)) (map[string]string, error) {
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
	p := &parser{r: f, size: fi.Size(), file: path}
	if err := p.readLayout(); err != nil {
		return nil, err
	}
	var skip []byte
	crc := uint32(0)
	for _, t := range p.infos {
		n := t.end - t.begin
		b, err := dst(t.name, t.dtype, t.shape)
		if err != nil {
			return nil, err
		}
		if b != nil {
			if int64(len(b)) != n {
				return nil, fmt.Errorf("checkpoint: load %s: tensor %q holds %d bytes, the destination %d", path, t.name, n, len(b))
			}
			if err := p.readAt(b, p.dataStart+t.begin); err != nil {
				return nil, err
			}
			crc = crc32.Update(crc, castagnoli, b)
			continue
		}
		if skip == nil {
			skip = make([]byte, min(IntoBufferBytes, max(n, 1)))
		}
		for off := int64(0); off < n; {
			c := min(int64(len(skip)), n-off)
			if int64(len(skip)) < c {
				c = int64(len(skip))
			}
			if err := p.readAt(skip[:c], p.dataStart+t.begin+off); err != nil {
				return nil, err
			}
			crc = crc32.Update(crc, castagnoli, skip[:c])
			off += c
		}
	}
	if err := p.checkCRC(crc); err != nil {
		return nil, err
	}
	return p.meta, nil
}

// Meta returns the metadata of the checkpoint at path, reading only its
// header (of a sharded checkpoint: its index's).
func Meta(path string) (map[string]string, error) {
	if IsIndex(path) {
		x, err := ReadIndex(path)
		if err != nil {
			return nil, err
		}
		return x.Metadata, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: load: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("checkpoint: load: %w", err)
	}
	p := &parser{r: f, size: fi.Size(), file: path}
	if err := p.readLayout(); err != nil {
		return nil, err
	}
	return p.meta, nil
}
