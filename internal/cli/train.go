package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	goruntime "runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/headroom-ml/headroom/dist"
	"github.com/headroom-ml/headroom/internal/atomicfile"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/train"
)

// trainFlags are train's own flags, beside the options it shares with
// plan, the data flags and the fit flags.
type trainFlags struct {
	ckpt, csv, save, cpuProfile, bucketSize string
	instrProfile                            string
	every, maxSteps                         int64
	zero                                    int
	resume, quiet, strict, shard            bool
	fitBudget, allowPrecision, followLimit  bool
	rankTimeout                             time.Duration
}

func (f *trainFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.ckpt, "checkpoint-dir", "", "write a checkpoint at each epoch end (and on SIGTERM/SIGINT, and with --checkpoint-every) to this directory")
	fs.Int64Var(&f.every, "checkpoint-every", 0, "also write a checkpoint every this many optimizer steps, at the exact position in the epoch")
	fs.BoolVar(&f.resume, "resume", false, "continue from the newest checkpoint in --checkpoint-dir")
	fs.StringVar(&f.csv, "csv", "", "append one line per epoch to this CSV file")
	fs.BoolVar(&f.quiet, "quiet", false, "print only the RESULT line")
	fs.Int64Var(&f.maxSteps, "max-steps", 0, "stop after this many optimizer steps (0: run every epoch)")
	fs.StringVar(&f.save, "save", "", "write the model to this safetensors file: its weights and, in the metadata, its architecture and preprocessing (headroom predict, evaluate, export and generate read it); a name ending in .keras writes a Keras 3 archive")
	fs.DurationVar(&f.rankTimeout, "rank-timeout", 60*time.Second, "under mpirun: how long a collective may wait for the other processes before the job fails naming the missing rank")
	fs.StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of training to this file (go tool pprof)")
	fs.StringVar(&f.instrProfile, "instr-profile", "", "after training, time every instruction of the training step (5 more runs of the last batch) and write a table of each one's op, owner, shape, kernel, time and GFLOP/s to this file")
	fs.BoolVar(&f.strict, "strict-memory", false, "fail when memory grows after the first epoch (default: warn)")
	fs.BoolVar(&f.shard, "shard-optimizer", false, "under mpirun: keep 1/ranks of the optimizer state on each process (--zero 1)")
	fs.IntVar(&f.zero, "zero", 0, zeroUsage)
	fs.BoolVar(&f.fitBudget, "fit-to-budget", false, "choose micro-batches, recomputation, streaming the data (and, with --allow-precision, 16-bit activations) so the run fits the budget, keeping the effective batch")
	fs.BoolVar(&f.allowPrecision, "allow-precision", false, "let --fit-to-budget, and a budget following the container, choose mixed_bfloat16")
	fs.BoolVar(&f.followLimit, "follow-limit", true, "in a container (no --budget): follow its memory limit while training, re-planning the step when a neighbour grows or the limit is lowered, and growing back when room returns (exit status 75, with a checkpoint, if nothing fits)")
	fs.StringVar(&f.bucketSize, "bucket-size", "1MiB", "under mpirun: gradients are all-reduced in buckets of about this size, each started as soon as backward has produced it")
}

// check refuses flags that do not go together, before anything runs.
func (f *trainFlags) check() error {
	if f.resume && f.ckpt == "" {
		return usagef("--resume needs --checkpoint-dir")
	}
	if f.every < 0 || (f.every > 0 && f.ckpt == "") {
		return usagef("--checkpoint-every %d needs a positive count and --checkpoint-dir", f.every)
	}
	if b, err := mem.ParseBytes(f.bucketSize); err != nil || b <= 0 {
		return usagef("--bucket-size %q: want a size such as 1MiB", f.bucketSize)
	}
	_, err := zeroStage(f.zero, f.shard)
	return err
}

// runTrain trains as the flags say: the data and the model, train.New's
// plan (printed before step 1), train.Fit, the RESULT line.
func runTrain(args []string, stdout, stderr io.Writer) error {
	r, err := parseTrain(args, stdout)
	if err != nil {
		return err
	}
	defer r.close()
	if err := r.setup(); err != nil {
		return err
	}
	t, err := r.newTrainer()
	if err != nil {
		return err
	}
	defer t.Close()
	h, err := r.fit(t, stderr)
	if err != nil {
		// said now, before the deferred close meets the other ranks in
		// the final barrier: once a rank of an MPI run exits with 143,
		// mpirun ends the others with a SIGTERM this process no longer
		// catches (it caught its own), which would lose the message
		return said(r.stopped(err), stderr)
	}
	if err := r.report(t, h); err != nil {
		return err
	}
	return r.instrProfile(t, stderr)
}

// parseTrain parses train's flags.
func parseTrain(args []string, stdout io.Writer) (*trainRun, error) {
	r := &trainRun{stdout: stdout, out: stdout}
	fs := newFlagSet("train", stdout)
	r.o.register(fs)
	r.o.dev.register(fs, false)
	r.df.register(fs, true)
	r.kf.register(fs)
	r.f.register(fs)
	if err := r.o.parse(fs, args, r.df.given); err != nil {
		return nil, err
	}
	if err := r.f.check(); err != nil {
		return nil, err
	}
	if !r.df.given() {
		if err := r.df.unused(fs); err != nil {
			return nil, err
		}
	}
	if r.f.quiet {
		r.out = io.Discard
	}
	return r, nil
}

