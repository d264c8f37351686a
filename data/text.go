package data

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Byte-level text: ReadText gathers a file or a folder of files into one
// []byte, and Windows cuts it into windows of T+1 bytes, inputs x [B, T] and
// targets y [B, T] (the next byte), as the peers' sequence workloads do
// (peers/seq.py). A byte is a token: the vocabulary is 256.

// ErrTextTooLarge is the cause (FormatError.Err) of the error ReadText
// returns when the text would pass TextOptions.MaxBytes.
var ErrTextTooLarge = errors.New("text passes MaxBytes")

// TextOptions says which files ReadText reads and how it joins them.
type TextOptions struct {
	// Separator appends "\n" after each file's bytes (a file that already
	// ends in a newline gets a second one), as peers/common.py's go_corpus
	// does.
	Separator bool
	// MaxBytes is the most bytes the text may hold, separators included;
	// zero or less means no limit. Passing it is a *FormatError wrapping ErrTextTooLarge
	// that names the file where the limit falls. Set it for a folder you
	// do not know: without it the folder is read whole into memory.
	MaxBytes int64
	// Hidden includes files and folders whose name starts with "." below
	// the root. By default they are skipped (.git, editor swap files), as
	// a shell glob would; the root itself is always read.
	Hidden bool
	// Keep, when set, is asked about each folder and file below the root
	// that Hidden lets through: rel is its path relative to the root with
	// "/" separators, dir says whether it is a folder. False skips it (a
	// folder with everything under it). Keep is not asked about the root.
	Keep func(rel string, dir bool) bool
}

// TextFile is one file ReadText reads: Path to open (the root joined with
// Rel), Rel its path relative to the root with "/" separators (the file's
// base name when the root is a file), Size its size when it was listed.
type TextFile struct {
	Path string
	Rel  string
	Size int64
}

// TextFiles lists the files ReadText(path, opt) reads, in the order it
// reads them. A file is read alone. A folder is walked recursively and its
// files are sorted by Rel in byte order (not in walk order: "a.b/x" comes
// before "a/x", since '.' < '/'), so the order depends only on the paths,
// as Python's sorted(os.path.relpath(...)) orders them. Regular files are
// listed, and symbolic links to regular files; a link to a folder is not
// followed (as os.walk), and devices, pipes and sockets are skipped. A
// folder or link that cannot be read is an error naming it.
func TextFiles(path string, opt TextOptions) ([]TextFile, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("data: text: %w", err)
	}
	if !info.IsDir() {
		if !info.Mode().IsRegular() {
			return nil, fmt.Errorf("data: text %s: not a regular file or a folder (%v)", path, info.Mode().Type())
		}
		return []TextFile{{Path: path, Rel: filepath.Base(path), Size: info.Size()}}, nil
	}
	var files []TextFile
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("data: text: %w", err)
		}
		if p == path {
			return nil
		}
		rel, err := filepath.Rel(path, p)
		if err != nil {
			return fmt.Errorf("data: text %s: %w", p, err)
		}
		rel = filepath.ToSlash(rel)
		if !opt.Hidden && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			if opt.Keep != nil && !opt.Keep(rel, true) {
				return filepath.SkipDir
			}
			return nil
		}
		var size int64
		switch t := d.Type(); {
		case t.IsRegular():
			info, err := d.Info()
			if err != nil {
				return fmt.Errorf("data: text: %w", err)
			}
			size = info.Size()
		case t&fs.ModeSymlink != 0:
			info, err := os.Stat(p)
			if err != nil {
				return fmt.Errorf("data: text: %w", err)
			}
			if !info.Mode().IsRegular() {
				return nil // a link to a folder (not followed) or a device
			}
			size = info.Size()
		default:
			return nil // a device, pipe or socket
		}
		if opt.Keep != nil && !opt.Keep(rel, false) {
			return nil
		}
		files = append(files, TextFile{Path: p, Rel: rel, Size: size})
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortFunc(files, func(a, b TextFile) int { return strings.Compare(a.Rel, b.Rel) })
	return files, nil
}

// ReadText reads the files TextFiles(path, opt) lists and joins them into
// one []byte with ReadTextFiles.
func ReadText(path string, opt TextOptions) ([]byte, error) {
	files, err := TextFiles(path, opt)
	if err != nil {
		return nil, err
	}
	return ReadTextFiles(files, opt)
}

