#!/usr/bin/python3
"""Writes HDF5 files with h5py in the layouts the Go reader must handle and
a manifest (JSON) of what each holds: every dataset's dtype, shape and
values, and every attribute's value. Usage: make_h5.py DIR"""
import json, os, sys
import numpy as np
import h5py

out = sys.argv[1]
manifest = {}


def record(path):
    entry = {"datasets": {}, "attrs": {}}
    with h5py.File(path, "r") as f:
        def attrs(name, o):
            for k, v in o.attrs.items():
                if isinstance(v, bytes):
                    v = v.decode()
                elif isinstance(v, np.ndarray):
                    v = [x.decode() if isinstance(x, bytes) else (x if isinstance(x, str) else float(x)) for x in v.tolist()]
                elif isinstance(v, (np.floating, float)):
                    v = float(v)
                elif isinstance(v, (np.integer, int)):
                    v = int(v)
                entry["attrs"][("/" + name).rstrip("/") + "@" + k if name else "/@" + k] = v
        attrs("", f)

        def visit(name, o):
            attrs(name, o)
            if isinstance(o, h5py.Dataset):
                a = o[()]
                dt = str(o.dtype)
                if o.attrs.get("dtype") == "bfloat16":
                    dt = "bfloat16"
                    a = np.frombuffer(np.ascontiguousarray(a).tobytes(), dtype=np.uint16).astype(np.uint32) << 16
                    a = a.view(np.float32)
                entry["datasets"]["/" + name] = {"dtype": dt, "shape": list(o.shape),
                                                 "values": np.asarray(a, dtype=np.float64).ravel().tolist()}
        f.visititems(visit)
    manifest[os.path.basename(path)] = entry


rng = np.random.default_rng(7)


def common(f):
    g = f.create_group("model_weights")
    g.attrs["layer_names"] = np.array([b"dense", b"conv"], dtype="S5")
    g.attrs["backend"] = "tensorflow"                       # variable-length string
    g.attrs["names_vlen"] = ["dense/kernel:0", "dense/bias:0"]  # array of vlen strings
    g.attrs["empty"] = np.zeros((0,), dtype=np.float64)
    g.attrs["pi"] = 3.25
    g.attrs["count"] = np.int64(-7)
    d = g.create_group("dense/dense")
    d.create_dataset("kernel:0", data=rng.standard_normal((5, 3)).astype(np.float32))
    d.create_dataset("bias:0", data=np.arange(3, dtype=np.float64))
    d.create_dataset("half", data=rng.standard_normal((4, 2)).astype(np.float16))
    d.create_dataset("steps", data=np.array([1, -2, 3], dtype=np.int64))
    d.create_dataset("scalar", data=np.float32(2.5))
    d.create_dataset("empty", data=np.zeros((0, 4), dtype=np.float32))
    bf = (rng.standard_normal(6).astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)
    ds = d.create_dataset("bf16", data=bf.view("V2"))
    ds.attrs["dtype"] = "bfloat16"
    f.attrs["model_config"] = json.dumps({"class_name": "Sequential", "config": {"layers": []}})


# 1. what h5py writes by default (superblock 0, symbol tables), as Keras 2 does
with h5py.File(os.path.join(out, "earliest.h5"), "w") as f:
    common(f)
    many = f.create_group("many")  # a B-tree with internal nodes and several symbol nodes
    for i in range(300):
        many.create_dataset("d%03d" % i, data=np.full((2,), i, dtype=np.float32))

# 2. the newest format: superblock 3, version 2 object headers, link
# messages, dense groups in fractal heaps, dense attributes
with h5py.File(os.path.join(out, "latest.h5"), "w", libver="latest") as f:
    common(f)
    many = f.create_group("many")
    for i in range(300):
        many.create_dataset("d%03d" % i, data=np.full((2,), i, dtype=np.float32))
    f["many"].attrs["big"] = np.arange(20000, dtype=np.float64)  # past 64 KiB: dense attribute storage
    for i in range(20):
        f["many"].attrs["a%02d" % i] = "value %d" % i

