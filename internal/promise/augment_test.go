package promise

import "testing"

// TestAugmentationIsPlanned: a cnn on a folder of PNG images in two class
// sub-folders, with the images flipped and cropped as pipeline maps,
// plans what it measures: the augmentation's buffers are in the plan. The
// same run without --augment is the control.
func TestAugmentationIsPlanned(t *testing.T) {
	imgs := imageFolder(t, 16, 40)
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"flip_crop", []string{"--augment", "flip,crop"}},
		{"none", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"train", "--data", imgs, "--model", "cnn", "--epochs", "2", "--batch", "16", "--threads", "2"}, tc.args...)
			trained(t, headroom(t, args...))
		})
	}
}
