// Command gpucheck is the hardware check of the CUDA backend, the Go half
// of scripts/gpu-check.sh (which builds it with -tags cuda and runs it on a
// machine with an NVIDIA GPU): for each reference model it trains the
// same steps on the host and on the GPU from the same seed and prints one
// row of a table (Markdown, to be pasted into BENCHMARKS.md):
//
//   - weights: the largest difference of the final weights from the
//     host's, relative to each variable's largest magnitude (1e-4 at most;
//     trained with SGD and momentum for this, see weightsOptimizer; the
//     other columns are the workload's own run, with Adam);
//   - planned == measured: the plan's peak against the device ledger's;
//   - driver: cuMemGetInfo's drop while the plan was reserved, against what
//     the plan's allocations take at the driver's 2 MiB granularity (the
//     CUDA context and cuBLAS's handle were made before the first reading,
//     so they are not in it; the header states the free memory they left);
//   - OOM: a budget one byte under the plan fails before step 1 with
//     *mem.OOMError, nothing left mapped;
//   - fit: --fit-to-budget's choice under half the plan trains within it
//     (see checkFit where no way fits in half);
//   - speed and memory: the GPU run's samples/s and device ledger peak,
//     beside PyTorch's (eager and torch.compile) read from -torch (JSON
//     lines written by scripts/gpu_check_torch.py), as ratios.
//
// The exit status is 0 when every correctness check passed (weights,
// planned == measured, driver, OOM, fit), 1 when one failed (the table
// says which), 2 when the check could not run. The speed and memory
// targets (samples/s at least PyTorch eager's, peak at most 0.7 of
// PyTorch's) are reported below the table as met or missed; they do not
// change the exit status.
//
//	gpucheck [-device 0] [-steps 50] [-models mlp,cnn,resnet,gpt] [-torch FILE] [-emulated]
//
// -emulated runs the check on an emulated GPU (cuda.NewEmulated: device
// memory in host memory, kernels run by the PTX interpreter) with small
// versions of the models, for checking the check itself on a machine
// without a GPU (its test does).
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/headroom-ml/headroom/backend/cuda"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/train"
)

func main() {
	o, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		os.Exit(2)
	}
	ok, err := run(os.Stdout, o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "gpucheck:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// options configure a check.
type options struct {
	device   int
	steps    int64
	models   []string
	torch    string
	emulated bool // an emulated GPU and small models
	threads  int
	log      io.Writer // how long each part took (stderr)
	// plant, when set, changes the GPU run's config only: a planted
	// difference the check must report (tests).
	plant func(*train.Config)
}

// parseFlags parses gpucheck's command line.
func parseFlags(args []string, errs io.Writer) (options, error) {
	o := options{log: errs}
	fs := flag.NewFlagSet("gpucheck", flag.ContinueOnError)
	fs.SetOutput(errs)
	fs.IntVar(&o.device, "device", 0, "the CUDA device")
	fs.Int64Var(&o.steps, "steps", 50, "optimizer steps of each run")
	models := fs.String("models", "mlp,cnn,resnet,gpt", "the reference models to check")
	fs.StringVar(&o.torch, "torch", "", "PyTorch's results: JSON lines of scripts/gpu_check_torch.py")
	fs.BoolVar(&o.emulated, "emulated", false, "check on an emulated GPU (the PTX interpreter) with small models, not a device")
	fs.IntVar(&o.threads, "threads", runtime.NumCPU(), "the host run's threads")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(errs, "gpucheck: unexpected arguments %q\n", fs.Args())
		return o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	o.models = strings.Split(*models, ",")
	return o, nil
}

// run checks every model and prints the table; it reports whether every
// correctness check passed.
func run(w io.Writer, o options) (bool, error) {
	torch, err := readTorch(o.torch)
	if err != nil {
		return false, err
	}
	target, err := openTarget(o)
	if err != nil {
		return false, err
	}
	defer target.Close()
	g := target.GPU()
	free, total, err := g.MemInfo()
	if err != nil {
		return false, err
	}
	maj, min := g.ComputeCapability()
	what := g.Model()
	if o.emulated {
		what += ", small models"
	}
	fmt.Fprintf(w, "gpucheck: %s, compute capability %d.%d, %s free of %s after the CUDA context and cuBLAS handle; kernels for %s; %d steps a run\n\n",
		what, maj, min, mem.FormatBytes(free), mem.FormatBytes(total), target.Arch(), o.steps)
	var rows []*row
	for _, name := range o.models {
		r, err := checkModel(target, name, o)
		if err != nil {
			return false, fmt.Errorf("%s: %w", name, err)
		}
		r.torch = torch[name]
		rows = append(rows, r)
	}
	return printTable(w, rows), nil
}

// openTarget opens the device, or an emulated GPU.
func openTarget(o options) (*cuda.Target, error) {
	if o.emulated {
		return cuda.NewEmulated(4 << 30)
	}
	return cuda.New(o.device)
}
