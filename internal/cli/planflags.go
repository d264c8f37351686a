package cli

import (
	"flag"

	"github.com/headroom-ml/headroom/mem"
)

// planFlags are plan's own flags.
type planFlags struct {
	asJSON     bool
	ranks      int
	shard      bool
	zero       int
	bucketSize string
}

// register adds plan's own flags to fs.
func (f *planFlags) register(fs *flag.FlagSet) {
	fs.BoolVar(&f.asJSON, "json", false, "print one JSON object")
	fs.IntVar(&f.ranks, "ranks", 1, "plan one process of a data-parallel run over this many (as under mpirun -np N): its share of --batch, the gradient buckets")
	fs.BoolVar(&f.shard, "shard-optimizer", false, "with --ranks: keep 1/ranks of the optimizer state on each process (--zero 1)")
	fs.IntVar(&f.zero, "zero", 0, zeroUsage)
	fs.StringVar(&f.bucketSize, "bucket-size", "1MiB", "with --ranks: the size of a gradient bucket")
}

// check returns the bucket size and the ZeRO stage the flags ask for, or
// a usage error.
func (f *planFlags) check() (int64, int, error) {
	bucketBytes, err := mem.ParseBytes(f.bucketSize)
	if err != nil || bucketBytes <= 0 {
		return 0, 0, usagef("--bucket-size %q: want a size such as 1MiB", f.bucketSize)
	}
	if f.ranks < 1 {
		return 0, 0, usagef("--ranks %d: want at least 1", f.ranks)
	}
	stage, err := zeroStage(f.zero, f.shard)
	return bucketBytes, stage, err
}
