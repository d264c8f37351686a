#!/usr/bin/env bash
# Issue 8's overlap benchmark: the step time of the reference cnn on two
# ranks (--threads 1, 64 examples per rank) against one process (--threads
# 1, batch 64), runs interleaved, with the gradient buckets of the default
# size (their all-reduces start during backward) and with one bucket for
# every gradient (it can only start when backward is done). For the
# two-rank runs it prints how long the all-reduces took per step, how long
# the steps waited for them, and the share hidden behind backward.
#
# Usage: bench/overlap.sh [--rounds R] [--steps S]
# Needs Open MPI (openmpi-bin, libopenmpi-dev, pkg-config).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=3 steps=100
while [[ $# -gt 0 ]]; do
  case "$1" in
    --rounds) rounds="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    *) echo "unknown argument $1" >&2; exit 2 ;;
  esac
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
go build -o "$out/headroom" ./cmd/headroom
go build -tags mpi -o "$out/headroom-mpi" ./cmd/headroom
if [ "$(id -u)" = 0 ]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
fi
args=(train --model cnn --dataset synthetic --threads 1 --max-steps "$steps" --quiet)
fields() { # samples_per_sec ranks allreduce_s allreduce_wait_s
  grep '^RESULT' | sed -E 's/.* samples_per_sec=([0-9.]+) .* ranks=([0-9]+) .* allreduce_s=([0-9.]+) allreduce_wait_s=([0-9.]+).*/\1 \2 \3 \4/'
}
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for ((r = 1; r <= rounds; r++)); do
  "$out/headroom" "${args[@]}" --batch 64 | fields |
    awk -v r=$r '{printf "#%d one process        step_ms=%.1f\n", r, 64000/$1}' | tee -a "$out/single"
  for b in 1MiB 1GiB; do
    mpirun -np 2 "$out/headroom-mpi" "${args[@]}" --batch 128 --bucket-size $b | fields |
      awk -v r=$r -v b=$b -v n="$steps" '{printf "#%d two ranks, %-5s   step_ms=%.1f allreduce_ms_per_step=%.2f wait_ms_per_step=%.2f hidden=%.0f%%\n", r, b, 128000/$1, 1000*$3/n, 1000*$4/n, 100*(1-$4/$3)}' | tee -a "$out/mpi-$b"
  done
done
median() { sed -E 's/.*step_ms=([0-9.]+).*/\1/' "$1" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
s=$(median "$out/single")
for b in 1MiB 1GiB; do
  m=$(median "$out/mpi-$b")
  awk -v s="$s" -v m="$m" -v b=$b 'BEGIN {printf "median step: one process %.1f ms, two ranks (%s buckets) %.1f ms: %.2fx\n", s, b, m, m/s}'
done
