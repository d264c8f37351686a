#!/usr/bin/env bash
# Side-by-side throughput and memory of headroom and its peers on the
# reference workloads of ../shared/BENCHMARKS.md (synthetic data, batch 128,
# Adam 1e-3, 1 epoch), runs interleaved (headroom, PyTorch, GoMLX, headroom,
# ...), three rounds; prints each run's RESULT line, then the medians and the
# ratios headroom/peer of samples_per_sec and peak_rss_mib.
#
# Usage: bench/compare.sh [--threads N] [--rounds R] [--models "mlp cnn"]
# Needs ../shared/peers (the PyTorch peer installs Debian's python3-torch on
# first use; the GoMLX peer builds with GOEXPERIMENT=simd).
set -euo pipefail
cd "$(dirname "$0")/.."
threads=2 rounds=3 models="mlp cnn"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --threads) threads="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --models) models="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
peers=../shared/peers
[ -x "$peers/run.sh" ] || { echo "bench/compare.sh: $peers/run.sh not found (shared/ must sit beside the repository)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
go build -o "$out/headroom" ./cmd/headroom

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), threads=$threads"
run() { # name file command...
  local name=$1 file=$2; shift 2
  local line
  line=$("$@" 2>/dev/null | grep '^RESULT' | tail -1) || true
  echo "$name: ${line:-FAILED}"
  [ -n "$line" ] && echo "$line" >>"$file"
}
for model in $models; do
  for ((r = 1; r <= rounds; r++)); do
    run "headroom $model #$r" "$out/headroom-$model" "$out/headroom" train --model "$model" --dataset synthetic --epochs 1 --batch 128 --threads "$threads" --quiet
    run "pytorch  $model #$r" "$out/torch-$model" "$peers/run.sh" "$model" --threads "$threads" --batch 128 --epochs 1
    if [ "$model" = mlp ]; then
      run "gomlx    $model #$r" "$out/gomlx-$model" "$peers/gomlx/run.sh" --threads "$threads" -epochs 1
    fi
  done
done

field() { # file key -> median of key=value over the file's lines
  [ -f "$1" ] || { echo NaN; return; }
  tr ' ' '\n' <"$1" | awk -F= -v k="$2" '$1 == k {print $2}' | sort -g |
    awk '{v[NR] = $1} END {if (NR == 0) print "NaN"; else if (NR % 2) print v[(NR + 1) / 2]; else print (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
echo
printf '%-6s %-9s %16s %14s %18s %16s\n' model peer "headroom samp/s" "peer samp/s" "ratio samp/s" "ratio peak RSS"
for model in $models; do
  hs=$(field "$out/headroom-$model" samples_per_sec)
  hr=$(field "$out/headroom-$model" peak_rss_mib)
  for peer in torch gomlx; do
    [ -f "$out/$peer-$model" ] || continue
    ps=$(field "$out/$peer-$model" samples_per_sec)
    pr=$(field "$out/$peer-$model" peak_rss_mib)
    awk -v m="$model" -v p="$peer" -v hs="$hs" -v ps="$ps" -v hr="$hr" -v pr="$pr" \
      'BEGIN {printf "%-6s %-9s %16.1f %14.1f %17.2fx %15.2fx\n", m, p, hs, ps, hs / ps, hr / pr}'
  done
done
