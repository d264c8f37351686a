"""The PyTorch half of bench/resnet_control.sh: builds the ResNet-20 of
../shared/peers/train.py (the same layers, torch.manual_seed(0), Adam 1e-3,
the peer's batch order from torch.Generator().manual_seed(1)), writes its
initial weights under headroom's names (DIR/w0), the first K batches of
Fashion-MNIST (DIR/x.bin float32 NHWC, DIR/y.bin int32), trains K steps,
and writes the weights after them (DIR/wK) and each step's loss
(DIR/losses.txt). Weights are raw little-endian float32 files named
LAYER__WEIGHT.bin, in headroom's layouts: convolution kernels
[KH, KW, C, F], dense kernels [in, out].

    /usr/bin/python3 bench/resnet_control.py DIR K
"""
import os, sys
import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "shared", "peers"))
from common import fashion  # noqa: E402

out, K = sys.argv[1], int(sys.argv[2])
torch.set_num_threads(2)
torch.manual_seed(0)
x, y = fashion("train")
n = len(x)
X, Y = torch.from_numpy(x).reshape(n, 1, 28, 28), torch.from_numpy(y)
nn = torch.nn


def bn(c):
    return nn.BatchNorm2d(c, eps=1e-3, momentum=0.01)


class Basic(nn.Module):  # peers/train.py's basic block
    def __init__(s, cin, cout, stride):
        super().__init__()
        s.body = nn.Sequential(nn.Conv2d(cin, cout, 3, stride, 1, bias=False), bn(cout), nn.ReLU(),
                               nn.Conv2d(cout, cout, 3, 1, 1, bias=False), bn(cout))
        s.short = nn.Identity() if stride == 1 and cin == cout else nn.Sequential(
            nn.Conv2d(cin, cout, 1, stride, bias=False), bn(cout))

    def forward(s, x):
        return torch.relu(s.body(x) + s.short(x))


layers, cin = [nn.Conv2d(1, 16, 3, 1, 1, bias=False), bn(16), nn.ReLU()], 16
for cout, stride in [(16, 1), (32, 2), (64, 2)]:
    for b in range(3):
        layers.append(Basic(cin, cout, stride if b == 0 else 1))
        cin = cout
model = nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))

# headroom's names (nn.ResNet20): one counter over every layer, in the order
# the layers are created: conv, BN, relu; per block conv, BN, relu, conv, BN,
# the shortcut's conv and BN, add, relu; pooling; dense
count, names = [0], {}
weighted = iter([m for m in model.modules() if isinstance(m, (nn.Conv2d, nn.BatchNorm2d, nn.Linear))])


def name(kind, module=True):
    count[0] += 1
    if module:
        names[next(weighted)] = "%s_%d" % (kind, count[0])


name("conv2d"); name("batch_normalization"); name("relu", False)
for blk in [m for m in model.modules() if isinstance(m, Basic)]:
    name("conv2d"); name("batch_normalization"); name("relu", False); name("conv2d"); name("batch_normalization")
    if not isinstance(blk.short, nn.Identity):
        name("conv2d"); name("batch_normalization")
    name("add", False); name("relu", False)
name("global_average_pooling2d", False); name("dense")


def save(path):
    os.makedirs(path, exist_ok=True)
    for m, nm in names.items():
        if isinstance(m, nn.Conv2d):
            w = {"kernel": m.weight.detach().numpy().transpose(2, 3, 1, 0)}
        elif isinstance(m, nn.BatchNorm2d):
            w = {"gamma": m.weight.detach().numpy(), "beta": m.bias.detach().numpy(),
                 "moving_mean": m.running_mean.numpy(), "moving_variance": m.running_var.numpy()}
        else:
            w = {"kernel": m.weight.detach().numpy().T, "bias": m.bias.detach().numpy()}
        for k, v in w.items():
            np.ascontiguousarray(v, dtype=np.float32).tofile(os.path.join(path, "%s__%s.bin" % (nm, k)))


save(os.path.join(out, "w0"))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
lossf = nn.CrossEntropyLoss()
perm = torch.randperm(n, generator=torch.Generator().manual_seed(1))
xs, ys, losses = [], [], []
for s in range(K):
    idx = perm[s * 128:(s + 1) * 128]
    xs.append(X[idx].numpy().transpose(0, 2, 3, 1))
    ys.append(Y[idx].numpy().astype(np.int32))
    opt.zero_grad(set_to_none=True)
    loss = lossf(model(X[idx]), Y[idx])
    loss.backward()
    opt.step()
    losses.append(loss.item())
np.ascontiguousarray(np.stack(xs), dtype=np.float32).tofile(os.path.join(out, "x.bin"))
np.ascontiguousarray(np.stack(ys), dtype=np.int32).tofile(os.path.join(out, "y.bin"))
save(os.path.join(out, "wK"))
with open(os.path.join(out, "losses.txt"), "w") as f:
    f.write("".join("%.6f\n" % v for v in losses))
