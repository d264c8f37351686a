package cli

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/headroom-ml/headroom/backend/cpu"
	"github.com/headroom-ml/headroom/kernels"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/nn"
	hruntime "github.com/headroom-ml/headroom/runtime"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
	"github.com/headroom-ml/headroom/train/checkpoint"
)

// `headroom generate`: sample bytes from a language model saved by
// `headroom train --save` (gpt or lstm), through an inference plan of one
// token per step: no optimizer state, no saved activations, and a cache of
// keys and values (the lstm's state) so that each byte costs O(context).

// decoder is a model with a one-token decoding step (nn.GPT, nn.LSTMLM).
type decoder interface {
	Decoder() nn.Model
}

func runGenerate(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("generate", stderr)
	load := fs.String("load", "", "a language model saved by 'headroom train --model gpt|lstm --save FILE' (required)")
	prompt := fs.String("prompt", "func main() {", "the text to continue")
	n := fs.Int("bytes", 400, "how many bytes to generate")
	temp := fs.Float64("temperature", 0.8, "sampling temperature (0: always the likeliest byte)")
	seed := fs.Uint64("seed", 1, "random seed of the sampling")
	threads := fs.Int("threads", runtime.NumCPU(), "threads for kernels")
	quiet := fs.Bool("quiet", false, "print only the generated text")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	if *load == "" {
		return fmt.Errorf("--load is required: a model saved by 'headroom train --model gpt --dataset go-src --save FILE'")
	}
	if *n < 0 || !(*temp >= 0) || math.IsInf(*temp, 0) || *threads <= 0 {
		return fmt.Errorf("--bytes, --temperature and --threads must be non-negative (threads positive)")
	}
	runtime.GOMAXPROCS(*threads)
	kernels.SetThreads(*threads)
	f, err := checkpoint.Load(*load)
	if err != nil {
		return err
	}
	name := f.Meta[train.KeySeqModel]
	ctx, err1 := strconv.Atoi(f.Meta[train.KeySeqContext])
	vocab, err2 := strconv.Atoi(f.Meta[train.KeySeqVocab])
	if name == "" || err1 != nil || err2 != nil || ctx < 1 || vocab < 1 {
		return fmt.Errorf("%s holds no language model: its metadata lacks %s, %s or %s (save one with 'headroom train --model gpt --dataset go-src --save FILE')",
			*load, train.KeySeqModel, train.KeySeqContext, train.KeySeqVocab)
	}
	m, err := nn.NewModel(name, tensor.Shape{ctx}, vocab)
	if err != nil {
		return fmt.Errorf("%s: %w", *load, err)
	}
	dm, ok := m.(decoder)
	if !ok {
		return fmt.Errorf("%s: model %s has no decoding step", *load, name)
	}
	prog, err := step.Compile(step.Config{Model: dm.Decoder(), Target: cpu.New(*threads)}, 1, step.Infer, (*step.Builder).Standard)
	if err != nil {
		return err
	}
	prog.Name = "generate"
	e := cpu.NewEngine(*threads, 0)
	defer e.Close()
	x, err := e.Load(prog)
	if err != nil {
		return err
	}
	defer x.Close()
	var cache int64
	for _, v := range e.Variables() {
		if isState(v.Name) {
			cache += mem.Align(v.Bytes())
			continue
		}
		w, ok := f.Get(v.Name)
		if !ok || w.DType() != v.DType || !w.Shape().Equal(v.Shape) {
			return fmt.Errorf("%s: no weight %s %s%v for model %s", *load, v.Name, v.DType, v.Shape, name)
		}
		copy(v.Tensor().Bytes(), w.Bytes())
	}
	f = nil // the file's copy of the weights is no longer needed
	out := stdout
	if *quiet {
		out = io.Discard
	}
	p := prog.Plan
	fmt.Fprintf(out, "headroom: %s (window %d) from %s, one byte per step\n", name, ctx, *load)
	fmt.Fprintf(out, "inference plan (known before the first byte): %s in total: weights %s, %s %s, optimizer state %s, saved activations %s, arena %s\n",
		mem.FormatBytes(p.Peak), mem.FormatBytes(p.Totals[mem.Param]-cache), cacheName(name), mem.FormatBytes(cache),
		mem.FormatBytes(p.Totals[mem.OptState]), mem.FormatBytes(p.Totals[mem.Activation]), mem.FormatBytes(p.ArenaBytes))
	g := &sampler{x: x, e: e, ctx: ctx, vocab: vocab, temp: *temp, rng: rand.New(rand.NewPCG(*seed, 0x9e3779b9))}
	if err := g.bind(); err != nil {
		return err
	}
	start := time.Now()
	text, err := g.generate([]byte(*prompt), *n)
	if err != nil {
		return err
	}
	took := time.Since(start)
	fmt.Fprintf(stdout, "%s%s\n", *prompt, text)
	fmt.Fprintf(out, "headroom: %d bytes in %.2fs (%.0f bytes/s, %d steps); measured peak %s (plan %s)\n",
		len(text), took.Seconds(), float64(len(text))/took.Seconds(), g.steps, mem.FormatBytes(e.Ledger().Peak()), mem.FormatBytes(p.Peak))
	return nil
}

