// Package nn holds the model vocabulary: layers (Dense, Conv2D, pooling,
// Flatten, Dropout, BatchNormalization, LayerNormalization, Embedding,
// Activation; the vision layers of vision.go and activations2.go:
// DepthwiseConv2D, SeparableConv2D, Conv2DTranspose, UpSampling2D,
// ZeroPadding2D, Cropping2D, GlobalMaxPooling2D, Reshape, Permute,
// RepeatVector, Rescaling, Normalization, SpatialDropout2D, ReLU,
// LeakyReLU, ELU, PReLU, Softmax), activations, losses, initializers, the
// Sequential and functional models and the reference models (models.go,
// models_vision.go: ResNet-20, a U-Net), in the shape Keras users know,
// channels-last (NHWC) as Keras.
//
// In the life of a step, nn is the first stage: a model's Forward builds
// graph nodes over symbolic inputs with a concrete batch size. Layers hold
// no tensors: each Forward declares its weights as graph Variables through
// the Context, named "<layer>/<weight>" (Keras' names: kernel, bias, gamma,
// beta, moving_mean, moving_variance, embeddings), and records how to
// initialize them. Building the same model into several graphs (training,
// evaluation, a smaller last batch) declares the same names, so every
// program loaded on one runtime.Engine shares one copy of the weights.
//
// Choices where Keras leaves room, stated:
//   - Initializers follow Keras defaults: kernels glorot_uniform, biases
//     zeros, BatchNormalization gamma ones, beta zeros, moving mean zeros,
//     moving variance ones; Embedding uniform(-0.05, 0.05). HeNormal is
//     Keras' truncated normal (stddev sqrt(2/fan_in), cut at 2 stddev).
//     Each variable's draw is seeded by (model seed, variable name), so it
//     does not depend on the order layers are built in.
//   - BatchNormalization (momentum 0.99, epsilon 1e-3) normalizes over every
//     axis but the last, uses the batch's biased variance in training and
//     updates the moving statistics as Keras 3 does (moving =
//     momentum*moving + (1-momentum)*batch; Keras 2's fused kernel and
//     PyTorch correct the batch variance by n/(n-1) for it); in inference
//     it uses the moving statistics, folded into a Conv2D before it.
//   - UpSampling2D's bilinear interpolation is TensorFlow's
//     tf.image.resize (half-pixel centers, no antialiasing), which Keras 2
//     and 3 both call; hard_sigmoid is Keras 3's x/6 + 1/2 clipped (Keras
//     2's 0.2·x + 1/2 is "hard_sigmoid_keras2").
//   - Conv2DTranspose's output size is Keras' deconv_output_length; a size
//     TensorFlow would reject (the forward convolution of the output does
//     not give the input's size) is an error here too.
//   - Dropout is inverted dropout (kept units scaled by 1/(1-rate)) with a
//     counter-based mask: a function of (seed, layer, step), so runs and
//     resumed runs draw the same masks.
//   - A model whose last layer ends in softmax is trained from the logits
//     before that softmax with the fused, stable cross-entropy (what Keras
//     does internally for a softmax output); Predict still returns
//     probabilities.
package nn
