package train

import (
	"fmt"
	"math"

	"github.com/headroom-ml/headroom/mem"

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
	// Set, when Train is nil, is the text in files: the trainer plans
	// with its size and reads it (and splits it) once the plan fits.
	Set *data.TextSet
	T   int
	// ValWindows is how many windows the validation loss averages over:
	// the first ValWindows non-overlapping windows of Val (0: 64, the
	// peers' count; fewer if Val holds fewer).
	ValWindows int
	// Buckets, when set (ascending lengths, the largest T), make the run
	// one over sequences of varying length: the lines of the text, batched
	// by length and padded to their bucket (see buckets.go). The
	// validation loss is then the mean over every validation line's tokens.
	Buckets []int

	trainSeqs *seqs // the training split cut into sequences (Buckets)
}

// valWindows returns the windows of the validation loss.
func (x *Text) valWindows() int {
	n := x.ValWindows
	if n <= 0 {
		n = 64
	}
	val := len(x.Val)
	if x.Train == nil && x.Set != nil { // not read yet: the split of its listed size
		total := int(x.Set.Bytes())
		val = total - x.Set.Cut(total)
	}
	if x.T > 0 && val > x.T {
		n = min(n, (val-1)/x.T)
	} else {
		n = 0
	}
	return n
}

// StepsPerEpoch is the updates of one epoch of text: as many windows of T
// bytes as the training split holds, in batches of batch (each batch drawn
// uniformly at random, so an epoch covers the text once in expectation).
func (x *Text) StepsPerEpoch(batch int) int {
	if len(x.Buckets) > 0 && x.Train != nil {
		if x.trainSeqs == nil {
			x.trainSeqs = cutSeqs(x.Train, x.Buckets)
		}
		return x.trainSeqs.batches(batch)
	}
	return max(1, (len(x.Train)+batch*x.T-1)/(batch*x.T))
}

// evaluateText returns the mean cross-entropy (nats per byte) over the
// validation windows: the first ValWindows non-overlapping windows of Val.
func (t *Trainer) evaluateText() (float64, error) {
	txt := t.text
	if len(txt.Buckets) > 0 {
		return t.evaluateSeqs()
	}
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

// resolveText describes a text run: windows of T tokens, int32 next-byte
// labels; the text read later when it is in files.
func (d *Data) resolveText() error {
	t := d.text
	if len(t.Buckets) > 0 {
		last := t.Buckets[len(t.Buckets)-1]
		for i, b := range t.Buckets {
			if b < 1 || i > 0 && b <= t.Buckets[i-1] {
				return fmt.Errorf("train: text %q: buckets %v: want lengths >= 1, ascending", t.Name, t.Buckets)
			}
		}
		if t.T == 0 {
			t.T = last
		}
		if t.T != last {
			return fmt.Errorf("train: text %q: the window %d is not the largest bucket %d", t.Name, t.T, last)
		}
	}
	if t.T <= 0 {
		return fmt.Errorf("train: text %q: a window of %d tokens", t.Name, t.T)
	}
	if t.Train == nil && t.Set == nil {
		return fmt.Errorf("train: text %q holds no bytes", t.Name)
	}
	d.info = data.SetInfo{Train: &data.Examples{Name: t.Name, Shape: tensor.Shape{t.T}},
		Labels: data.LabelKind{Class: true, Classes: 256, Shape: tensor.Shape{t.T}}, HeldOutName: "validation"}
	d.held, d.loaded = t.bytes(), t.Train != nil
	d.resolved = true
	return nil
}

// bytes is the text's size in memory: read, or as its files list it.
func (x *Text) bytes() int64 {
	if x.Train == nil && x.Set != nil {
		return mem.Align(x.Set.Bytes())
	}
	return mem.Align(int64(len(x.Train) + len(x.Val)))
}

// read reads the text's files (Set) into Train and Val.
func (x *Text) read() error {
	if x.Train != nil || x.Set == nil {
		return nil
	}
	tr, val, err := x.Set.Read()
	if err != nil {
		return fmt.Errorf("train: %w", err)
	}
	x.Train, x.Val = tr, val
	return nil
}

// checkText checks that the model reads one int32 window of T tokens and
// its loss takes int32 next-byte labels [T], and that the training text
// holds a window.
func (t *Trainer) checkText(spec step.OutputSpec) error {
	txt := t.text
	in, ok := t.cfg.input()
	if !ok || in.Type() != tensor.Int32 || !in.Shape.Equal(tensor.Shape{txt.T}) {
		return fmt.Errorf("train: a language model on text takes one int32 input of %d tokens; the model's inputs are %v", txt.T, t.cfg.Model.Inputs())
	}
	if spec.Loss == nil || spec.LabelType != tensor.Int32 || !spec.LabelShape.Equal(tensor.Shape{txt.T}) {
		return fmt.Errorf("train: a language model's output %v (per example) must take int32 next-byte labels [%d]", spec.Shape, txt.T)
	}
	return nil
}

// newTextFeed checks the read text and returns its feed.
func (t *Trainer) newTextFeed() (feed, error) {
	txt := t.text
	if len(txt.Buckets) > 0 {
		if txt.trainSeqs == nil {
			txt.trainSeqs = cutSeqs(txt.Train, txt.Buckets)
		}
		if len(txt.trainSeqs.start) == 0 {
			return nil, fmt.Errorf("train: text %q: its training split holds no line of 2 bytes or more", txt.Name)
		}
		t.valSeqs = cutSeqs(txt.Val, txt.Buckets)
		return newBucketFeed(txt.trainSeqs, t.cfg.Batch, t.cfg.Seed), nil
	}
	w, err := data.NewWindows(txt.Train, txt.T)
	if err != nil || len(txt.Train) < txt.T+2 {
		return nil, fmt.Errorf("train: text %q: its training split of %d bytes holds no random window of %d bytes", txt.Name, len(txt.Train), txt.T+1)
	}
	return &textFeed{src: windowSource{text: txt.Train, t: txt.T, w: w, seed: t.cfg.Seed, offsets: make([]int, t.cfg.Batch)},
		count: txt.StepsPerEpoch(t.cfg.Batch)}, nil
}
