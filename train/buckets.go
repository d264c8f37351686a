package train

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/headroom-ml/headroom/compile"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/runtime"
)

// A text with Buckets is a run over sequences of varying length, as
// tf.data's bucket_by_sequence_length batches them: the text is cut into
// lines (each with its newline; a line longer than the largest bucket is
// cut into pieces of that many tokens), each a sequence predicting its
// next bytes. A sequence of L tokens belongs to the smallest bucket of at
// least L; each batch holds sequences of one bucket, padded to the
// bucket's length (and with empty rows after a bucket's last sequences)
// with labels of -1, which the loss leaves out
// (nn.SparseCategoricalCrossentropy.IgnoreNegative): padding changes
// neither the loss nor the gradients. The model is compiled at each
// bucket's length (nn.LengthModel), every program in one reservation whose
// arena is the largest bucket's, so the plan holds for every batch.

// seqs is a text cut into sequences for a bucketed run.
type seqs struct {
	text     []byte
	start, n []int   // each sequence's first byte, and its bytes (tokens + 1)
	buckets  []int   // the buckets' lengths, ascending
	byBucket [][]int // the sequences of each bucket
}

// cutSeqs cuts text into the sequences of buckets (ascending).
func cutSeqs(text []byte, buckets []int) *seqs {
	s := &seqs{text: text, buckets: buckets, byBucket: make([][]int, len(buckets))}
	longest := buckets[len(buckets)-1]
	add := func(start, n int) {
		if n < 2 { // a sequence needs a token and its next byte
			return
		}
		b, _ := slices.BinarySearch(buckets, n-1)
		s.byBucket[b] = append(s.byBucket[b], len(s.start))
		s.start, s.n = append(s.start, start), append(s.n, n)
	}
	for lo := 0; lo < len(text); {
		end := lo
		for end < len(text) && text[end] != '\n' {
			end++
		}
		end = min(end+1, len(text)) // with its newline
		for p := lo; p < end-1; p += longest {
			add(p, min(end-p, longest+1)) // pieces overlap by a byte: every next byte is a label once
		}
		lo = end
	}
	return s
}

// batches returns how many batches of batch sequences an epoch has.
func (s *seqs) batches(batch int) int {
	n := 0
	for _, b := range s.byBucket {
		n += (len(b) + batch - 1) / batch
	}
	return n
}

// seqBatch is one batch of a bucket: its sequences.
type seqBatch struct {
	bucket int // the bucket's length
	idx    []int
}

// bucketFeed feeds a bucketed text: each epoch visits every sequence once,
// each bucket's sequences in a fresh order drawn from (seed, epoch) and the
// batches of all buckets in a fresh order too. Its orders are reshuffled
// in place: an epoch allocates nothing.
type bucketFeed struct {
	s     *seqs
	batch int
	seed  uint64
	perms [][]int
	order []seqBatch
	at    int
	src   seqSource
}

func newBucketFeed(s *seqs, batch int, seed uint64) *bucketFeed {
	f := &bucketFeed{s: s, batch: batch, seed: seed, perms: make([][]int, len(s.byBucket)), src: seqSource{s: s}}
	for b, list := range s.byBucket {
		f.perms[b] = slices.Clone(list)
		for lo := 0; lo < len(list); lo += batch {
			f.order = append(f.order, seqBatch{bucket: s.buckets[b]})
		}
	}
	return f
}

func (f *bucketFeed) batches() int { return len(f.order) }

func (f *bucketFeed) epoch(_ context.Context, ep, skip int) (epochFeed, error) {
	rng := rand.New(rand.NewPCG(f.seed, uint64(ep)+0xb0c4e7))
	k := 0
	for b, p := range f.perms {
		copy(p, f.s.byBucket[b])
		rng.Shuffle(len(p), func(i, j int) { p[i], p[j] = p[j], p[i] })
		for lo := 0; lo < len(p); lo += f.batch {
			f.order[k] = seqBatch{bucket: f.s.buckets[b], idx: p[lo:min(lo+f.batch, len(p))]}
			k++
		}
	}
	rng.Shuffle(len(f.order), func(i, j int) { f.order[i], f.order[j] = f.order[j], f.order[i] })
	f.at = skip
	return f, nil
}

