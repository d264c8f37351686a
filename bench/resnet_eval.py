"""Test accuracy of a ResNet-20 saved by `headroom train --model resnet
--dataset fashion-mnist --save FILE`, recomputed in numpy from the file's
weights, two ways:

  moving  BatchNormalization with its moving statistics (what headroom's
          test_acc and PyTorch's model.eval() use)
  batch   each test batch of 1000 normalized with its own statistics

and, per BatchNormalization layer, how far the moving statistics are from
the statistics of the test batches: the mean absolute difference of the
means (beside the mean's size) and the ratio of the variances.

    /usr/bin/python3 bench/resnet_eval.py FILE [--data-dir DIR]

It follows nn.ResNet20's layer names and padding: 3x3 convolutions of stride
2 pad one row and column on every side (PyTorch's padding=1), the others
are "same".
"""
import argparse, gzip, json, os, struct
import numpy as np

p = argparse.ArgumentParser()
p.add_argument("file")
p.add_argument("--data-dir", default="/usr/share/datasets/fashion-mnist")
a = p.parse_args()


def safetensors(path):
    with open(path, "rb") as f:
        b = f.read()
    n = struct.unpack("<Q", b[:8])[0]
    head, out = json.loads(b[8:8 + n]), {}
    for k, v in head.items():
        if k == "__metadata__":
            continue
        s, e = v["data_offsets"]
        dt = {"F32": np.float32, "F64": np.float64}[v["dtype"]]
        out[k] = np.frombuffer(b[8 + n + s:8 + n + e], dtype=dt).reshape(v["shape"])
    return out


def idx(path):
    with gzip.open(path, "rb") as f:
        b = f.read()
    nd = b[3]
    dims = struct.unpack(">" + "I" * nd, b[4:4 + 4 * nd])
    return np.frombuffer(b, np.uint8, offset=4 + 4 * nd).reshape(dims)


W = safetensors(a.file)
tx = idx(os.path.join(a.data_dir, "t10k-images-idx3-ubyte.gz")).reshape(-1, 28, 28, 1).astype(np.float32) / 255
ty = idx(os.path.join(a.data_dir, "t10k-labels-idx1-ubyte.gz")).astype(np.int64)


def conv(x, w, stride, pad):  # x [N, H, W, C], w [KH, KW, C, F], pad (before, after)
    kh, kw, _, f = w.shape
    x = np.pad(x, ((0, 0), pad, pad, (0, 0)))
    oh, ow = (x.shape[1] - kh) // stride + 1, (x.shape[2] - kw) // stride + 1
    y = np.zeros((x.shape[0], oh, ow, f), np.float32)
    for i in range(kh):
        for j in range(kw):
            y += x[:, i:i + stride * oh:stride, j:j + stride * ow:stride, :] @ w[i, j]
    return y


def same(n, k, s):
    o = -(-n // s)
    t = max((o - 1) * s + k - n, 0)
    return (t // 2, t - t // 2)


seen = {}


def forward(x, mode):
    count = [0]

    def name(kind):
        count[0] += 1
        return "%s_%d" % (kind, count[0])

    def cv(t, k, s):
        pad = (k // 2, k // 2) if s > 1 and k > 1 else same(t.shape[1], k, s)
        return conv(t, W[name("conv2d") + "/kernel"], s, pad)

    def bn(t):
        n = name("batch_normalization")
        m, v = t.mean((0, 1, 2)), t.var((0, 1, 2))
        seen.setdefault(n, []).append((m, v))
        if mode == "moving":
            m, v = W[n + "/moving_mean"], W[n + "/moving_variance"]
        return (t - m) / np.sqrt(v + 1e-3) * W[n + "/gamma"] + W[n + "/beta"]

    def relu(t):
        name("relu")
        return np.maximum(t, 0)

    h, cin = relu(bn(cv(x, 3, 1))), 16
    for f, stride in [(16, 1), (32, 2), (64, 2)]:
        for b in range(3):
            s = stride if b == 0 else 1
            body = bn(cv(relu(bn(cv(h, 3, s))), 3, 1))
            short = bn(cv(h, 1, s)) if s != 1 or cin != f else h
            name("add")
            h, cin = relu(body + short), f
    name("global_average_pooling2d")
    d = name("dense")
    return h.mean((1, 2)) @ W[d + "/kernel"] + W[d + "/bias"]


for mode in ("moving", "batch"):
    seen.clear()
    pred = np.concatenate([forward(tx[i:i + 1000], mode).argmax(1) for i in range(0, len(tx), 1000)])
    print("%-6s statistics: test_acc %.4f" % (mode, (pred == ty).mean()))
print("moving statistics against the test batches' (means: mean |difference| and mean |mean|; variances: ratio median, min, max)")
for n in sorted(seen, key=lambda s: int(s.rsplit("_", 1)[1])):
    m = np.mean([x for x, _ in seen[n]], 0)
    v = np.mean([y for _, y in seen[n]], 0)
    r = W[n + "/moving_variance"] / v
    print("%-24s %.3f of %.3f   %.3f %.3f %.3f" % (n, np.abs(m - W[n + "/moving_mean"]).mean(), np.abs(m).mean(), np.median(r), r.min(), r.max()))
