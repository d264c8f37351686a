package cpu

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/internal/atomicfile"
	"github.com/headroom-ml/headroom/kernels"
)

// How a float32 convolution's algorithm (kernels.ConvAlgos: the direct
// register tiles, im2col's packed product or Winograd, for the forward
// product and each gradient) and a float32 matrix product's
// (kernels.MatMulAlgos: packed over the pool's threads or on one, or the
// register tiles unpacked) are picked. The algorithms sum in different
// orders, so the choice changes the last bits of a result, never the
// plan: every algorithm runs in the workspace and scratch the plan already
// holds (the larger of the candidates'), so planned == measured whatever
// is chosen.
//
//   - "measure" (the default): each convolution and matrix product shape
//     in a program is timed once, before step 1, with every algorithm that
//     can run it, on the program's own buffers, and the fastest kept.
//     Choices are kept in a file per machine (the CPU model, the threads
//     and the shape are its key), so a second run of the same plan times
//     nothing, and a run given a file picks what the file says: copy the
//     file to pin the choices on every machine of that CPU model.
//     Processes sharing the file take one choice per shape: a process
//     measures under the file's lock, after reading what others wrote
//     (merge). A line timed without a candidate that is offered now
//     (written before the candidate existed) is measured again (current).
//     Shapes are timed before a program of the backend has run, within
//     MeasureBudget a process; the others keep the rule, for a later run
//     to time.
//     As XLA's autotuning on GPUs, and unlike PyTorch's cudnn.benchmark,
//     this is the default: the rules of thumb were measured on one CPU,
//     and the machine a job lands on is rarely chosen. The price is that
//     two machines of one model with different files may pick different
//     algorithms, and so other last bits (so may two thread counts).
//   - "rule": the built-in rules of thumb (kernels.ConvAuto,
//     kernels.MatMulPacked), nothing timed. Two runs of one command give
//     the same bits on any machine, at any thread count.
//   - "direct", "im2col", "winograd" or "winograd4": that convolution algorithm
//     wherever it can run, matrix products by the rule; "packed1", "tiles"
//     or "tiles1": that matrix product algorithm wherever it can run,
//     convolutions by the rule (tests force each candidate so).
//
// Winograd's F(2×2, 3×3) and F(4×4, 3×3) (kernels/winograd.go) are
// candidates for 3×3 stride-1 products; they round differently from the
// others (their error is in docs/kernels.md), so the rule never picks
// them, and they can be left out of the measurement.
//
// HEADROOM_KERNELS sets the mode of every backend in the process;
// HEADROOM_KERNEL_CACHE names the file (default: the user's cache
// directory, headroom/kernel-choices.tsv); HEADROOM_WINOGRAD=off leaves
// Winograd out (a measured choice of it in the file is measured again).

// Choices picks convolution and matrix product algorithms for a backend.
// Its methods are safe for concurrent use.
type Choices struct {
	mode     string             // rule, measure, or an algorithm forced
	force    kernels.ConvAlgo   // direct, im2col, winograd or winograd4 (else ConvAuto)
	forceMM  kernels.MatMulAlgo // packed1, tiles or tiles1 (else MatMulPacked)
	winograd bool               // Winograd is a candidate
	file     string             // measure: the choices' file ("": kept in memory only)
	cpu      string             // the CPU model, the key's first part

	measuring sync.Mutex // held while a program's shapes are timed: one at a time

	mu       sync.Mutex
	loaded   bool
	table    map[string]choice // by key: what the file holds and what was measured
	used     map[string]bool   // keys a bound product took: their choice stays for the process
	spent    time.Duration     // measuring, over every program bound
	budget   time.Duration     // the most spent measuring in one process (MeasureBudget)
	timed    int               // shapes measured
	deferred int               // shapes left to the rule once the budget was spent
	fileErr  error             // the last failure to open or write the file
}

// choice is one line of the file.
type choice struct {
	algo  string // the algorithm's name (kernels.ConvAlgo, kernels.MatMulAlgo)
	times string // what each candidate took, for the reader: "direct=1.2ms,im2col=2.3ms"
}