// fit trains, with a CPU profile when asked (written atomically, as every
// file headroom writes: an existing file is never left half-written).
func (r *trainRun) fit(t *train.Trainer, stderr io.Writer) (*train.History, error) {
	if r.f.cpuProfile != "" {
		p, err := atomicfile.Create(atomicfile.OS, r.f.cpuProfile, 0o666)
		if err != nil {
			return nil, err
		}
		defer p.Abort()
		if err := pprof.StartCPUProfile(p); err != nil {
			return nil, err
		}
		defer func() {
			pprof.StopCPUProfile()
			if err := p.Commit(); err != nil {
				fmt.Fprintf(stderr, "headroom: writing the CPU profile %s failed: %v\n", r.f.cpuProfile, err)
			}
		}()
	}
	h, err := t.Fit(context.Background())
	r.progress.finish()
	if r.tb != nil {
		if cerr := r.tb.Close(); err == nil {
			err = cerr
		}
	}
	return h, err
}

// stopped turns a run ended by SIGTERM or SIGINT into its exit status
// (128 + the signal) and a message naming the checkpoint.
func (r *trainRun) stopped(err error) error {
	var in *train.Interrupted
	var ex *train.BudgetExhausted
	if errors.As(err, &ex) {
		msg := ex.Error()
		if ex.Checkpoint != "" {
			msg += fmt.Sprintf(": resume with --resume --checkpoint-dir %s", r.f.ckpt)
		}
		return &exhaustedError{msg: strings.TrimPrefix(msg, "train: ")}
	}
	if !errors.As(err, &in) {
		return err
	}
	sig := r.stop.signal()
	msg := fmt.Sprintf("stopped by %s after step %d (epoch %d, batch %d)", signalName(sig), in.Step, in.Epoch, in.Batch)
	if sig == nil && in.ByPeer { // another rank was signalled: stop as it did
		sig = syscall.SIGTERM
		msg = fmt.Sprintf("stopped with the other processes of the run (one was signalled) after step %d (epoch %d, batch %d)", in.Step, in.Epoch, in.Batch)
	}
	switch {
	case in.Checkpoint != "":
		msg += fmt.Sprintf("; checkpoint written to %s: resume with --resume --checkpoint-dir %s", in.Checkpoint, r.f.ckpt)
	case r.f.ckpt != "": // another rank of a data-parallel run wrote it
		msg += fmt.Sprintf("; rank 0 wrote the run's checkpoint to %s: resume with --resume --checkpoint-dir %s", r.f.ckpt, r.f.ckpt)
	default:
		msg += "; no --checkpoint-dir was given, so nothing was saved"
	}
	return &stoppedError{signal: signalNumber(sig), msg: msg}
}

// openComm joins the processes of a data-parallel run (under mpirun, a
// binary built with -tags mpi; otherwise this is one process).
func (r *trainRun) openComm() error {
	comm, err := dist.Open(dist.Options{Timeout: r.f.rankTimeout})
	if err != nil {
		return err
	}
	r.comm = comm
	if comm.Size() > 1 {
		bucket, _ := mem.ParseBytes(r.f.bucketSize)
		r.cfg.Comm, r.cfg.BucketBytes = comm, bucket
		r.cfg.Zero, _ = zeroStage(r.f.zero, r.f.shard) // (checked with the flags)
		// MPI's progress thread needs a P of its own beside the kernels'
		// threads: with GOMAXPROCS = --threads a completed collective waits
		// for the scheduler to take the P back from the thread's cgo call,
		// up to milliseconds each time (see dist's package comment)
		goruntime.GOMAXPROCS(r.o.threads + 1)
		if comm.Rank() != 0 { // one process reports
			r.stdout, r.out, r.f.quiet = io.Discard, io.Discard, true
		}
	}
	return nil
}

// checkFiles makes the checkpoint directory and checks the CSV log before
// step 1: a run that cannot write them fails before it trains, and never
// writes over a user's file.
func (r *trainRun) checkFiles() error {
	if r.f.ckpt != "" { // as Keras' ModelCheckpoint: make it, and fail before step 1 if we cannot
		if err := os.MkdirAll(r.f.ckpt, 0o755); err != nil {
			return fmt.Errorf("--checkpoint-dir: %w", err)
		}
	}
	if r.f.save != "" && isKerasArchive(r.f.save) {
		if err := r.o.checkKerasSave(r.cfg.Model); err != nil {
			return err
		}
	}
	if r.f.csv != "" {
		logger := &train.CSVLogger{Path: r.f.csv}
		if err := logger.Check(); err != nil {
			return fmt.Errorf("--csv: %w", err)
		}
		r.cfg.Callbacks = append(r.cfg.Callbacks, logger)
	}
	if r.o.profileDir != "" {
		r.tb = &train.TensorBoard{Dir: r.o.profileDir}
		r.cfg.Callbacks = append(r.cfg.Callbacks, r.tb)
	}
	return nil
}
