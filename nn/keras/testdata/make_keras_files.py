#!/usr/bin/python3
"""Writes Keras model files with h5py in the layouts Keras' own saving code
uses (keras/src/legacy/saving/legacy_h5_format.py for .h5,
keras/src/saving/saving_lib.py for .keras), and a manifest (JSON): each
file's total parameter count, its weights by headroom variable name, and a
numpy forward pass of the MLP on inputs.csv. Usage: make_keras_files.py DIR"""
import io, json, os, sys, zipfile
import numpy as np
import h5py

out = sys.argv[1]
rng = np.random.default_rng(11)
manifest = {}

# the MLP: 6 -> Dense(5, relu) -> BatchNormalization -> Dense(3, softmax)
W = {
    "dense/kernel": rng.standard_normal((6, 5)).astype(np.float32),
    "dense/bias": rng.standard_normal(5).astype(np.float32),
    "bn/gamma": (1 + 0.1 * rng.standard_normal(5)).astype(np.float32),
    "bn/beta": (0.1 * rng.standard_normal(5)).astype(np.float32),
    "bn/moving_mean": rng.standard_normal(5).astype(np.float32),
    "bn/moving_variance": (0.5 + rng.random(5)).astype(np.float32),
    "out/kernel": rng.standard_normal((5, 3)).astype(np.float32),
    "out/bias": rng.standard_normal(3).astype(np.float32),
}
ORDER = {"dense": ["kernel", "bias"], "bn": ["gamma", "beta", "moving_mean", "moving_variance"], "out": ["kernel", "bias"]}
CLASS = {"dense": "Dense", "bn": "BatchNormalization", "out": "Dense"}
MLP_PARAMS = 6 * 5 + 5 + 4 * 5 + 5 * 3 + 3
# Adam's state as Keras 3 keeps it: the iteration count, the learning rate,
# then each trainable variable's momentum and velocity, interleaved
TRAINABLE = ["dense/kernel", "dense/bias", "bn/gamma", "bn/beta", "out/kernel", "out/bias"]
orng = np.random.default_rng(12)
OPT = {}
for name in TRAINABLE:
    OPT[name + "/m"] = orng.standard_normal(W[name].shape).astype(np.float32)
    OPT[name + "/v"] = orng.random(W[name].shape).astype(np.float32)
manifest["optimizer"] = {"iterations": 100, "slots": {k: v.astype(np.float64).ravel().tolist() for k, v in OPT.items()}}


def keras2_config():
    return {"class_name": "Sequential", "config": {"name": "mlp", "layers": [
        {"class_name": "Dense", "config": {"name": "dense", "trainable": True, "batch_input_shape": [None, 6], "dtype": "float32",
                                           "units": 5, "activation": "relu", "use_bias": True}},
        {"class_name": "BatchNormalization", "config": {"name": "bn", "trainable": True, "dtype": "float32", "axis": -1,
                                                        "momentum": 0.99, "epsilon": 0.001, "center": True, "scale": True}},
        {"class_name": "Dense", "config": {"name": "out", "trainable": True, "dtype": "float32", "units": 3, "activation": "softmax", "use_bias": True}}]},
        "keras_version": "2.15.0", "backend": "tensorflow"}


def policy(name):
    return {"module": "keras", "class_name": "DTypePolicy", "config": {"name": name}, "registered_name": None}


def keras3_config(dtype="float32"):
    def layer(cls, cfg, shape):
        cfg = dict(cfg, trainable=True, dtype=policy(dtype))
        return {"module": "keras.layers", "class_name": cls, "config": cfg, "registered_name": None, "build_config": {"input_shape": shape}}
    return {"module": "keras", "class_name": "Sequential", "registered_name": None, "config": {"name": "mlp", "trainable": True, "dtype": policy("float32"), "layers": [
        {"module": "keras.layers", "class_name": "InputLayer", "config": {"batch_shape": [None, 6], "dtype": "float32", "sparse": False, "name": "input_layer"}, "registered_name": None},
        layer("Dense", {"name": "dense", "units": 5, "activation": "relu", "use_bias": True}, [None, 6]),
        layer("BatchNormalization", {"name": "bn", "axis": -1, "momentum": 0.99, "epsilon": 0.001, "center": True, "scale": True}, [None, 5]),
        layer("Dense", {"name": "out", "units": 3, "activation": "softmax", "use_bias": True}, [None, 5])]},
        "build_config": {"input_shape": [None, 6]},
        "compile_config": {"optimizer": {"module": "keras.optimizers", "class_name": "Adam", "config": {"name": "adam", "learning_rate": 0.001}, "registered_name": None},
                           "loss": "sparse_categorical_crossentropy", "metrics": ["accuracy"]}}


def record(name, params, weights, dtype=np.float32):
    manifest[name] = {"params": params, "weights": {k: np.asarray(v.astype(dtype), dtype=np.float64).ravel().tolist() for k, v in weights.items()}}


def legacy_weights(g, keras3_names=False):
    """Keras 2 layout (save_weights_to_hdf5_group): layer_names, then a
    group per layer with weight_names and datasets at those paths."""
    g.attrs["layer_names"] = [n.encode() for n in ORDER]
    g.attrs["backend"] = b"tensorflow"
    g.attrs["keras_version"] = b"2.15.0"
    for layer, names in ORDER.items():
        lg = g.create_group(layer)
        # Keras 2: "<layer>/<weight>:0"; Keras 3 writing .h5: "<model>/<layer>/<weight>"
        wn = [("mlp/%s/%s" % (layer, n)) if keras3_names else ("%s/%s:0" % (layer, n)) for n in names]
        lg.attrs["weight_names"] = [w.encode() for w in wn]
        for w, n in zip(wn, names):
            lg.create_dataset(w, data=W[layer + "/" + n])


