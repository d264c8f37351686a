// Package nn holds the model vocabulary: the Model interface, layers (Dense,
// Conv2D, pooling, Flatten, Dropout, BatchNormalization,
// LayerNormalization, Embedding, Activation, the merge layers),
// activations, losses, initializers, and three ways to write a model: the
// Sequential stack, the functional API (NewInput, Apply, NewFunctional:
// several inputs and outputs, shared layers, nested models) and ModelFunc
// (a model as a Go function, as GoMLX's), in the shape Keras users know,
// channels-last (NHWC) as Keras.
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
//     updates the moving statistics as Keras does (moving = momentum*moving
//   - (1-momentum)*batch); in inference it uses the moving statistics.
//   - Dropout is inverted dropout (kept units scaled by 1/(1-rate)) with a
//     counter-based mask: a function of (seed, layer, step), so runs and
//     resumed runs draw the same masks.
//   - A model whose last layer ends in softmax is trained from the logits
//     before that softmax with the fused, stable cross-entropy (what Keras
//     does internally for a softmax output); Predict still returns
//     probabilities.
package nn
