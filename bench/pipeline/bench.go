package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/internal/atomicfile"
	"github.com/headroom-ml/headroom/mem"
	"github.com/headroom-ml/headroom/tensor"
)

// A synthetic record is 8 KiB: a 16-byte header (magic "HRR1", int32 label,
// crc32c of the payload, uint32 index) and 2044 float32 features.
const (
	recordBytes  = 8192
	headerBytes  = 16
	features     = (recordBytes - headerBytes) / 4
	magic        = 0x31525248 // "HRR1" little endian
	shuffleBuf   = 10000
	batchSize    = 256
	readBufBytes = 4 << 20
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

type benchConfig struct {
	size, budget int64
	dir          string
	cold         bool
	seed         uint64
	remove       bool
	rounds       int
	verbose      bool
	verify       bool
}

type result struct {
	size            int64
	rawMBs, pipeMBs float64
	peakRSSMiB      float64
	ledgerPeak      int64
	cache           string
	stats           data.Stats
}

func run(c benchConfig) (result, error) {
	n := c.size / recordBytes
	if n < 1 {
		return result{}, fmt.Errorf("--size %d is smaller than one %d-byte record", c.size, recordBytes)
	}
	path := filepath.Join(c.dir, "headroom-pipeline-"+strconv.FormatInt(n*recordBytes, 10)+".rec")
	t0 := time.Now()
	wrote, err := ensureFile(path, n)
	if err != nil {
		return result{}, err
	}
	if wrote {
		fmt.Printf("wrote %s (%s) in %v\n", path, mem.FormatBytes(n*recordBytes), time.Since(t0).Round(time.Millisecond))
	} else {
		fmt.Printf("reusing %s\n", path)
	}
	if c.remove {
		defer os.Remove(path)
	}
	r := result{size: n * recordBytes, cache: "warm"}
	if c.cold {
		r.cache = "cold"
		if err := evict(path); err != nil {
			fmt.Printf("cannot evict the file from the page cache (%v): measuring warm\n", err)
			c.cold, r.cache = false, "warm"
		}
	}
	// prepare puts the file in the same page-cache state before every read.
	prepare := func() error {
		if c.cold {
			return evict(path)
		}
		_, err := rawRead(path)
		return err
	}
	// Interleave raw reads and pipeline passes so that both see the same
	// disk (whose speed drifts from second to second on a shared VM), and
	// report the median of each.
	var raws, pipes []float64
	for round := range c.rounds {
		runtime.GC() // the last pass's dropped buffers, before the next one
		debug.FreeOSMemory()
		if err := prepare(); err != nil {
			return result{}, err
		}
		rcpu0 := cpuTime()
		raw, err := rawRead(path)
		if err != nil {
			return result{}, err
		}
		rcpu := (cpuTime() - rcpu0).Seconds() / raw.Seconds()
		if err := prepare(); err != nil {
			return result{}, err
		}
		cpu0 := cpuTime()
		pass, err := runPipeline(path, n, c)
		if err != nil {
			return result{}, err
		}
		cpu := (cpuTime() - cpu0).Seconds() / pass.wall.Seconds()
		raws = append(raws, float64(r.size)/raw.Seconds()/1e6)
		pipes = append(pipes, float64(r.size)/pass.wall.Seconds()/1e6)
		fmt.Printf("round %d: raw read %v (%.1f MB/s, %.2f CPUs busy), pipeline %v (%.1f MB/s, %.2f CPUs busy), ratio %.3f, ledger peak %s (%s page cache)\n",
			round+1, raw.Round(time.Millisecond), raws[round], rcpu, pass.wall.Round(time.Millisecond), pipes[round], cpu,
			pipes[round]/raws[round], mem.FormatBytes(pass.ledgerPeak), r.cache)
		if c.verbose {
			fmt.Println(pass.stats)
		}
		r.ledgerPeak = max(r.ledgerPeak, pass.ledgerPeak)
		r.stats = pass.stats
	}
	r.rawMBs, r.pipeMBs = median(raws), median(pipes)
	var err2 error
	r.peakRSSMiB, err2 = peakRSSMiB()
	return r, err2
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

type pass struct {
	wall       time.Duration
	ledgerPeak int64
	stats      data.Stats
}

// runPipeline streams the file once through the measured pipeline.
func runPipeline(path string, n int64, c benchConfig) (pass, error) {
	host := mem.NewLedger("host", 0)
	t0 := time.Now()
	it, err := pipeline(path, c.seed, c.verify).Iter(context.Background(), data.Config{Ledger: host, Budget: c.budget})
	if err != nil {
		return pass{}, err
	}
	defer it.Close()
	var samples int64
	for {
		b, err := it.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return pass{}, err
		}
		samples += int64(b.Size)
	}
	p := pass{wall: time.Since(t0), ledgerPeak: it.Ledger().Peak(), stats: it.Stats()}
	if samples != n {
		return pass{}, fmt.Errorf("pipeline yielded %d samples, the file has %d", samples, n)
	}
	return p, nil
}

// pipeline is the measured input pipeline.
func pipeline(path string, seed uint64, verify bool) data.Dataset[data.Batch] {
	recs := data.FixedLengthRecords(path, recordBytes, data.RecordOptions{BufferSize: readBufBytes})
	dec := decode
	if !verify {
		dec = decodeUnchecked
	}
	samples := data.Map(recs.Shuffle(shuffleBuf, seed), "decode", dec, data.Parallel(data.Autotune))
	return data.Batches(samples, batchSize, false).Prefetch(data.Autotune)
}

// decode checks a record's magic and payload checksum (crc32c, as a
// TFRecord reader would) and returns views of its features and label (no
// copy).
func decode(ctx context.Context, r data.Record) (data.Sample, error) {
	if len(r.Data) == recordBytes && crc32.Checksum(r.Data[headerBytes:], castagnoli) != binary.LittleEndian.Uint32(r.Data[8:]) {
		return data.Sample{}, &data.FormatError{Format: "bench", File: r.File, Offset: r.Offset, Msg: "payload checksum mismatch"}
	}
	return decodeUnchecked(ctx, r)
}

// decodeUnchecked checks a record's magic and returns views of its features
// and label, as tf.io.decode_raw would (without its copy).
func decodeUnchecked(ctx context.Context, r data.Record) (data.Sample, error) {
	b := r.Data
	if len(b) != recordBytes || binary.LittleEndian.Uint32(b) != magic {
		return data.Sample{}, &data.FormatError{Format: "bench", File: r.File, Offset: r.Offset, Msg: "bad magic"}
	}
	payload := b[headerBytes:]
	x, err := tensor.FromBytes(tensor.Float32, tensor.Shape{features}, payload)
	if err != nil {
		return data.Sample{}, err
	}
	y, err := tensor.FromBytes(tensor.Int32, nil, b[4:8])
	if err != nil {
		return data.Sample{}, err
	}
	return data.NewSample(x, y, r.Block()), nil
}

// ensureFile writes n synthetic records to path unless a complete file is
// there; it reports whether it wrote.
func ensureFile(path string, n int64) (bool, error) {
	if fi, err := os.Stat(path); err == nil && fi.Size() == n*recordBytes {
		f, err := os.Open(path)
		if err == nil {
			var h [4]byte
			_, err = io.ReadFull(f, h[:])
			f.Close()
			if err == nil && binary.LittleEndian.Uint32(h[:]) == magic {
				return false, nil
			}
		}
	}
	// written atomically (package atomicfile): an interrupted run leaves
	// no short file to be reused
	err := atomicfile.WriteFile(atomicfile.OS, path, 0o666, func(w io.Writer) error {
		rec := make([]byte, recordBytes)
		s := uint64(0x9e3779b97f4a7c15)
		for i := range n {
			for j := headerBytes; j < recordBytes; j += 8 { // xorshift64 noise
				s ^= s << 13
				s ^= s >> 7
				s ^= s << 17
				binary.LittleEndian.PutUint64(rec[j:], s&0x3f7f_ffff_3f7f_ffff) // finite floats
			}
			binary.LittleEndian.PutUint32(rec[0:], magic)
			binary.LittleEndian.PutUint32(rec[4:], uint32(i%10))
			binary.LittleEndian.PutUint32(rec[8:], crc32.Checksum(rec[headerBytes:], castagnoli))
			binary.LittleEndian.PutUint32(rec[12:], uint32(i))
			if _, err := w.Write(rec); err != nil {
				return err
			}
		}
		return nil
	})
	return err == nil, err
}

// rawRead reads path sequentially with the pipeline's buffer size.
func rawRead(path string) (time.Duration, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buf := make([]byte, readBufBytes)
	t0 := time.Now()
	for {
		_, err := f.Read(buf)
		if err == io.EOF {
			return time.Since(t0), nil
		}
		if err != nil {
			return 0, err
		}
	}
}

// cpuTime returns the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakRSSMiB returns the process's peak resident set (VmHWM).
func peakRSSMiB() (float64, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 64)
			return kb / 1024, err
		}
	}
	return 0, errors.New("no VmHWM in /proc/self/status")
}
