package cli

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/headroom-ml/headroom/internal/atomicfile"
	"github.com/headroom-ml/headroom/train"
)

// instrProfile writes --instr-profile's table: every instruction of the
// training step timed over 5 more runs of the last batch (the fastest
// kept), with its FLOPs, GFLOP/s and the kernel the backend chose, and
// prints the five slowest and the convolutions' share to stderr.
func (r *trainRun) instrProfile(t *train.Trainer, stderr io.Writer) error {
	path := r.f.instrProfile
	if path == "" {
		return nil
	}
	rows, err := t.ProfileStep(5)
	if err != nil {
		return err
	}
	var total, conv time.Duration
	var convFlops float64
	for _, it := range rows {
		total += it.Time
		if strings.HasPrefix(it.Op, "conv2d") {
			conv += it.Time
			convFlops += it.Flops
		}
	}
	err = atomicfile.WriteFile(atomicfile.OS, path, 0o666, func(w io.Writer) error {
		tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
		fmt.Fprintln(tw, "#\top\towner\tshape\tkernel\tms\tshare\tGFLOP\tGFLOP/s")
		for i, it := range rows {
			fmt.Fprintf(tw, "%d\t%s\t%s\t%v\t%s\t%.3f\t%.1f%%\t%.4f\t%.1f\n", i, it.Op, it.Owner, it.Shape, dash(it.Kernel),
				it.Time.Seconds()*1e3, 100*it.Time.Seconds()/max(total.Seconds(), 1e-12), it.Flops/1e9, it.GFLOPS())
		}
		fmt.Fprintf(tw, "\ttotal\t\t\t\t%.3f\t100%%\t\t\n", total.Seconds()*1e3)
		return tw.Flush()
	})
	if err != nil {
		return fmt.Errorf("--instr-profile %s: %w", path, err)
	}
	order := make([]int, len(rows))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return rows[order[a]].Time > rows[order[b]].Time })
	fmt.Fprintf(stderr, "instruction profile: step %.2f ms over %d instructions; convolutions %.2f ms at %.1f GFLOP/s; wrote %s\n",
		total.Seconds()*1e3, len(rows), conv.Seconds()*1e3, convFlops/max(conv.Seconds(), 1e-12)/1e9, path)
	for _, i := range order[:min(5, len(order))] {
		it := rows[i]
		fmt.Fprintf(stderr, "  #%d %s %s %v %s: %.3f ms, %.1f GFLOP/s\n", i, it.Op, it.Owner, it.Shape, dash(it.Kernel), it.Time.Seconds()*1e3, it.GFLOPS())
	}
	return nil
}

// dash is s, or "-" when s is empty.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
