package kernels

// Test hooks for the attention kernels.

// AttentionRowNames lists the implementations of the attention row
// operations this CPU runs, fastest first.
func AttentionRowNames() []string {
	var s []string
	for _, t := range attnRowTiers {
		s = append(s, t.name)
	}
	return s
}

// UseAttentionRows makes the attention kernels use the named row
// operations.
func UseAttentionRows(name string) (restore func()) {
	old := attnRows
	for _, t := range attnRowTiers {
		if t.name == name {
			attnRows = t
			return func() { attnRows = old }
		}
	}
	panic("no attention row operations " + name)
}

// AttentionRowExp runs the named implementation's exp on row: row[j] =
// e^(row[j] - sub), returning the sum.
func AttentionRowExp(name string, row []float32, sub float32) float32 {
	defer UseAttentionRows(name)()
	return attnRows.exp(row, sub)
}

// AttentionRowMax runs the named implementation's max on row.
func AttentionRowMax(name string, row []float32) float32 {
	defer UseAttentionRows(name)()
	return attnRows.max(row)
}

// AttentionRowDS runs the named implementation's ds: ds[j] = p[j]·(ds[j] - di).
func AttentionRowDS(name string, ds, p []float32, di float32) {
	defer UseAttentionRows(name)()
	attnRows.ds(ds, p, di)
}

// AttentionGroups returns the key-block groups the backward pass splits
// each (b, h) into for p's sizes (D >= 1).
func AttentionGroups(p AttentionParams) int {
	pl := newAttnPlan(&p)
	return pl.groups
}

// AttentionLog is the row sums' logarithm of the forward pass.
func AttentionLog(x float32) float64 { return attnLog(x) }

// AttentionRowDrop runs the named implementation's dropout on row with
// DropoutMask's draws for elements e0, e0+1, ... of (seed, step, rate).
func AttentionRowDrop(name string, row []float32, seed uint64, step int64, rate float64, e0 int) {
	defer UseAttentionRows(name)()
	d := newAttnDropout(&AttentionParams{DropoutRate: rate, DropoutSeed: seed, DropoutStep: step})
	d.apply(&attnRows, row, e0)
}

// AttentionRowMask runs the named implementation's mask on row.
func AttentionRowMask(name string, row []float32, m []uint8) {
	defer UseAttentionRows(name)()
	attnRows.mask(row, m)
}
