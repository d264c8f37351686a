package cli

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/nn"
	"github.com/headroom-ml/headroom/tensor"
	"github.com/headroom-ml/headroom/train"
)

// parseBuckets reads --buckets: lengths, comma-separated.
func (o *options) parseBuckets(v string) error {
	o.buckets = nil
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return fmt.Errorf("%q: want lengths such as 32,64,128", v)
		}
		o.buckets = append(o.buckets, n)
	}
	slices.Sort(o.buckets)
	o.buckets = slices.Compact(o.buckets)
	return nil
}

// checkBuckets refuses --buckets where it cannot apply and makes the
// largest bucket the window.
func (o *options) checkBuckets() error {
	if len(o.buckets) == 0 {
		return nil
	}
	largest := o.buckets[len(o.buckets)-1]
	switch {
	case !o.isText():
		return usagef("--buckets batches a text's lines by length: give --text FILE or --dataset go-src")
	case o.model != "gpt" && o.model != "lstm":
		return usagef("--buckets needs a model over sequences of varying length (gpt, lstm), not %s", o.model)
	case o.set["seq"] && o.seq != largest:
		return usagef("--seq %d is not the largest of --buckets (%d): the largest bucket is the window", o.seq, largest)
	}
	o.seq = largest
	return nil
}

// bucketReport is one bucket of a plan: its length and what a run of it
// alone reserves.
type bucketReport struct {
	Length    int   `json:"length"`
	PeakBytes int64 `json:"peak_bytes"`
}

// addBuckets adds a bucketed text's buckets to the report and, under a
// budget, the longest window of the model that fits it.
func (o *options) addBuckets(r *planReport, cfg train.Config, rp *train.RunPlan) error {
	if len(rp.Buckets) == 0 {
		return nil
	}
	for _, b := range rp.Buckets {
		r.Buckets = append(r.Buckets, bucketReport{Length: b.Length, PeakBytes: b.Peak})
	}
	budget, _ := o.planBudget()
	if budget <= 0 {
		return nil
	}
	longest, err := o.longestWindow(cfg, budget)
	if err != nil {
		return err
	}
	r.LongestSeq = &longest
	return nil
}

// longestWindow returns the longest window of the run's model, on its
// text, that fits in budget bytes (train.LongestWindow, up to 65,536).
func (o *options) longestWindow(cfg train.Config, budget int64) (int, error) {
	txt, err := o.textData()
	if err != nil {
		return 0, err
	}
	return train.LongestWindow(cfg, *txt, budget, 1<<16, func(t int) (nn.Model, error) {
		return nn.NewModel(o.model, tensor.Shape{t}, vocab)
	})
}

// printBuckets prints a plan's buckets.
func printBuckets(w io.Writer, r *planReport) {
	if len(r.Buckets) == 0 {
		return
	}
	fmt.Fprintf(w, "buckets (each batch padded to the smallest that holds its longest line; one reservation holds them all):\n")
	for _, b := range r.Buckets {
		fmt.Fprintf(w, "  %6d tokens: peak %s alone\n", b.Length, mem.FormatBytes(b.PeakBytes))
	}
	if r.LongestSeq != nil {
		if *r.LongestSeq > 0 {
			fmt.Fprintf(w, "the longest window of this model that fits the budget: %d tokens\n", *r.LongestSeq)
		} else {
			fmt.Fprintf(w, "no window of this model fits the budget\n")
		}
	}
}