// ReadTextFiles reads files in order and joins them into one []byte, each
// followed by "\n" if opt.Separator (its other options are TextFiles'). The
// buffer is sized from the listed sizes, so the text is read with one
// allocation unless a file grows while it is read. An unreadable file is an
// error naming it; passing opt.MaxBytes is a *FormatError (format "text")
// wrapping ErrTextTooLarge that names the file and the offset in it where
// the limit falls, found from the listed sizes before anything is read.
func ReadTextFiles(files []TextFile, opt TextOptions) ([]byte, error) {
	sep := int64(0)
	if opt.Separator {
		sep = 1
	}
	var total int64
	for _, f := range files {
		if opt.MaxBytes > 0 && total+f.Size+sep > opt.MaxBytes {
			return nil, tooLarge(f.Path, total, opt.MaxBytes)
		}
		total += f.Size + sep
	}
	buf := make([]byte, 0, total)
	for _, f := range files {
		start := int64(len(buf))
		var err error
		if buf, err = appendFile(buf, f.Path, opt.MaxBytes); err != nil {
			return nil, err
		}
		if opt.MaxBytes > 0 && int64(len(buf))+sep > opt.MaxBytes {
			return nil, tooLarge(f.Path, start, opt.MaxBytes) // the file grew since it was listed
		}
		if opt.Separator {
			buf = append(buf, '\n')
		}
	}
	return buf, nil
}

// tooLarge is the error for a file that starts at byte start of the text
// and carries it past max bytes.
func tooLarge(path string, start, max int64) *FormatError {
	return formatErr("text", path, max-start, ErrTextTooLarge,
		"the file starts at byte %d of the text, whose limit is %d bytes", start, max)
}

// appendFile appends the bytes of the file at path to buf, reading at most
// max+1 bytes in all when max > 0 (enough to see that max is passed).
func appendFile(buf []byte, path string, max int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return buf, fmt.Errorf("data: text: %w", err)
	}
	defer f.Close()
	var r io.Reader = f
	if max > 0 {
		r = io.LimitReader(f, max+1-int64(len(buf)))
	}
	for {
		if len(buf) == cap(buf) {
			// Usually the end of the file: probe before growing the buffer.
			var probe [512]byte
			n, err := r.Read(probe[:])
			buf = append(buf, probe[:n]...)
			if err == io.EOF {
				return buf, nil
			}
			if err != nil {
				return buf, fmt.Errorf("data: text: %w", err)
			}
			continue
		}
		n, err := r.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, fmt.Errorf("data: text: %w", err)
		}
	}
}

// Windows cuts a text into windows of T+1 bytes: the window at offset o
// gives the inputs x[t] = text[o+t] and the targets y[t] = text[o+t+1],
// t < T, as int32 tokens. Batches are filled into the caller's buffers
// without allocating. A Windows is not safe for concurrent use (Random
// reseeds a generator it holds); Consecutive is.
type Windows struct {
	text []byte
	t    int
	pcg  rand.PCG
	rng  *rand.Rand
}

// NewWindows returns the windows of T+1 bytes of text. text is not copied.
// It must hold at least T+1 bytes (one window); Random needs T+2.
func NewWindows(text []byte, T int) (*Windows, error) {
	if T < 1 {
		return nil, fmt.Errorf("data: windows of T+1 bytes with T = %d, want T >= 1", T)
	}
	if len(text) < T+1 {
		return nil, fmt.Errorf("data: a text of %d bytes holds no window of T+1 = %d bytes", len(text), T+1)
	}
	w := &Windows{text: text, t: T}
	w.rng = rand.New(&w.pcg)
	return w, nil
}

// T returns the number of tokens a window gives (its length less one).
func (w *Windows) T() int { return w.t }

// Len returns the length of the text in bytes.
func (w *Windows) Len() int { return len(w.text) }

// NonOverlapping returns how many windows Consecutive can give: those at
// offsets i*T with i*T+T+1 <= Len. Consecutive windows share one byte (the
// last target of one is the first input of the next); their inputs do not
// overlap.
func (w *Windows) NonOverlapping() int { return (len(w.text) - 1) / w.t }

// RandomOffsets fills dst with the offsets Random(x, y, seed, step) uses for
// a batch of len(dst) windows and returns dst. They are drawn uniformly in
// [0, Len-T-1), the range of peers/seq.py's torch.randint(0, len-T-1), by
// math/rand/v2's Rand.IntN over a PCG seeded with (seed, step): offset b is
// the b-th draw of rand.New(rand.NewPCG(seed, step)). A batch is thus a
// function of (seed, step) alone, so a run resumed at step s draws what the
// uninterrupted run drew, and a batch's first offsets do not depend on B.
// (The peer draws from torch's generator: the same distribution, not the
// same offsets.)
func (w *Windows) RandomOffsets(dst []int, seed, step uint64) ([]int, error) {
	n, err := w.randomRange()
	if err != nil {
		return dst, err
	}
	w.pcg.Seed(seed, step)
	for i := range dst {
		dst[i] = w.rng.IntN(n)
	}
	return dst, nil
}

