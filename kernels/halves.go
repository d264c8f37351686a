package kernels

import (
	"sync"
	"unsafe"
)

// The data-movement parts of convolution and max pooling (im2col, col2im,
// the pooling loops) work image by image, so a batch splits in two with no
// shared writes: the calling goroutine takes the first half and the image
// worker, a goroutine started once, the second. Tasks travel by value over
// a channel, so a split allocates nothing.

type imageKind uint8

const (
	taskIm2col imageKind = iota
	taskCol2im
	taskMaxPool
	taskMaxPoolGrad
)

// imageTask is one half of a split kernel over images [n0, n0+nb).
type imageTask struct {
	kind   imageKind
	f32    [3][]float32
	f64    [3][]float64
	g      ConvGeom
	n0, nb int
}

// halfMin is the smallest amount of work, in elements moved, worth a split.
const halfMin = 1 << 15

var imageWorker struct {
	once  sync.Once
	mu    sync.Mutex // one split at a time: callers on other goroutines wait
	tasks chan imageTask
	done  chan struct{}
}

func startImageWorker() {
	imageWorker.tasks = make(chan imageTask, 1)
	imageWorker.done = make(chan struct{}, 1)
	go func() {
		for t := range imageWorker.tasks {
			if t.f32[0] != nil {
				runImages(t.kind, t.f32, t.g, t.n0, t.nb)
			} else {
				runImages(t.kind, t.f64, t.g, t.n0, t.nb)
			}
			imageWorker.done <- struct{}{}
		}
	}()
}

// inHalves runs kind over images [n0, n0+nb): in two halves at once when
// more than one thread is allowed and the work is large enough, else here.
// s holds the kernel's operands (for im2col, cols first; for col2im, cols
// second), whose image-ordered rows it offsets per half.
func inHalves[T Float](kind imageKind, s [3][]T, g ConvGeom, n0, nb int) {
	if nb < 2 || Threads() < 2 || nb*g.H*g.W*g.C < halfMin {
		runImages(kind, s, g, n0, nb)
		return
	}
	imageWorker.once.Do(startImageWorker)
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
	t := imageTask{kind: kind, g: g, n0: n0 + half, nb: nb - half}
	var z T
	if unsafe.Sizeof(z) == 4 {
		for i, x := range second {
			t.f32[i] = unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(x))), len(x))
		}
	} else {
		for i, x := range second {
			t.f64[i] = unsafe.Slice((*float64)(unsafe.Pointer(unsafe.SliceData(x))), len(x))
		}
	}
	imageWorker.mu.Lock()
	defer imageWorker.mu.Unlock()
	imageWorker.tasks <- t
	runImages(kind, s, g, n0, half)
	<-imageWorker.done
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
		maxPoolGradImages(s[0], s[1], s[2], g, n0, nb)
	}
}
