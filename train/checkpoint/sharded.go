package checkpoint

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/headroom-ml/headroom/internal/atomicfile"
	"github.com/headroom-ml/headroom/tensor"
)

// A sharded checkpoint is what the processes of a data-parallel run write
// together: process r of n writes its part, PartPath(dir, step, r, n), a
// safetensors file of its own, at the same time as the others; once every
// part is complete, one process writes the index, IndexPath(dir, step), in
// the Hugging Face layout (model.safetensors.index.json):
//
//	{"metadata": {"step": "100", ...}, "weight_map": {"tensor name": "part file name", ...}}
//
// The index is the checkpoint's commit: a step whose index is missing (a
// run killed while writing its parts) does not exist, and Latest passes it
// over. The metadata holds what a single file's __metadata__ holds (each
// part holds it too, with KeyStep); every tensor is in exactly one part.

// indexSuffix ends an index's name: ckpt-<step>.safetensors.index.json.
const indexSuffix = stepSuffix + ".index.json"

// IndexPath returns the index of the sharded checkpoint of step in dir:
// dir/ckpt-<step>.safetensors.index.json.
func IndexPath(dir string, step int64) string {
	return filepath.Join(dir, fmt.Sprintf("%s%010d%s", stepPrefix, step, indexSuffix))
}

// PartPath returns part rank (from 0) of n of the sharded checkpoint of
// step in dir: dir/ckpt-<step>-<rank+1>-of-<n>.safetensors (5 digits
// each, as Hugging Face numbers its shards).
func PartPath(dir string, step int64, rank, n int) string {
	return filepath.Join(dir, fmt.Sprintf("%s%010d-%05d-of-%05d%s", stepPrefix, step, rank+1, n, stepSuffix))
}

// parseIndexName returns the step of an index's file name.
func parseIndexName(name string) (int64, bool) {
	base, ok := strings.CutSuffix(name, ".index.json")
	if !ok {
		return 0, false
	}
	return parseStepName(base)
}

// parsePartName returns the step of a part's file name.
func parsePartName(name string) (int64, bool) {
	rest, ok := strings.CutSuffix(name, stepSuffix)
	if !ok || len(rest) < 15 {
		return 0, false
	}
	i := strings.LastIndex(rest, "-of-")
	j := strings.LastIndexByte(rest[:max(i, 0)], '-')
	if i < 0 || j < 0 {
		return 0, false
	}
	rank, err1 := strconv.Atoi(rest[j+1 : i])
	n, err2 := strconv.Atoi(rest[i+4:])
	step, ok := parseStepName(rest[:j] + stepSuffix)
	if err1 != nil || err2 != nil || !ok || rank < 1 || rank > n || filepath.Base(PartPath("", step, rank-1, n)) != name {
		return 0, false
	}
	return step, true
}

// Index is a sharded checkpoint's index.
type Index struct {
	Metadata  map[string]string `json:"metadata"`
	WeightMap map[string]string `json:"weight_map"` // tensor name -> part file name (in the index's directory)
}

// Parts returns the index's part files, sorted, as paths beside dir.
func (x *Index) Parts(dir string) []string {
	var parts []string
	for _, p := range x.WeightMap {
		if !slices.Contains(parts, p) {
			parts = append(parts, p)
		}
	}
	slices.Sort(parts)
	for i, p := range parts {
		parts[i] = filepath.Join(dir, p)
	}
	return parts
}

// SavePart writes process rank's part of n of the sharded checkpoint of
// step to PartPath(dir, step, rank, n), atomically (Save), recording step
// under KeyStep, and returns its path. The index (SaveIndex) commits it.
func SavePart(dir string, step int64, rank, n int, entries []Entry, meta map[string]string) (string, error) {
	if step < 0 || rank < 0 || rank >= n {
		return "", fmt.Errorf("checkpoint: save part %d of %d of step %d: out of range", rank, n, step)
	}
	m := make(map[string]string, len(meta)+2)
	for k, v := range meta {
		m[k] = v
	}
	m[KeyStep] = strconv.FormatInt(step, 10)
	path := PartPath(dir, step, rank, n)
	return path, Save(path, entries, m)
}

