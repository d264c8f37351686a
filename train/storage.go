package train

import (
	"fmt"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/step"
)

// StorageChoice is what a 16-bit precision policy (mixed_bfloat16,
// mixed_float16) keeps for the backward pass on a given model and batch.
// Keeping each layer's output in 16 bits halves activation memory, but
// costs the casts' buffers, and float16 loss scaling keeps every gradient
// until the overflow check; on a small model that can plan more than
// float32. The trainer plans the policy and float32 and keeps the policy's
// 16-bit layout only when it plans no more: a 16-bit policy never plans
// more than float32 for the same model and batch.
type StorageChoice uint8

// The choices.
const (
	// StorageLow: the policy as asked (16-bit saved activations; loss
	// scaling under mixed_float16). Always the choice under float32.
	StorageLow StorageChoice = iota
	// StorageFloat32Activations: mixed_bfloat16's bfloat16 products with
	// float32 saved activations.
	StorageFloat32Activations
	// StorageFloat32: float32's plan (under mixed_float16, which computes
	// in float32 on the CPU, this is float32 itself: nothing is float16,
	// so no loss is scaled).
	StorageFloat32
)

func (s StorageChoice) String() string {
	return [...]string{"16-bit activations", "float32 activations with bfloat16 products", "float32's layout"}[s]
}

// compileAll compiles the run's programs (see compileAs) and, under a
// 16-bit policy, chooses the storage that plans least, never more than
// float32: it records the choice in c (Storage reports it) and returns
// why, or "" when the policy's own layout is kept.
func (c *Config) compileAll(trainN, evalN int) (map[string]*program, error) {
	c.storage = StorageLow
	progs, err := c.compileAs(trainN, evalN)
	if err != nil || !c.Precision.Low() {
		return progs, err
	}
	low := planTotal(progs)
	alt := *c
	alt.storage = StorageFloat32
	f32, err := alt.compileAs(trainN, evalN)
	if err != nil {
		return nil, err
	}
	best, choice := f32, StorageFloat32
	if c.Precision == step.MixedBFloat16 {
		alt.storage = StorageFloat32Activations
		mid, err := alt.compileAs(trainN, evalN)
		if err != nil {
			return nil, err
		}
		if planTotal(mid) <= planTotal(best) {
			best, choice = mid, StorageFloat32Activations
		}
	}
	if low <= planTotal(f32) {
		return progs, nil
	}
	c.storage = choice
	c.storageNote = fmt.Sprintf("%s: with 16-bit activations the steps would plan %s, with float32's layout %s; keeping %s (%s)",
		c.Precision, mem.FormatBytes(low), mem.FormatBytes(planTotal(f32)), choice, mem.FormatBytes(planTotal(best)))
	return best, nil
}

func planTotal(progs map[string]*program) int64 {
	var list []*compile.Program
	for _, pr := range progs {
		list = append(list, pr.p)
	}
	return runtime.Reserve(list).Bytes()
}

// Storage returns what the trainer keeps for the backward pass under its
// precision policy, and, when that is not the policy's 16-bit layout, why.
func (t *Trainer) Storage() (StorageChoice, string) { return t.cfg.storage, t.cfg.storageNote }
