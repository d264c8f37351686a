// Package keras reads a Keras model file (a JSON config, a .keras archive,
// a legacy .h5), Sequential or functional, and maps it onto headroom's
// model vocabulary (package nn), so that a model written in Keras can be
// planned (`headroom plan --keras model.keras`), trained and fine-tuned
// from its weights (`headroom train --keras`), run (`headroom predict
// --load model.h5`) and written back as a .keras archive (`--save`).
//
// In the life of a step, keras sits before the first stage: it turns a file
// into an *nn.Sequential or an *nn.Functional, which is then built into a
// graph like any model written in Go. Model.Training carries the file's
// training configuration (optimizer, losses) for the step builder;
// LoadWeights reads TensorFlow.js weights into a trainer's variables.
//
// # What is read
//
// Load and OpenFile tell a file's format by its first bytes, not by its
// name (tf.keras before 2.12 wrote HDF5 under a .keras name; a pickle or
// a Git LFS pointer under a model's name is named as such):
//   - a Keras 3 .keras archive (a zip): config.json, metadata.json (its
//     keras_version: tf.keras 2.13 and 2.14 archives are read as Keras 2)
//     and model.weights.h5;
//   - a legacy full model (model.save("x.h5"), Keras 1 to 3): HDF5 whose
//     root attributes hold model_config, training_config (its loss and
//     optimizer are used as a JSON file's are; metrics are not needed) and
//     keras_version, and whose model_weights group holds the weights;
//   - weights alone (save_weights: HDF5 in Keras 2's or Keras 3's layout,
//     the root holding them), with the architecture from another file
//     (LoadWithConfig; the CLI's --keras-config);
//   - JSON, as below.
//
// HDF5 is read by internal/hdf5, this project's own reader of the subset
// Keras writes (its doc says why no module from the Go module proxy is
// used). File.ParamCount counts the values of the weights a file holds,
// the optimizer's and the metrics' state left out.
//
// Parse and the JSON files accept:
//   - what model.to_json() writes: {"class_name": "Sequential" | "Model" |
//     "Functional", "config": {...}}, with Keras 2 keys (batch_input_shape,
//     dtype strings, inbound nodes as lists) or Keras 3 keys (batch_shape,
//     DTypePolicy objects, module/registered_name/build_config, inbound
//     nodes as {"args", "kwargs"}), and Keras 2.13-2.15 hybrids;
//   - Keras 2.0-era files whose "config" is the bare list of layers;
//   - TensorFlow.js layers-model model.json: the Keras config under
//     modelTopology.model_config (the converter's output) or modelTopology
//     itself (what tfjs-layers, 0.8 on, saves);
//   - a config stored as a JSON string inside JSON (the whole file, or
//     model_config / modelTopology / training_config, as HDF5 attributes
//     hold them);
//   - the config.json inside a Keras 3 .keras archive (a zip).
//
// Terms. A Keras layer is one element of a model's layer list, with a
// class name ("Conv2D") and a name ("conv2d_1"); its index is its position
// in that list, from 0, and errors name both (a layer of a nested model as
// "outer/inner", with its index in the nested model's list). A call (Keras'
// "inbound node") is one application of a layer to tensors; a layer called
// more than once is shared: its calls use one set of weights. A tensor is
// named [layer, node_index, tensor_index]: output tensor_index of call
// node_index. A per-example shape is a tensor shape without the batch
// dimension, as Keras' summary prints it after the leading None. Params is
// Keras' "Total params" (trainable and not); TrainableParams is "Trainable
// params".
//
// # Functional models
//
// Each layer's calls are read from its inbound nodes; the reader resolves
// the tensors each call takes back from the model's outputs to its inputs
// (the order of the file's layer list is not trusted; a cycle is an error),
// maps each call with Keras' own shape arithmetic and replays it with
// nn.Apply, so the result is an nn.Functional with the file's inputs (in
// input_layers order; a Keras 3 dict of inputs in sorted key order, as
// Keras flattens it), outputs and layer names. In Keras 2, arguments after
// the first are written as kwargs with tensors as [name, node, tensor]; in
// Keras 3 every tensor is a __keras_tensor__ with its keras_history (and
// its shape, which must match the one computed). Non-tensor kwargs
// (training, mask=None) are read by the layers that take them and
// otherwise ignored: Keras 3 replaces a recorded training=False with the
// model's own training flag.
//
// Node indices of nested models: Keras leaves out of a config the node
// that links a nested Functional's own inputs to its outputs, so the first
// call of a nested Functional (Model) is node 1, in Keras 2 and 3; so is
// that of a Keras 2 Sequential built with an input shape; a Keras 2
// Sequential without one, and any Keras 3 Sequential, start at node 0. An
// InputLayer is node 0 whatever the file says, as Keras reads it.
//
// Nested models (Sequential, Functional, Model as a layer, in a functional
// model or in a Sequential) become nn.Functional layers whose layers are
// named "<model>/<layer>", so their weights are "<model>/<layer>/<weight>"
// and cannot collide with the enclosing model's; a nested Sequential
// without an input shape takes its first call's.
//
// # Mapping
//
// One nn layer per Keras layer, named as in the file, so weights are named
// "<layer>/<weight>" as Keras names them; an InputLayer maps to no nn layer
// (an nn input of its name, shape and dtype: integer dtypes become int32).
// Model.Layers lists every Keras layer, the InputLayers included, aligned
// with the file.
//
//	Dense                   nn.Dense (units, activation, use_bias, kernel_initializer)
//	Conv2D                  nn.Conv2D (filters, kernel_size, strides, padding, dilation_rate, groups, activation, use_bias)
//	DepthwiseConv2D         nn.DepthwiseConv2D (kernel_size, strides, padding, depth_multiplier, dilation_rate)
//	SeparableConv2D         nn.SeparableConv2D (filters, kernel_size, strides, padding, depth_multiplier, dilation_rate)
//	Conv2DTranspose         nn.Conv2DTranspose (filters, kernel_size, strides, padding, output_padding, dilation_rate)
//	MaxPooling2D            nn.Pool2D{Max: true} (pool_size, strides, null strides = pool_size, padding)
//	AveragePooling2D        nn.Pool2D
//	GlobalAveragePooling2D  nn.GlobalAveragePooling2D
//	GlobalMaxPooling2D      nn.GlobalMaxPooling2D (keepdims)
//	UpSampling2D            nn.UpSampling2D (size, interpolation nearest or bilinear)
//	ZeroPadding2D, Cropping2D  nn.ZeroPadding2D, nn.Cropping2D (n, (h, w) or ((top, bottom), (left, right)))
//	Flatten, Reshape, Permute, RepeatVector  nn.Flatten, nn.Reshape (target_shape, one -1), nn.Permute (dims), nn.RepeatVector (n)
//	Dropout, SpatialDropout2D  nn.Dropout (rate, noise_shape: an axis of size 1 shares a draw), nn.SpatialDropout2D (rate)
//	BatchNormalization      nn.BatchNormalization (momentum, epsilon, scale, center, axis: any one axis but the batch)
//	LayerNormalization      nn.LayerNormalization (epsilon)
//	Rescaling, Normalization  nn.Rescaling (scale, offset: numbers, or one per channel), nn.Normalization (mean and variance:
//	                        constants; absent: weights, 2·C + 1 params)
//	GlobalAveragePooling2D/1D, GlobalMaxPooling1D with keepdims  nn's with KeepDims
//	Resizing                nn.Resizing (height, width, interpolation bilinear or nearest, crop_to_aspect_ratio, pad_to_aspect_ratio, fill_value)
//	RandomFlip, RandomRotation, RandomZoom, RandomTranslation, RandomContrast  nn's (mode; factor, height_factor,
//	                        width_factor; fill_mode, interpolation, fill_value; value_range): active in training, the identity in inference
//	LayerScale, StochasticDepth  ConvNeXt's (keras.src.applications.convnext): nn.LayerScale, nn.Dropout with one draw per example
//	CustomScaleLayer        Inception-ResNet-v2's: nn.ScaledAdd (x + scale·r)
//	Activation              nn.Activation (every name nn.Activations lists)
//	ReLU                    nn.Activation "relu", or nn.ReLU with max_value, negative_slope, threshold
//	LeakyReLU, ELU, PReLU   nn.LeakyReLU (alpha or negative_slope), nn.ELU (alpha), nn.PReLU (shared_axes)
//	Softmax                 nn.Activation "softmax" over the last axis, else nn.Softmax (axis)
//	Embedding               nn.Embedding (input_dim, output_dim); a Sequential's input becomes int32
//	Add, Subtract, Multiply nn.Add, nn.Subtract, nn.Multiply (inputs of one rank, sizes of 1 broadcast)
//	Average, Maximum, Minimum  nn.Average, nn.Maximum, nn.Minimum
//	Concatenate             nn.Concatenate (axis, counting the batch)
//	Dot                     nn.Dot (axes, normalize) over inputs of rank 2 or 3 (batch included)
//	MultiHeadAttention      nn.MultiHeadAttention (num_heads, key_dim, value_dim, output_shape, dropout, use_bias; the call's
//	                        value, key, attention_mask, use_causal_mask, return_attention_scores)
//	LSTM, GRU, SimpleRNN    nn.LSTM, nn.GRU (reset_after), nn.SimpleRNN (units, activations, return_sequences,
//	                        return_state, go_backwards, dropouts, unit_forget_bias; initial states as inputs)
//	Bidirectional           nn.Bidirectional (merge_mode concat, sum, mul, ave or null)
//	Conv1D                  nn.Conv1D (filters, kernel_size, strides, padding valid, same or causal)
//	MaxPooling1D, AveragePooling1D  nn.Pool1D; GlobalAveragePooling1D, GlobalMaxPooling1D  nn.GlobalPooling1D
//	TimeDistributed         nn.TimeDistributed of a one-input layer (named as the wrapper, as Keras 2 names its weights)
//	PositionEmbedding, SinePositionEncoding  keras_hub's, as nn's
//	Sequential, Functional, Model   nested nn.Functional
//
// Operation nodes. Keras 3 writes Python arithmetic on tensors (x +
// inputs, x * (1/6)) and keras.ops calls as entries of a functional
// model's layer list whose module is keras.src.ops.numpy, .nn, .math or
// .core; their calls may take numbers (x + 3.0 is called with [x, 3.0]),
// and their config holds the operation's own arguments. They map as:
//
//	Add, Subtract, Multiply, Divide, TrueDivide, Maximum, Minimum, Power (a constant integer exponent up to 8, or ±0.5),
//	Negative, Absolute (Abs), Exp, Log, Sqrt, Square, Reciprocal, Erf, Clip  nn.Math, over tensors of one rank and numbers,
//	                        broadcasting as NumPy
//	Relu, Relu6, Sigmoid, Tanh, Softplus, Softsign, Silu, HardSigmoid, HardSilu, Selu  nn.Activation; Gelu (approximate,
//	                        ops.gelu's default: the tanh form) nn.Math; Elu, LeakyRelu, Softmax, LogSoftmax (last axis)  nn's
//	Mean, Sum, Max, Min     nn.Reduce (axis, keepdims; not over the batch)
//	Reshape (newshape (-1, ...)), Transpose (axes keeping the batch first), ExpandDims, Squeeze, Concatenate (axis)
//	                        nn.Reshape, nn.Permute, nn.Concatenate
//	Cast                    to a float type: the identity (headroom plans precision itself)
//
// Other operations (Matmul, GetItem, Where, Stack, ...) are refused by
// class name and module. tf.keras 2 writes the same as TFOpLambda layers
// naming a TensorFlow function, whose first tensor is the function's
// first argument and whose keyword arguments (y, axis, keepdims, shape,
// perm) the others: __operators__.add, math.add, subtract, multiply,
// truediv, divide, maximum, minimum, pow, negative, abs, exp, log, sqrt,
// square, reciprocal, erf, sigmoid, tanh, softplus, reduce_mean,
// reduce_sum, reduce_max, reduce_min; nn.relu, relu6, sigmoid, tanh,
// silu, swish, softplus, gelu, softmax; reshape, transpose,
// compat.v1.transpose, expand_dims, squeeze and compat.v1.squeeze map as
// those operations; a TFOpLambda of another function is refused by its
// name.
//
// The preprocessing layers behave as Keras': Resizing resizes as
// tf.image.resize (bilinear with half-pixel centres, no antialiasing;
// nearest); the random layers draw per image in training and are the
// identity in inference, resampling with TensorFlow's
// ImageProjectiveTransformV3 (graph.ImageTransform) at the matrix Keras
// computes for the draw. Where headroom differs: the draws come from the
// model's seed, the layer's name and the step (as Dropout's masks), not
// from Keras' seed argument; a rotation's sine and cosine are composed
// from elementwise ops (to about 1e-10); a tf.keras 2 file's RandomFlip
// flips each axis on a draw of its own and its RandomContrast reads a
// factor f as (f, f), a Keras 3 file's on one draw and as (0, f), as each
// version computes them.
//
// Activations are the names nn.Activations lists, written as a name or as
// a serialized function object ({"class_name": "function", "config":
// "relu"}); a Keras 2 or TensorFlow.js file's hard_sigmoid is Keras 2's
// clip(0.2·x + 0.5, 0, 1), a Keras 3 file's relu6(x + 3)/6 (a file says
// which by its keras_version; Keras 3 configs have none). padding is "valid" or "same". A normalization's axis
// may be written as an int or a list and counts the batch dimension (for
// NHWC input 3, [3] and -1 all name the channels). Kernel initializers
// glorot_uniform, he_normal, zeros, ones, constant and random_uniform map to
// nn's (including Keras 2.0's VarianceScaling spellings of the first two);
// others fall back to nn's default, glorot_uniform: they change the first
// step, not shapes or memory.
//
// trainable=false, on a layer or on a model (then on every layer in it),
// freezes the layer in nn too: its weights are declared but left out of
// the trainable ones, so no gradient or optimizer state is planned for
// them, and a frozen BatchNormalization runs in inference mode (its moving
// statistics, no updates), as in TensorFlow 2 and Keras 3 (Keras before
// 2.1.3 kept batch statistics in a frozen BatchNormalization).
//
// # Shapes that vary
//
// A config may leave a dimension of an input unknown (null, Python's
// None): sequences of any length, (None, None, 71), or images of any size.
// headroom plans fixed shapes, so the size is given when the model is
// read: WithInputShape(name, shape) gives the input of that InputLayer
// name (name "" for a model's only input) its per-example shape, and
// WithSeq(t) the first axis after the batch of every top-level input (a
// sequence's time axis) where the file leaves it unknown; `headroom plan
// --keras` takes them as --input-shape NAME=DxD... (ParseInputShape) and
// --seq T. A size the file states must agree with the one given; a name
// the model lacks, or a dimension still unknown, is an error saying which
// flag gives it. A nested model whose input leaves sizes unknown (a
// backbone saved without input_shape) takes them from its first call.
//
// # Cross-checks
//
// Parse computes each call's output shapes and each layer's parameter
// count with Keras' own arithmetic while it maps it, then builds the nn
// model and requires the same shapes (for every tensor of a functional
// model, nested models included) and counts, layer by layer, total and
// trainable: a difference is reported as an error, never as a wrong plan.
// Where a file records the shape each layer was built with (build_config,
// Keras 2.13+ and 3; a list of shapes for a merge layer) or the shape of
// each tensor it passes (Keras 3), those must match the layers before it.
// A TensorFlow.js weightsManifest must list exactly Params values (counted
// by shape, so quantized manifests count alike), and each weight nn also
// declares must have nn's shape. A shared layer's calls must give its
// weights one shape.
//
// # Training configuration
//
// Model.Training is the first of the file's TensorFlow.js trainingConfig,
// Keras 2 training_config (HDF5 attributes) and Keras 3 compile_config that
// names a loss or an optimizer.
//
// Losses: a name (Keras 2 and 3, "keras.losses.mse", TensorFlow.js'
// camelCase), a serialized function ({"class_name": "function", "config":
// "sparse_categorical_crossentropy"}, Keras 3) or loss object
// ({"class_name": "MeanSquaredError", ...}); one loss for every output, a
// list per output or a dict by output name (an output left out has no
// loss); loss_weights as a list or a dict. StepLosses maps them onto nn:
// sparse_categorical_crossentropy, categorical_crossentropy (trained as the
// sparse form: headroom's data sets label with class indices),
// binary_crossentropy and mse; others, and a reduction other than the
// batch mean, are refused by name. headroom's cross-entropies read a
// softmax or sigmoid output through its logits whatever from_logits says.
//
// Optimizers (NewOptimizer): Adam, AdamW, SGD (momentum, nesterov),
// RMSprop (rho, momentum, centered), Adagrad (initial_accumulator_value),
// Nadam and Adamax, with their settings, Keras 3's defaults for those a file
// leaves out, Keras' update rules (ε before Adam's bias correction, inside
// RMSprop's root; Nadam's momentum schedule, Keras 2's schedule_decay
// included), Keras 3's decoupled weight_decay for Adam, global_clipnorm as
// global-norm clipping, Keras 2's decay (lr/(1 + decay·t)) and the
// schedules ExponentialDecay, InverseTimeDecay, CosineDecay (no warm-up),
// PolynomialDecay (no cycle) and PiecewiseConstantDecay. Refused, by name:
// other optimizers and schedules, amsgrad, clipnorm and clipvalue (per
// variable), use_ema, loss_scale_factor, gradient_accumulation_steps
// (headroom's --accumulate splits a batch; Keras' accumulates batches),
// SGD's and Nadam's weight_decay, and any setting headroom does not know.
// The CLI uses the file's optimizer unless --optimizer is given, and its
// learning rate unless --lr is.
//
// # Weights
//
// ReadFileWeights and LoadFileWeights read the weights of a .keras or .h5
// file into the model's variables, in both layouts Keras has used:
//   - Keras 1 and 2 (and Keras 3 writing .h5): model_weights (or the
//     root) lists its layers in a layer_names attribute, and each layer's
//     group its weights, in order, in weight_names (both split into
//     name0, name1, ... when Keras 2 found them too long). A weight loads
//     into the variable of its layer whose name ends as the weight's does,
//     a recurrent cell's level ("lstm_cell") dropped, or whose name the
//     weight's ends: "dense_1/kernel:0", Keras 2's renamed inner groups
//     ("Conv2D1_5/kernel:0" of layer Conv2D1), Keras 3's
//     "sequential/gru/gru_cell/kernel", a nested model's weights listed
//     under the outer layer without the inner model's name, Keras 1's
//     "dense_1_W:0" (W, b). A weight that matches no variable, or two, is
//     an error naming it.
//   - Keras 3 (and tf.keras 2.13+ archives): each layer's variables are
//     layers/<snake_case(class)>[_N]/vars/<i>, N counting the layers of a
//     class in its model's list (taken in the order of N: tf.keras 2.13
//     skips numbers), in the order Keras creates them (kernel,
//     depthwise_kernel, pointwise_kernel, recurrent_kernel, bias, gamma,
//     beta, moving_mean, moving_variance, embeddings, alpha, mean,
//     variance, count); sub-layers beside vars: an RNN's cell, a
//     TimeDistributed's layer, a Bidirectional's forward_layer and
//     backward_layer, MultiHeadAttention's query_dense, key_dense,
//     value_dense and output_dense; a nested model's layers under its own
//     layers group. keras.src.ops nodes and InputLayers hold none; the
//     optimizer's and metrics' groups are not weights.
//
// Every variable must get exactly one value of its shape. float16,
// bfloat16 (a 16-bit float type, or Keras 3's 2-byte data tagged
// dtype="bfloat16") and float64 weights are converted to float32: layers
// whose dtype policy is float16, bfloat16, mixed_float16 or
// mixed_bfloat16 are read as float32 layers, and headroom plans precision
// itself (--precision). The optimizer's state a Keras 3 archive keeps
// (optimizer/vars) is read by ReadOptimizerState for Adam, AdamW, Adamax
// and RMSprop, and a run training with the file's optimizer continues it
// (moments and bias correction) where Keras stopped; the layouts and what
// is not read (legacy .h5 optimizer_weights, SGD's momentum, Adagrad,
// Nadam, amsgrad, loss-scaled state, models with MultiHeadAttention) are
// in optstate.go. There the optimizer starts afresh, as Keras does when
// the saved state does not match, and the run says why.
//
// ReadWeights and LoadWeights read the weights a TensorFlow.js model.json
// lists in its weightsManifest from the shard files beside it: float32
// values, and uint8/uint16 affine-quantized (min + scale·q) and float16
// ones, dequantized to float32. Each weight loads into the variable of its
// name ("dense/kernel", a ":0" suffix dropped), or the one variable whose
// name ends the weight's (a converter's "model/dense/kernel"); every
// variable must get one, of its shape.
//
// # Writing .keras archives
//
// WriteArchive writes a model as Keras 3 saves one: config.json,
// metadata.json and model.weights.h5 in Keras 3's layout (the inverse of
// the reading above). The config is the file's own when the model was
// read from a Keras 3 config; otherwise it is written from an
// nn.Sequential whose layers have Keras counterparts (Dense, Conv2D,
// MaxPooling2D, AveragePooling2D, Flatten, Dropout, BatchNormalization,
// LayerNormalization, Activation, Reshape, GlobalAveragePooling2D,
// Embedding); other models are refused, naming the layer. h5py opens
// what it writes (TestSaveKerasRoundTrip); Keras itself cannot be
// installed here, so loading in Keras is checked only against its saving
// code's layout.
//
// # Not supported, and why
//
// Each of these is an *Error for which errors.Is(err, ErrUnsupported)
// holds, naming the layer (class and name) and what to change:
//   - Lambda, SlicingOpLambda (Python code), TFOpLambda of functions
//     other than those listed under Mapping, StringLookup,
//     IntegerLookup, TextVectorization, Hashing, CategoryEncoding,
//     Discretization (tables built in Python), custom classes (a
//     registered_name such as "Custom>Gate", a module outside keras), and a
//     subclassed model's class: a config cannot say what they compute.
//   - Layer classes without an nn layer yet (ConvLSTM2D, Conv3D,
//     CuDNNLSTM, whose biases differ from LSTM's, ...): "class X is not
//     supported yet". Among Keras' image preprocessing layers these are
//     CenterCrop, RandomCrop, RandomBrightness, RandomHeight,
//     RandomWidth, RandomGrayscale, RandomHue, RandomSaturation,
//     RandomSharpness, RandomShear, RandomPerspective,
//     RandomElasticTransform, RandomErasing, RandomGaussianBlur,
//     RandomColorJitter, RandomColorDegeneration, RandomInvert,
//     RandomPosterization, Solarization, AutoContrast, Equalization,
//     MixUp, CutMix, AugMix, RandAugment and Pipeline; every layer
//     class keras.applications uses is mapped (testdata/applications).
//   - Operation nodes other than those listed under Mapping: "operation
//     X (module) is not supported yet"; an operation in a Sequential
//     model; an operation called with keyword tensors, or with a
//     constant that is not a number.
//   - data_format "channels_first": headroom is NHWC, Keras' default.
//   - padding other than valid/same (causal on Conv1D); dilation_rate and
//     strides both above 1 (Keras refuses it too); Conv1D's dilation_rate
//     and groups.
//   - BatchNormalization over several axes; LayerNormalization over an
//     axis other than the last, or several; LayerNormalization's center=false or
//     scale=false; renorm, virtual_batch_size, adjustment, rms_scaling; a
//     momentum outside (0, 1) or an epsilon that is not positive (nn reads
//     zero as "use the default").
//   - Activations nn lacks; Dropout's noise_shape with a size other
//     than 1 or the input's (a fixed batch); Embedding with lora_rank;
//     UpSampling2D and Resizing interpolations but nearest and bilinear;
//     Resizing's antialias=true and fill modes but constant; the random
//     layers' fill mode mirror; Normalization over another axis than the
//     last; StochasticDepth, LayerScale or CustomScaleLayer from a module
//     outside Keras (a custom class of the same name).
//   - Recurrent layers with stateful=true or time_major=true, or called
//     with a mask; Bidirectional with a backward_layer of its own or over
//     another layer than LSTM, GRU, SimpleRNN; MultiHeadAttention over
//     other axes than time (attention_axes), with query/value/key masks
//     (an attention_mask is read).
//   - Elementwise merges of inputs of different ranks (Keras broadcasts
//     from the first axis, nn from the last); Concatenate along the batch;
//     tensors passed as keyword arguments to a layer that takes none (a
//     mask); constants passed as a layer's input (_CONSTANT_VALUE).
//   - dtypes other than float32 and the 16-bit float policies (float16,
//     bfloat16, mixed_float16, mixed_bfloat16, which read as float32:
//     headroom plans precision itself, --precision): float64, quantized
//     policies (int8_from_float32, ...). An input may be an integer type
//     only when it feeds an Embedding.
//   - model.weights.npz archives, sharded weights, soft and external
//     links in HDF5 (Keras refuses them too).
//
// Read but not carried over, because nn has no such notion: regularizers
// and constraints (they change the loss, not shapes or memory), bias and
// other initializers than the kernel's, seeds and mask_zero.
//
// Any malformed input is an *Error naming the file, and the layer index and
// name where known (inside HDF5, an *hdf5.FormatError naming the byte
// offset); Parse, ParseFile and ReadWeights never panic (FuzzParse,
// FuzzParseFile, FuzzReadWeights).
package keras
