#!/usr/bin/env bash
# A controlled comparison of headroom's ResNet-20 training with the PyTorch
# peer's: headroom starts from the peer's initial weights (torch.manual_seed(0))
# and trains on the peer's first K batches of Fashion-MNIST; it prints both
# losses step by step and how far each weight ends from the peer's. Float
# rounding differs (summation orders; Adam's first steps magnify it where a
# gradient is near zero), so the two drift apart slowly; a difference in the
# math (a gradient, the optimizer, BatchNormalization's statistics or their
# update) shows at step 1.
#
# Usage: bench/resnet_control.sh [K]   (default 1; 30 shows the drift)
set -euo pipefail
cd "$(dirname "$0")/.."
k=${1:-1}
peers=../shared/peers
[ -x "$peers/run.sh" ] || { echo "bench/resnet_control.sh: $peers/run.sh not found (shared/ must sit beside the repository)" >&2; exit 1; }
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "bench/resnet_control.sh: no PyTorch: run $peers/run.sh resnet once (it installs Debian's python3-torch)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-pthread \
  /usr/bin/python3 bench/resnet_control.py "$out" "$k"
go run ./bench/resnetcontrol -dir "$out"
