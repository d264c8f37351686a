package kernels

import "unsafe"

// The data-movement parts of convolution and max pooling (im2col, col2im,
// the pooling loops) work image by image, so a batch splits in two with no
// shared writes: the two halves run as a job on a Pool (jobs.go), the
// calling goroutine taking one. Tasks are values in the pool's one job in
// flight, so a split allocates nothing.

type imageKind uint8

const (
	taskIm2col imageKind = iota
	taskCol2im
	taskMaxPool
	taskMaxPoolGrad
	taskMaxPoolReluGrad
)

// imageTask is one half of a split kernel over images [n0, n0+nb).
type imageTask struct {
	kind   imageKind
	f32    [3][]float32
	f64    [3][]float64
	g      ConvGeom
	n0, nb int
}

func (t *imageTask) run() {
	if t.f32[0] != nil {
		runImages(t.kind, t.f32, t.g, t.n0, t.nb)
	} else {
		runImages(t.kind, t.f64, t.g, t.n0, t.nb)
	}
}

// halfMin is the smallest amount of work, in elements moved, worth a split.
const halfMin = 1 << 15

// inHalves runs kind over images [n0, n0+nb): in two halves at once on
// pool p when it has more than one thread and the work is large enough,
// else here.
// s holds the kernel's operands (for im2col, cols first; for col2im, cols
// second), whose image-ordered rows it offsets per half.
func inHalves[T Float](p *Pool, kind imageKind, s [3][]T, g ConvGeom, n0, nb int) {
	if nb < 2 || p.Threads() < 2 || nb*g.H*g.W*g.C < halfMin {
		runImages(kind, s, g, n0, nb)
		return
	}
	half := nb / 2
	second := s
	// cols of im2col and col2im start at image n0: the second half's start
	// half images later
	rows := half * g.OH * g.OW * g.KH * g.KW * g.C
	switch kind {
	case taskIm2col:
		second[0] = s[0][rows:]
	case taskCol2im:
		second[1] = s[1][rows:]
	}
	if !p.calls.jobMu.TryLock() {
		runImages(kind, s, g, n0, nb)
		return
	}
	defer p.calls.jobMu.Unlock()
	j := &p.calls.job
	*j = poolJob{kind: jobImages}
	j.halves[0] = imageTaskOf(kind, s, g, n0, half)
	j.halves[1] = imageTaskOf(kind, second, g, n0+half, nb-half)
	p.runJob(j, 2)
	*j = poolJob{} // drop the caller's slices
}

// imageTaskOf returns the task of kind over images [n0, n0+nb) with
// operands s.
func imageTaskOf[T Float](kind imageKind, s [3][]T, g ConvGeom, n0, nb int) imageTask {
	t := imageTask{kind: kind, g: g, n0: n0, nb: nb}
	var z T
	if unsafe.Sizeof(z) == 4 {
		for i, x := range s {
			t.f32[i] = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(x))), len(x))
		}
	} else {
		for i, x := range s {
			t.f64[i] = unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(x))), len(x))
		}
	}
	return t
}

func runImages[T Float](kind imageKind, s [3][]T, g ConvGeom, n0, nb int) {
	switch kind {
	case taskIm2col:
		im2col(s[0], s[1], g, n0, nb)
	case taskCol2im:
		col2im(s[0], s[1], g, n0, nb)
	case taskMaxPool:
		maxPoolImages(s[0], s[1], g, n0, nb)
	case taskMaxPoolGrad:
		maxPoolGradImages(s[0], s[1], s[2], g, n0, nb, false)
	case taskMaxPoolReluGrad:
		maxPoolGradImages(s[0], s[1], s[2], g, n0, nb, true)
	}
}
