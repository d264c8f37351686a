package keras

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/headroom-ml/headroom/tensor"
)

// A TensorFlow.js layers model keeps its weights beside model.json: the
// weightsManifest lists groups, each a list of shard files ("paths") whose
// concatenation holds the group's weights one after another, each as its
// dtype's little-endian values in row-major order. A quantized weight
// ("quantization": {"dtype": "uint8" or "uint16", "min", "scale"}) holds
// integers q standing for min + scale·q; "float16" holds half floats.

// ReadWeights reads the weights that the TensorFlow.js model.json at path
// lists in its weightsManifest (the shards are the files beside it), and
// returns them as float32 tensors by the name of the variable of m (read
// from the same file) each loads into. Every variable of m must get a
// value whose shape is the variable's, and every weight of the manifest
// must load into one: a weight is matched to a variable by name
// ("conv1/kernel"), or by the last parts of its name when the converter
// prefixed it ("model/conv1/kernel"), never by position.
func ReadWeights(path string, m *Model) (map[string]tensor.Tensor, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	out, err := readWeights(data, filepath.Dir(path), m)
	if err != nil {
		var ke *Error
		if !errors.As(err, &ke) {
			err = &Error{File: path, Index: -1, Err: err}
		}
		return nil, err
	}
	return out, nil
}

// LoadWeights reads the TensorFlow.js weights of the model.json at path
// (ReadWeights) and hands each to write in the order of their names: with
// a trainer's SetWeight (train.Trainer, built for m), before it trains, a
// TensorFlow.js model is fine-tuned from its weights. An error of write
// is returned naming the file.
func LoadWeights(path string, m *Model, write func(name string, w tensor.Tensor) error) error {
	ws, err := ReadWeights(path, m)
	if err != nil {
		return err
	}
	names := make([]string, 0, len(ws))
	for n := range ws {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := write(n, ws[n]); err != nil {
			return &Error{File: path, Index: -1, Err: err}
		}
	}
	return nil
}

// manifestEntry is one weight of a weightsManifest.
type manifestEntry struct {
	name   string
	shape  tensor.Shape
	dtype  string // what the bytes hold: float32, int32, float16, uint8, uint16
	min    float64
	scale  float64
	group  int
	offset int64 // in the group's bytes
}

func (w manifestEntry) bytes() int64 {
	n := int64(w.shape.Size())
	switch w.dtype {
	case "uint8":
		return n
	case "uint16", "float16":
		return 2 * n
	}
	return 4 * n
}

func readWeights(data []byte, dir string, m *Model) (map[string]tensor.Tensor, error) {
	data, err := unpack(data)
	if err != nil {
		return nil, err
	}
	root, err := decode(data)
	if err != nil {
		return nil, err
	}
	groups, ok := root["weightsManifest"].([]any)
	if !ok {
		return nil, errors.New("no weightsManifest: weights load from a TensorFlow.js model.json (HDF5 weights are not read)")
	}
	declared, err := weightShapes(m.NN())
	if err != nil {
		return nil, err
	}
	var entries []manifestEntry
	var paths [][]string
	for gi, g := range groups {
		gm, ok := g.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("weightsManifest[%d]: want an object, got %s", gi, describe(g))
		}
		ps, ok := gm["paths"].([]any)
		if !ok {
			return nil, fmt.Errorf("weightsManifest[%d].paths: want a list of file names, got %s", gi, describe(gm["paths"]))
		}
		var files []string
		for _, p := range ps {
			s, ok := p.(string)
			if !ok || s == "" || filepath.IsAbs(s) || strings.Contains(filepath.ToSlash(s), "..") {
				return nil, fmt.Errorf("weightsManifest[%d].paths: %s is not a file name beside model.json", gi, describe(p))
			}
			files = append(files, filepath.Join(dir, filepath.FromSlash(s)))
		}
		paths = append(paths, files)
		ws, ok := gm["weights"].([]any)
		if !ok {
			return nil, fmt.Errorf("weightsManifest[%d].weights: want a list, got %s", gi, describe(gm["weights"]))
		}
		var off int64
		for wi, w := range ws {
			e, err := readManifestEntry(w)
			if err != nil {
				return nil, fmt.Errorf("weightsManifest[%d].weights[%d]: %w", gi, wi, err)
			}
			e.group, e.offset = gi, off
			off += e.bytes()
			entries = append(entries, e)
		}
	}
	target, err := matchWeights(entries, declared)
	if err != nil {
		return nil, err
	}
	out := map[string]tensor.Tensor{}
	for gi, files := range paths {
		var mine []int
		var size int64
		for i, e := range entries {
			if e.group == gi {
				mine = append(mine, i)
				size = e.offset + e.bytes()
			}
		}
		buf, err := readShards(files, size)
		if err != nil {
			return nil, fmt.Errorf("weightsManifest[%d]: %w", gi, err)
		}
		for _, i := range mine {
			e := entries[i]
			out[target[i]] = dequantize(e, buf[e.offset:e.offset+e.bytes()])
		}
	}
	return out, nil
}

