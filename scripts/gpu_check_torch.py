#!/usr/bin/env python3
"""PyTorch's half of scripts/gpu-check.sh: trains the reference models on the GPU,
eagerly and under torch.compile, and prints one JSON line per run for bench/gpucheck
(-torch FILE) to set beside headroom's:

  {"model": "mlp", "mode": "eager", "samples_per_sec": ..., "peak_bytes": ...,
   "torch": "2.11.0", "device": "NVIDIA H100 80GB HBM3", "final_loss": ...}

or, for a run that failed, {"model": ..., "mode": ..., "error": "..."}.

The workloads are the PyTorch peers' (../shared/peers/train.py and seq.py), the
same as bench/gpucheck's: the models are defined here again so that the script
needs nothing but PyTorch on the GPU machine.
  mlp     784-1024-1024-10, ReLU
  cnn     conv3x3x32 -> relu -> conv3x3x64 -> relu -> maxpool2 -> dense128 -> relu -> dense10
  resnet  ResNet-20 for 28x28x1 (BatchNorm eps 1e-3, momentum 0.01)
  gpt     4 blocks of width 128, 4 heads, MLP 512, context 128, vocabulary 256 bytes,
          attention written out as seq.py's (not scaled_dot_product_attention)
Images: 4096 examples of N(0,1) features labelled by a random linear teacher, batch
128; gpt: random windows of 129 bytes, batch 32, gradients clipped to norm 1. Adam lr
1e-3, --steps updates. samples/s leaves out the first --warmup steps (where
torch.compile compiles); peak_bytes is torch.cuda.max_memory_allocated over the run
(model, optimizer state, activations and the batch on the device; the data set stays
in pinned host memory, each batch copied as headroom stages it).

  python3 scripts/gpu_check_torch.py [--models mlp,cnn,resnet,gpt] [--modes eager,compile]
                                     [--steps 50] [--warmup 20] [--out FILE]
"""
import argparse, json, math, sys, time

import torch

nn, F = torch.nn, torch.nn.functional


def mlp():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(), nn.Linear(1024, 1024), nn.ReLU(),
                         nn.Linear(1024, 10))


def cnn():
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 12 * 12, 128), nn.ReLU(), nn.Linear(128, 10))


def resnet():
    def bn(c):
        return nn.BatchNorm2d(c, eps=1e-3, momentum=0.01)

    class Basic(nn.Module):
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
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


