package cli

// SetShapesSize makes --dataset shapes generate n training and nTest test
// images of size×size, and returns a function that restores the sizes.
func SetShapesSize(n, nTest, size int) (restore func()) {
	old := [3]int{shapesTrain, shapesTest, shapesSize}
	shapesTrain, shapesTest, shapesSize = n, nTest, size
	return func() { shapesTrain, shapesTest, shapesSize = old[0], old[1], old[2] }
}
