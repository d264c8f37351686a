package cli

// The sizes of the shapes segmentation data set (datasets.Shapes) that
// --dataset shapes trains on: 32x32 grey images, a class per pixel.
const (
	ShapesTrain = 2000
	ShapesTest  = 400
	ShapesSize  = 32
)
