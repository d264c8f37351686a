package mem

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
)

// LimitWatch re-reads a container's memory limit and what its processes
// hold, for a run that follows the limit while it trains: the cgroup whose
// limit Limit found (its limit, usage and page cache, and on cgroup v2
// memory.high, the OOM kills of memory.events and the pressure of
// memory.pressure where present) and the process's own anonymous memory.
// The files are opened once; a Read is a pread of each into a buffer of the
// watch's own: a few system calls and no allocation.
type LimitWatch struct {
	version                   int
	limit, usage, stat, statm *os.File
	high, events, pressure    *os.File // v2 only, nil where absent
	dir                       string
	buf                       [8192]byte
}

// LimitSample is one reading of a LimitWatch, in bytes.
type LimitSample struct {
	Limit int64 // the cgroup's limit (memory.limit_in_bytes, memory.max)
	High  int64 // v2's memory.high (0: none or v1)
	Usage int64 // what the cgroup holds (memory.usage_in_bytes, memory.current)
	Cache int64 // of it, page cache the kernel reclaims before it kills (v1 total_cache, v2 file)
	Own   int64 // this process's anonymous resident memory (resident - shared of /proc/self/statm)
	// OOMKills counts the cgroup's OOM kills so far (v2 memory.events;
	// -1 on v1, where memory.oom_control holds it but is not read per
	// sample). PressureSome10 is PSI's "some avg10" of memory.pressure, in
	// percent (-1 where absent).
	OOMKills       int64
	PressureSome10 float64
}

// Others returns what the cgroup's other processes hold: its usage less
// page cache and this process's own anonymous memory.
func (s LimitSample) Others() int64 { return max(0, s.Usage-s.Cache-s.Own) }

// Watch opens the files a LimitWatch reads. It fails for a limit that is
// not a cgroup's (the machine's available memory), which no file follows.
func (l Limit) Watch() (*LimitWatch, error) {
	if !l.FromCgroup() || l.File == "" {
		return nil, errors.New("mem: only a container's (cgroup's) memory limit can be followed")
	}
	w := &LimitWatch{version: 1, dir: filepath.Dir(l.File)}
	usage := "memory.usage_in_bytes"
	if l.Kind == LimitCgroupV2 {
		w.version, usage = 2, "memory.current"
	}
	var err error
	open := func(name string, must bool) *os.File {
		if err != nil {
			return nil
		}
		f, e := os.Open(name)
		if e != nil && must {
			err = fmt.Errorf("mem: following the memory limit: %w", e)
		}
		return f
	}
	w.limit = open(l.File, true)
	w.usage = open(filepath.Join(w.dir, usage), true)
	w.stat = open(filepath.Join(w.dir, "memory.stat"), true)
	w.statm = open("/proc/self/statm", true)
	if w.version == 2 {
		w.high = open(filepath.Join(w.dir, "memory.high"), false)
		w.events = open(filepath.Join(w.dir, "memory.events"), false)
		w.pressure = open(filepath.Join(w.dir, "memory.pressure"), false)
	}
	if err != nil {
		w.Close()
		return nil, err
	}
	return w, nil
}

// Close closes the watch's files.
func (w *LimitWatch) Close() {
	for _, f := range []*os.File{w.limit, w.usage, w.stat, w.statm, w.high, w.events, w.pressure} {
		if f != nil {
			f.Close()
		}
	}
}

// Dir returns the cgroup directory the watch reads.
func (w *LimitWatch) Dir() string { return w.dir }

// Read reads every file once and returns the sample.
func (w *LimitWatch) Read() (LimitSample, error) {
	s := LimitSample{OOMKills: -1, PressureSome10: -1}
	var err error
	if s.Limit, err = w.number(w.limit); err != nil {
		return s, err
	}
	if s.Usage, err = w.number(w.usage); err != nil {
		return s, err
	}
	cacheKey := "total_cache"
	if w.version == 2 {
		cacheKey = "file"
	}
	if s.Cache, err = w.key(w.stat, cacheKey); err != nil {
		return s, err
	}
	if s.Own, err = w.ownAnon(); err != nil {
		return s, err
	}
	if w.high != nil {
		s.High, _ = w.number(w.high)
	}
	if w.events != nil {
		s.OOMKills, _ = w.key(w.events, "oom_kill")
	}
	if w.pressure != nil {
		s.PressureSome10 = w.pressureSome10()
	}
	return s, nil
}

// fill preads f from its start into w.buf and returns what it read.
func (w *LimitWatch) fill(f *os.File) ([]byte, error) {
	n, err := f.ReadAt(w.buf[:], 0)
	if err != nil && err != io.EOF {
		return nil, fmt.Errorf("mem: reading %s: %w", f.Name(), err)
	}
	return w.buf[:n], nil
}

// number reads a file of one number ("max": no limit, read as the largest
// int64).
func (w *LimitWatch) number(f *os.File) (int64, error) {
	b, err := w.fill(f)
	if err != nil {
		return 0, err
	}
	n, unlimited, err := parseCgroupBytes(b)
	if err != nil {
		return 0, fmt.Errorf("mem: %s: %w", f.Name(), err)
	}
	if unlimited {
		return 1<<63 - 1, nil
	}
	return n, nil
}

// key reads the number after "key " in a file of "key value" lines (0
// when the key is absent).
func (w *LimitWatch) key(f *os.File, key string) (int64, error) {
	b, err := w.fill(f)
	if err != nil {
		return 0, err
	}
	for len(b) > 0 {
		line := b
		if i := indexByte(b, '\n'); i >= 0 {
			line, b = b[:i], b[i+1:]
		} else {
			b = nil
		}
		if len(line) > len(key) && line[len(key)] == ' ' && string(line[:len(key)]) == key {
			n, _, err := parseCgroupBytes(line[len(key)+1:])
			return n, err
		}
	}
	return 0, nil
}

// ownAnon reads this process's anonymous resident memory: statm's resident
// pages less its shared (file-backed) ones.
func (w *LimitWatch) ownAnon() (int64, error) {
	b, err := w.fill(w.statm)
	if err != nil {
		return 0, err
	}
	var fields [3]int64
	for i := range fields {
		for len(b) > 0 && b[0] == ' ' {
			b = b[1:]
		}
		j := 0
		for j < len(b) && b[j] >= '0' && b[j] <= '9' {
			fields[i] = fields[i]*10 + int64(b[j]-'0')
			j++
		}
		b = b[j:]
	}
	return max(0, fields[1]-fields[2]) * int64(os.Getpagesize()), nil
}

// pressureSome10 reads the "some avg10=" figure of memory.pressure.
func (w *LimitWatch) pressureSome10() float64 {
	b, err := w.fill(w.pressure)
	if err != nil {
		return -1
	}
	const tag = "some avg10="
	for i := 0; i+len(tag) <= len(b); i++ {
		if string(b[i:i+len(tag)]) == tag {
			j := i + len(tag)
			k := j
			for k < len(b) && (b[k] == '.' || b[k] >= '0' && b[k] <= '9') {
				k++
			}
			v, err := strconv.ParseFloat(string(b[j:k]), 64)
			if err != nil {
				return -1
			}
			return v
		}
	}
	return -1
}

// parseCgroupBytes parses a number of bytes, or "max", with trailing space,
// without allocating.
func parseCgroupBytes(b []byte) (n int64, unlimited bool, err error) {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == ' ') {
		b = b[:len(b)-1]
	}
	if string(b) == "max" {
		return 0, true, nil
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false, errors.New("not a byte count")
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false, errors.New("not a byte count")
		}
		n = n*10 + int64(c-'0')
	}
	return n, false, nil
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}
