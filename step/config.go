package step

import (
	"errors"
	"fmt"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/tensor"
)

// Config is what a step is built from: a model, its losses, an optimizer
// and the options that shape the training step.
type Config struct {
	Model nn.Model
	// Loss trains output 0 (nil: sparse categorical cross-entropy) when
	// Losses is empty.
	Loss nn.Loss
	// Losses gives several outputs a loss each, summed with their weights
	// (Keras' loss_weights); an output without an entry has no loss.
	Losses    []OutputLoss
	Optimizer optim.Optimizer // nil: Adam
	// ClipNorm > 0 clips the gradients by their global norm.
	ClipNorm float64
	// Precision is the precision policy (see Storage and the loss-scaling
	// transform); the zero value is Float32.
	Precision Precision
	// Float32Storage keeps saved activations in float32 whatever Precision
	// says (a caller that found 16-bit storage does not pay on a model):
	// mixed_bfloat16 still computes its products in bfloat16, and
	// mixed_float16, with nothing in float16 left, scales no loss.
	Float32Storage bool
	// Remat recomputes activations in the backward pass, keeping every
	// ⌈√L⌉-th of the model's L layer boundaries.
	Remat bool
	// Seed seeds dropout masks (initial weights are drawn elsewhere).
	Seed uint64
	// Ranks > 1 builds one process's step of a data-parallel run of Ranks
	// processes, this being Rank: gradients are weighted by the process's
	// share and summed over the processes in buckets of BucketBytes (0:
	// DefaultBucketBytes), or, with a ZeRO stage, reduce-scattered to an
	// update of this process's block of each parameter.
	Ranks, Rank int
	// Zero is the ZeRO stage of a data-parallel run (Rajbhandari et al.,
	// "ZeRO: Memory Optimizations Toward Training Trillion Parameter
	// Models", 2020): 1 shards the optimizer state over the processes, 2
	// also the gradients (reduce-scattered in buckets while backward goes
	// on; micro-batches accumulate shards), 3 also the parameters (each
	// layer's gathered before its forward and again before its backward).
	// 0: none; ShardOptimizer is stage 1.
	Zero           int
	ShardOptimizer bool
	BucketBytes    int64
	// Target is the backend the step is compiled for (required by Compile).
	Target compile.Target
	// Extra transforms run after the built-in ones' Grad hooks would, but
	// before the update (a user's gradient noise, a custom clipping).
	Extra []Transform
}

// OutputLoss is the loss of one model output and its weight in the total
// (nn.OutputLoss: model readers such as nn/keras return it without
// importing the step builder).
type OutputLoss = nn.OutputLoss

// Precision is a precision policy, as Keras names them: what a step
// computes and keeps for the backward pass in 16 bits. Weights, optimizer
// state, the loss and the logits stay float32 under every policy.
type Precision uint8

// The policies.
const (
	Float32 Precision = iota
	// MixedBFloat16 keeps each layer output (but the logits) for the
	// backward pass in bfloat16 and computes the products on bfloat16
	// operands with float32 sums.
	MixedBFloat16
	// MixedFloat16 keeps the saved layer outputs in float16, computes in
	// float32 (these CPUs have no float16 arithmetic) and scales the loss
	// dynamically (PyTorch GradScaler's defaults).
	MixedFloat16
	numPrecisions
)

var precisionNames = [numPrecisions]string{"float32", "mixed_bfloat16", "mixed_float16"}

// String returns the policy's Keras name.
func (p Precision) String() string {
	if p < numPrecisions {
		return precisionNames[p]
	}
	return fmt.Sprintf("Precision(%d)", uint8(p))
}

// Low reports whether the policy keeps activations in 16 bits.
func (p Precision) Low() bool { return p == MixedBFloat16 || p == MixedFloat16 }

