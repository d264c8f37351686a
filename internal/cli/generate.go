package cli

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/train"
)

// `headroom generate`: sample bytes from a language model saved by
// `headroom train --save` (gpt or lstm), through an inference plan of one
// token per step: no optimizer state, no saved activations, and a cache of
// keys and values (the lstm's state) so that each byte costs O(context).

func runGenerate(args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("generate", stderr)
	load := fs.String("load", "", "a language model saved by 'headroom train --model gpt|lstm --save FILE' (required)")
	prompt := fs.String("prompt", "func main() {", "the text to continue")
	n := fs.Int("bytes", 400, "how many bytes to generate")
	temp := fs.Float64("temperature", 0.8, "sampling temperature (0: always the likeliest byte)")
	seed := fs.Uint64("seed", 1, "random seed of the sampling")
	threads := fs.Int("threads", defaultThreads(), "threads for kernels")
	quiet := fs.Bool("quiet", false, "print only the generated text")
	var dev deviceFlags
	dev.register(fs, false)
	if err := fs.Parse(args); err != nil {
		return &usageError{err}
	}
	defer dev.close()
	if fs.NArg() > 0 {
		return usagef("unexpected argument %q", fs.Arg(0))
	}
	if *load == "" {
		return usagef("--load is required: a model saved by 'headroom train --model gpt --dataset go-src --save FILE'")
	}
	if *n < 0 || !(*temp >= 0) || math.IsInf(*temp, 0) || *threads <= 0 {
		return usagef("--bytes, --temperature and --threads must be non-negative (threads positive)")
	}
	setThreads(*threads)
	mf, err := train.LoadModel(*load)
	if err != nil {
		return err
	}
	g, err := newGenerator(mf, *threads, &dev)
	if err != nil {
		return err
	}
	defer g.Close()
	mf.Weights = nil // copied into the engine: the file's copy is no longer needed
	out := stdout
	if *quiet {
		out = io.Discard
	}
	p := g.Plan
	name := "a language model"
	if mf.Registered != nil {
		name = mf.Registered.Name
	}
	fmt.Fprintf(out, "headroom: %s (window %d) from %s, one byte per step\n", name, g.Context, *load)
	fmt.Fprintf(out, "inference plan (known before the first byte): %s in total: weights %s, %s %s, optimizer state %s, saved activations %s, arena %s\n",
		mem.FormatBytes(p.Peak), mem.FormatBytes(p.Totals[mem.Param]-g.CacheBytes()), cacheName(mf), mem.FormatBytes(g.CacheBytes()),
		mem.FormatBytes(p.Totals[mem.OptState]), mem.FormatBytes(p.Totals[mem.Activation]), mem.FormatBytes(p.ArenaBytes))
	start := time.Now()
	text, err := g.Generate([]byte(*prompt), *n, *temp, *seed)
	if err != nil {
		return err
	}
	took := time.Since(start)
	fmt.Fprintf(stdout, "%s%s\n", *prompt, text)
	fmt.Fprintf(out, "headroom: %d bytes in %.2fs (%.0f bytes/s, %d steps); measured peak %s (plan %s)\n",
		len(text), took.Seconds(), float64(len(text))/took.Seconds(), g.Steps(), mem.FormatBytes(g.Engine().Ledger().Peak()), mem.FormatBytes(p.Peak))
	return nil
}

// newGenerator returns the generator on the host, or on the GPU --device
// names under its budget.
func newGenerator(mf *train.ModelFile, threads int, dev *deviceFlags) (*train.Generator, error) {
	if err := dev.check(); err != nil {
		return nil, err
	}
	b, budget, _, err := dev.backend(false)
	if err != nil || b == nil {
		if err != nil {
			return nil, err
		}
		return train.NewGenerator(mf, threads, 0)
	}
	return train.NewGeneratorOn(mf, b, budget)
}

// cacheName names what the model keeps between bytes.
func cacheName(mf *train.ModelFile) string {
	if _, ok := mf.Model.(*nn.LSTMLM); ok {
		return "recurrent state"
	}
	return "key/value cache"
}