// Random fills x and y, each [B, T] (B = len(x)/T), with B windows at the
// offsets RandomOffsets draws for (seed, step). It does not allocate.
func (w *Windows) Random(x, y []int32, seed, step uint64) error {
	b, err := w.batch(x, y)
	if err != nil {
		return err
	}
	n, err := w.randomRange()
	if err != nil {
		return err
	}
	w.pcg.Seed(seed, step)
	for i := range b {
		w.fill(x[i*w.t:(i+1)*w.t], y[i*w.t:(i+1)*w.t], w.rng.IntN(n))
	}
	return nil
}

// Consecutive fills x and y, each [B, T], with the windows at offsets
// (first+b)*T, b < B: Consecutive(x, y, 0) with B = 64 gives the first 64
// non-overlapping windows, peers/seq.py's validation batch. The windows
// must lie within NonOverlapping. It does not allocate.
func (w *Windows) Consecutive(x, y []int32, first int) error {
	b, err := w.batch(x, y)
	if err != nil {
		return err
	}
	if n := w.NonOverlapping(); first < 0 || first+b > n {
		return fmt.Errorf("data: windows %d..%d of T+1 = %d bytes: a text of %d bytes holds %d non-overlapping windows", first, first+b-1, w.t+1, len(w.text), n)
	}
	for i := range b {
		w.fill(x[i*w.t:(i+1)*w.t], y[i*w.t:(i+1)*w.t], (first+i)*w.t)
	}
	return nil
}

// randomRange returns n, the number of offsets Random draws from: [0, n).
func (w *Windows) randomRange() (int, error) {
	n := len(w.text) - w.t - 1
	if n < 1 {
		return 0, fmt.Errorf("data: random windows of T+1 = %d bytes need a text of at least %d bytes, got %d", w.t+1, w.t+2, len(w.text))
	}
	return n, nil
}

// batch checks that x and y are [B, T] buffers of one size and returns B.
func (w *Windows) batch(x, y []int32) (int, error) {
	if len(x) != len(y) || len(x)%w.t != 0 {
		return 0, fmt.Errorf("data: windows with T = %d: x holds %d tokens and y %d, want the same multiple of T ([B, T] each)", w.t, len(x), len(y))
	}
	return len(x) / w.t, nil
}

// fill writes the window at off: x [T] inputs, y [T] targets.
func (w *Windows) fill(x, y []int32, off int) {
	src := w.text[off : off+len(x)+1]
	y = y[:len(x)]
	for t := range x {
		x[t] = int32(src[t])
		y[t] = int32(src[t+1])
	}
}

// TextSet is byte-level text in files, listed but not yet read: a
// trainer plans with its size (Bytes) and reads it (Read) only once the
// plan fits. The first TrainFraction of the bytes (0: 9/10) trains, the
// rest validates, as go-src and the peers split.
type TextSet struct {
	Name          string
	Files         []TextFile
	Options       TextOptions
	TrainFraction float64
}

// NewTextSet lists the files ReadText(path, opt) would read.
func NewTextSet(name, path string, opt TextOptions) (*TextSet, error) {
	files, err := TextFiles(path, opt)
	if err != nil {
		return nil, err
	}
	return &TextSet{Name: name, Files: files, Options: opt}, nil
}

// Bytes returns the text's size: the listed files' sizes and their
// separators.
func (s *TextSet) Bytes() int64 {
	var n int64
	for _, f := range s.Files {
		n += f.Size
		if s.Options.Separator {
			n++
		}
	}
	return n
}

// Read reads the text and splits it: train is the first TrainFraction of
// the bytes (its capacity ends there), val the rest.
func (s *TextSet) Read() (train, val []byte, err error) {
	b, err := ReadTextFiles(s.Files, s.Options)
	if err != nil {
		return nil, nil, err
	}
	if len(b) == 0 {
		return nil, nil, fmt.Errorf("data: text %s holds no bytes", s.Name)
	}
	cut := s.Cut(len(b))
	return b[:cut:cut], b[cut:], nil
}

// Cut returns where a text of n bytes splits: the bytes before it train.
func (s *TextSet) Cut(n int) int {
	if f := s.TrainFraction; f > 0 && f < 1 {
		return int(float64(n) * f)
	}
	return n * 9 / 10
}
