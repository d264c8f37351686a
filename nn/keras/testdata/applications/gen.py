#!/usr/bin/env python3
"""Writes the configs of keras.applications models as Keras 3's
model.to_json() writes them, without Keras.

Keras cannot be installed where headroom's tests run, so this script runs
Keras' own builder code, keras/src/applications/<model>.py from a Keras 3
source tree, against a stand-in for the few parts of Keras it calls:
`layers` (each layer records its class, its config as Keras 3's
get_config writes it, and its calls, and computes its output shape as
Keras' compute_output_shape does), tensors whose arithmetic records
keras.src.ops nodes (x + y, x * 0.5), `Functional` and `Sequential`
(which serialize as Keras 3 does), `backend`, `initializers` and the file
helpers (the ImageNet weights are never downloaded). The builder code is
Keras' own and unchanged, so each config has the layers, options, names and
connections keras.applications gives the model; the stand-in only writes
them down. Parameter counts are not computed here: headroom's reader
computes them from the configs, and its test compares them with Keras'
published counts.

Usage: python3 gen.py KERAS_SOURCE_TREE [OUT_DIR]
(the directory holding keras/src/applications; OUT_DIR defaults to this
script's directory). Each model is written as <Model>.json.gz.
"""

import copy
import gzip
import json
import math
import os
import shutil
import sys
import tempfile
import types

# --- the stand-in for Keras ------------------------------------------------

_uids = {}


def get_uid(prefix=""):
    _uids[prefix] = _uids.get(prefix, 0) + 1
    return _uids[prefix]


def to_snake_case(name):
    out = ""
    for i, c in enumerate(name):
        if c.isupper() and i > 0 and (not name[i - 1].isupper() or (i + 1 < len(name) and name[i + 1].islower())):
            out += "_"
        out += c.lower()
    return out


_names = set()


def auto_name(prefix):
    """Keras 3's naming: conv2d, conv2d_1, ..."""
    base = to_snake_case(prefix)
    name = base
    n = 0
    while name in _names:
        n += 1
        name = f"{base}_{n}"
    _names.add(name)
    return name


def policy():
    return {"module": "keras", "class_name": "DTypePolicy", "config": {"name": "float32"}, "registered_name": None}


def serialize_initializer(init):
    if init is None:
        return None
    if isinstance(init, dict):  # keras.applications' own dicts (EfficientNet)
        return {"module": "keras.initializers", "class_name": init["class_name"], "config": init.get("config", {}),
                "registered_name": None}
    if isinstance(init, str):
        cls = {"glorot_uniform": "GlorotUniform", "zeros": "Zeros", "ones": "Ones", "he_normal": "HeNormal"}[init]
        cfg = {} if cls in ("Zeros", "Ones") else {"seed": None}
        return {"module": "keras.initializers", "class_name": cls, "config": cfg, "registered_name": None}
    return init.serialize()


class Initializer:
    def __init__(self, class_name, config):
        self.class_name, self.config = class_name, config

    def serialize(self):
        return {"module": "keras.initializers", "class_name": self.class_name, "config": self.config,
                "registered_name": None}


initializers = types.ModuleType("initializers")
initializers.Constant = lambda value=0.0: Initializer("Constant", {"value": value})
initializers.VarianceScaling = lambda **kw: Initializer("VarianceScaling", kw)


def activation_name(a):
    if a is None:
        return "linear"
    if isinstance(a, str):
        return a
    raise ValueError(f"activation {a!r}")


def pair(v):
    return (v, v) if isinstance(v, int) else tuple(v)


