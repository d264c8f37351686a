//go:build !amd64 || purego

package kernels

// gemmTiers is the Go micro-kernel alone: this build has no assembly tier.
var gemmTiers = []gemmTier{gemmGo}
