package cli

import (
	"fmt"
	"io"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/dist"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/profile"
	"github.com/headroom-ml/headroom/train"
)

// trainRun is one `headroom train`: its flags, and what they resolve to
// (the data, the configuration), wired to package train.
type trainRun struct {
	o        options
	df       dataFlags
	kf       fitFlags
	f        trainFlags
	stdout   io.Writer // the RESULT line
	out      io.Writer // everything else (io.Discard with --quiet)
	data     *train.Data
	info     data.SetInfo
	cfg      train.Config
	comm     dist.Comm
	tb       *train.TensorBoard
	progress *progress
	stop     *signals
	live     *train.LiveBudget // following the container's limit (nil: not)
}

// setup resolves the data (train decides whether to load or stream it
// under the budget, reading nothing large yet), builds the configuration
// and wires the callbacks, the processes and the signals.
func (r *trainRun) setup() error {
	var err error
	if r.data, err = r.o.runData(&r.df); err != nil {
		return err
	}
	if r.info, err = r.o.describe(r.data, &r.df); err != nil {
		return err
	}
	if r.cfg, err = r.o.runConfig(r.info); err != nil {
		return err
	}
	if err := r.kf.apply(&r.cfg, r.data, r.info, r.o.lr); err != nil {
		return err
	}
	if r.cfg.InputBudget, err = r.df.pipelineBytes(); err != nil {
		return err
	}
	f := &r.f
	r.cfg.CheckpointDir, r.cfg.Resume, r.cfg.StrictMemory, r.cfg.MaxSteps, r.cfg.CheckpointEvery = f.ckpt, f.resume, f.strict, f.maxSteps, f.every
	if err := r.checkFiles(); err != nil {
		return err
	}
	if err := r.openComm(); err != nil {
		return err
	}
	r.progress = &progress{w: r.out, tty: isTerminal(r.stdout) && !f.quiet, epochs: r.cfg.Epochs, heldOut: r.o.heldOut()}
	r.cfg.Callbacks = append(r.cfg.Callbacks, r.progress)
	r.cfg.Log = func(msg string) { fmt.Fprintf(r.out, "headroom: %s\n", msg) }
	// SIGTERM (Slurm, Kubernetes, spot instances) and SIGINT (Ctrl-C) end
	// the step in progress, write a checkpoint and exit 128+signal; a
	// second one is not caught and ends the process at once.
	r.stop = onSignals()
	r.cfg.Interrupt = r.stop.fired
	return r.follow()
}

// follow makes the budget follow the container's limit while training,
// when it came from one (no --budget) and --follow-limit is on.
func (r *trainRun) follow() error {
	if !r.f.followLimit || r.o.budgetBytes > 0 || r.o.processErr != nil || r.o.dev.isCUDA() { // a GPU's budget is its own
		return nil
	}
	live, err := r.o.process.Follow(0)
	if err != nil {
		fmt.Fprintf(r.out, "warning: the budget will not follow the container's limit while training: %v\n", err)
		return nil
	}
	if live != nil {
		r.live = live
		r.cfg.Live, r.cfg.LivePrecision = live, r.f.allowPrecision
	}
	return nil
}

// newTrainer chooses a way to fit the budget (--fit-to-budget), reserves
// the run (train.New: refused before step 1 when it does not fit) and
// prints its plan.
func (r *trainRun) newTrainer() (*train.Trainer, error) {
	if r.f.fitBudget {
		if err := r.o.planCheck(); err != nil {
			return nil, err
		}
		chosen, cands, err := train.FitToBudget(r.cfg, r.data, r.cfg.Budget, r.f.allowPrecision)
		if len(cands) > 0 {
			fmt.Fprint(r.out, train.Describe(cands))
		}
		if err != nil {
			return nil, err
		}
		r.cfg = chosen
	}
	t, err := train.New(r.cfg, r.data)
	if err != nil {
		return nil, err
	}
	if err := r.o.kerasStart(r.out, t); err != nil {
		t.Close()
		return nil, err
	}
	r.printPlan(t)
	return t, nil
}

// report saves the model and the profile, says what the run found, and
// prints the RESULT line.
func (r *trainRun) report(t *train.Trainer, h *train.History) error {
	if h.Done {
		fmt.Fprintf(r.stdout, "headroom: nothing to do: %s is at the end of the run (%d epochs", h.ResumedFrom, r.cfg.Epochs)
		if r.cfg.MaxSteps > 0 {
			fmt.Fprintf(r.stdout, ", --max-steps %d", r.cfg.MaxSteps)
		}
		fmt.Fprintln(r.stdout, ")")
		return nil
	}
	if r.f.save != "" && isKerasArchive(r.f.save) { // a Keras 3 .keras archive
		if err := r.o.saveKeras(r.out, r.f.save, r.cfg.Model, t); err != nil {
			return err
		}
	} else if r.f.save != "" { // every process takes part; rank 0 writes
		if err := t.SaveModel(r.f.save, r.o.preprocessing(r.info, &r.df), r.o.registered(r.info)); err != nil {
			return err
		}
		if r.o.isText() {
			fmt.Fprintf(r.out, "headroom: saved the model to %s (headroom generate --load %s)\n", r.f.save, r.f.save)
		}
	}
	if r.o.profileDir != "" {
		if err := profile.WriteAll(r.o.profileDir, t.Plan, profileRun(h), r.o.modelName()); err != nil {
			return err
		}
		fmt.Fprintf(r.out, "headroom: profile written to %s (go tool pprof -top %s/profile.pb.gz; open report.html; trace.json in Perfetto; tensorboard --logdir %s)\n", r.o.profileDir, r.o.profileDir, r.o.profileDir)
	}
	for _, l := range h.Leaks {
		fmt.Fprintf(r.out, "warning: %v\n", l)
	}
	for _, e := range h.Events {
		if !e.Logged { // the live budget's moves were shown as they happened
			fmt.Fprintf(r.out, "headroom: %v\n", e)
		}
	}
	if len(h.Growth) > 0 {
		fmt.Fprintf(r.out, "warning: the ledger grew by %d B after the first epoch; largest growth: %s (%s) +%d B\n",
			h.LedgerGrowth, h.Growth[0].Owner, h.Growth[0].Category, h.Growth[0].Bytes)
	}
	if c, err := cpu.ChoicesFromEnv(); err == nil && c.FileErr() != nil {
		fmt.Fprintf(r.out, "warning: the kernel choices file could not be read or written, so the next run measures again: %v\n", c.FileErr())
	}
	res, err := r.result(t, h)
	if err != nil {
		return err
	}
	fmt.Fprintln(r.stdout, res)
	return nil
}

// close lets go of the processes and the signals.
func (r *trainRun) close() {
	if r.live != nil {
		r.live.Close()
	}
	if r.stop != nil {
		r.stop.release()
	}
	if r.comm != nil {
		r.comm.Close()
	}
	r.o.dev.close()
}

// boundRuntime bounds the Go runtime's memory to what the budget leaves
// beside the reservation (debug.SetMemoryLimit) and says so.
func (r *trainRun) boundRuntime(t *train.Trainer) {
	if r.o.processErr != nil {
		return
	}
	if bound := r.o.process.BoundRuntime(t.Planned, t.HeapBytes()); bound > 0 {
		fmt.Fprintf(r.out, "  the Go runtime's own memory (its heap, with the data sets in it) is bounded at %s (debug.SetMemoryLimit)\n", mem.FormatBytes(bound))
	}
}