# 3. every dataset chunked and deflate-compressed, in both index forms
for libver, name in (("earliest", "chunked.h5"), ("latest", "chunked_latest.h5")):
    with h5py.File(os.path.join(out, name), "w", libver=libver) as f:
        g = f.create_group("layers/dense/vars")
        g.create_dataset("0", data=rng.standard_normal((37, 29)).astype(np.float32), chunks=(8, 7), compression="gzip", shuffle=True, fletcher32=True)
        g.create_dataset("1", data=rng.standard_normal((29,)).astype(np.float32), chunks=(29,), compression="gzip")
        g.create_dataset("2", data=rng.standard_normal((3, 4, 5)).astype(np.float16), chunks=(2, 3, 2), compression="gzip", compression_opts=9)
        g.create_dataset("3", data=np.zeros((100, 100), dtype=np.float32), chunks=True, compression="gzip")
        g.create_dataset("4", data=rng.standard_normal((6, 5)).astype(np.float64), chunks=(6, 5), compression="gzip")

# 4. a user block before the superblock
with h5py.File(os.path.join(out, "userblock.h5"), "w", userblock_size=512) as f:
    f.create_dataset("x", data=np.arange(10, dtype=np.float32))

# 5. compact storage
with h5py.File(os.path.join(out, "compact.h5"), "w") as f:
    space = h5py.h5s.create_simple((4, 3))
    plist = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    plist.set_layout(h5py.h5d.COMPACT)
    dsid = h5py.h5d.create(f.id, b"c", h5py.h5t.IEEE_F32LE, space, plist)
    dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, np.arange(12, dtype=np.float32).reshape(4, 3))

for name in sorted(os.listdir(out)):
    if name.endswith(".h5"):
        record(os.path.join(out, name))
with open(os.path.join(out, "manifest.json"), "w") as f:
    json.dump(manifest, f)

# malformed files, beside: each must end in an error naming the file and an offset
bad = os.path.join(out, "bad")
os.makedirs(bad, exist_ok=True)
with h5py.File(os.path.join(bad, "cycle.h5"), "w") as f:
    f.create_group("a/b")
    f["a/b/loop"] = f["a"]  # a hard link to an ancestor: a loop in the groups
    f["a/x"] = np.zeros(3, dtype=np.float32)
with h5py.File(os.path.join(out, "tmp_big.h5"), "w") as f:
    f.create_dataset("w", data=np.arange(1000, dtype=np.float32))
raw = bytearray(open(os.path.join(out, "tmp_big.h5"), "rb").read())
os.remove(os.path.join(out, "tmp_big.h5"))
space = b"\x01\x01\x01\x00\x00\x00\x00\x00" + (1000).to_bytes(8, "little")  # dataspace v1, rank 1, max dims
i = raw.find(space)
assert i > 0, "no dataspace message of 1000 elements"
lying = bytearray(raw)
lying[i + 8:i + 16] = (10 ** 9).to_bytes(8, "little")
lying[i + 16:i + 24] = (10 ** 9).to_bytes(8, "little")  # a dataspace that lies: 10^9 elements in 4000 bytes of storage
open(os.path.join(bad, "lying_size.h5"), "wb").write(lying)
# 10^9 elements and a layout that says 4e9 bytes: a dataset larger than the file
larger = bytearray(lying)
j = larger.find((4000).to_bytes(8, "little"))
assert j > 0
larger[j:j + 8] = (4 * 10 ** 9).to_bytes(8, "little")
open(os.path.join(bad, "larger_than_file.h5"), "wb").write(larger)
open(os.path.join(bad, "truncated.h5"), "wb").write(raw[:len(raw) // 2])
heap = bytearray(raw)
k = heap.find(b"HEAP")
heap[k + 8:k + 16] = (1 << 40).to_bytes(8, "little")  # a local heap larger than the file
open(os.path.join(bad, "heap_size.h5"), "wb").write(heap)