func (f *bucketFeed) next(int64) (batchSource, int, error) {
	if f.at >= len(f.order) {
		return nil, 0, io.EOF
	}
	b := f.order[f.at]
	f.at++
	f.src.t, f.src.idx = b.bucket, b.idx
	return &f.src, f.batch, nil // padded to the batch: its programs are the batch's
}

func (f *bucketFeed) close() {}

// seqSource feeds a batch of sequences of one bucket: row r < len(idx) is
// sequence idx[r] (x its bytes, y the next ones) padded to t tokens with
// x 0 and y -1; the rows after them are padding only.
type seqSource struct {
	s   *seqs
	t   int
	idx []int
}

func (src *seqSource) fill(pr *program, lo, hi int) {
	x, y := pr.in.x.Int32s(), pr.in.y.Int32s()
	t := src.t
	for r := lo; r < hi; r++ {
		xi, yi := x[(r-lo)*t:(r-lo+1)*t], y[(r-lo)*t:(r-lo+1)*t]
		n := 0
		if r < len(src.idx) {
			i := src.idx[r]
			b := src.s.text[src.s.start[i] : src.s.start[i]+src.s.n[i]]
			n = len(b) - 1
			for j := 0; j < n; j++ {
				xi[j], yi[j] = int32(b[j]), int32(b[j+1])
			}
		}
		for j := n; j < t; j++ {
			xi[j], yi[j] = 0, -1
		}
	}
}

func (src *seqSource) label(int) int { return -1 } // no accuracy for a language model

// bucket returns the length the batch runs at.
func (src *seqSource) bucket() int { return src.t }

// valid returns the tokens (the labels kept) of rows [lo, hi).
func (src *seqSource) valid(lo, hi int) int {
	n := 0
	for r := lo; r < min(hi, len(src.idx)); r++ {
		n += src.s.n[src.idx[r]] - 1
	}
	return n
}

// bucketed is a batch of a bucketed run: the length it runs at, and the
// labels kept per rows (micro-batches and processes weigh by them).
type bucketed interface {
	bucket() int
	valid(lo, hi int) int
}

// progKey names the program name runs at bucket length t: the plain name
// for the largest bucket (and for runs without buckets, t 0), name@t for
// the others.
func (c *Config) progKey(name string, t int) string {
	if t == 0 || len(c.buckets) == 0 || t == c.buckets[len(c.buckets)-1] {
		return name
	}
	return fmt.Sprintf("%s@%d", name, t)
}

// forBuckets sets what a bucketed text needs of the configuration: the
// buckets, and the loss that leaves the padding out.
func (c *Config) forBuckets(d *Data) error {
	if d.text == nil || len(d.text.Buckets) == 0 {
		c.buckets = nil
		return nil
	}
	c.buckets = d.text.Buckets
	if _, ok := c.Model.(nn.LengthModel); !ok {
		return fmt.Errorf("train: buckets need a model over sequences of varying length (gpt, lstm); %T is not one", c.Model)
	}
	l, ok := c.Loss.(nn.SparseCategoricalCrossentropy)
	if !ok {
		return fmt.Errorf("train: buckets need the sparse categorical cross-entropy (it leaves the padding out); the loss is %s", c.Loss.Name())
	}
	l.IgnoreNegative = true
	c.Loss = l
	return nil
}

