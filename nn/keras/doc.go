// Package keras reads a Keras Sequential model config and maps it onto
// headroom's model vocabulary (package nn), so that a model written in Keras
// can be planned (`headroom plan --keras model.json`) and trained.
//
// In the life of a step, keras sits before the first stage: it turns a file
// into an *nn.Sequential, which is then built into a graph like any model
// written in Go. It holds no weights and reads none.
//
// # What is read
//
// Load and Parse accept:
//   - what model.to_json() writes: {"class_name": "Sequential", "config":
//     {"name": ..., "layers": [...]}}, with Keras 2 keys (batch_input_shape,
//     dtype strings) or Keras 3 keys (batch_shape, DTypePolicy objects,
//     module/registered_name/build_config), and Keras 2.13-2.15 hybrids;
//   - Keras 2.0-era files whose "config" is the bare list of layers;
//   - TensorFlow.js layers-model model.json: the Keras config under
//     modelTopology.model_config (the converter's output) or modelTopology
//     itself (what tfjs-layers saves);
//   - the config.json inside a Keras 3 .keras archive (a zip).
//
// Terms. A Keras layer is one element of the file's layer list, with a
// class name ("Conv2D") and a name ("conv2d_1"); its index is its position
// in that list, from 0, and errors name both. A per-example shape is a
// tensor shape without the batch dimension, as Keras' summary prints it
// after the leading None. Params is Keras' "Total params" (trainable and
// not); TrainableParams is "Trainable params".
//
// The input shape comes from an InputLayer (batch_input_shape or
// batch_shape), from the first layer's batch_input_shape, batch_shape or
// input_shape, from input_dim on a first Dense or input_length on a first
// Embedding, from the Sequential's build_input_shape or the model's
// build_config; a file may repeat it in several of these places, and all
// must agree. Every dimension but the batch must have a size: a plan needs
// concrete shapes. The loss comes from a training_config (HDF5 attributes,
// TensorFlow.js), a trainingConfig (tfjs-layers, camelCase names turned into
// Keras' snake_case) or a compile_config (Keras 3).
//
// # Mapping
//
// One nn layer per Keras layer, named as in the file, so weights are named
// "<layer>/<weight>" as Keras names them; an InputLayer sets the input shape
// and maps to no nn layer. Model.Layers lists every Keras layer, the
// InputLayer included, aligned with the file.
//
//	Dense                   nn.Dense (units, activation, use_bias, kernel_initializer)
//	Conv2D                  nn.Conv2D (filters, kernel_size, strides, padding, activation, use_bias)
//	MaxPooling2D            nn.Pool2D{Max: true} (pool_size, strides, null strides = pool_size, padding)
//	AveragePooling2D        nn.Pool2D
//	GlobalAveragePooling2D  nn.GlobalAveragePooling2D
//	Flatten                 nn.Flatten
//	Dropout                 nn.Dropout (rate)
//	BatchNormalization      nn.BatchNormalization (momentum, epsilon)
//	LayerNormalization      nn.LayerNormalization (epsilon)
//	Activation              nn.Activation
//	ReLU                    nn.Activation "relu"
//	Embedding               nn.Embedding (input_dim, output_dim); the model's input becomes int32
//
// Activations are linear, relu, sigmoid, tanh, softmax and gelu, written as
// a name or as a serialized function object ({"class_name": "function",
// "config": "relu"}). padding is "valid" or "same". A normalization's axis
// may be written as an int or a list and counts the batch dimension (for
// NHWC input 3, [3] and -1 all name the channels). Kernel initializers
// glorot_uniform, he_normal, zeros, ones, constant and random_uniform map to
// nn's (including Keras 2.0's VarianceScaling spellings of the first two);
// others fall back to nn's default, glorot_uniform: they change the first
// step, not shapes or memory.
//
// # Cross-checks
//
// Parse computes each layer's output shape and parameter count with Keras'
// own arithmetic while it maps the layer, then builds the nn model
// (nn.Sequential.Summary) and requires the same shapes and counts, layer by
// layer: a difference is reported as an error, never as a wrong plan. Where
// a file records the shape each layer was built with (build_config, Keras
// 2.13+ and 3), that shape must match the layers before it. A TensorFlow.js
// weightsManifest must list exactly Params values, and each weight nn also
// declares must have nn's shape.
//
// # Not supported, and why
//
// Each of these is an *Error for which errors.Is(err, ErrUnsupported)
// holds, naming the layer and what to change:
//   - Functional models and nested models: their layers form a graph, and
//     nn.Sequential is a stack.
//   - Layer classes other than those above (LSTM, Conv1D, DepthwiseConv2D,
//     ...): nn has no such layer.
//   - data_format "channels_first": headroom is NHWC, Keras' default.
//   - Conv2D dilation_rate other than 1 and groups other than 1; padding
//     other than valid/same: nn's convolution has neither.
//   - BatchNormalization or LayerNormalization over an axis other than the
//     last, or several axes; center=false or scale=false (nn always learns
//     gamma and beta, so the count would differ); renorm,
//     virtual_batch_size, adjustment, rms_scaling; a momentum outside (0, 1)
//     or an epsilon that is not positive (nn reads zero as "use the
//     default").
//   - ReLU with max_value, negative_slope or threshold; activations nn lacks
//     (swish, elu, ...); Dropout with noise_shape; GlobalAveragePooling2D
//     with keepdims; Embedding with lora_rank.
//   - dtypes other than float32, including mixed-precision policies:
//     headroom plans precision itself. An InputLayer may be an integer type
//     only when it feeds an Embedding.
//   - HDF5 (.h5) files: export the JSON with model.to_json().
//
// Read but not carried over, because nn has no such notion: regularizers
// and constraints (they change the loss, not shapes or memory), bias and
// other initializers than the kernel's, seeds, mask_zero, and trainable=false
// (counted in TrainableParams as Keras does, but nn trains every layer).
//
// Any malformed input is an *Error naming the file, and the layer index and
// name where known; Parse never panics (FuzzParse).
package keras
