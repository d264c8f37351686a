package cli

// The sizes of the shapes segmentation data set (datasets.Shapes) that
// --dataset shapes trains on: 32x32 grey images, a class per pixel. Tests
// shrink them (export_test.go).
var (
	shapesTrain = 2000
	shapesTest  = 400
	shapesSize  = 32
)

// shapes data set defaults, as digits has its own: small batches and
// enough epochs for the U-Net's loss to fall (the per-pixel loss of 2,000
// images needs a few hundred updates).
const (
	shapesBatch  = 32
	shapesEpochs = 4
)
