// Command resnetcontrol is the headroom half of bench/resnet_control.sh: it
// trains nn.ResNet20 from the PyTorch peer's initial weights on the peer's
// first K batches (written by bench/resnet_control.py into DIR), prints
// each step's loss beside the peer's, and how far every weight is from the
// peer's after the K steps (the sum of absolute differences over the sum of
// absolute values, per weight), largest last.
//
//	go run ./bench/resnetcontrol -dir DIR [-threads 2]
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/optim"
	"github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
)

const batch = 128

func main() {
	dir := flag.String("dir", "", "the folder bench/resnet_control.py wrote")
	threads := flag.Int("threads", 2, "kernel threads")
	flag.Parse()
	if err := run(*dir, *threads); err != nil {
		fmt.Fprintln(os.Stderr, "resnetcontrol:", err)
		os.Exit(1)
	}
}

func run(dir string, threads int) error {
	if dir == "" {
		return errors.New("-dir is required")
	}
	m, err := nn.NewModel("resnet", tensor.Shape{28, 28, 1}, 10)
	if err != nil {
		return err
	}
	host := cpu.New(threads)
	defer host.Close()
	cfg := step.Config{Model: m, Optimizer: &optim.Adam{}, Target: host}
	prog, err := step.Compile(cfg, batch, step.Train, (*step.Builder).Standard)
	if err != nil {
		return err
	}
	e := runtime.NewEngine(host, 0)
	defer e.Close()
	session, err := e.Open(prog)
	if err != nil {
		return err
	}
	defer session.Close()
	x, _ := session.Program(prog.Name)
	names, err := weightNames(filepath.Join(dir, "w0"))
	if err != nil {
		return err
	}
	for _, name := range names {
		v, ok := e.Variable(name)
		if !ok {
			return fmt.Errorf("the peer's weight %s is not a weight of nn.ResNet20", name)
		}
		w, err := readFloats(filepath.Join(dir, "w0", fileName(name)))
		if err != nil {
			return err
		}
		dst := v.Tensor().Float32s()
		if len(w) != len(dst) {
			return fmt.Errorf("%s: the peer's has %d values, headroom's %d", name, len(w), len(dst))
		}
		copy(dst, w)
	}
	xs, err := readFloats(filepath.Join(dir, "x.bin"))
	if err != nil {
		return err
	}
	yb, err := os.ReadFile(filepath.Join(dir, "y.bin"))
	if err != nil {
		return err
	}
	peer, err := readLosses(filepath.Join(dir, "losses.txt"))
	if err != nil {
		return err
	}
	in, err := x.Input("x")
	if err != nil {
		return err
	}
	labels, err := x.Input("y")
	if err != nil {
		return err
	}
	loss, err := x.Output("loss")
	if err != nil {
		return err
	}
	per := batch * 28 * 28
	if len(xs) != len(peer)*per || len(yb) != len(peer)*batch*4 {
		return fmt.Errorf("%s: %d losses, %d images, %d labels: want a batch of %d for each loss", dir, len(peer), len(xs)/per, len(yb)/4, batch)
	}
	fmt.Println("step  headroom loss  peer loss")
	for s := range peer {
		copy(in.Float32s(), xs[s*per:(s+1)*per])
		for i, l := 0, labels.Int32s(); i < batch; i++ {
			l[i] = int32(binary.LittleEndian.Uint32(yb[4*(s*batch+i):]))
		}
		cfg.Optimizer.Feed(int64(s+1), 1e-3, x.SetScalar)
		if err := x.Run(); err != nil {
			return err
		}
		fmt.Printf("%4d  %13.6f  %9.6f\n", s+1, loss.Float64At(0), peer[s])
	}
	type diff struct {
		name string
		rel  float64
	}
	var diffs []diff
	for _, name := range names {
		want, err := readFloats(filepath.Join(dir, "wK", fileName(name)))
		if err != nil {
			return err
		}
		v, _ := e.Variable(name)
		var d, n float64
		for i, g := range v.Tensor().Float32s() {
			d += math.Abs(float64(g) - float64(want[i]))
			n += math.Abs(float64(want[i]))
		}
		diffs = append(diffs, diff{name, d / max(n, 1e-30)})
	}
	sort.Slice(diffs, func(i, j int) bool { return diffs[i].rel < diffs[j].rel })
	fmt.Printf("weights after %d steps against the peer's (relative difference):\n", len(peer))
	for _, d := range diffs {
		fmt.Printf("  %-40s %.3g\n", d.name, d.rel)
	}
	return nil
}

// weightNames lists the weights of a folder of LAYER__WEIGHT.bin files.
func weightNames(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, en := range ents {
		if n, ok := strings.CutSuffix(en.Name(), ".bin"); ok {
			names = append(names, strings.ReplaceAll(n, "__", "/"))
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("%s: no weights", dir)
	}
	return names, nil
}

func fileName(weight string) string { return strings.ReplaceAll(weight, "/", "__") + ".bin" }

func readFloats(path string) ([]float32, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(b)%4 != 0 {
		return nil, fmt.Errorf("%s: %d bytes, not a whole number of float32s", path, len(b))
	}
	f := make([]float32, len(b)/4)
	for i := range f {
		f[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return f, nil
}

func readLosses(path string) ([]float64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []float64
	for i, line := range strings.Fields(string(b)) {
		v, err := strconv.ParseFloat(line, 64)
		if err != nil {
			return nil, fmt.Errorf("%s: line %d: %w", path, i+1, err)
		}
		out = append(out, v)
	}
	return out, nil
}