// NewChoices returns the choices of mode ("rule", "measure", "direct",
// "im2col", "winograd", "winograd4", "packed1", "tiles" or "tiles1") with file the
// measured choices' file ("" keeps them in memory); without winograd,
// Winograd is never picked.
func NewChoices(mode, file string, winograd bool) (*Choices, error) {
	c := &Choices{mode: mode, file: file, cpu: cpuModel(), table: map[string]choice{}, used: map[string]bool{}, winograd: winograd,
		budget: MeasureBudget}
	switch mode {
	case "", "measure":
		c.mode = "measure"
	case "rule":
	case "direct", "im2col", "winograd", "winograd4":
		c.force, _ = kernels.ParseConvAlgo(mode)
	case "packed1", "tiles", "tiles1":
		c.forceMM, _ = kernels.ParseMatMulAlgo(mode)
	default:
		return nil, fmt.Errorf("kernel choice %q: want rule, measure, direct, im2col, winograd, winograd4, packed1, tiles or tiles1", mode)
	}
	if c.force.IsWinograd() && !winograd {
		return nil, fmt.Errorf("kernel choice %s with Winograd turned off", mode)
	}
	return c, nil
}

var (
	envChoicesOnce sync.Once
	envChoices     *Choices
	envChoicesErr  error
)

// ChoicesFromEnv returns the process's choices: HEADROOM_KERNELS's mode,
// HEADROOM_KERNEL_CACHE's file and HEADROOM_WINOGRAD, made once.
func ChoicesFromEnv() (*Choices, error) {
	envChoicesOnce.Do(func() {
		file := os.Getenv("HEADROOM_KERNEL_CACHE")
		if file == "" {
			if dir, err := os.UserCacheDir(); err == nil {
				file = filepath.Join(dir, "headroom", "kernel-choices.tsv")
			}
		}
		winograd := true
		switch w := os.Getenv("HEADROOM_WINOGRAD"); w {
		case "", "on", "1":
		case "off", "0":
			winograd = false
		default:
			envChoicesErr = fmt.Errorf("HEADROOM_WINOGRAD=%q: want on or off", w)
			return
		}
		envChoices, envChoicesErr = NewChoices(os.Getenv("HEADROOM_KERNELS"), file, winograd)
		if envChoicesErr != nil {
			envChoicesErr = fmt.Errorf("HEADROOM_KERNELS: %w", envChoicesErr)
		}
	})
	return envChoices, envChoicesErr
}

// Mode returns the choices' mode.
func (c *Choices) Mode() string { return c.mode }

// Spent returns how long measuring took and how many shapes were timed,
// over every program bound with c.
func (c *Choices) Spent() (time.Duration, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spent, c.timed
}

// Table returns every choice made or read for this CPU model, as "key
// algo" lines in key order (for reports and tests).
func (c *Choices) Table() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for k, v := range c.table {
		if strings.HasPrefix(k, c.cpu+"\t") {
			out = append(out, strings.TrimPrefix(k, c.cpu+"\t")+"\t"+v.algo)
		}
	}
	sort.Strings(out)
	return out
}

// convKey is a convolution product's key: the CPU model, the threads, the
// kind, the geometry and the filters.
func (c *Choices) convKey(threads int, kind kernels.ConvKind, g kernels.ConvGeom, f int) string {
	return fmt.Sprintf("%s\t%d\t%v\t%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d\t%d", c.cpu, threads, kind,
		g.N, g.H, g.W, g.C, g.KH, g.KW, g.SH, g.SW, g.PadTop, g.PadLeft, g.OH, g.OW, f)
}