// isState reports whether a decoder's variable is its cache or state (the
// decoder's own, not a trained weight).
func isState(name string) bool {
	return strings.HasPrefix(name, "cache/") || strings.HasPrefix(name, "state/")
}

func cacheName(model string) string {
	if model == "gpt" {
		return "key/value cache"
	}
	return "recurrent state"
}

// sampler feeds bytes through a decoding step and samples the next ones.
type sampler struct {
	x          *hruntime.Executable
	e          *hruntime.Engine
	ctx, vocab int
	temp       float64
	rng        *rand.Rand
	steps      int

	tok, pos   tensor.Tensor // inputs (pos and mask only for the gpt)
	mask       []byte
	logits     tensor.Tensor
	at         int    // the next position in the cache
	window     []byte // the bytes in the cache, in order
	probs      []float64
	hasPos     bool
	stateBytes [][]byte // the caches, zeroed when the window slides
}

func (s *sampler) bind() error {
	var err error
	if s.tok, err = s.x.Input("x"); err != nil {
		return err
	}
	if s.logits, err = s.x.Output("out"); err != nil {
		return err
	}
	if p, err := s.x.Input("pos"); err == nil {
		s.pos, s.hasPos = p, true
		m, err := s.x.Input("mask")
		if err != nil {
			return err
		}
		s.mask = m.Bytes()
	}
	for _, v := range s.e.Variables() {
		if isState(v.Name) {
			s.stateBytes = append(s.stateBytes, v.Tensor().Bytes())
		}
	}
	s.probs = make([]float64, s.vocab)
	return nil
}

// feed runs one byte through the step at the next position. When the
// gpt's cache is full, its second half is fed again from position 0 (the
// learned positions end at the window): each byte still costs O(window).
func (s *sampler) feed(b byte) error {
	if s.hasPos && s.at == s.ctx {
		keep := append([]byte(nil), s.window[len(s.window)-s.ctx/2:]...)
		s.at, s.window = 0, s.window[:0]
		for _, st := range s.stateBytes {
			clear(st)
		}
		clear(s.mask)
		for _, k := range keep {
			if err := s.run(k); err != nil {
				return err
			}
		}
	}
	return s.run(b)
}

func (s *sampler) run(b byte) error {
	s.tok.Int32s()[0] = int32(b)
	if s.hasPos {
		s.pos.Int32s()[0] = int32(s.at)
		s.mask[s.at] = 1
	}
	if err := s.x.Run(); err != nil {
		return err
	}
	s.steps++
	s.at++
	s.window = append(s.window, b)
	return nil
}

// next samples a byte from the last step's logits at the temperature.
func (s *sampler) next() byte {
	l := s.logits
	best := 0
	for i := 0; i < s.vocab; i++ {
		if l.Float64At(i) > l.Float64At(best) {
			best = i
		}
	}
	if s.temp == 0 {
		return byte(best)
	}
	var sum float64
	top := l.Float64At(best)
	for i := range s.probs {
		s.probs[i] = math.Exp((l.Float64At(i) - top) / s.temp)
		sum += s.probs[i]
	}
	r := s.rng.Float64() * sum
	for i, p := range s.probs {
		if r -= p; r < 0 {
			return byte(i)
		}
	}
	return byte(best)
}

// generate feeds the prompt and samples n bytes.
func (s *sampler) generate(prompt []byte, n int) ([]byte, error) {
	if len(prompt) == 0 {
		prompt = []byte{'\n'}
	}
	for _, b := range prompt {
		if err := s.feed(b); err != nil {
			return nil, err
		}
	}
	out := make([]byte, 0, n)
	for len(out) < n {
		b := s.next()
		out = append(out, b)
		if err := s.feed(b); err != nil {
			return nil, err
		}
	}
	return out, nil
}
