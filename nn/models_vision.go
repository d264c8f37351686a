package nn

import (
	"fmt"

	"github.com/headroom-ml/headroom/tensor"
)

// The reference vision models, registered with RegisterModel so the CLI's
// --model builds them: "resnet" (ResNet-20) and "unet" (a small U-Net).

var (
	_ = RegisterModel("resnet", func(input tensor.Shape, classes int) (Model, error) { return ResNet20(input, classes) })
	_ = RegisterModel("unet", func(input tensor.Shape, classes int) (Model, error) { return UNet(input, classes) })
)

// ResNet20 returns the ResNet-20 of He et al., "Deep Residual Learning for
// Image Recognition" (2016), section 4.2, as the PyTorch peer builds it
// (../shared/peers/train.py) for image examples of shape input (a flat
// square input is read as [s, s, 1]) and classes outputs (logits):
//
//	conv3x3x16 (same, no bias) -> BN -> relu
//	three stages of 3 basic blocks of 16, 32, 64 filters; the first block
//	of stages 2 and 3 has stride 2. A basic block is conv3x3 -> BN -> relu
//	-> conv3x3 -> BN, added to the shortcut (the identity, or conv1x1 with
//	the block's stride -> BN where the shape changes), then relu
//	global average pooling -> dense classes
//
// Convolutions have no bias; BatchNormalization has epsilon 1e-3 and
// momentum 0.99 (PyTorch's momentum 0.01). The 3x3 convolutions of stride
// 2 pad one row and column on every side, as PyTorch's padding=1 (a
// ZeroPadding2D before a "valid" convolution, as Keras' own ResNets do):
// Keras' "same" pads only after on an even size, which would centre their
// windows one pixel off the strided conv1x1 of the shortcut they are added
// to. The other convolutions are "same". The weights start as PyTorch's
// do (TorchUniform), so that Adam's steps are as large relative to them as
// in the peer. For 28x28x1 input and 10
// classes it has 272,186 trainable parameters (PyTorch's count: BN's gamma
// and beta are trainable, its moving statistics are not) and 273,754 in
// all (Keras' "Total params": the moving statistics too).
func ResNet20(input tensor.Shape, classes int) (*Functional, error) {
	img, err := imageShape(input)
	if err != nil {
		return nil, fmt.Errorf("nn: resnet: %w", err)
	}
	x := NewInput("x", img)
	n := 0
	name := func(kind string) string {
		n++
		return fmt.Sprintf("%s_%d", kind, n)
	}
	pads := 0
	conv := func(t *Tensor, filters, k, stride int) *Tensor {
		same := true
		if stride > 1 && k > 1 {
			// PyTorch's padding=k/2 on every side, not Keras' "same" (which
			// pads only after, when the stride is 2 and the size even): the
			// window of output i is then centred on input 2i, where the
			// strided conv1x1 of the shortcut reads, as in the peer.
			pads++
			p := [2]int{k / 2, k / 2}
			t = Apply(&ZeroPadding2D{LayerName: fmt.Sprintf("zero_padding2d_%d", pads), Padding: [2][2]int{p, p}}, t)
			same = false
		}
		return Apply(&Conv2D{LayerName: name("conv2d"), Filters: filters, Kernel: [2]int{k, k}, Strides: [2]int{stride, stride},
			Same: same, NoBias: true, KernelInit: TorchUniform{}}, t)
	}
	bn := func(t *Tensor) *Tensor {
		return Apply(&BatchNormalization{LayerName: name("batch_normalization"), Momentum: 0.99, Epsilon: 1e-3}, t)
	}
	relu := func(t *Tensor) *Tensor { return Apply(&Activation{LayerName: name("relu"), Fn: "relu"}, t) }
	h := relu(bn(conv(x, 16, 3, 1)))
	cin := 16
	for _, st := range []struct{ filters, stride int }{{16, 1}, {32, 2}, {64, 2}} {
		for b := 0; b < 3; b++ {
			stride := 1
			if b == 0 {
				stride = st.stride
			}
			body := bn(conv(relu(bn(conv(h, st.filters, 3, stride))), st.filters, 3, 1))
			short := h
			if stride != 1 || cin != st.filters {
				short = bn(conv(h, st.filters, 1, stride))
			}
			h = relu(Apply(&Add{LayerName: name("add")}, body, short))
			cin = st.filters
		}
	}
	h = Apply(&GlobalAveragePooling2D{LayerName: name("global_average_pooling2d")}, h)
	y := Apply(&Dense{LayerName: name("dense"), Units: classes, KernelInit: TorchUniform{}, BiasInit: TorchUniform{FanIn: 64}}, h)
	return NewFunctional("resnet", []*Tensor{x}, []*Tensor{y})
}

// UNet returns a small U-Net (Ronneberger, Fischer and Brox, "U-Net:
// Convolutional Networks for Biomedical Image Segmentation", 2015) for
// per-pixel classification of image examples [H, W, C] (H and W divisible
// by 4) into classes, output logits [H, W, classes]:
//
//	enc1: conv3x3x16 relu, conv3x3x16 relu (same) -> maxpool 2
//	enc2: conv3x3x32 relu, conv3x3x32 relu        -> maxpool 2
//	mid:  conv3x3x64 relu, conv3x3x64 relu
//	up2:  Conv2DTranspose 2x2x32 stride 2, concatenated with enc2's output,
//	      conv3x3x32 relu, conv3x3x32 relu
//	up1:  Conv2DTranspose 2x2x16 stride 2, concatenated with enc1's output,
//	      conv3x3x16 relu, conv3x3x16 relu
//	out:  conv1x1 to classes
//
// For 32x32x1 input and 4 classes it has 116,804 parameters.
func UNet(input tensor.Shape, classes int) (*Functional, error) {
	img, err := imageShape(input)
	if err != nil {
		return nil, fmt.Errorf("nn: unet: %w", err)
	}
	if img[0]%4 != 0 || img[1]%4 != 0 {
		return nil, fmt.Errorf("nn: unet: image height and width must be multiples of 4, got %v", img)
	}
	x := NewInput("x", img)
	n := 0
	name := func(kind string) string {
		n++
		return fmt.Sprintf("%s_%d", kind, n)
	}
	conv := func(t *Tensor, filters, k int, act string) *Tensor {
		return Apply(&Conv2D{LayerName: name("conv2d"), Filters: filters, Kernel: [2]int{k, k}, Same: true, Activation: act}, t)
	}
	block := func(t *Tensor, filters int) *Tensor { return conv(conv(t, filters, 3, "relu"), filters, 3, "relu") }
	pool := func(t *Tensor) *Tensor {
		return Apply(&Pool2D{LayerName: name("max_pooling2d"), Max: true, Pool: [2]int{2, 2}}, t)
	}
	up := func(t, skip *Tensor, filters int) *Tensor {
		u := Apply(&Conv2DTranspose{LayerName: name("conv2d_transpose"), Filters: filters, Kernel: [2]int{2, 2}, Strides: [2]int{2, 2}, Same: true}, t)
		return block(Apply(&Concatenate{LayerName: name("concatenate")}, u, skip), filters)
	}
	e1 := block(x, 16)
	e2 := block(pool(e1), 32)
	mid := block(pool(e2), 64)
	y := conv(up(up(mid, e2, 32), e1, 16), classes, 1, "")
	return NewFunctional("unet", []*Tensor{x}, []*Tensor{y})
}
