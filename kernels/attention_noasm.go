//go:build !amd64 || purego

package kernels

// attnRowTiers is the Go implementation alone: this build has no assembly.
var attnRowTiers = []attnRowOps{attnRowsGo}

// rowExpSum is attnRows.exp called directly: the Go loop here.
func rowExpSum(row []float32, sub float32) float32 { return attnExpGo(row, sub) }

// rowMax32 is attnRows.max called directly: the Go loop here.
func rowMax32(row []float32) float32 { return attnMaxGo(row) }
