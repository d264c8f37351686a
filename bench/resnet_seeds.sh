#!/usr/bin/env bash
# The ResNet-20's test accuracy after one epoch of Fashion-MNIST (batch 128,
# Adam 1e-3, BatchNormalization momentum 0.99) over several seeds, headroom
# beside the PyTorch peer, runs interleaved. The peer seeds its weights with
# torch.manual_seed(0); this runs a copy of ../shared/peers with that seed
# changed (its data order stays the peer's own). For each seed it prints
# both engines' test_acc and final_loss, then the medians.
#
# One epoch at momentum 0.99 leaves the moving statistics about a hundred
# steps behind the weights, so the accuracy of inference (model.eval() in
# PyTorch) swings with the seed in both engines; one run says little.
# bench/resnet_eval.py recomputes a saved model's accuracy with the moving
# statistics and with each test batch's own.
#
# Usage: bench/resnet_seeds.sh [--seeds "0 1 2 3 4"] [--threads N]
set -euo pipefail
cd "$(dirname "$0")/.."
seeds="0 1 2 3 4" threads=2
while [[ $# -gt 0 ]]; do
  case "$1" in
    --seeds) seeds="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
peers=../shared/peers
[ -x "$peers/run.sh" ] || { echo "bench/resnet_seeds.sh: $peers/run.sh not found (shared/ must sit beside the repository)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
go build -o "$out/headroom" ./cmd/headroom
cp -r "$peers" "$out/peers"
grep -q 'torch.manual_seed(0)' "$out/peers/train.py" || { echo "bench/resnet_seeds.sh: $peers/train.py no longer seeds with torch.manual_seed(0)" >&2; exit 1; }
sed -i 's/torch.manual_seed(0)/torch.manual_seed(int(os.environ["PEER_SEED"]))/' "$out/peers/train.py"

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), threads=$threads"
field() { grep -o "$1=[0-9.]*" | cut -d= -f2; }
for s in $seeds; do
  h=$("$out/headroom" train --model resnet --dataset fashion-mnist --epochs 1 --batch 128 --threads "$threads" --seed "$s" --quiet)
  p=$(PEER_SEED=$s "$out/peers/run.sh" resnet --data fashion --epochs 1 --batch 128 --threads "$threads")
  printf 'seed %s  headroom test_acc %s final_loss %s  peer test_acc %s final_loss %s\n' "$s" \
    "$(field test_acc <<<"$h")" "$(field final_loss <<<"$h")" "$(field test_acc <<<"$p")" "$(field final_loss <<<"$p")"
  echo "$(field test_acc <<<"$h") $(field test_acc <<<"$p")" >>"$out/acc"
done
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
echo "median test_acc: headroom $(cut -d' ' -f1 "$out/acc" | median), peer $(cut -d' ' -f2 "$out/acc" | median)"