class KerasTensor:
    def __init__(self, shape, history):
        self.shape = tuple(shape)
        self.history = history  # (layer, node_index, tensor_index)
        self.dtype = "float32"
        self.ndim = len(self.shape)

    def serialize(self):
        layer, node, index = self.history
        return {"class_name": "__keras_tensor__",
                "config": {"shape": list(self.shape), "dtype": "float32", "keras_history": [layer.name, node, index]}}

    # Python arithmetic records keras.src.ops.numpy operations
    def __add__(self, other):
        return Operation("Add")(self, other)

    def __radd__(self, other):
        return Operation("Add")(other, self)

    def __sub__(self, other):
        return Operation("Subtract")(self, other)

    def __rsub__(self, other):
        return Operation("Subtract")(other, self)

    def __mul__(self, other):
        return Operation("Multiply")(self, other)

    def __rmul__(self, other):
        return Operation("Multiply")(other, self)

    def __truediv__(self, other):
        return Operation("TrueDivide")(self, other)

    def __neg__(self):
        return Operation("Negative")(self)


def flatten(x):
    if isinstance(x, (list, tuple)):
        out = []
        for e in x:
            out.extend(flatten(e))
        return out
    return [x]


def serialize_arg(x):
    if isinstance(x, KerasTensor):
        return x.serialize()
    if isinstance(x, (list, tuple)):
        return [serialize_arg(e) for e in x]
    return x


def broadcast(shapes):
    out = list(shapes[0])
    for s in shapes[1:]:
        if len(s) != len(out):
            raise ValueError(f"ranks differ: {shapes}")
        for i, d in enumerate(s):
            if d == out[i] or d == 1:
                continue
            if out[i] == 1 or out[i] is None:  # None against a known size: the known one
                out[i] = d if out[i] == 1 or d is not None else None
            elif d is not None:
                raise ValueError(f"shapes do not broadcast: {shapes}")
    return tuple(out)


class Node:
    def __init__(self, args, kwargs):
        self.args, self.kwargs = args, kwargs

    def serialize(self):
        return {"args": serialize_arg(list(self.args)), "kwargs": {k: serialize_arg(v) for k, v in self.kwargs.items()}}


class Layer:
    """A layer: its class, config and calls. Subclasses set `module` and
    compute output shapes; the config starts as Keras 3's base config."""

    module = "keras.layers"
    registered_name = None

    def __init__(self, name=None, trainable=True, dtype=None, **kwargs):
        self.name = name if name is not None else auto_name(type(self).__name__)
        if name is not None:
            _names.add(name)
        self.trainable = trainable
        self.nodes = []
        self.built_shapes = None
        self.extra = kwargs

    def base_config(self):
        return {"name": self.name, "trainable": self.trainable, "dtype": policy()}

    def get_config(self):
        return self.base_config()

    def output_shape(self, shape):
        return shape

    def compute_output_shapes(self, shapes):
        return [self.output_shape(shapes[0])]

    def __call__(self, *args, **kwargs):
        tensors = [t for t in flatten(list(args)) if isinstance(t, KerasTensor)]
        shapes = [t.shape for t in tensors]
        outs = self.compute_output_shapes(shapes)
        if self.built_shapes is None:
            self.built_shapes = shapes
        node = len(self.nodes)
        self.nodes.append(Node(args, kwargs))
        result = [KerasTensor(s, (self, node, i)) for i, s in enumerate(outs)]
        return result[0] if len(result) == 1 else result

    def build_config(self):
        if self.built_shapes is None:
            return None
        if len(self.built_shapes) == 1:
            return {"input_shape": list(self.built_shapes[0])}
        return {"input_shape": [list(s) for s in self.built_shapes]}

    def serialize(self, nodes=True):
        d = {"module": self.module, "class_name": type(self).__name__, "config": self.get_config(),
             "registered_name": self.registered_name}
        bc = self.build_config()
        if bc is not None:
            d["build_config"] = bc
        if nodes:
            d["name"] = self.name
            d["inbound_nodes"] = [n.serialize() for n in self.nodes]
        return d

    def inputs_of(self):
        for n in self.nodes:
            for t in flatten(list(n.args)) + flatten(list(n.kwargs.values())):
                if isinstance(t, KerasTensor):
                    yield t