// matMulKey is a matrix product's key: the CPU model, the threads,
// "matmul", its sizes and transposes, and "-" in the filters' field.
func (c *Choices) matMulKey(threads, m, n, k int, transA, transB bool) string {
	return fmt.Sprintf("%s\t%d\tmatmul\t%d,%d,%d,%d,%d\t-", c.cpu, threads, m, n, k, b2i(transA), b2i(transB))
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// pending is a bound product whose algorithm is still to be measured.
type pending struct {
	b     *Bound
	key   string
	names []string    // the candidates' names
	run   func(i int) // runs the bound product with candidate i
	set   func(i int) // keeps candidate i
}

// pick sets *algo for a bound float32 convolution product and returns a
// pending measurement, or nil where nothing is left to measure (the file
// was read before binding: load).
func (c *Choices) pick(b *Bound, kind kernels.ConvKind, algo *kernels.ConvAlgo, run func(kernels.ConvAlgo)) *pending {
	g, f := kernels.ConvGeom(b.Window.Geom), b.Window.F
	algos := convAlgos(kind, b.Instr)
	if c != nil && !c.winograd {
		algos = slices.DeleteFunc(algos, kernels.ConvAlgo.IsWinograd)
	}
	*algo = kernels.ConvAuto
	if c == nil || c.mode == "rule" || len(algos) < 2 {
		return nil
	}
	if c.mode != "measure" {
		if slices.Contains(algos, c.force) {
			*algo = c.force
		}
		return nil
	}
	return lookup(c, b, c.convKey(b.pool.Threads(), kind, g, f), algos, func(i int) { run(algos[i]) }, func(i int) { *algo = algos[i] })
}

// pickMatMul sets *algo for a bound float32 matrix product, [m, k]·[k, n]
// with transposes as stored, and returns a pending measurement, or nil.
func (c *Choices) pickMatMul(b *Bound, m, n, k int, transA, transB bool, algo *kernels.MatMulAlgo, run func(kernels.MatMulAlgo)) *pending {
	threads := b.pool.Threads()
	algos := kernels.MatMulAlgos(m, n, k, transA, transB, false, threads)
	*algo = kernels.MatMulPacked
	if c == nil || c.mode == "rule" || len(algos) < 2 {
		return nil
	}
	if c.mode != "measure" {
		if slices.Contains(algos, c.forceMM) {
			*algo = c.forceMM
		}
		return nil
	}
	return lookup(c, b, c.matMulKey(threads, m, n, k, transA, transB), algos, func(i int) { run(algos[i]) }, func(i int) { *algo = algos[i] })
}

// lookup keeps the table's choice for key where it is still good
// (current), and else returns the measurement still to run.
func lookup[A fmt.Stringer](c *Choices, b *Bound, key string, algos []A, run, set func(int)) *pending {
	names := make([]string, len(algos))
	for i, a := range algos {
		names[i] = a.String()
	}
	c.mu.Lock()
	got, ok := c.table[key]
	i, cur := current(got, names)
	if ok && cur {
		c.used[key] = true
	}
	c.mu.Unlock()
	if ok && cur {
		set(i)
		return nil
	}
	return &pending{b: b, key: key, names: names, run: run, set: set}
}

// current returns the index of a kept choice among the candidates names,
// and whether the choice still holds: it is one of them, and no candidate
// is missing from the times it was chosen by. A choice made before a
// candidate existed (a file written by an older headroom, or with
// Winograd left out) is measured again with it; a line whose times list
// no candidates ("-", written by hand to pin a choice) holds while its
// algorithm is offered.
func current(got choice, names []string) (int, bool) {
	i := slices.Index(names, got.algo)
	if i < 0 {
		return i, false
	}
	var timed []string
	for _, t := range strings.Split(got.times, ",") {
		if name, _, ok := strings.Cut(t, "="); ok {
			timed = append(timed, name)
		}
	}
	if len(timed) == 0 {
		return i, true
	}
	for _, n := range names {
		if !slices.Contains(timed, n) {
			return i, false
		}
	}
	return i, true
}

// measure times each pending product with each of its algorithms on its
// own buffers (the pool's scratch set), keeps the fastest, and saves the
// file once. Only a product whose output and workspace are the arena's
// temporaries is run: at a re-plan in the middle of a run, variables and
// outputs hold what must not be overwritten (such a product keeps the
// rule).
func (c *Choices) measure(p *compile.Program, todo []*pending) error {
	if len(todo) == 0 {
		return nil
	}
	c.measuring.Lock()
	defer c.measuring.Unlock()
	start := time.Now()
	defer func() {
		c.mu.Lock()
		c.spent += time.Since(start)
		c.mu.Unlock()
	}()
	if c.file != "" {
		// Another process sharing the file (a rank on this node, a job
		// started at the same time, the run before this one) may have
		// timed these shapes since the file was read: under the file's
		// lock, what it wrote is read first and kept, so every process
		// sharing a file takes one choice per shape.
		defer lockChoices(c.file, choicesLockWait)()
		if err := c.merge(); err != nil {
			return err
		}
	}
	added := 0
	for _, t := range todo {
		it := t.b.Instr
		if !temporary(p, it.Out) || it.Work >= 0 && !temporary(p, it.Work) {
			continue
		}
		c.mu.Lock()
		got, ok := c.table[t.key] // another program or process may have timed the shape
		c.mu.Unlock()
		i, cur := current(got, t.names)
		if (!ok || !cur) && c.spentSoFar(start) >= c.budget {
			// past the budget a shape keeps the rule, unrecorded: the
			// next run that binds it times it
			c.mu.Lock()
			c.deferred++
			c.mu.Unlock()
			continue
		}
		if !ok || !cur {
			got, i = timeAlgos(t)
			c.mu.Lock()
			c.table[t.key] = got
			c.timed++
			c.mu.Unlock()
			added++
		}
		c.mu.Lock()
		c.used[t.key] = true
		c.mu.Unlock()
		t.set(i)
	}
	if added == 0 || c.file == "" {
		return nil
	}
	// A file that cannot be written (a read-only home) costs the next run
	// the measuring again, not this run: the error is kept for its report
	// (FileErr).
	if err := c.save(); err != nil {
		c.mu.Lock()
		c.fileErr = err
		c.mu.Unlock()
	}
	return nil
}

// MeasureBudget bounds the time one process spends measuring (waiting
// on another's lock included): a model of many large shapes spreads its
// timing over its first runs instead of holding the first one for
// minutes.
const MeasureBudget = 30 * time.Second

// spentSoFar returns the time spent measuring before this program's
// measuring began at start, plus since.
func (c *Choices) spentSoFar(start time.Time) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.spent + time.Since(start)
}