# 1. a legacy full model (model.save("x.h5") in Keras 2)
with h5py.File(os.path.join(out, "k2_full.h5"), "w") as f:
    f.attrs["keras_version"] = "2.15.0"
    f.attrs["backend"] = "tensorflow"
    f.attrs["model_config"] = json.dumps(keras2_config())
    f.attrs["training_config"] = json.dumps({"loss": "categorical_crossentropy", "metrics": ["accuracy"],
        "optimizer_config": {"class_name": "Adam", "config": {"name": "Adam", "learning_rate": 0.01, "beta_1": 0.9, "beta_2": 0.999, "epsilon": 1e-07}}})
    legacy_weights(f.create_group("model_weights"))
record("k2_full.h5", MLP_PARAMS, W)

# 2. Keras 3 writing the legacy format: names without :0, the model's name in the path
with h5py.File(os.path.join(out, "k3_legacy.h5"), "w") as f:
    f.attrs["keras_version"] = "3.7.0"
    f.attrs["model_config"] = json.dumps(keras3_config())
    legacy_weights(f.create_group("model_weights"), keras3_names=True)
    f.create_group("model_weights/top_level_model_weights")
record("k3_legacy.h5", MLP_PARAMS, W)

# 3. weights alone (save_weights, Keras 2) and the architecture as JSON
with h5py.File(os.path.join(out, "k2_weights.h5"), "w") as f:
    legacy_weights(f)
with open(os.path.join(out, "k2_config.json"), "w") as f:
    json.dump(keras2_config(), f)
record("k2_weights.h5", MLP_PARAMS, W)


def keras3_archive(name, dtype=np.float32, chunked=False, policy_name="float32", bf16=False, libver="earliest"):
    """A .keras zip as saving_lib writes it: H5IOStore groups
    layers/<snake_case(class)>[_N]/vars/<i>, an optimizer's state beside."""
    buf = io.BytesIO()
    with h5py.File(buf, "w", libver=libver) as f:
        counts = {}
        f.create_group("vars").attrs["name"] = "mlp"
        for layer, names in ORDER.items():
            snake = {"Dense": "dense", "BatchNormalization": "batch_normalization"}[CLASS[layer]]
            n = counts.get(snake, 0)
            counts[snake] = n + 1
            g = f.create_group("layers/%s/vars" % (snake if n == 0 else "%s_%d" % (snake, n)))
            g.attrs["name"] = layer
            for i, wn in enumerate(names):
                v = W[layer + "/" + wn]
                kw = {"chunks": tuple(max(1, d // 2) for d in v.shape), "compression": "gzip", "shuffle": True} if chunked else {}
                if bf16:
                    bits = (v.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
                    ds = g.create_dataset(str(i), data=bits.view("V2"), **kw)
                    ds.attrs["dtype"] = "bfloat16"
                else:
                    g.create_dataset(str(i), data=v.astype(dtype), **kw)
        o = f.create_group("optimizer/vars")
        o.create_dataset("0", data=np.int64(100))
        o.create_dataset("1", data=np.float32(0.001))
        for i, (vname, slot) in enumerate((n, s) for n in TRAINABLE for s in ("m", "v")):
            o.create_dataset(str(i + 2), data=OPT[vname + "/" + slot])
        f.create_group("metrics/mean/vars").create_dataset("0", data=np.float32(3))
    with zipfile.ZipFile(os.path.join(out, name), "w") as z:
        z.writestr("metadata.json", json.dumps({"keras_version": "3.10.0", "date_saved": "2026-01-01@00:00:00"}))
        z.writestr("config.json", json.dumps(keras3_config(policy_name)))
        z.writestr("model.weights.h5", buf.getvalue())


keras3_archive("k3.keras")
record("k3.keras", MLP_PARAMS, W)
keras3_archive("k3_chunked.keras", chunked=True, libver="latest")  # every dataset chunked and deflated
record("k3_chunked.keras", MLP_PARAMS, W)
keras3_archive("k3_fp16.keras", dtype=np.float16, policy_name="float16")  # a float16 policy's weights
record("k3_fp16.keras", MLP_PARAMS, W, dtype=np.float16)
keras3_archive("k3_bf16.keras", bf16=True, policy_name="mixed_bfloat16")


def bf16(v):
    return ((v.astype(np.float32).view(np.uint32) >> 16) << 16).astype(np.uint32).view(np.float32)


manifest["k3_bf16.keras"] = {"params": MLP_PARAMS, "weights": {k: bf16(v).astype(np.float64).ravel().tolist() for k, v in W.items()}}

# inputs, labels and the MLP's outputs (inference: moving statistics)
x = rng.standard_normal((20, 6)).astype(np.float32)
y = rng.integers(0, 3, 20)
h = np.maximum(x @ W["dense/kernel"] + W["dense/bias"], 0)
h = (h - W["bn/moving_mean"]) / np.sqrt(W["bn/moving_variance"] + 1e-3) * W["bn/gamma"] + W["bn/beta"]
z = h @ W["out/kernel"] + W["out/bias"]
p = np.exp(z - z.max(1, keepdims=True))
p /= p.sum(1, keepdims=True)
with open(os.path.join(out, "inputs.csv"), "w") as f:
    f.write("a,b,c,d,e,f,label\n")
    for row, t in zip(x, y):
        f.write(",".join("%.9g" % v for v in row) + ",%d\n" % t)
manifest["outputs"] = p.astype(np.float64).ravel().tolist()
with open(os.path.join(out, "manifest.json"), "w") as f:
    json.dump(manifest, f)