// ParsePrecision returns the policy named s ("" is float32).
func ParsePrecision(s string) (Precision, error) {
	if s == "" {
		return Float32, nil
	}
	for p, name := range precisionNames {
		if s == name {
			return Precision(p), nil
		}
	}
	return 0, fmt.Errorf("unknown precision %q: want float32, mixed_bfloat16 or mixed_float16", s)
}

// Check returns an error for a configuration no step can be built from.
func (c *Config) Check() error {
	if c.Model == nil {
		return errors.New("step: no model")
	}
	if c.Precision >= numPrecisions {
		return fmt.Errorf("step: unknown precision %v (float32, mixed_bfloat16, mixed_float16)", c.Precision)
	}
	if c.Zero < 0 || c.Zero > 3 {
		return fmt.Errorf("step: ZeRO stage %d: want 0 (none), 1, 2 or 3", c.Zero)
	}
	if c.Ranks > 1 && (c.Rank < 0 || c.Rank >= c.Ranks) {
		return fmt.Errorf("step: rank %d of %d processes", c.Rank, c.Ranks)
	}
	for _, l := range c.Losses {
		if l.Loss == nil {
			return fmt.Errorf("step: output %d has a nil loss", l.Output)
		}
	}
	return nil
}

// losses returns the outputs' losses: Losses, or Loss (default sparse
// categorical cross-entropy) on output 0.
func (c *Config) losses() []OutputLoss {
	if len(c.Losses) > 0 {
		return c.Losses
	}
	l := c.Loss
	if l == nil {
		l = nn.SparseCategoricalCrossentropy{}
	}
	return []OutputLoss{{Output: 0, Loss: l, Weight: 1}}
}

func (c *Config) optimizer() optim.Optimizer {
	if c.Optimizer == nil {
		return &optim.Adam{}
	}
	return c.Optimizer
}

// Storage returns the dtype saved activations are kept in under the
// precision policy (Invalid for float32).
func (c *Config) Storage() tensor.DType {
	if c.Float32Storage {
		return tensor.Invalid
	}
	switch c.Precision {
	case MixedBFloat16:
		return tensor.BFloat16
	case MixedFloat16:
		return tensor.Float16
	}
	return tensor.Invalid
}

// LossScaling reports whether the step scales its loss (mixed_float16).
func (c *Config) LossScaling() bool { return c.Precision == MixedFloat16 && !c.Float32Storage }

// ZeroStage returns the ZeRO stage the step is built with: Zero (1 with
// ShardOptimizer), or 0 when the run has one process.
func (c *Config) ZeroStage() int {
	if c.Ranks <= 1 {
		return 0
	}
	if c.Zero == 0 && c.ShardOptimizer {
		return 1
	}
	return c.Zero
}

func (c *Config) sharded() bool { return c.ZeroStage() > 0 }

// BlockSize is the elements of one process's block of a tensor of n
// elements sharded over ranks: ⌈n/ranks⌉. Process r holds elements
// [r·BlockSize, (r+1)·BlockSize) of the flattened tensor, zero-padded past
// n (the last blocks may be all padding).
func BlockSize(n, ranks int) int { return (n + ranks - 1) / max(ranks, 1) }

// DefaultBucketBytes is the gradient bucket size of a data-parallel run
// when Config.BucketBytes is 0.
//
// PyTorch DDP's buckets are 25 MiB (the first 1 MiB) and Horovod fuses up
// to 64 MiB; both aim at networks where each all-reduce has a high fixed
// cost. Between processes of one machine (Open MPI's shared-memory
// transport) an all-reduce costs tens of microseconds plus the copy, so
// smaller buckets win: the first ones start earlier in backward, and the
// models of this project would fit one 25 MiB bucket, which cannot overlap
// anything. A gradient larger than the limit is a bucket of its own.
const DefaultBucketBytes = 1 << 20

func (c *Config) bucketBytes() int64 {
	if c.BucketBytes > 0 {
		return c.BucketBytes
	}
	return DefaultBucketBytes
}
