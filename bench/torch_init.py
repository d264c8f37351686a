"""The PyTorch peer's mlp on its synthetic data, with PyTorch's default
initialization or with Keras' (glorot_uniform kernels, zero biases, what
headroom uses), printing the epoch's mean batch loss: whether headroom's
higher final_loss than the peer's comes from the engine or from the init.

Usage: /usr/bin/python3 bench/torch_init.py default|glorot
(needs Debian's python3-torch and ../shared/peers beside the repository)
"""
import os, sys
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "peers"))
from common import make_data

torch.set_num_threads(2)
torch.manual_seed(0)
x, y = make_data(60000, seed=0)
X, Y = torch.from_numpy(x), torch.from_numpy(y)
nn = torch.nn
model = nn.Sequential(nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10))
if sys.argv[1] == "glorot":
    for m in model:
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)
            nn.init.zeros_(m.bias)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
lossf = nn.CrossEntropyLoss()
g = torch.Generator().manual_seed(1)
perm = torch.randperm(60000, generator=g)
losses = []
for i in range(0, 60000 - 128 + 1, 128):
    idx = perm[i:i + 128]
    opt.zero_grad()
    loss = lossf(model(X[idx]), Y[idx])
    loss.backward()
    opt.step()
    losses.append(loss.item())
print(f"{sys.argv[1]}: final_loss={losses[-1]:.4f} epoch_mean_loss={sum(losses) / len(losses):.4f}")