class Block(nn.Module):
    """seq.py's block: attention written out (the scores masked, softmax, times v)."""

    def __init__(s, d=128, h=4, ff=512, T=128):
        super().__init__()
        s.h = h
        s.ln1, s.ln2 = nn.LayerNorm(d, eps=1e-5), nn.LayerNorm(d, eps=1e-5)
        s.q, s.k, s.v, s.o = (nn.Linear(d, d) for _ in range(4))
        s.fc1, s.fc2 = nn.Linear(d, ff), nn.Linear(ff, d)
        s.register_buffer("mask", torch.full((T, T), float("-inf")).triu(1))

    def forward(s, x):
        B, L, D = x.shape
        y = s.ln1(x)
        q, k, v = (m(y).view(B, L, s.h, D // s.h).transpose(1, 2) for m in (s.q, s.k, s.v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(D // s.h) + s.mask[:L, :L]
        y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, L, D)
        x = x + s.o(y)
        return x + s.fc2(F.gelu(s.fc1(s.ln2(x))))


class GPT(nn.Module):
    def __init__(s, T=128, V=256, d=128, layers=4):
        super().__init__()
        s.tok, s.pos = nn.Embedding(V, d), nn.Embedding(T, d)
        s.blocks = nn.Sequential(*[Block(d, T=T) for _ in range(layers)])
        s.ln, s.head = nn.LayerNorm(d, eps=1e-5), nn.Linear(d, V)
        for m in s.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
                if getattr(m, "bias", None) is not None:
                    nn.init.zeros_(m.bias)

    def forward(s, idx):
        x = s.tok(idx) + s.pos(torch.arange(idx.shape[1], device=idx.device))
        return s.head(s.ln(s.blocks(x)))


BUILD = {"mlp": mlp, "cnn": cnn, "resnet": resnet, "gpt": GPT}


def data(name, n=4096, T=128, pin=True):
    """The workload's data in pinned host memory: (inputs, targets, batch)."""
    pinned = (lambda t: t.contiguous().pin_memory()) if pin else (lambda t: t.contiguous())
    g = torch.Generator().manual_seed(0)
    if name == "gpt":
        text = torch.randint(0, 256, (1 << 20,), generator=g, dtype=torch.uint8)
        starts = torch.randint(0, len(text) - T - 1, (n,), generator=g)
        win = torch.stack([text[s:s + T + 1] for s in starts.tolist()]).long()
        return pinned(win[:, :-1]), pinned(win[:, 1:]), 32
    x = torch.randn(n, 784, generator=g)
    y = (x @ torch.randn(784, 10, generator=g)).argmax(1)
    if name != "mlp":
        x = x.reshape(n, 1, 28, 28)
    return pinned(x), pinned(y), 128


def sync(dev):
    if dev.type == "cuda":
        torch.cuda.synchronize(dev)


def train(name, mode, steps, warmup, dev):
    torch.manual_seed(0)
    x, y, batch = data(name, pin=dev.type == "cuda")
    if dev.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(dev)
    model = BUILD[name]().to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    fwd = torch.compile(model) if mode == "compile" else model
    g = torch.Generator().manual_seed(1)
    perm, at = torch.randperm(len(x), generator=g), 0
    t0, loss = None, None
    for step in range(1, steps + 1):
        if at + batch > len(x):
            perm, at = torch.randperm(len(x), generator=g), 0
        idx = perm[at:at + batch]
        at += batch
        xb, yb = x[idx].to(dev, non_blocking=True), y[idx].to(dev, non_blocking=True)
        opt.zero_grad(set_to_none=True)
        out = fwd(xb)
        loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), yb.reshape(-1))
        loss.backward()
        if name == "gpt":
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step == warmup:
            sync(dev)
            t0 = time.perf_counter()
    final = loss.item()  # synchronizes
    secs = time.perf_counter() - t0
    return {"samples_per_sec": (steps - warmup) * batch / secs, "peak_bytes": torch.cuda.max_memory_allocated(dev) if dev.type == "cuda" else 0,
            "final_loss": final}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--models", default="mlp,cnn,resnet,gpt")
    p.add_argument("--modes", default="eager,compile")
    p.add_argument("--steps", type=int, default=50)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--out", default="-")
    p.add_argument("--device", default="cuda", help="cpu: a smoke test of this script (no peak)")
    a = p.parse_args()
    if a.device == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu_check_torch.py: PyTorch sees no CUDA GPU")
    if not 0 < a.warmup < a.steps:
        sys.exit("gpu_check_torch.py: want 0 < --warmup < --steps")
    dev = torch.device("cuda", 0) if a.device == "cuda" else torch.device("cpu")
    out = sys.stdout if a.out == "-" else open(a.out, "w")
    for mode in a.modes.split(","):  # every eager run first: compile's may be cut off by a time limit
        for name in a.models.split(","):
            rec = {"model": name, "mode": mode, "torch": torch.__version__, "device": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"}
            try:
                rec.update(train(name, mode, a.steps, a.warmup, dev))
                if not math.isfinite(rec["final_loss"]):
                    rec["error"] = "the loss is not finite"
            except Exception as e:  # a failed run is a line too: the others go on
                rec["error"] = f"{type(e).__name__}: {e}"[:300]
            print(json.dumps(rec), file=out, flush=True)
            print(f"torch {mode} {name}: {rec.get('samples_per_sec', 0):.1f} samples/s, "
                  f"peak {rec.get('peak_bytes', 0) / 2**20:.1f} MiB {rec.get('error', '')}", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