func readManifestEntry(w any) (manifestEntry, error) {
	name, shape, err := manifestWeight(w)
	if err != nil {
		return manifestEntry{}, err
	}
	wm := w.(map[string]any) // manifestWeight checked it
	e := manifestEntry{name: strings.TrimSuffix(name, ":0"), shape: shape, dtype: "float32", scale: 1}
	if d, ok := wm["dtype"].(string); ok {
		e.dtype = d
	}
	switch e.dtype {
	case "float32":
	case "int32":
		return e, fmt.Errorf("%s: an int32 weight: Keras layers' weights are float32", name)
	default:
		return e, fmt.Errorf("%s: dtype %q is not read (float32, quantized to uint8, uint16 or float16)", name, e.dtype)
	}
	if q, ok := wm["quantization"]; ok && q != nil {
		qm, ok := q.(map[string]any)
		if !ok {
			return e, fmt.Errorf("%s: quantization: want an object, got %s", name, describe(q))
		}
		f := &fields{m: qm}
		e.dtype = f.str("dtype", "")
		switch e.dtype {
		case "uint8", "uint16":
			e.min, e.scale = f.float("min", 0), f.float("scale", 1)
			if !f.has("scale") || !f.has("min") {
				f.fail("quantization to %s without min and scale", e.dtype)
			}
		case "float16":
		default:
			f.fail("quantization dtype %q is not read (uint8, uint16, float16)", e.dtype)
		}
		if f.err != nil {
			return e, fmt.Errorf("%s: %w", name, f.err)
		}
	}
	return e, nil
}

// matchWeights returns, for each manifest entry, the variable it loads
// into: the one of the same name, else the only one whose name ends the
// entry's (or whose name the entry's ends) at a "/".
func matchWeights(entries []manifestEntry, declared map[string]tensor.Shape) ([]string, error) {
	target := make([]string, len(entries))
	taken := map[string]string{}
	for i, e := range entries {
		name := e.name
		if _, ok := declared[name]; !ok {
			var found []string
			for d := range declared {
				if strings.HasSuffix(name, "/"+d) || strings.HasSuffix(d, "/"+name) {
					found = append(found, d)
				}
			}
			sort.Strings(found)
			switch len(found) {
			case 0:
				return nil, fmt.Errorf("weight %s loads into no variable of the model", e.name)
			case 1:
				name = found[0]
			default:
				return nil, fmt.Errorf("weight %s could load into %s: ambiguous", e.name, strings.Join(found, " or "))
			}
		}
		if !declared[name].Equal(e.shape) {
			return nil, fmt.Errorf("weight %s has shape %v, variable %s %v", e.name, e.shape, name, declared[name])
		}
		if prev, dup := taken[name]; dup {
			return nil, fmt.Errorf("weights %s and %s both load into %s", prev, e.name, name)
		}
		taken[name] = e.name
		target[i] = name
	}
	var missing []string
	for d := range declared {
		if _, ok := taken[d]; !ok {
			missing = append(missing, d)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, fmt.Errorf("the manifest has no weight for %s", strings.Join(missing, ", "))
	}
	return target, nil
}

// readShards reads a group's shard files, which must hold size bytes
// together.
func readShards(files []string, size int64) ([]byte, error) {
	buf := make([]byte, 0, size)
	for _, p := range files {
		f, err := os.Open(p)
		if err != nil {
			return nil, fmt.Errorf("shard %s: %w", p, err)
		}
		b, err := io.ReadAll(io.LimitReader(f, size-int64(len(buf))+1))
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("shard %s: %w", p, err)
		}
		buf = append(buf, b...)
		if int64(len(buf)) > size {
			return nil, fmt.Errorf("the shards hold more than the %d bytes the manifest lists (at %s)", size, p)
		}
	}
	if int64(len(buf)) != size {
		return nil, fmt.Errorf("the shards hold %d bytes, the manifest lists %d", len(buf), size)
	}
	return buf, nil
}

// dequantize turns a weight's bytes into float32 values.
func dequantize(e manifestEntry, b []byte) tensor.Tensor {
	t := tensor.New(tensor.Float32, e.shape.Clone())
	v := t.Float32s()
	switch e.dtype {
	case "float32":
		for i := range v {
			v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case "float16":
		for i := range v {
			v[i] = tensor.F16(binary.LittleEndian.Uint16(b[2*i:])).Float32()
		}
	case "uint8":
		for i := range v {
			v[i] = float32(float64(b[i])*e.scale + e.min)
		}
	case "uint16":
		for i := range v {
			v[i] = float32(float64(binary.LittleEndian.Uint16(b[2*i:]))*e.scale + e.min)
		}
	}
	return t
}
