package kernels

// SetDirectConv turns the direct convolution tiles on or off and returns a
// function that restores the setting.
func SetDirectConv(on bool) (restore func()) {
	old := directConv
	directConv = on
	return func() { directConv = old }
}
