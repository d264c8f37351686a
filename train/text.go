package train

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/train/checkpoint"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/step"
	"github.com/headroom-ml/headroom/tensor"
)

// Text is byte-level text for a language model (NewText, FitText): the
// model reads windows of T tokens ("x", int32 [T]) and predicts the next
// byte at each position ("y", int32 [T]), as peers/seq.py trains.
type Text struct {
	Name string
	// Train and Val are the two splits; T is the model's window.
	Train, Val []byte
	T          int
	// ValWindows is how many windows the validation loss averages over:
	// the first ValWindows non-overlapping windows of Val (0: 64, the
	// peers' count; fewer if Val holds fewer).
	ValWindows int
}

// valWindows returns the windows of the validation loss.
func (x *Text) valWindows() int {
	n := x.ValWindows
	if n <= 0 {
		n = 64
	}
	if x.T > 0 && len(x.Val) > x.T {
		n = min(n, (len(x.Val)-1)/x.T)
	} else {
		n = 0
	}
	return n
}

// StepsPerEpoch is the updates of one epoch of text: as many windows of T
// bytes as the training split holds, in batches of batch (each batch drawn
// uniformly at random, so an epoch covers the text once in expectation).
func (x *Text) StepsPerEpoch(batch int) int {
	return max(1, (len(x.Train)+batch*x.T-1)/(batch*x.T))
}

// NewText compiles cfg's model (one int32 input of [T] tokens, logits
// [T, vocab] out) for batches of cfg.Batch windows of txt and for its
// validation windows, and reserves all the memory the run will use, the
// text included: as New, for text.
func NewText(cfg Config, txt *Text) (*Trainer, error) {
	cfg.defaults()
	if cfg.Model == nil || cfg.Batch <= 0 || cfg.Epochs < 0 {
		return nil, errors.New("train: a model, a positive batch size and epochs >= 0 are required")
	}
	sc := cfg.stepConfig()
	if err := sc.Check(); err != nil {
		return nil, fmt.Errorf("train: %w", err)
	}
	in, ok := cfg.input()
	if !ok || in.Type() != tensor.Int32 || !in.Shape.Equal(tensor.Shape{txt.T}) {
		return nil, fmt.Errorf("train: a language model on text takes one int32 input of %d tokens; the model's inputs are %v", txt.T, cfg.Model.Inputs())
	}
	if _, err := data.NewWindows(txt.Train, txt.T); err != nil || len(txt.Train) < txt.T+2 {
		return nil, fmt.Errorf("train: text %q: its training split of %d bytes holds no random window of %d bytes", txt.Name, len(txt.Train), txt.T+1)
	}
	t := &Trainer{cfg: cfg, xName: in.Name, lossScale: initLossScale, text: txt}
	if err := t.checkText(); err != nil {
		return nil, err
	}
	hold := []held{{name: txt.Name, bytes: int64(len(txt.Train) + len(txt.Val))}}
	if err := t.open(cfg.Batch, txt.valWindows(), hold, false); err != nil {
		return nil, err
	}
	t.validate = t.evaluateText
	return t, nil
}

// checkText checks that the model's loss takes int32 next-byte labels [T].
func (t *Trainer) checkText() error {
	specs, err := step.Outputs(t.cfg.stepConfig())
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	o := specs[0]
	if o.Loss == nil || o.LabelType != tensor.Int32 || !o.LabelShape.Equal(tensor.Shape{t.text.T}) {
		return fmt.Errorf("train: a language model's output %v (per example) must take int32 next-byte labels [%d]", o.Shape, t.text.T)
	}
	return nil
}

// FitText trains on txt (the one NewText compiled for) for cfg.Epochs
// epochs of StepsPerEpoch updates, or cfg.MaxSteps, evaluating the
// validation loss at each epoch's end. Batch s (counted from 1) is the
// windows data.Windows.RandomOffsets draws for (cfg.Seed, s): a function
// of the seed and the step, so a resumed run draws what the uninterrupted
// one would.
func (t *Trainer) FitText() (*History, error) {
	txt := t.text
	if txt == nil {
		return nil, errors.New("train: FitText needs a trainer made by NewText")
	}
	w, err := data.NewWindows(txt.Train, txt.T)
	if err != nil {
		return nil, err
	}
	r, err := t.begin()
	if err != nil {
		return nil, err
	}
	if r.h.Done {
		return r.finish(), nil
	}
	src := &windowSource{text: txt.Train, t: txt.T, w: w, seed: t.cfg.Seed, offsets: make([]int, t.cfg.Batch)}
	batches := txt.StepsPerEpoch(t.cfg.Batch)
	for ep := r.h.StartEpoch; ep < t.cfg.Epochs && !t.stop; ep++ {
		e := r.epochBegin(ep)
		for e.batch < batches && !r.done() {
			if _, err := w.RandomOffsets(src.offsets, src.seed, uint64(r.step+1)); err != nil {
				return r.h, err
			}
			if err := r.update(e, t.cfg.Batch, batches, src); err != nil {
				return r.h, err
			}
			if err := r.afterStep(e, e.batch == batches); err != nil {
				return r.h, err
			}
		}
		if err := r.epochEnd(e, e.batch == batches); err != nil {
			return r.h, err
		}
	}
	h := r.finish()
	if n := len(h.Epochs); n > 0 && !math.IsNaN(h.Epochs[n-1].ValLoss) {
		h.ValLoss = h.Epochs[n-1].ValLoss
	} else if h.ValLoss, err = t.evaluateText(); err != nil {
		return h, err
	}
	return h, nil
}

