package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/headroom-ml/headroom/internal/atomicfile"
)

const (
	stepPrefix = "ckpt-"
	stepSuffix = ".safetensors"
)

// StepPath returns the checkpoint file of step in dir:
// dir/ckpt-<step, 10 digits or more>.safetensors.
func StepPath(dir string, step int64) string {
	return filepath.Join(dir, fmt.Sprintf("%s%010d%s", stepPrefix, step, stepSuffix))
}

// parseStepName returns the step of a file name that StepPath writes, or
// false for any other name (including non-canonical spellings of a step).
func parseStepName(name string) (int64, bool) {
	digits, ok := strings.CutPrefix(name, stepPrefix)
	if !ok {
		return 0, false
	}
	if digits, ok = strings.CutSuffix(digits, stepSuffix); !ok || len(digits) < 10 {
		return 0, false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	step, err := strconv.ParseInt(digits, 10, 64)
	if err != nil || filepath.Base(StepPath("", step)) != name {
		return 0, false
	}
	return step, true
}

// isStepName reports whether name is a file name StepPath, PartPath or
// IndexPath writes.
func isStepName(name string) bool {
	_, ok := parseStepName(name)
	_, part := parsePartName(name)
	_, index := parseIndexName(name)
	return ok || part || index
}

// SaveStep saves the checkpoint of a training step to StepPath(dir, step)
// with Save (atomically), recording step under KeyStep in the metadata. Then,
// if keep > 0, it deletes older checkpoints so that keep remain with a step
// at or below step; checkpoints with a larger step (left by a run that was
// resumed from an earlier one) are never touched. It also removes temporary
// files that a killed writer left in dir: a directory has one writer at a
// time. If only this clean-up fails, SaveStep returns the path of the
// complete checkpoint together with the error.
func SaveStep(dir string, step int64, entries []Entry, meta map[string]string, keep int) (string, error) {
	if step < 0 {
		return "", fmt.Errorf("checkpoint: save step %d: negative step", step)
	}
	want := strconv.FormatInt(step, 10)
	if v, ok := meta[KeyStep]; ok && v != want {
		return "", fmt.Errorf("checkpoint: save step %d: metadata %s is %q", step, KeyStep, v)
	}
	m := make(map[string]string, len(meta)+2)
	for k, v := range meta {
		m[k] = v
	}
	m[KeyStep] = want
	path := StepPath(dir, step)
	if err := Save(path, entries, m); err != nil {
		return "", err
	}
	if err := prune(dir, step, keep); err != nil {
		return path, fmt.Errorf("checkpoint: save step %d: clean up %s: %w", step, dir, err)
	}
	return path, nil
}

// prune deletes all but the keep-1 newest checkpoints older than step (step's
// own is the keep-th), single files or sharded (index and parts), the parts
// of older steps that have no index (a run killed while writing them), and
// every leftover temporary checkpoint file.
func prune(dir string, step int64, keep int) error {
	des, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var older []int64
	sharded, indexed := map[int64]bool{}, map[int64]bool{}
	var errs []error
	for _, de := range des {
		name := de.Name()
		if s, ok := parseStepName(name); ok && s < step {
			older = append(older, s)
		} else if s, ok := parseIndexName(name); ok && s < step {
			older = append(older, s)
			sharded[s], indexed[s] = true, true
		} else if s, ok := parsePartName(name); ok && s < step {
			sharded[s] = true
		} else if target, ok := atomicfile.ParseTemp(name); ok && isStepName(target) {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	for s := range sharded {
		if !indexed[s] {
			errs = append(errs, removeSharded(dir, s, des))
		}
	}
	if keep > 0 && len(older) > keep-1 {
		slices.Sort(older)
		for _, s := range older[:len(older)-(keep-1)] {
			if indexed[s] {
				errs = append(errs, removeSharded(dir, s, des))
			} else if err := os.Remove(StepPath(dir, s)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// Latest returns the newest checkpoint in dir that loads: it validates the
// newest file (header, layout, checksum, and that its KeyStep metadata, if
// any, matches its name) and falls back to the previous one if that fails.
// With no checkpoint files in dir (or no dir), the error wraps
// fs.ErrNotExist, so a trainer can start afresh. When files exist but none
// loads, the error does not wrap fs.ErrNotExist: starting afresh would
// silently discard the run, so the caller should stop and show the error
// (each file's *FormatError is reachable with errors.As).
func Latest(dir string) (path string, step int64, err error) {
	path, step, _, err = LatestSkipping(dir)
	return path, step, err
}

// LatestSkipping is Latest that also returns why each newer checkpoint was
// passed over (one error per damaged file, newest first), so a trainer can
// tell its user that it resumed from an older step than the newest file.
func LatestSkipping(dir string) (path string, step int64, skipped []error, err error) {
	des, err := os.ReadDir(dir)
	if err != nil {
		return "", 0, nil, fmt.Errorf("checkpoint: latest: %w", err)
	}
	var steps []int64
	index := map[int64]bool{} // sharded: the step's index
	for _, de := range des {
		if !de.Type().IsRegular() {
			continue
		}
		if s, ok := parseStepName(de.Name()); ok {
			steps = append(steps, s)
		} else if s, ok := parseIndexName(de.Name()); ok {
			steps, index[s] = append(steps, s), true
		}
	}
	if len(steps) == 0 {
		return "", 0, nil, fmt.Errorf("checkpoint: latest: no checkpoint in %s: %w", dir, fs.ErrNotExist)
	}
	slices.Sort(steps)
	steps = slices.Compact(steps)
	var errs []error
	for i := len(steps) - 1; i >= 0; i-- {
		p, verify := StepPath(dir, steps[i]), verifyStep
		if index[steps[i]] {
			p, verify = IndexPath(dir, steps[i]), verifyIndex
		}
		if err := verify(p, steps[i]); err != nil {
			errs = append(errs, err)
			continue
		}
		return p, steps[i], errs, nil
	}
	return "", 0, nil, fmt.Errorf("checkpoint: latest: none of the %d checkpoints in %s loads: %w", len(steps), dir, errors.Join(errs...))
}

// verifyStep validates the checkpoint at path, streaming its data through the
// checksum without keeping it.
func verifyStep(path string, step int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	meta, err := verify(f, fi.Size(), path)
	if err != nil {
		return err
	}
	if v, ok := meta[KeyStep]; ok && v != strconv.FormatInt(step, 10) {
		return &FormatError{File: path, Offset: 8, Msg: fmt.Sprintf("metadata %s is %q but the file name says step %d", KeyStep, v, step)}
	}
	return nil
}
