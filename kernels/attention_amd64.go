//go:build !purego

package kernels

import "golang.org/x/sys/cpu"

//go:generate go run ./internal/genattn -out attention_amd64.s -stubs attention_stub_amd64.go -pkg kernels

// attnRowTiers are the implementations of the attention row operations this
// CPU runs, fastest first: AVX-512 (F for VSCALEFPS and the k-masks, DQ for
// the dropout hash's VPMULLQ, BMI2 for the tail mask), AVX2+FMA (e^x, max
// and ds; masks and dropout in Go), Go.
var attnRowTiers = func() []attnRowOps {
	var t []attnRowOps
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512DQ && cpu.X86.HasBMI2 {
		t = append(t, attnRowOps{name: "avx512", max: attnMax512s, exp: attnExp512s, ds: attnDS512s, mask: attnMask512s, drop: attnDrop512s})
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		t = append(t, attnRowOps{name: "avx2", max: attnMaxAVX2s, exp: attnExpAVX2s, ds: attnDSAVX2s, mask: attnMaskGo, drop: attnDropGo})
	}
	return append(t, attnRowsGo)
}()

func attnMax512s(row []float32) float32 { return attnMax512(&row[0], len(row)) }

func attnExp512s(row []float32, sub float32) float32 {
	if len(row) == 0 {
		return 0
	}
	return attnExp512(&row[0], len(row), sub)
}

func attnDS512s(ds, p []float32, di float32) {
	if len(ds) == 0 {
		return
	}
	p = p[:len(ds)]
	attnDS512(&ds[0], &p[0], len(ds), di)
}

func attnMaxAVX2s(row []float32) float32 { return attnMaxAVX2(&row[0], len(row)) }

func attnExpAVX2s(row []float32, sub float32) float32 {
	if len(row) == 0 {
		return 0
	}
	return attnExpAVX2(&row[0], len(row), sub)
}

func attnDSAVX2s(ds, p []float32, di float32) {
	if len(ds) == 0 {
		return
	}
	p = p[:len(ds)]
	attnDSAVX2(&ds[0], &p[0], len(ds), di)
}

func attnDrop512s(row []float32, x0, threshold uint64, keep float32) {
	if len(row) == 0 {
		return
	}
	attnDrop512(&row[0], len(row), x0, attnGamma, threshold, keep)
}

func attnMask512s(row []float32, m []uint8) {
	if len(row) == 0 {
		return
	}
	m = m[:len(row)]
	attnMask512(&row[0], &m[0], len(row))
}

// rowExpSum is attnRows.exp called directly (so that a caller's buffer on
// its stack does not escape through a function value).
func rowExpSum(row []float32, sub float32) float32 {
	switch attnRows.name {
	case "avx512":
		return attnExp512s(row, sub)
	case "avx2":
		return attnExpAVX2s(row, sub)
	}
	return attnExpGo(row, sub)
}

// rowMax32 is attnRows.max called directly.
func rowMax32(row []float32) float32 {
	switch attnRows.name {
	case "avx512":
		return attnMax512s(row)
	case "avx2":
		return attnMaxAVX2s(row)
	}
	return attnMaxGo(row)
}
