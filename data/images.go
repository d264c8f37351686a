package data

import (
	"context"
	"fmt"
	"image"
	"image/draw"
	_ "image/gif"  // register GIF (the first frame, as Keras)
	_ "image/jpeg" // register JPEG
	_ "image/png"  // register PNG
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/headroom-ml/headroom/tensor"
)

// ImageOptions configure ImageFolder.
type ImageOptions struct {
	// Channels is 1 (grey), 3 (RGB, the default) or 4 (RGBA).
	Channels int
	// Height and Width, when both set, resize every image (bilinear) so
	// that samples can be batched; otherwise images keep their size.
	Height, Width int
	BufferSize    int // read buffer; <= 0: DefaultBufferSize
	// Unlabeled reads every image under root and its sub-folders, in
	// sorted path order, without labels (Keras' labels=None): for
	// prediction.
	Unlabeled bool
}

// ImageFolder returns one sample per PNG, JPEG or GIF file under
// root/<class>/, as Keras's image_dataset_from_directory with
// labels="inferred": X is the image as uint8 [height, width, channels], Y
// its class index (int32 scalar), classes numbered in the sorted order of
// the sub-folder names (ClassNames). Files are listed in class then name
// order (ImageFiles); Shuffle to mix them. Unlike Keras, images are not
// resized unless asked. A file that does not decode is a *FormatError
// (offset 0). With opt.Unlabeled, every image under root is read, without
// Y.
func ImageFolder(root string, opt ImageOptions) (Dataset[Sample], error) {
	files, labels, _, err := ImageFiles(root, opt.Unlabeled)
	if err != nil {
		return Dataset[Sample]{}, err
	}
	ch := opt.Channels
	if ch == 0 {
		ch = 3
	}
	if ch != 1 && ch != 3 && ch != 4 {
		return Dataset[Sample]{}, fmt.Errorf("data: ImageFolder: %d channels, want 1, 3 or 4", ch)
	}
	name := fmt.Sprintf("images(%s)", baseName(root))
	return newDataset(name, kindSource, func(p *pipeline, st *stage) (iterator[Sample], error) {
		return &imageIter{p: p, st: st, pool: p.arena.pool(name), files: files, labels: labels, ch: ch, opt: opt}, nil
	}), nil
}

// IsImageFile reports whether name has the extension of an image format
// ImageFolder reads (.png, .jpg, .jpeg, .gif, in any case).
func IsImageFile(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".png", ".jpg", ".jpeg", ".gif":
		return true
	}
	return false
}

// ImageFiles lists the images ImageFolder(root, ...) reads, in its order:
// labelled, those in root's sub-folders (one level down), class by class
// (classes are the sorted sub-folder names, label i naming classes[i]),
// each class's files by name; unlabeled (labels and classes nil), every
// image under root, recursively, sorted by path.
func ImageFiles(root string, unlabeled bool) (files []string, labels []int32, classes []string, err error) {
	if unlabeled {
		err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return fmt.Errorf("data: %w", err)
			}
			if d.Type().IsRegular() && IsImageFile(d.Name()) {
				files = append(files, p)
			}
			return nil
		})
		sort.Strings(files)
		return files, nil, nil, err
	}
	if classes, err = ClassNames(root); err != nil {
		return nil, nil, nil, err
	}
	for i, c := range classes {
		ents, err := os.ReadDir(filepath.Join(root, c))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("data: %w", err)
		}
		for _, e := range ents {
			if e.Type().IsRegular() && IsImageFile(e.Name()) {
				files = append(files, filepath.Join(root, c, e.Name()))
				labels = append(labels, int32(i))
			}
		}
	}
	return files, labels, classes, nil
}

// ClassNames returns the sorted names of root's sub-folders: the classes of
// ImageFolder, label i naming ClassNames[i].
func ClassNames(root string) ([]string, error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("data: %w", err)
	}
	var classes []string
	for _, e := range ents {
		if e.IsDir() {
			classes = append(classes, e.Name())
		}
	}
	sort.Strings(classes)
	return classes, nil
}