// File returns the choices file ("": none, kept in memory).
func (c *Choices) File() string { return c.file }

// Deferred returns how many shapes kept the rule because the measuring
// budget was spent (a later run times them).
func (c *Choices) Deferred() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deferred
}

// Read returns how many shapes this process took from the file or from
// another of its programs without timing them.
func (c *Choices) Read() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.used) - c.timed
}

// choicesLockWait bounds the wait for another process's measuring: past
// it, this process measures without the lock.
const choicesLockWait = 2 * time.Minute

// FileErr returns the last failure to open or write the choices file
// (nil when the file was read and every measured choice saved): the run
// went on with the choices in memory.
func (c *Choices) FileErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.fileErr
}

// merge reads the file again and takes its lines for every key no bound
// product of this process has taken yet.
func (c *Choices) merge() error {
	table, err := c.read()
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for k, v := range table {
		if !c.used[k] {
			c.table[k] = v
		}
	}
	return nil
}

// read returns the file's choices (none for a missing file). A file that
// cannot be opened (a home without access) reads as an empty one, the
// error kept for the run's report; a file that is not a choices file is
// an error naming its line.
func (c *Choices) read() (map[string]choice, error) {
	f, err := os.Open(c.file)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		c.mu.Lock()
		c.fileErr = fmt.Errorf("kernel choices: %w", err)
		c.mu.Unlock()
		return nil, nil
	}
	defer f.Close()
	table, err := parseChoices(f)
	if err != nil {
		return nil, fmt.Errorf("kernel choices %s: %w (remove the file to measure afresh)", c.file, err)
	}
	return table, nil
}

// temporary reports whether buffer id of p is an arena temporary.
func temporary(p *compile.Program, id int) bool {
	return p.Plan != nil && id >= 0 && id < len(p.Plan.Buffers) && p.Plan.Buffers[id].Kind == compile.KindArena
}

// timeAlgos runs t with each algorithm: once to warm, then the best of up
// to three runs (fewer once the runs have taken 50 ms), and returns the
// fastest and its index.
func timeAlgos(t *pending) (choice, int) {
	best, bestAt := time.Duration(1<<62), 0
	var times []string
	for a, name := range t.names {
		t.run(a)
		fastest, total := time.Duration(1<<62), time.Duration(0)
		for i := 0; i < 3 && total < 50*time.Millisecond; i++ {
			s := time.Now()
			t.run(a)
			d := time.Since(s)
			fastest, total = min(fastest, d), total+d
		}
		times = append(times, fmt.Sprintf("%s=%v", name, fastest.Round(time.Microsecond)))
		if fastest < best {
			best, bestAt = fastest, a
		}
	}
	return choice{algo: t.names[bestAt], times: strings.Join(times, ",")}, bestAt
}

