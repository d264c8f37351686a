package datasets

import (
	"math"
	"math/rand/v2"

	"github.com/headroom-ml/headroom/data"
	"github.com/headroom-ml/headroom/tensor"
)

// The shapes classes, per pixel.
const (
	ShapeBackground = iota
	ShapeDisk
	ShapeRectangle
	ShapeTriangle
	ShapeClasses
)

// Shapes returns a synthetic segmentation data set: n training and nTest
// test images of size×size grey pixels, each holding one to four shapes
// (disks, axis-aligned rectangles, triangles) of random size, position and
// grey level over a noisy, darker background, with a class label per
// pixel: ShapeBackground, ShapeDisk, ShapeRectangle or ShapeTriangle (a
// shape drawn later covers the ones under it). The grey levels of the
// three kinds overlap, so a model must tell them by their outline. Pixels
// are uint8 (scaled to [0, 1] when fed); labels are [size, size] per
// example (data.Examples.LabelShape). The draw is a pure function of
// seed.
func Shapes(n, nTest, size int, seed uint64) (trainSet, testSet *data.Examples) {
	rng := rand.New(rand.NewPCG(seed, 0x5a4e5))
	px := size * size
	all := &data.Examples{Name: "shapes", Shape: tensor.Shape{size, size, 1}, N: n + nTest, Scale: 1.0 / 255,
		Pixels: make([]uint8, (n+nTest)*px), Labels: make([]int32, (n+nTest)*px), Classes: ShapeClasses,
		LabelShape: tensor.Shape{size, size}}
	for i := 0; i < all.N; i++ {
		drawShapes(rng, all.Pixels[i*px:(i+1)*px], all.Labels[i*px:(i+1)*px], size)
	}
	return all.Slice("shapes/train", 0, n), all.Slice("shapes/test", n, n+nTest)
}

// drawShapes fills one image and its labels.
func drawShapes(rng *rand.Rand, img []uint8, lab []int32, size int) {
	grey := make([]float64, len(img))
	bg := 20 + 60*rng.Float64()
	for p := range grey {
		grey[p] = bg
	}
	s := float64(size)
	for k := 1 + rng.IntN(4); k > 0; k-- {
		kind := ShapeDisk + rng.IntN(3)
		level := 110 + 120*rng.Float64()
		cx, cy := s*(0.15+0.7*rng.Float64()), s*(0.15+0.7*rng.Float64())
		r := s * (0.08 + 0.14*rng.Float64())
		// a triangle's corners: around the centre at random angles
		var tri [3][2]float64
		a0 := 2 * math.Pi * rng.Float64()
		for v := range tri {
			a := a0 + float64(v)*2*math.Pi/3 + 0.4*(rng.Float64()-0.5)
			tri[v] = [2]float64{cx + 1.3*r*math.Cos(a), cy + 1.3*r*math.Sin(a)}
		}
		hw, hh := r*(0.6+0.8*rng.Float64()), r*(0.6+0.8*rng.Float64())
		for y := 0; y < size; y++ {
			for x := 0; x < size; x++ {
				fx, fy := float64(x)+0.5, float64(y)+0.5
				in := false
				switch kind {
				case ShapeDisk:
					in = (fx-cx)*(fx-cx)+(fy-cy)*(fy-cy) <= r*r
				case ShapeRectangle:
					in = math.Abs(fx-cx) <= hw && math.Abs(fy-cy) <= hh
				case ShapeTriangle:
					in = inTriangle(fx, fy, tri)
				}
				if in {
					grey[y*size+x] = level
					lab[y*size+x] = int32(kind)
				}
			}
		}
	}
	for p, g := range grey {
		img[p] = uint8(min(max(g+12*rng.NormFloat64(), 0), 255))
	}
}

// inTriangle reports whether (x, y) lies inside the triangle t (either
// orientation).
func inTriangle(x, y float64, t [3][2]float64) bool {
	side := func(a, b [2]float64) float64 { return (b[0]-a[0])*(y-a[1]) - (b[1]-a[1])*(x-a[0]) }
	d0, d1, d2 := side(t[0], t[1]), side(t[1], t[2]), side(t[2], t[0])
	return (d0 >= 0 && d1 >= 0 && d2 >= 0) || (d0 <= 0 && d1 <= 0 && d2 <= 0)
}