type imageIter struct {
	p      *pipeline
	st     *stage
	pool   *pool
	files  []string
	labels []int32
	ch     int
	opt    ImageOptions
	i      int
}

func (it *imageIter) next(ctx context.Context) (Sample, error) {
	for it.i < len(it.files) {
		path, label := it.files[it.i], int32(-1)
		if it.labels != nil {
			label = it.labels[it.i]
		}
		it.i++
		s, err := it.load(ctx, path, label)
		if err != nil && it.p.skip(it.st, err) {
			continue
		}
		return s, err
	}
	return Sample{}, io.EOF
}

func (it *imageIter) load(ctx context.Context, path string, label int32) (Sample, error) {
	fr, err := openFile(ctx, it.pool, path, it.opt.BufferSize, false, false)
	if err != nil {
		return Sample{}, err
	}
	img, _, err := image.Decode(fr)
	fr.close()
	if err != nil {
		return Sample{}, formatErr("image", path, 0, err, "cannot decode")
	}
	r := img.Bounds()
	h, w := r.Dy(), r.Dx()
	if it.opt.Height > 0 && it.opt.Width > 0 {
		h, w = it.opt.Height, it.opt.Width
	}
	x, xb, err := NewTensor(ctx, tensor.Uint8, tensor.Shape{h, w, it.ch})
	if err != nil {
		return Sample{}, err
	}
	rgba := image.NewRGBA(r)
	draw.Draw(rgba, r, img, r.Min, draw.Src)
	fillPixels(x.Uint8s(), rgba, h, w, it.ch)
	if it.labels == nil {
		s := NewSample(x, tensor.Tensor{}, xb)
		xb.Release()
		return s, nil
	}
	y, yb, err := NewTensor(ctx, tensor.Int32, nil)
	if err != nil {
		xb.Release()
		return Sample{}, err
	}
	y.Int32s()[0] = label
	s := NewSample(x, y, xb, yb)
	xb.Release()
	yb.Release()
	return s, nil
}

// fillPixels writes src, resized bilinearly to h x w when its size differs,
// as h x w x ch bytes (grey is ITU-R BT.601 luma).
func fillPixels(dst []byte, src *image.RGBA, h, w, ch int) {
	sh, sw := src.Rect.Dy(), src.Rect.Dx()
	at := func(y, x int) []byte {
		o := y*src.Stride + 4*x
		return src.Pix[o : o+4]
	}
	for y := range h {
		for x := range w {
			var px [4]float64
			if sh == h && sw == w {
				for c, v := range at(y, x) {
					px[c] = float64(v)
				}
			} else {
				// sample at pixel centres (align_corners=False)
				fy := max(0, (float64(y)+0.5)*float64(sh)/float64(h)-0.5)
				fx := max(0, (float64(x)+0.5)*float64(sw)/float64(w)-0.5)
				y0, x0 := min(int(fy), sh-1), min(int(fx), sw-1)
				y1, x1 := min(y0+1, sh-1), min(x0+1, sw-1)
				dy, dx := fy-float64(y0), fx-float64(x0)
				for c := range 4 {
					top := float64(at(y0, x0)[c])*(1-dx) + float64(at(y0, x1)[c])*dx
					bot := float64(at(y1, x0)[c])*(1-dx) + float64(at(y1, x1)[c])*dx
					px[c] = top*(1-dy) + bot*dy
				}
			}
			o := (y*w + x) * ch
			switch ch {
			case 1:
				dst[o] = byte(0.299*px[0] + 0.587*px[1] + 0.114*px[2] + 0.5)
			default:
				for c := range ch {
					dst[o+c] = byte(px[c] + 0.5)
				}
			}
		}
	}
}

func (it *imageIter) close() {}
