// Command pipeline measures headroom's input pipeline against the disk: it
// writes a synthetic file of fixed-size records (once, cached in the temp
// directory), measures the raw sequential read rate of that file, then
// streams it through Shuffle(10000) -> Map(decode, Autotune workers) ->
// Batches(256) -> Prefetch(Autotune) under a RAM budget and prints
//
//	RESULT size_bytes=... budget_bytes=... raw_mb_s=... pipeline_mb_s=...
//	throughput_ratio=... peak_rss_mib=... ledger_peak_bytes=... cache=...
//
// A record is 8 KiB: a 16-byte header (magic, int32 label, crc32c of the
// payload, index) and 2044 float32 features. decode checks the magic and
// the payload's crc32c and returns zero-copy views (--verify=false skips the
// checksum). Both the raw read and the pipeline read 4 MiB at a time.
//
// raw_mb_s and pipeline_mb_s are medians over interleaved rounds (raw read,
// pipeline pass, raw read, ...), each read starting from the same page-cache
// state: cold (the file's pages evicted with posix_fadvise DONTNEED before
// every read; the default) or warm (read once before). peak_rss_mib is the
// process's VmHWM over the whole run, file writing included.
//
// Usage: go run ./bench/pipeline --size 4GiB --budget 256MiB
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"runtime/pprof"

	"github.com/headroom-ml/headroom/internal/atomicfile"
	"github.com/headroom-ml/headroom/mem"
)

func main() {
	sizeFlag := flag.String("size", "4GiB", "size of the synthetic record file")
	budgetFlag := flag.String("budget", "256MiB", "RAM budget of the pipeline")
	dir := flag.String("dir", os.TempDir(), "directory of the cached record file")
	cache := flag.String("cache", "cold", "page-cache state of both reads: cold (evicted with fadvise before each) or warm")
	seed := flag.Uint64("seed", 1, "shuffle seed")
	remove := flag.Bool("rm", false, "remove the record file afterwards")
	rounds := flag.Int("rounds", 5, "interleaved rounds of raw read and pipeline pass; medians are reported")
	verbose := flag.Bool("v", false, "print every round's stage stats")
	verify := flag.Bool("verify", true, "decode verifies each record's crc32c (false: header check and views only)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of the run to this file")
	flag.Parse()
	if *cpuProfile != "" { // written atomically, as every file headroom writes
		f, err := atomicfile.Create(atomicfile.OS, *cpuProfile, 0o666)
		check(err)
		check(pprof.StartCPUProfile(f))
		defer func() {
			pprof.StopCPUProfile()
			check(f.Commit())
		}()
	}

	size, err := mem.ParseBytes(*sizeFlag)
	check(err)
	budget, err := mem.ParseBytes(*budgetFlag)
	check(err)
	if *cache != "cold" && *cache != "warm" {
		check(fmt.Errorf("--cache %q: want cold or warm", *cache))
	}
	// Go-heap settings, stated in the output: the pipeline's buffers are
	// recycled through free lists, so the heap stays near the ledger; the
	// soft memory limit makes the GC return what little garbage there is
	// before RSS drifts above budget + runtime overhead.
	limit := budget + 96<<20
	debug.SetMemoryLimit(limit)
	fmt.Printf("settings: GOGC=100 (default) GOMEMLIMIT=%s (budget + 96 MiB)\n", mem.FormatBytes(limit))

	r, err := run(benchConfig{size: size, budget: budget, dir: *dir, cold: *cache == "cold", seed: *seed, remove: *remove, rounds: max(1, *rounds), verbose: *verbose, verify: *verify})
	if err != nil {
		pprof.StopCPUProfile()
	}
	check(err)
	fmt.Println(r.stats)
	fmt.Printf("RESULT size_bytes=%d budget_bytes=%d raw_mb_s=%.1f pipeline_mb_s=%.1f throughput_ratio=%.3f peak_rss_mib=%.1f ledger_peak_bytes=%d cache=%s\n",
		r.size, budget, r.rawMBs, r.pipeMBs, r.pipeMBs/r.rawMBs, r.peakRSSMiB, r.ledgerPeak, r.cache)
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "pipeline:", err)
		os.Exit(1)
	}
}