// windowSource feeds the windows at offsets: x[t] = text[o+t] and y[t] =
// text[o+t+1].
type windowSource struct {
	text    []byte
	t       int
	w       *data.Windows
	seed    uint64
	offsets []int
}

func (s *windowSource) fill(pr *program, lo, hi int) {
	x, y := pr.in.x.Int32s(), pr.in.y.Int32s()
	for i, o := range s.offsets[lo:hi] {
		src := s.text[o : o+s.t+1]
		xi, yi := x[i*s.t:(i+1)*s.t], y[i*s.t:(i+1)*s.t]
		for j := range xi {
			xi[j] = int32(src[j])
			yi[j] = int32(src[j+1])
		}
	}
}

func (s *windowSource) label(int) int { return -1 } // no accuracy for a language model

// evaluateText returns the mean cross-entropy (nats per byte) over the
// validation windows: the first ValWindows non-overlapping windows of Val.
func (t *Trainer) evaluateText() (float64, error) {
	txt := t.text
	n := txt.valWindows()
	ev := t.progs["eval"]
	if n == 0 || ev == nil {
		return math.NaN(), nil
	}
	w, err := data.NewWindows(txt.Val, txt.T)
	if err != nil {
		return math.NaN(), err
	}
	var sum float64
	for first := 0; first < n; {
		pr := ev
		if n-first < ev.batch {
			if pr, err = t.evalTail(n - first); err != nil {
				return math.NaN(), err
			}
		}
		if err := w.Consecutive(pr.in.x.Int32s(), pr.in.y.Int32s(), first); err != nil {
			return math.NaN(), err
		}
		if err := pr.x.Run(); err != nil {
			return math.NaN(), fmt.Errorf("train: evaluating %q: %w", txt.Name, err)
		}
		sum += pr.loss.Float64At(0) // the sum of the windows' mean losses
		first += pr.batch
	}
	return sum / float64(n), nil
}

// PlanForText compiles the programs FitText would use on txt and returns
// the training step's plan and the bytes the run would reserve by
// category, the text included (as input).
func PlanForText(cfg Config, txt *Text) (*compile.Plan, [mem.NumCategories]int64, error) {
	cfg.defaults()
	progs, err := cfg.compileAll(cfg.Batch, txt.valWindows())
	if err != nil {
		return nil, [mem.NumCategories]int64{}, err
	}
	totals, _ := planned(progs)
	totals[mem.Input] += mem.Align(int64(len(txt.Train) + len(txt.Val)))
	return progs["train"].p.Plan, totals, nil
}

// FitToBudgetText is FitToBudget for a language model on txt: it plans
// every micro-batching of cfg.Batch windows, with and without
// recomputation, keeps those that fit budget, and times the best few.
func FitToBudgetText(cfg Config, txt *Text, budget int64, allowPrecision bool) (Config, []Candidate, error) {
	cfg.defaults()
	dataBytes := mem.Align(int64(len(txt.Train) + len(txt.Val)))
	return fitToBudget(cfg, cfg.Batch, txt.valWindows(), dataBytes, budget, allowPrecision, func(c Config) (float64, error) {
		c.Epochs, c.Warmup, c.MaxSteps, c.NoWatchdog = 1, 1<<30, 1, true
		c.Callbacks, c.CheckpointDir, c.Resume = nil, "", false
		t, err := NewText(c, txt)
		if err != nil {
			return 0, err
		}
		defer t.Close()
		t.validate = nil
		times := make([]float64, 0, timedSteps)
		for i := 0; i <= timedSteps; i++ {
			t.stop = false // one update per call (each starts at step 0)
			start := time.Now()
			if _, err := t.FitText(); err != nil {
				return 0, err
			}
			if i > 0 {
				times = append(times, time.Since(start).Seconds())
			}
		}
		sort.Float64s(times)
		return times[len(times)/2], nil
	})
}

// Metadata keys a language model's saved file carries (SaveText), so that
// `headroom generate` can rebuild the model: the model's name, its window
// and vocabulary.
const (
	KeySeqModel   = "headroom.seq.model"
	KeySeqContext = "headroom.seq.context"
	KeySeqVocab   = "headroom.seq.vocab"
)

// SaveText writes every variable to path as one safetensors file,
// atomically (as SaveWeights), with the metadata a decoder needs: the
// model's name (nn.NewModel's), its window and vocabulary (KeySeq*).
func (t *Trainer) SaveText(path, model string, vocab int) error {
	entries, err := t.entries()
	if err != nil {
		return err
	}
	if t.cfg.ranks() > 1 && t.cfg.Comm.Rank() != 0 {
		return nil
	}
	meta := map[string]string{"optimizer": t.cfg.Optimizer.Name(), KeySeqModel: model,
		KeySeqContext: strconv.Itoa(t.text.T), KeySeqVocab: strconv.Itoa(vocab)}
	if err := checkpoint.Save(path, entries, meta); err != nil {
		return fmt.Errorf("train: saving weights: %w", err)
	}
	return nil
}
