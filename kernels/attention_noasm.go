//go:build !amd64 || purego

package kernels

// attnRowTiers is the Go implementation alone: this build has no assembly.
var attnRowTiers = []attnRowOps{attnRowsGo}
