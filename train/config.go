package train

import (
	"errors"
	"fmt"
	"time"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
)

// Config describes a training run (Keras' compile and fit arguments).
type Config struct {
	// Model is any nn.Model. Fit feeds it from data.Examples, which hold
	// one input per example: the model must have one input.
	Model nn.Model
	Loss  nn.Loss // nil: sparse categorical cross-entropy
	// Losses, when set, give several outputs a loss each, summed with
	// their weights (Keras' loss_weights), instead of Loss on the only
	// output; Fit feeds one label, so they serve planning (PlanFor).
	Losses    []step.OutputLoss
	Optimizer optim.Optimizer // nil: Adam
	Schedule  optim.Schedule  // nil: constant 1e-3
	ClipNorm  float64         // > 0: clip gradients by global norm
	Epochs    int
	Batch     int
	Seed      uint64
	Budget    int64 // bytes; <= 0: no budget
	// InputBudget is the input pipeline's budget when the training
	// batches come through one (Augmented, Pipeline, a streamed FromSet):
	// reserved in the plan as input, the most the pipeline may hold (0:
	// data.PipelineBudget of the batch and the examples' size).
	InputBudget int64
	// BudgetSource says where Budget came from, for reports ("--budget
	// 100MiB", "the container's memory limit (...) of 200.00 MiB ...").
	BudgetSource string
	// EvalBatch is the batch size of evaluation (0: Batch).
	EvalBatch int
	Callbacks []Callback
	// CheckpointDir, when set, receives a checkpoint at each epoch end;
	// with Resume, training continues from the newest one there.
	CheckpointDir   string
	Resume          bool
	KeepCheckpoints int // 0: keep 3
	// CheckpointEvery > 0 also writes a checkpoint every that many
	// optimizer steps, at the exact position in the epoch: a resumed run
	// continues from there bit for bit.
	CheckpointEvery int64
	// Interrupt, when it fires (a receive succeeds), makes Fit finish the
	// step in progress, write a checkpoint of where it stands (with
	// CheckpointDir) and return an *Interrupted: how a SIGTERM from a job
	// scheduler stops a run without losing it.
	Interrupt <-chan struct{}
	// Live, when set, is the memory the run may reserve now, which Fit
	// follows (a LiveBudget follows the container's limit): read after
	// every step, when it falls below the running plan the next step is
	// re-planned, cheapest first (more micro-batches, then recomputation,
	// then mixed_bfloat16 activations with LivePrecision), its memory
	// given back to the OS at once; when a faster plan has fitted for
	// LiveSettle (0: DefaultLiveSettle) it grows back. Variables are kept,
	// so no step is lost or applied twice. When no plan fits, Fit writes a
	// checkpoint and returns a *BudgetExhausted. With Comm, every process
	// agrees at each step: all stop when any is interrupted, and all move
	// to the most frugal plan any of them needs.
	Live          Live
	LiveSettle    time.Duration
	LivePrecision bool
	// Log, when set, receives the trainer's own messages as they happen:
	// which checkpoint a resume starts from and which damaged ones it
	// passed over, re-plans under a lowered budget.
	Log func(msg string)
	// Warmup steps are left out of SamplesPerSec (20, as the peers).
	Warmup int
	// Threads is how many threads the run's host backend has (0: one): the
	// one setting that sizes both the plan (fused chains split over them,
	// packing scratch per thread) and the backend's worker pool.
	Threads int
	// Backend runs the steps (nil: the host, backend/cpu, with Threads
	// threads, which the trainer closes with itself). backend/sim runs
	// them on a simulated device.
	Backend runtime.Backend
	// ownBackend: defaults made Backend, and Close closes it
	ownBackend bool
	// MaxSteps, when > 0, ends training after that many optimizer steps
	// (the epoch in progress ends there).
	MaxSteps int64
	// ShardOptimizer keeps 1/Size of the optimizer state on each process
	// (ZeRO stage 1; with Comm only).
	ShardOptimizer bool
	// Zero is the ZeRO stage of a data-parallel run (step.Config.Zero): 1
	// shards the optimizer state over the processes, 2 also the gradients,
	// 3 also the parameters; 0 none (ShardOptimizer is stage 1). Sharded
	// variables are gathered whole into checkpoints and saved models, so
	// any number of processes can resume from them.
	Zero int
	// Comm, when it has more than one process, makes the run data-parallel:
	// each process trains on its share of every batch (Batch is the global
	// batch, as Keras' tf.distribute; each runs Batch/Size), gradients are
	// summed over the processes (weighted by their shares, so the update is
	// the one batch's) in buckets whose all-reduce starts as soon as
	// backward has produced them, weights start from rank 0's, and only
	// rank 0 writes checkpoints. dist.Comm provides it.
	Comm Collective
	// BucketBytes is the size of a gradient bucket of a data-parallel run
	// (0: step.DefaultBucketBytes).
	BucketBytes int64
	// StrictMemory makes memory growth after the first epoch an error
	// (*LeakError) instead of a warning in History.Leaks; NoWatchdog turns
	// the check off (it forces two garbage collections per epoch).
	StrictMemory bool
	NoWatchdog   bool
	// Precision is the policy (step.Float32, the zero value;
	// step.MixedBFloat16, step.MixedFloat16): weights, optimizer state,
	// the loss and the logits stay float32; each other layer output is
	// kept for the backward pass as a 16-bit copy. mixed_float16 adds
	// dynamic loss scaling (PyTorch GradScaler's defaults: scale 65536,
	// halved and the step skipped when a gradient is not finite, doubled
	// after 2000 good steps).
	Precision step.Precision
	// Remat recomputes activations in the backward pass instead of keeping
	// them, but for every ⌈√L⌉-th layer output (gradient checkpointing).
	Remat bool
	// buckets are a bucketed text's lengths (forBuckets), ascending
	buckets []int
	// storage is what compileAll chose for a 16-bit precision policy (see
	// Storage).
	storage     StorageChoice
	storageNote string
	// Accumulate, when > 1, splits each batch into that many equal
	// micro-batches whose gradients are summed before one update (the
	// effective batch stays Batch). BatchNormalization sees each
	// micro-batch as a batch, as with Keras' gradient_accumulation_steps.
	Accumulate int
}

