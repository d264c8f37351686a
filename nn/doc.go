// Package nn holds the model vocabulary: the Model interface, layers (Dense,
// Conv2D, pooling, Flatten, Dropout, BatchNormalization,
// LayerNormalization, Embedding, Activation, the merge layers; for
// sequences MultiHeadAttention, LSTM, GRU, SimpleRNN, Bidirectional,
// PositionEmbedding, SinePositionEncoding, Conv1D, 1-D pooling and
// TimeDistributed; for images DepthwiseConv2D, SeparableConv2D,
// Conv2DTranspose, UpSampling2D, ZeroPadding2D, Cropping2D,
// GlobalMaxPooling2D, Reshape, Permute, RepeatVector, Rescaling,
// Normalization, SpatialDropout2D, ReLU, LeakyReLU, ELU, PReLU, Softmax;
// Keras' image preprocessing layers Resizing, RandomFlip, RandomRotation,
// RandomZoom, RandomTranslation, RandomContrast; keras.applications'
// LayerScale and ScaledAdd; Math and Reduce, Keras 3's operation nodes),
// activations, losses, initializers, the reference models (models.go,
// models_seq.go, models_vision.go: ResNet-20, a U-Net), and three ways to write a model: the
// Sequential stack, the functional API (NewInput, Apply, NewFunctional:
// several inputs and outputs, shared layers, nested models) and ModelFunc
// (a model as a Go function, as GoMLX's), in the shape Keras users know,
// channels-last (NHWC) as Keras.
//
// Sequence layers: MultiHeadAttention runs on graph.Attention, the
// memory-efficient op (the backward pass keeps each query row's
// log-sum-exp, not the Tq×Tk probabilities), and can decode one token at a
// time over a key/value cache (KVCache). Recurrent layers are unrolled over
// their fixed T in the graph (recurrent.go says why), so the planner sees,
// and recomputation can drop, every step.
//
// In the life of a step, nn is the first stage: a model's Build builds
// graph nodes over symbolic inputs with a concrete batch size. Every layer
// call goes through the Context (Call, Boundary), which records layer
// boundaries for any model: recomputation keeps every ⌈√L⌉-th of them, and
// a 16-bit storage policy keeps each one but a model output in 16 bits. Layers hold
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
//     resumed runs draw the same masks. The random preprocessing layers
//     (preprocess.go) draw the same way, one draw per image, and are the
//     identity in inference, as Keras'.
//   - A model whose last layer ends in softmax is trained from the logits
//     before that softmax with the fused, stable cross-entropy (what Keras
//     does internally for a softmax output); Predict still returns
//     probabilities.
//
// Serialization (serialize.go): every layer type and initializer is
// registered under a name, one line beside its definition
// (var _ = RegisterLayer("Dense", &Dense{})); MarshalModel writes a
// Sequential or Functional model as JSON of its layers' exported fields,
// LoadModel builds it back (Keras' to_json and model_from_json). A test
// fails when a layer type of this package is not registered.
package nn