class Operation(Layer):
    """A keras.src.ops node: x + y and the like."""

    def __init__(self, cls):
        self.cls = cls
        super().__init__(name=auto_name(cls))
        self.module = "keras.src.ops.numpy"
        self.registered_name = cls

    def get_config(self):
        return {"name": self.name}

    def compute_output_shapes(self, shapes):
        return [broadcast(shapes)]

    def build_config(self):
        return None

    def serialize(self, nodes=True):
        d = super().serialize(nodes)
        d["class_name"] = self.cls
        return d


class InputLayer(Layer):
    def __init__(self, batch_shape, name=None):
        super().__init__(name=name if name is not None else auto_name("input_layer"))
        self.batch_shape = tuple(batch_shape)
        self.output = KerasTensor(self.batch_shape, (self, 0, 0))

    def get_config(self):
        return {"batch_shape": list(self.batch_shape), "dtype": "float32", "sparse": False, "ragged": False,
                "name": self.name}

    def serialize(self, nodes=True):
        d = {"module": "keras.layers", "class_name": "InputLayer", "config": self.get_config(), "registered_name": None}
        if nodes:
            d["name"] = self.name
            d["inbound_nodes"] = []
        return d


def Input(shape=None, batch_size=None, name=None, tensor=None, **kwargs):
    return InputLayer((batch_size,) + tuple(shape), name=name).output


def plus(n, d):
    """n + d for a size n that may be unknown (None)."""
    return None if n is None else n + d


def conv_length(n, k, s, padding, d=1):
    if n is None:
        return None
    k = (k - 1) * d + 1
    if padding == "same":
        return (n + s - 1) // s
    return (n - k) // s + 1


def common_conv(self, kernel_size, strides, padding, data_format, dilation_rate, activation, use_bias):
    self.kernel_size, self.strides = pair(kernel_size), pair(strides)
    self.padding, self.data_format = padding.lower(), data_format or "channels_last"
    self.dilation_rate, self.activation, self.use_bias = pair(dilation_rate), activation, use_bias


def conv_hw(self, shape):
    return tuple(conv_length(shape[i + 1], self.kernel_size[i], self.strides[i], self.padding, self.dilation_rate[i])
                 for i in range(2))


class Conv2D(Layer):
    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format=None, dilation_rate=(1, 1),
                 groups=1, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        common_conv(self, kernel_size, strides, padding, data_format, dilation_rate, activation, use_bias)
        self.filters, self.groups = filters, groups
        self.kernel_initializer, self.bias_initializer = kernel_initializer, bias_initializer

    def get_config(self):
        c = self.base_config()
        c.update({"filters": self.filters, "kernel_size": list(self.kernel_size), "strides": list(self.strides),
                  "padding": self.padding, "data_format": self.data_format, "dilation_rate": list(self.dilation_rate),
                  "groups": self.groups, "activation": activation_name(self.activation), "use_bias": self.use_bias,
                  "kernel_initializer": serialize_initializer(self.kernel_initializer),
                  "bias_initializer": serialize_initializer(self.bias_initializer),
                  "kernel_regularizer": None, "bias_regularizer": None, "activity_regularizer": None,
                  "kernel_constraint": None, "bias_constraint": None})
        return c

    def output_shape(self, shape):
        return (shape[0],) + conv_hw(self, shape) + (self.filters,)