// addBuckets compiles the programs of the buckets shorter than the
// largest (compileAs made the largest's): the model at each one's length,
// named name@length.
func (c *Config) addBuckets(progs map[string]*program) error {
	lm := c.Model.(nn.LengthModel)
	for _, t := range c.buckets[:len(c.buckets)-1] {
		m, err := lm.AtLength(t)
		if err != nil {
			return fmt.Errorf("train: bucket %d: %w", t, err)
		}
		cb := *c
		cb.Model, cb.buckets = m, nil
		for key, pr := range progs {
			if pr.bucket != 0 {
				continue
			}
			p, err := cb.compile(pr.batch, pr.mode)
			if err != nil {
				return fmt.Errorf("train: building the %s step of bucket %d (batch %d): %w", key, t, pr.batch, err)
			}
			k := fmt.Sprintf("%s@%d", key, t)
			p.Name = k
			progs[k] = &program{p: p, batch: pr.batch, mode: pr.mode, bucket: t}
		}
	}
	return nil
}

// evaluateSeqs returns the validation loss of a bucketed text: the mean
// cross-entropy over the tokens of every validation sequence (nats per
// byte), each bucket's batches run at its length.
func (t *Trainer) evaluateSeqs() (float64, error) {
	s := t.valSeqs
	if s == nil || len(s.start) == 0 {
		return math.NaN(), nil
	}
	var sum float64
	var tokens int
	for b, list := range s.byBucket {
		pr := t.progs[t.cfg.progKey("eval", s.buckets[b])]
		if pr == nil {
			return math.NaN(), fmt.Errorf("train: no evaluation step for bucket %d", s.buckets[b])
		}
		for lo := 0; lo < len(list); lo += pr.batch {
			src := seqSource{s: s, t: s.buckets[b], idx: list[lo:min(lo+pr.batch, len(list))]}
			src.fill(pr, 0, pr.batch)
			if err := pr.x.Run(); err != nil {
				return math.NaN(), fmt.Errorf("train: evaluating %q (bucket %d): %w", t.text.Name, s.buckets[b], err)
			}
			n := src.valid(0, pr.batch)
			// the batch's losses sum to batch x the mean over its tokens
			sum += pr.loss.Float64At(0) * float64(n) / float64(pr.batch)
			tokens += n
		}
	}
	return sum / float64(max(tokens, 1)), nil
}

// BucketPlan is one bucket of a bucketed text: its length and the bytes a
// run of it alone would reserve.
type BucketPlan struct {
	Length int
	Peak   int64
}

// bucketPlans returns each bucket's plan: its programs' reservation and
// the input the run holds beside them (extra).
func (c *Config) bucketPlans(progs map[string]*program, extra int64) []BucketPlan {
	if len(c.buckets) == 0 {
		return nil
	}
	out := make([]BucketPlan, len(c.buckets))
	for i, t := range c.buckets {
		var list []*compile.Program
		for _, pr := range progs {
			if pr.bucket == t || pr.bucket == 0 && i == len(c.buckets)-1 {
				list = append(list, pr.p)
			}
		}
		out[i] = BucketPlan{Length: t, Peak: runtime.Reserve(list).Bytes() + extra}
	}
	return out
}

// LongestWindow returns the longest window, up to most tokens, whose run
// of model(T) on txt (fixed windows of T, no buckets) fits in budget
// bytes; 0 if none does. It doubles T from 1 while the run fits, then
// bisects.
func LongestWindow(cfg Config, txt Text, budget int64, most int, model func(T int) (nn.Model, error)) (int, error) {
	fits := func(t int) (bool, error) {
		m, err := model(t)
		if err != nil {
			return false, err
		}
		x := txt
		x.T, x.Buckets, x.trainSeqs = t, nil, nil
		c := cfg
		c.Model = m
		rp, err := PlanFor(c, OnText(&x))
		if err != nil {
			return false, err
		}
		return rp.Peak <= budget, nil
	}
	lo, hi := 0, 1 // fits(lo) (0 by convention)
	for hi <= most {
		ok, err := fits(hi)
		if err != nil || !ok {
			if err != nil {
				return 0, err
			}
			return largest(lo, hi-1, fits)
		}
		lo, hi = hi, hi*2
	}
	return largest(lo, most, fits)
}
