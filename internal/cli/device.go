package cli

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/headroom-ml/headroom/backend/cuda"
	"github.com/headroom-ml/headroom/backend/cuda/ptx"
	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/train"
)

// deviceFlags choose the device the steps run on: the host (cpu, the
// default) or a GPU (cuda, cuda:N; a binary built with -tags cuda). On a
// GPU the plan's budget is the device's: its free memory (cuMemGetInfo),
// or --device-memory.
type deviceFlags struct {
	device      string
	memory      string // --device-memory
	memoryBytes int64
	arch        string // --device-arch: what plan writes kernels for without a GPU
	ptxDir      string // plan --ptx
	target      *cuda.Target
}

// register adds --device and, for plan, --device-memory, --device-arch
// and --ptx.
func (d *deviceFlags) register(fs *flag.FlagSet, plan bool) {
	fs.StringVar(&d.device, "device", "cpu", "where the steps run: cpu, or cuda[:N] (an NVIDIA GPU; needs a binary built with -tags cuda): the plan's budget is then the GPU's free memory")
	fs.StringVar(&d.memory, "device-memory", "", "with --device cuda: the device memory the plan may take, e.g. 80GiB (default: the GPU's free memory); plan takes it without a GPU")
	if plan {
		fs.StringVar(&d.arch, "device-arch", "sm_90", "plan --device cuda --device-memory without a GPU: the compute capability to write kernels for (sm_80, sm_86, sm_89, sm_90)")
		fs.StringVar(&d.ptxDir, "ptx", "", "plan --device cuda: write the PTX of every kernel the run would load to this directory, one file each")
	}
}

// isCUDA reports whether --device names a GPU.
func (d *deviceFlags) isCUDA() bool { return strings.HasPrefix(d.device, "cuda") }

// check validates the flags.
func (d *deviceFlags) check() error {
	if d.device != "cpu" && !d.isCUDA() {
		return usagef("--device %q: want cpu, cuda or cuda:N", d.device)
	}
	if d.isCUDA() {
		if _, err := cuda.ParseDevice(d.device); err != nil {
			return &usageError{err}
		}
	}
	if d.memory != "" {
		b, err := mem.ParseBytes(d.memory)
		if err != nil || b <= 0 || !d.isCUDA() {
			return usagef("--device-memory %q: want a size such as 80GiB, with --device cuda", d.memory)
		}
		d.memoryBytes = b
	}
	if d.ptxDir != "" && !d.isCUDA() {
		return usagef("--ptx writes the kernels of a GPU run: give --device cuda")
	}
	return nil
}

// backend returns the GPU backend and its budget (nil for the host):
// planning without a GPU when plan gives --device-memory, else the GPU
// itself, opened once.
func (d *deviceFlags) backend(planOnly bool) (runtime.Backend, int64, string, error) {
	if !d.isCUDA() {
		return nil, 0, "", nil
	}
	if d.target != nil {
		return d.target, d.budget(), d.source(), nil
	}
	if planOnly && d.memoryBytes > 0 {
		major, minor, err := parseArch(d.arch)
		if err != nil {
			return nil, 0, "", err
		}
		if d.target, err = cuda.Planning(12080, major, minor, d.memoryBytes); err != nil {
			return nil, 0, "", err
		}
		return d.target, d.memoryBytes, fmt.Sprintf("--device-memory %s (no GPU: kernels for %s)", d.memory, d.target.Arch()), nil
	}
	ordinal, _ := cuda.ParseDevice(d.device)
	t, err := cuda.New(ordinal)
	if err != nil {
		if planOnly {
			return nil, 0, "", fmt.Errorf("%w (plan without a GPU: give --device-memory, e.g. 80GiB)", err)
		}
		return nil, 0, "", err
	}
	d.target = t
	return t, d.budget(), d.source(), nil
}

// budget is --device-memory, else the GPU's free memory now.
func (d *deviceFlags) budget() int64 {
	if d.memoryBytes > 0 {
		return d.memoryBytes
	}
	if g := d.target.GPU(); g != nil {
		if free, _, err := g.MemInfo(); err == nil {
			return free
		}
	}
	return 0
}

func (d *deviceFlags) source() string {
	if d.memoryBytes > 0 {
		return "--device-memory " + d.memory
	}
	g := d.target.GPU()
	return fmt.Sprintf("the free memory of %s (%s, cuMemGetInfo)", g.Name(), g.Model())
}

// close releases the GPU.
func (d *deviceFlags) close() {
	if d.target != nil {
		d.target.Close()
		d.target = nil
	}
}

// parseArch parses sm_XY.
func parseArch(s string) (major, minor int, err error) {
	v, err := strconv.Atoi(strings.TrimPrefix(s, "sm_"))
	if err != nil || !strings.HasPrefix(s, "sm_") || v < 60 {
		return 0, 0, usagef("--device-arch %q: want sm_80, sm_86, sm_89 or sm_90", s)
	}
	return v / 10, v % 10, nil
}

// writePTX writes every distinct kernel of progs, rendered for arch, to
// dir as NAME.ptx, and returns how many.
func writePTX(dir string, arch ptx.Arch, progs []*compile.Program) (int, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	seen := map[string]bool{}
	for _, p := range progs {
		for i := range p.Instrs {
			it := &p.Instrs[i]
			inN := make([]int, len(it.In))
			for k, b := range it.In {
				inN[k] = p.Plan.Buffers[b].Shape.Size()
			}
			l, err := ptx.Render(arch, it, inN)
			if err != nil {
				return 0, err
			}
			for _, k := range l.Kernels() {
				if seen[k.Name] {
					continue
				}
				seen[k.Name] = true
				if err := os.WriteFile(filepath.Join(dir, k.Name+".ptx"), []byte(k.Text), 0o644); err != nil {
					return 0, err
				}
			}
		}
	}
	return len(seen), nil
}

// writeKernels writes plan --ptx's kernels and says so (on stderr's
// behalf: not in the JSON).
func (o *options) writeKernels(w io.Writer, rp *train.RunPlan, asJSON bool) error {
	if o.dev.ptxDir == "" {
		return nil
	}
	n, err := writePTX(o.dev.ptxDir, o.dev.target.Arch(), rp.Programs)
	if err != nil {
		return err
	}
	if !asJSON {
		fmt.Fprintf(w, "wrote the PTX of %d kernels (%s) to %s\n", n, o.dev.target.Arch(), o.dev.ptxDir)
	}
	return nil
}