class DepthwiseConv2D(Layer):
    def __init__(self, kernel_size, strides=(1, 1), padding="valid", depth_multiplier=1, data_format=None,
                 dilation_rate=(1, 1), activation=None, use_bias=True, depthwise_initializer="glorot_uniform",
                 bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        common_conv(self, kernel_size, strides, padding, data_format, dilation_rate, activation, use_bias)
        self.depth_multiplier = depth_multiplier
        self.depthwise_initializer, self.bias_initializer = depthwise_initializer, bias_initializer

    def get_config(self):
        c = self.base_config()
        c.update({"kernel_size": list(self.kernel_size), "strides": list(self.strides), "padding": self.padding,
                  "depth_multiplier": self.depth_multiplier, "data_format": self.data_format,
                  "dilation_rate": list(self.dilation_rate), "activation": activation_name(self.activation),
                  "use_bias": self.use_bias,
                  "depthwise_initializer": serialize_initializer(self.depthwise_initializer),
                  "bias_initializer": serialize_initializer(self.bias_initializer),
                  "depthwise_regularizer": None, "bias_regularizer": None, "activity_regularizer": None,
                  "depthwise_constraint": None, "bias_constraint": None})
        return c

    def output_shape(self, shape):
        return (shape[0],) + conv_hw(self, shape) + (shape[3] * self.depth_multiplier,)


class SeparableConv2D(Layer):
    def __init__(self, filters, kernel_size, strides=(1, 1), padding="valid", data_format=None, dilation_rate=(1, 1),
                 depth_multiplier=1, activation=None, use_bias=True, depthwise_initializer="glorot_uniform",
                 pointwise_initializer="glorot_uniform", bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        common_conv(self, kernel_size, strides, padding, data_format, dilation_rate, activation, use_bias)
        self.filters, self.depth_multiplier = filters, depth_multiplier
        self.inits = (depthwise_initializer, pointwise_initializer, bias_initializer)

    def get_config(self):
        c = self.base_config()
        c.update({"filters": self.filters, "kernel_size": list(self.kernel_size), "strides": list(self.strides),
                  "padding": self.padding, "data_format": self.data_format, "dilation_rate": list(self.dilation_rate),
                  "depth_multiplier": self.depth_multiplier, "activation": activation_name(self.activation),
                  "use_bias": self.use_bias,
                  "depthwise_initializer": serialize_initializer(self.inits[0]),
                  "pointwise_initializer": serialize_initializer(self.inits[1]),
                  "bias_initializer": serialize_initializer(self.inits[2]),
                  "depthwise_regularizer": None, "pointwise_regularizer": None, "bias_regularizer": None,
                  "activity_regularizer": None, "depthwise_constraint": None, "pointwise_constraint": None,
                  "bias_constraint": None})
        return c

    def output_shape(self, shape):
        return (shape[0],) + conv_hw(self, shape) + (self.filters,)


class Dense(Layer):
    def __init__(self, units, activation=None, use_bias=True, kernel_initializer="glorot_uniform",
                 bias_initializer="zeros", **kwargs):
        super().__init__(**kwargs)
        self.units, self.activation, self.use_bias = units, activation, use_bias
        self.kernel_initializer, self.bias_initializer = kernel_initializer, bias_initializer

    def get_config(self):
        c = self.base_config()
        c.update({"units": self.units, "activation": activation_name(self.activation), "use_bias": self.use_bias,
                  "kernel_initializer": serialize_initializer(self.kernel_initializer),
                  "bias_initializer": serialize_initializer(self.bias_initializer),
                  "kernel_regularizer": None, "bias_regularizer": None, "kernel_constraint": None,
                  "bias_constraint": None})
        return c

    def output_shape(self, shape):
        return shape[:-1] + (self.units,)


class BatchNormalization(Layer):
    def __init__(self, axis=-1, momentum=0.99, epsilon=1e-3, center=True, scale=True, **kwargs):
        super().__init__(**kwargs)
        self.axis, self.momentum, self.epsilon, self.center, self.scale = axis, momentum, epsilon, center, scale

    def get_config(self):
        c = self.base_config()
        c.update({"axis": self.axis, "momentum": self.momentum, "epsilon": self.epsilon, "center": self.center,
                  "scale": self.scale, "beta_initializer": serialize_initializer("zeros"),
                  "gamma_initializer": serialize_initializer("ones"),
                  "moving_mean_initializer": serialize_initializer("zeros"),
                  "moving_variance_initializer": serialize_initializer("ones"),
                  "beta_regularizer": None, "gamma_regularizer": None, "beta_constraint": None,
                  "gamma_constraint": None, "synchronized": False})
        return c


class LayerNormalization(Layer):
    def __init__(self, axis=-1, epsilon=1e-3, center=True, scale=True, **kwargs):
        super().__init__(**kwargs)
        self.axis, self.epsilon, self.center, self.scale = axis, epsilon, center, scale

    def get_config(self):
        c = self.base_config()
        c.update({"axis": self.axis, "epsilon": self.epsilon, "center": self.center, "scale": self.scale,
                  "rms_scaling": False, "beta_initializer": serialize_initializer("zeros"),
                  "gamma_initializer": serialize_initializer("ones"), "beta_regularizer": None,
                  "gamma_regularizer": None, "beta_constraint": None, "gamma_constraint": None})
        return c


class Activation(Layer):
    def __init__(self, activation, **kwargs):
        super().__init__(**kwargs)
        self.activation = activation

    def get_config(self):
        c = self.base_config()
        c["activation"] = activation_name(self.activation)
        return c


class ReLU(Layer):
    def __init__(self, max_value=None, negative_slope=0.0, threshold=0.0, **kwargs):
        super().__init__(**kwargs)
        self.max_value, self.negative_slope, self.threshold = max_value, negative_slope, threshold

    def get_config(self):
        c = self.base_config()
        c.update({"max_value": self.max_value, "negative_slope": self.negative_slope, "threshold": self.threshold})
        return c


def pads(p):
    if isinstance(p, int):
        return ((p, p), (p, p))
    return tuple((e, e) if isinstance(e, int) else tuple(e) for e in p)


class ZeroPadding2D(Layer):
    def __init__(self, padding=(1, 1), data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.padding, self.data_format = pads(padding), data_format or "channels_last"

    def get_config(self):
        c = self.base_config()
        c.update({"padding": [list(p) for p in self.padding], "data_format": self.data_format})
        return c

    def output_shape(self, s):
        return (s[0], plus(s[1], sum(self.padding[0])), plus(s[2], sum(self.padding[1])), s[3])


class Cropping2D(Layer):
    def __init__(self, cropping=((0, 0), (0, 0)), data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.cropping, self.data_format = pads(cropping), data_format or "channels_last"

    def get_config(self):
        c = self.base_config()
        c.update({"cropping": [list(p) for p in self.cropping], "data_format": self.data_format})
        return c

    def output_shape(self, s):
        return (s[0], plus(s[1], -sum(self.cropping[0])), plus(s[2], -sum(self.cropping[1])), s[3])


class Pooling2D(Layer):
    def __init__(self, pool_size=(2, 2), strides=None, padding="valid", data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.pool_size = pair(pool_size)
        self.strides = self.pool_size if strides is None else pair(strides)
        self.padding, self.data_format = padding.lower(), data_format or "channels_last"

    def get_config(self):
        c = self.base_config()
        c.update({"pool_size": list(self.pool_size), "padding": self.padding, "strides": list(self.strides),
                  "data_format": self.data_format})
        return c

    def output_shape(self, s):
        return (s[0], conv_length(s[1], self.pool_size[0], self.strides[0], self.padding),
                conv_length(s[2], self.pool_size[1], self.strides[1], self.padding), s[3])


class MaxPooling2D(Pooling2D):
    pass


class AveragePooling2D(Pooling2D):
    pass


class GlobalPooling2D(Layer):
    def __init__(self, data_format=None, keepdims=False, **kwargs):
        super().__init__(**kwargs)
        self.data_format, self.keepdims = data_format or "channels_last", keepdims

    def get_config(self):
        c = self.base_config()
        c.update({"data_format": self.data_format, "keepdims": self.keepdims})
        return c

    def output_shape(self, s):
        return (s[0], 1, 1, s[3]) if self.keepdims else (s[0], s[3])


class GlobalAveragePooling2D(GlobalPooling2D):
    pass


class GlobalMaxPooling2D(GlobalPooling2D):
    pass


class Flatten(Layer):
    def __init__(self, data_format=None, **kwargs):
        super().__init__(**kwargs)
        self.data_format = data_format or "channels_last"

    def get_config(self):
        c = self.base_config()
        c["data_format"] = self.data_format
        return c

    def output_shape(self, s):
        return (s[0], None if None in s[1:] else math.prod(s[1:]))


class Reshape(Layer):
    def __init__(self, target_shape, **kwargs):
        super().__init__(**kwargs)
        self.target_shape = tuple(target_shape)

    def get_config(self):
        c = self.base_config()
        c["target_shape"] = list(self.target_shape)
        return c

    def output_shape(self, s):
        t = list(self.target_shape)
        if -1 in t:
            t[t.index(-1)] = None if None in s[1:] else math.prod(s[1:]) // -math.prod(t)
        return (s[0],) + tuple(t)


class Dropout(Layer):
    def __init__(self, rate, noise_shape=None, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.rate, self.noise_shape, self.seed = rate, noise_shape, seed

    def get_config(self):
        c = self.base_config()
        c.update({"rate": self.rate, "seed": self.seed,
                  "noise_shape": None if self.noise_shape is None else list(self.noise_shape)})
        return c


class Rescaling(Layer):
    def __init__(self, scale, offset=0.0, **kwargs):
        super().__init__(**kwargs)
        self.scale, self.offset = scale, offset

    def get_config(self):
        c = self.base_config()
        c.update({"scale": self.scale, "offset": self.offset})
        return c


class Normalization(Layer):
    def __init__(self, axis=-1, mean=None, variance=None, invert=False, **kwargs):
        super().__init__(**kwargs)
        self.axis = (axis,) if isinstance(axis, int) else tuple(axis)
        self.mean, self.variance, self.invert = mean, variance, invert

    def get_config(self):
        c = self.base_config()
        c.update({"axis": list(self.axis), "invert": self.invert, "mean": self.mean, "variance": self.variance})
        return c


class Merge(Layer):
    def compute_output_shapes(self, shapes):
        return [broadcast(shapes)]

    def build_config(self):
        return {"input_shape": [list(s) for s in self.built_shapes]}


class Add(Merge):
    pass


class Multiply(Merge):
    pass


class Concatenate(Merge):
    def __init__(self, axis=-1, **kwargs):
        super().__init__(**kwargs)
        self.axis = axis

    def get_config(self):
        c = self.base_config()
        c["axis"] = self.axis
        return c

    def compute_output_shapes(self, shapes):
        a = self.axis % len(shapes[0])
        out = list(shapes[0])
        out[a] = None if any(s[a] is None for s in shapes) else sum(s[a] for s in shapes)
        return [tuple(out)]


def add(inputs, **kwargs):
    return Add(**kwargs)(inputs)


def multiply(inputs, **kwargs):
    return Multiply(**kwargs)(inputs)


def concatenate(inputs, axis=-1, **kwargs):
    return Concatenate(axis=axis, **kwargs)(inputs)


class CustomLayer(Layer):
    """Base of the layers keras.applications defines itself: Keras
    serializes them with their Python module and class name."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.module = type(self).__module__
        self.registered_name = type(self).__name__

    def get_config(self):
        return self.base_config()


class Functional(Layer):
    def __init__(self, inputs, outputs, name=None, **kwargs):
        super().__init__(name=name or auto_name("functional"))
        self.ins = flatten(inputs)
        self.outs = flatten(outputs)

    def load_weights(self, path):
        pass

    def operations(self):
        """Every layer from the inputs to the outputs, inputs first (the
        order of Keras' Functional.layers: by depth)."""
        seen, order = set(), []

        def visit(layer):
            if id(layer) in seen:
                return
            seen.add(id(layer))
            for t in layer.inputs_of():
                visit(t.history[0])
            order.append(layer)

        for t in self.outs:
            visit(t.history[0])
        return order

    def to_json(self):
        layers = [l.serialize() for l in self.operations()]
        ref = lambda t: [t.history[0].name, t.history[1], t.history[2]]
        ins = [ref(t) for t in self.ins]
        outs = [ref(t) for t in self.outs]
        config = {"name": self.name, "trainable": True, "layers": layers,
                  "input_layers": ins[0] if len(ins) == 1 else ins,
                  "output_layers": outs[0] if len(outs) == 1 else outs}
        return {"module": "keras.src.models.functional", "class_name": "Functional", "config": config,
                "registered_name": "Functional", "build_config": {"input_shape": None}}


class Sequential(Layer):
    """A Sequential called on a tensor: Keras 3 builds it with an InputLayer
    of the tensor's shape and writes that InputLayer first."""

    module = "keras"

    def __init__(self, layers=None, name=None, **kwargs):
        super().__init__(name=name)
        self.layers = list(layers or [])
        self.input = None

    def compute_output_shapes(self, shapes):
        self.input = InputLayer(shapes[0])
        x = self.input.output
        for l in self.layers:
            x = l(x)
        return [x.shape]

    def get_config(self):
        c = self.base_config()
        c["layers"] = [self.input.serialize(nodes=False)] + [l.serialize(nodes=False) for l in self.layers]
        c["build_input_shape"] = list(self.input.batch_shape)
        return c


# --- modules the builder code imports --------------------------------------


def stand_in_modules(app_module_names):
    layers = types.ModuleType("keras.src.layers")
    for name, obj in list(globals().items()):
        if isinstance(obj, type) and issubclass(obj, Layer) or name in ("Input", "add", "multiply", "concatenate"):
            setattr(layers, name, obj)
    layer_mod = types.ModuleType("keras.src.layers.layer")
    layer_mod.Layer = CustomLayer

    backend = types.ModuleType("keras.src.backend")
    backend.image_data_format = lambda: "channels_last"
    backend.standardize_data_format = lambda f: f or "channels_last"
    backend.is_keras_tensor = lambda x: isinstance(x, KerasTensor)
    backend.get_uid = get_uid
    backend.floatx = lambda: "float32"

    class name_scope:
        def __init__(self, *a, **k):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *a):
            return False

    backend.name_scope = name_scope

    models = types.ModuleType("keras.src.models")
    models.Functional, models.Sequential = Functional, Sequential
    api_export = types.ModuleType("keras.src.api_export")

    def keras_export(*a, **k):
        return lambda f: f

    api_export.keras_export = keras_export
    ops = types.ModuleType("keras.src.ops")
    operation_utils = types.ModuleType("keras.src.ops.operation_utils")
    operation_utils.get_source_inputs = lambda t: [t]
    ops.operation_utils = operation_utils
    utils = types.ModuleType("keras.src.utils")
    file_utils = types.ModuleType("keras.src.utils.file_utils")
    file_utils.get_file = lambda fname, origin=None, **k: fname
    file_utils.exists = lambda p: False
    utils.file_utils = file_utils
    activations = types.ModuleType("keras.src.activations")
    activations.get = lambda a: activation_name(a)
    random = types.ModuleType("keras.src.random")

    try:
        import numpy  # noqa: F401 (ConvNeXt's builder calls np.linspace)
    except ImportError:
        np = types.ModuleType("numpy")

        def linspace(start, stop, num):
            if num == 1:
                return [float(start)]
            return [start + (stop - start) * i / (num - 1) for i in range(num)]

        np.linspace = linspace
        sys.modules["numpy"] = np

    src = types.ModuleType("keras.src")
    for name, m in [("layers", layers), ("backend", backend), ("models", models), ("api_export", api_export),
                    ("ops", ops), ("utils", utils), ("activations", activations), ("initializers", initializers),
                    ("random", random)]:
        setattr(src, name, m)
        sys.modules["keras.src." + name] = m
    sys.modules["keras.src.layers.layer"] = layer_mod
    sys.modules["keras.src.ops.operation_utils"] = operation_utils
    sys.modules["keras.src.utils.file_utils"] = file_utils
    keras = types.ModuleType("keras")
    keras.src = src
    keras.__path__ = []
    src.__path__ = []
    sys.modules["keras"], sys.modules["keras.src"] = keras, src


# --- the models -------------------------------------------------------------

# Each model as keras.applications builds it by default (ImageNet weights,
# the classifier on top, 1000 classes): module and builder, and for a
# variant, the file name and the builder's arguments.
MODELS = [
    ("efficientnet", "EfficientNetB0"),
    # ConvNeXt-T with stochastic depth (0.1 as in the paper's ImageNet-1K
    # training; keras.applications' ConvNeXtTiny builds it with 0)
    ("convnext", "ConvNeXt", "ConvNeXtTinyDropPath",
     dict(name="convnext_tiny", depths=[3, 3, 9, 3], projection_dims=[96, 192, 384, 768], drop_path_rate=0.1)),
    ("efficientnet_v2", "EfficientNetV2B0"),
    ("mobilenet", "MobileNet"),
    ("mobilenet_v2", "MobileNetV2"),
    ("mobilenet_v3", "MobileNetV3Small"),
    ("mobilenet_v3", "MobileNetV3Large"),
    ("resnet", "ResNet50"),
    ("resnet_v2", "ResNet50V2"),
    ("inception_v3", "InceptionV3"),
    ("inception_resnet_v2", "InceptionResNetV2"),
    ("xception", "Xception"),
    ("densenet", "DenseNet121"),
    ("nasnet", "NASNetMobile"),
    ("convnext", "ConvNeXtTiny"),
    ("vgg16", "VGG16"),
    # the largest of some families
    ("efficientnet", "EfficientNetB7"),
    ("resnet_v2", "ResNet152V2"),
    ("densenet", "DenseNet201"),
    ("nasnet", "NASNetLarge"),
    ("vgg19", "VGG19"),
]


def main():
    if len(sys.argv) not in (2, 3):
        sys.exit(__doc__)
    src = os.path.join(sys.argv[1], "keras", "src", "applications")
    out_dir = sys.argv[2] if len(sys.argv) == 3 else os.path.dirname(os.path.abspath(__file__))
    tmp = tempfile.mkdtemp()
    try:
        pkg = os.path.join(tmp, "keras_applications_src")
        os.makedirs(pkg)
        for f in sorted(os.listdir(src)):
            if f.endswith(".py") and not f.endswith("_test.py"):
                shutil.copy(os.path.join(src, f), pkg)
        stand_in_modules([])
        apps = types.ModuleType("keras.src.applications")
        apps.__path__ = [pkg]
        sys.modules["keras.src.applications"] = apps
        sys.modules["keras.src"].applications = apps
        import importlib

        for entry in MODELS:
            module, builder = entry[:2]
            file, kwargs = (entry[2], entry[3]) if len(entry) == 4 else (builder, {})
            _names.clear()
            _uids.clear()
            mod = importlib.import_module("keras.src.applications." + module)
            model = getattr(mod, builder)(**kwargs)
            path = os.path.join(out_dir, file + ".json.gz")
            data = json.dumps(model.to_json(), separators=(",", ":")).encode()
            with open(path, "wb") as f:
                # no name or time in the header: the same source writes the same bytes
                with gzip.GzipFile(fileobj=f, mode="wb", filename="", mtime=0) as g:
                    g.write(data)
            print(f"{file}: {len(model.operations())} layers, {len(data)} bytes of JSON -> {path}")
    finally:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
