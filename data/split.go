package data

import (
	"fmt"
	"math/rand/v2"
)

// SplitValidation shuffles e's examples in place with seed and returns
// the first part for training and the last frac of them for validation,
// both views of e's memory: Keras' validation_split as
// image_dataset_from_directory applies it (a seeded shuffle, then the
// last int(frac * N) examples). It fails when either part would be empty.
func SplitValidation(e *Examples, frac float64, seed uint64) (train, val *Examples, err error) {
	if !(frac > 0 && frac < 1) {
		return nil, nil, fmt.Errorf("data: validation split %v: want a fraction in (0, 1)", frac)
	}
	nv := int(frac * float64(e.N))
	if nv < 1 || nv >= e.N {
		return nil, nil, fmt.Errorf("data: a validation split of %v leaves %d of %d examples for validation and %d for training: both need at least one", frac, nv, e.N, e.N-nv)
	}
	perm := make([]int, e.N)
	for i := range perm {
		perm[i] = i
	}
	rng := rand.New(rand.NewPCG(seed, 0x5b11d))
	rng.Shuffle(len(perm), func(i, j int) { perm[i], perm[j] = perm[j], perm[i] })
	e.Permute(perm)
	return e.Slice(e.Name+"/train", 0, e.N-nv), e.Slice(e.Name+"/validation", e.N-nv, e.N), nil
}

// Permute reorders the examples in place so that example i becomes the
// one that was at perm[i] (perm is a permutation of [0, N)). It uses one
// example's worth of scratch memory.
func (e *Examples) Permute(perm []int) {
	d, t := e.Shape.Size(), e.TargetSize()
	done := make([]bool, e.N)
	var px []uint8
	var fx, tx []float32
	for start := range perm {
		if done[start] || perm[start] == start {
			done[start] = true
			continue
		}
		// follow the cycle start <- perm[start] <- perm[perm[start]] ...
		px, fx, tx = e.saveRow(start, d, t, px, fx, tx)
		var label int32
		if e.Labels != nil {
			label = e.Labels[start]
		}
		i := start
		for {
			j := perm[i]
			done[i] = true
			if j == start {
				e.restoreRow(i, d, t, px, fx, tx, label)
				break
			}
			e.moveRow(i, j, d, t)
			i = j
		}
	}
}

func (e *Examples) saveRow(i, d, t int, px []uint8, fx, tx []float32) ([]uint8, []float32, []float32) {
	if e.Pixels != nil {
		px = append(px[:0], e.Pixels[i*d:(i+1)*d]...)
	}
	if e.Floats != nil {
		fx = append(fx[:0], e.Floats[i*d:(i+1)*d]...)
	}
	if e.Targets != nil {
		tx = append(tx[:0], e.Targets[i*t:(i+1)*t]...)
	}
	return px, fx, tx
}

func (e *Examples) restoreRow(i, d, t int, px []uint8, fx, tx []float32, label int32) {
	if e.Pixels != nil {
		copy(e.Pixels[i*d:], px)
	}
	if e.Floats != nil {
		copy(e.Floats[i*d:], fx)
	}
	if e.Targets != nil {
		copy(e.Targets[i*t:], tx)
	}
	if e.Labels != nil {
		e.Labels[i] = label
	}
}

// moveRow copies example j over example i.
func (e *Examples) moveRow(i, j, d, t int) {
	if e.Pixels != nil {
		copy(e.Pixels[i*d:(i+1)*d], e.Pixels[j*d:(j+1)*d])
	}
	if e.Floats != nil {
		copy(e.Floats[i*d:(i+1)*d], e.Floats[j*d:(j+1)*d])
	}
	if e.Targets != nil {
		copy(e.Targets[i*t:(i+1)*t], e.Targets[j*t:(j+1)*t])
	}
	if e.Labels != nil {
		e.Labels[i] = e.Labels[j]
	}
}