// SaveIndex commits the sharded checkpoint of step, whose parts are
// written: it writes IndexPath(dir, step) (atomically) with meta (KeyStep
// set) and weights, each tensor's part (a path or a base name), then, if
// keep > 0, deletes older checkpoints (single files, or indexes and their
// parts) so that keep remain, as SaveStep does. It returns the index's
// path (with an error if only the clean-up failed).
func SaveIndex(dir string, step int64, weights map[string]string, meta map[string]string, keep int) (string, error) {
	x := Index{Metadata: map[string]string{}, WeightMap: map[string]string{}}
	for k, v := range meta {
		x.Metadata[k] = v
	}
	x.Metadata[KeyStep] = strconv.FormatInt(step, 10)
	for name, part := range weights {
		x.WeightMap[name] = filepath.Base(part)
	}
	path := IndexPath(dir, step)
	err := atomicfile.WriteFile(fsys, path, 0o666, func(w io.Writer) error {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(&x)
	})
	if err != nil {
		return "", fmt.Errorf("checkpoint: save index %s: %w", path, err)
	}
	if err := prune(dir, step, keep); err != nil {
		return path, fmt.Errorf("checkpoint: save step %d: clean up %s: %w", step, dir, err)
	}
	return path, nil
}

// ReadIndex reads a sharded checkpoint's index.
func ReadIndex(path string) (*Index, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("checkpoint: index: %w", err)
	}
	var x Index
	if err := json.Unmarshal(b, &x); err != nil {
		return nil, &FormatError{File: path, Msg: "not a safetensors index: " + err.Error()}
	}
	if len(x.WeightMap) == 0 {
		return nil, &FormatError{File: path, Msg: "the index has no weight_map"}
	}
	for name, part := range x.WeightMap {
		if part == "" || filepath.Base(part) != part {
			return nil, &FormatError{File: path, Msg: fmt.Sprintf("tensor %q is in %q: want a file name beside the index", name, part)}
		}
	}
	return &x, nil
}

// IsIndex reports whether path names a sharded checkpoint's index.
func IsIndex(path string) bool { return strings.HasSuffix(path, ".index.json") }

// verifyIndex validates a sharded checkpoint: its index, and each part
// (header, layout, checksum, KeyStep), which must hold exactly the
// tensors the index places in it.
func verifyIndex(path string, step int64) error {
	x, err := ReadIndex(path)
	if err != nil {
		return err
	}
	if v := x.Metadata[KeyStep]; v != strconv.FormatInt(step, 10) {
		return &FormatError{File: path, Msg: fmt.Sprintf("metadata %s is %q but the file name says step %d", KeyStep, v, step)}
	}
	held := map[string]string{}
	for _, part := range x.Parts(filepath.Dir(path)) {
		if _, err := os.Stat(part); err != nil { // (not ErrNotExist: a run must not start afresh over it)
			return &FormatError{File: path, Msg: fmt.Sprintf("part %s is missing or unreadable: %v", filepath.Base(part), err)}
		}
		if err := verifyStep(part, step); err != nil {
			return fmt.Errorf("checkpoint: %s: part %s: %w", path, filepath.Base(part), err)
		}
		if _, err := LoadInto(part, func(name string, _ tensor.DType, _ tensor.Shape) ([]byte, error) {
			held[name] = filepath.Base(part)
			return nil, nil
		}); err != nil {
			return err
		}
	}
	for name, part := range x.WeightMap {
		if held[name] != part {
			return &FormatError{File: path, Msg: fmt.Sprintf("tensor %q should be in %s, which does not hold it", name, part)}
		}
	}
	return nil
}

// loadIndexInto is LoadInto over every part of the sharded checkpoint
// whose index is at path, in part order.
func loadIndexInto(path string, dst func(name string, dtype tensor.DType, shape tensor.Shape) ([]byte, error)) (map[string]string, error) {
	x, err := ReadIndex(path)
	if err != nil {
		return nil, err
	}
	for _, part := range x.Parts(filepath.Dir(path)) {
		if _, err := loadFileInto(part, dst); err != nil {
			return nil, err
		}
	}
	return x.Metadata, nil
}

// removeSharded deletes the sharded checkpoint of step in dir: its index
// first (the checkpoint is gone from then on), then every part of it.
func removeSharded(dir string, step int64, des []os.DirEntry) error {
	var errs []error
	if err := os.Remove(IndexPath(dir, step)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		errs = append(errs, err)
	}
	for _, de := range des {
		if s, ok := parsePartName(de.Name()); ok && s == step {
			if err := os.Remove(filepath.Join(dir, de.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}