// choicesHeader is the file's first line. A file of version 1 (whose
// lines are all convolutions') is read as well, and written back as
// version 2.
const (
	choicesHeader   = "# headroom kernel choices v2: cpu, threads, product, shape (conv: N,H,W,C,KH,KW,SH,SW,PadTop,PadLeft,OH,OW; matmul: M,N,K,transA,transB), filters (matmul: -), algorithm, times"
	choicesHeaderV1 = "# headroom kernel choices v1: cpu, threads, product, N,H,W,C,KH,KW,SH,SW,PadTop,PadLeft,OH,OW, filters, algorithm, times"
)

// load reads the file once when measuring (a missing file is an empty
// one).
func (c *Choices) load() error {
	c.mu.Lock()
	done := c.loaded || c.file == "" || c.mode != "measure"
	c.mu.Unlock()
	if done {
		return nil
	}
	if err := c.merge(); err != nil {
		return err
	}
	c.mu.Lock()
	c.loaded = true
	c.mu.Unlock()
	return nil
}

// parseChoices reads the file's lines: the header, then one choice a line
// of 7 tab-separated fields.
func parseChoices(r io.Reader) (map[string]choice, error) {
	table := map[string]choice{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), 1<<20)
	for line := 1; sc.Scan(); line++ {
		s := sc.Text()
		if line == 1 {
			if s != choicesHeader && s != choicesHeaderV1 {
				return nil, fmt.Errorf("line 1: not a headroom kernel choices file (want %q)", choicesHeader)
			}
			continue
		}
		if s == "" {
			continue
		}
		f := strings.Split(s, "\t")
		if len(f) != 7 {
			return nil, fmt.Errorf("line %d: %d fields, want 7", line, len(f))
		}
		if n, err := strconv.Atoi(f[1]); err != nil || n < 1 {
			return nil, fmt.Errorf("line %d: threads %q", line, f[1])
		}
		if f[2] == "matmul" {
			g := strings.Split(f[3], ",")
			if len(g) != 5 || !allInts(g) || g[3] != "0" && g[3] != "1" || g[4] != "0" && g[4] != "1" || f[4] != "-" {
				return nil, fmt.Errorf("line %d: matmul shape %q and %q: want M,N,K,transA,transB (transposes 0 or 1) and -", line, f[3], f[4])
			}
			if _, err := kernels.ParseMatMulAlgo(f[5]); err != nil {
				return nil, fmt.Errorf("line %d: %w", line, err)
			}
		} else {
			if !slices.Contains([]string{kernels.ConvForward.String(), kernels.ConvInputGrad.String(), kernels.ConvFilterGrad.String()}, f[2]) {
				return nil, fmt.Errorf("line %d: product %q (want conv2d, conv2d_input_grad, conv2d_filter_grad or matmul)", line, f[2])
			}
			if g := strings.Split(f[3], ","); len(g) != 12 || !allInts(append(g, f[4])) {
				return nil, fmt.Errorf("line %d: geometry %q and filters %q: want 12 and 1 integers", line, f[3], f[4])
			}
			a, err := kernels.ParseConvAlgo(f[5])
			if err != nil || a == kernels.ConvAuto {
				return nil, fmt.Errorf("line %d: algorithm %q (want direct, im2col or winograd)", line, f[5])
			}
		}
		table[strings.Join(f[:5], "\t")] = choice{algo: f[5], times: f[6]}
	}
	return table, sc.Err()
}

func allInts(s []string) bool {
	for _, v := range s {
		if n, err := strconv.Atoi(v); err != nil || n < 0 {
			return false
		}
	}
	return true
}

// save writes every choice to the file, atomically.
func (c *Choices) save() error {
	c.mu.Lock()
	keys := make([]string, 0, len(c.table))
	for k := range c.table {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(choicesHeader + "\n")
	for _, k := range keys {
		v := c.table[k]
		fmt.Fprintf(&b, "%s\t%s\t%s\n", k, v.algo, v.times)
	}
	c.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(c.file), 0o755); err != nil {
		return fmt.Errorf("kernel choices: %w", err)
	}
	err := atomicfile.WriteFile(atomicfile.OS, c.file, 0o644, func(w io.Writer) error {
		_, err := io.WriteString(w, b.String())
		return err
	})
	if err != nil {
		return fmt.Errorf("kernel choices: %w", err)
	}
	return nil
}

// cpuModel returns the CPU's model name from /proc/cpuinfo (tabs made
// spaces), or "unknown".
func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.ReplaceAll(strings.TrimSpace(v), "\t", " ")
		}
	}
	return "unknown"
}