// Collective is what a data-parallel run needs of its processes.
type Collective interface {
	runtime.Collective
	Broadcast(buf []byte, root int) error
}

// Loss scaling constants: torch.cuda.amp.GradScaler's defaults.
const (
	initLossScale  = 65536
	growthInterval = 2000
)

func (c *Config) defaults() {
	if c.Loss == nil {
		c.Loss = nn.SparseCategoricalCrossentropy{}
	}
	if c.Optimizer == nil {
		c.Optimizer = &optim.Adam{}
	}
	if c.Schedule == nil {
		c.Schedule = optim.Constant(1e-3)
	}
	if c.Warmup == 0 {
		c.Warmup = 20
	}
	if c.KeepCheckpoints == 0 {
		c.KeepCheckpoints = 3
	}
	if c.Backend == nil {
		c.Backend, c.ownBackend = cpu.New(c.Threads), true
	}
}

// check refuses a configuration no run can have.
func (c *Config) check() error {
	if c.Model == nil || c.Batch <= 0 || c.Epochs < 0 {
		return errors.New("train: a model, a positive batch size and epochs >= 0 are required")
	}
	sc := c.stepConfig()
	if err := sc.Check(); err != nil {
		return fmt.Errorf("train: %w", err)
	}
	return nil
}

// closeBackend closes the backend defaults made (its worker threads).
func (c *Config) closeBackend() {
	if cl, ok := c.Backend.(interface{ Close() }); ok && c.ownBackend {
		cl.Close()
	}
	c.ownBackend = false
}

// stepConfig is the step builder's configuration of the run.
func (c *Config) stepConfig() step.Config {
	prec := c.Precision
	if c.storage == StorageFloat32 {
		prec = step.Float32
	}
	s := step.Config{Model: c.Model, Loss: c.Loss, Losses: c.Losses, Optimizer: c.Optimizer, ClipNorm: c.ClipNorm, Precision: prec,
		Float32Storage: c.storage == StorageFloat32Activations,
		Remat:          c.Remat, Seed: c.Seed, Target: c.Backend, ShardOptimizer: c.ShardOptimizer, Zero: c.Zero, BucketBytes: c.BucketBytes}
	if c.ranks() > 1 {
		s.Ranks, s.Rank = c.ranks(), c.Comm.Rank()
	}
	return s
}

// evalBatch is the evaluation batch size: EvalBatch, or the (micro-)batch
// of one process (each process evaluates the whole set, as they all hold
// the same weights).
func (c *Config) evalBatch() int {
	if c.EvalBatch > 0 {
		return c.EvalBatch
	}
	return max(1, c.Batch/c.accumulate()/c.ranks())
}

// ranks returns the number of processes of the run (1 without Comm).
func (c *Config) ranks() int {
	if c.Comm == nil {
		return 1
	}
	return max(1, c.Comm.Size())
}

// accumulate is the number of micro-batches per update (at least 1).
func (c *Config) accumulate() int { return max(1, c.Accumulate) }

func (c *Config) lossScaling() bool {
	return c.Precision == step.MixedFloat16 && c.storage == StorageLow
}

// zeroStage is the ZeRO stage of the run's step (0 with one process).
func (c *Config) zeroStage() int {
	sc := c.stepConfig()
	return sc.ZeroStage()
}

// input returns the model's one input (Examples feed one).
func (c *Config) input() (nn.Input, bool) {
	ins := c.Model.Inputs()
	if len(ins) != 1 {
		return nn.Input{}, false
	}
	return ins[0], true
}

// inputDType returns the dtype of the model's first input.
func (c *Config) inputDType() tensor.DType {
	if in, ok := c.input(); ok {
		return in.Type()
	}
	return tensor.Float32
}
