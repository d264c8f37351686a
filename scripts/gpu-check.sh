#!/usr/bin/env bash
# The hardware run of the CUDA backend (issue 24), as one command. On a
# machine with an NVIDIA GPU (its driver, and cuBLAS 11 or later on the
# library path or beside PyTorch) it
#   1. runs the backend's -tags cuda tests on the device (device memory,
#      copies, cuBLAS, every kernel of the PTX suite JIT-compiled by the
#      driver against the host's kernels, the mlp and cnn trained 50 steps
#      with weights within 1e-4 of the host's, planned == measured);
#   2. runs the CLI on the device: `headroom plan --device cuda` (the budget
#      is cuMemGetInfo's free memory) and a short `headroom train --device
#      cuda` whose RESULT line must say planned == measured;
#   3. where python3 has PyTorch with CUDA, trains the same workloads with it
#      (scripts/gpu_check_torch.py: eager and torch.compile, samples/s and
#      torch.cuda.max_memory_allocated);
#   4. runs bench/gpucheck on the reference mlp, cnn, resnet and gpt (50
#      steps on the host and on the GPU: weights (under SGD with momentum,
#      see docs/gpu.md), planned == measured,
#      cuMemGetInfo's drop, OOM one byte under the plan, fit-to-budget under
#      half the plan, speed and peak beside PyTorch's) and prints its table.
# Exit status: 0 when every check passed; the table and a summary say what
# failed. It should take 3-5 minutes on an H100; each step has a time limit
# (120 + 30 + 60 + 150 + 200 s: the whole stops within 9.5 minutes, the
# device tool's 10-minute limit on a command, whatever happens). PyTorch's
# eager runs go first: torch.compile's, which compile for a while, may be
# cut off, and the table then shows them as missing.
#
# Binaries are built with `CGO_ENABLED=0 go build -tags cuda` (purego loads
# CUDA at run time, no cgo), so they can be built on a machine without a GPU
# and carried to one that has no Go:
#   scripts/gpu-check.sh build   # here: binaries into bench/out/gpu-check/ (about 30 MB)
#   scripts/gpu-check.sh run     # on the GPU machine: uses them (builds first if Go is there and they are missing)
#   scripts/gpu-check.sh         # both (builds only where Go is)
# Results (the table, logs, PyTorch's JSON lines) go to $OUT when it is set,
# else to bench/out/gpu-check/results/.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=bench/out/gpu-check
mode=${1:-all}

build() {
  echo "== build (-tags cuda, cgo off) into $bin"
  mkdir -p "$bin"
  local flags=(-tags cuda -trimpath -ldflags=-s\ -w)
  CGO_ENABLED=0 go build "${flags[@]}" -o "$bin/headroom" ./cmd/headroom
  CGO_ENABLED=0 go build "${flags[@]}" -o "$bin/gpucheck" ./bench/gpucheck
  CGO_ENABLED=0 go test -c "${flags[@]}" -o "$bin/cuda.test" ./backend/cuda
  git rev-parse --short HEAD >"$bin/commit" 2>/dev/null || true
  ls -l "$bin"
}

case "$mode" in
build) build; exit 0 ;;
run | all) ;;
*) echo "usage: scripts/gpu-check.sh [build|run]" >&2; exit 2 ;;
esac
# all: build where Go is; run: build only what is missing, where Go is
if command -v go >/dev/null 2>&1 && { [ "$mode" = all ] || [ ! -x "$bin/gpucheck" ]; }; then
  build
fi
for b in headroom gpucheck cuda.test; do
  [ -x "$bin/$b" ] || { echo "gpu-check.sh: $bin/$b is missing: run scripts/gpu-check.sh build where Go is" >&2; exit 2; }
done
out=${OUT:-$bin/results}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(pwd)

# cuBLAS: the system's, or the one PyTorch's wheels bring
py=${PYTHON:-python3}
if command -v "$py" >/dev/null 2>&1; then
  for d in $("$py" -c 'import nvidia, os; print(" ".join(os.path.join(p, s, "lib") for p in nvidia.__path__ for s in ("cublas", "cuda_runtime")))' 2>/dev/null); do
    [ -d "$d" ] && LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  done
fi
export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}

fails=()
step() { printf '\n== %s\n' "$*"; }
took() { printf '(%ds)\n' $(($(date +%s) - $1)); }

step "device"
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used --format=csv | tee "$out/nvidia-smi.txt" || echo "no nvidia-smi"
if ! command -v nvidia-smi >/dev/null 2>&1 && ! ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; then
  echo "no NVIDIA driver here (no nvidia-smi, no libcuda.so.1): every step below will fail"
fi
echo "binaries from commit $(cat "$bin/commit" 2>/dev/null || echo '?')"

step "1. backend tests on the GPU (cuda.test)"
t=$(date +%s)
# the emulated-GPU and ptxas tests ran where the binary was built (scripts/test.sh)
if (cd backend/cuda && timeout 120 "$root/$bin/cuda.test" -test.v -test.count=1 -test.timeout 115s \
  -test.skip 'FakeGPU|Assembl|^Fuzz' >"$out/cuda-test.log" 2>&1); then
  grep -E '^(--- |ok|PASS|FAIL)' "$out/cuda-test.log" | grep -v '^    ' || true
else
  grep -E -B3 '^ *--- FAIL|^panic' "$out/cuda-test.log" | head -60 || tail -40 "$out/cuda-test.log"
  fails+=("backend tests (see $out/cuda-test.log)")
fi
echo "tests passed: $(grep -c '^--- PASS' "$out/cuda-test.log" || true)"
took "$t"

step "2. the CLI on the GPU"
t=$(date +%s)
if timeout 30 "$bin/headroom" plan --model cnn --device cuda >"$out/cli-plan.txt" 2>&1; then
  grep -iE 'budget|memory plan' "$out/cli-plan.txt" | head -4
else
  cat "$out/cli-plan.txt"; fails+=("headroom plan --device cuda")
fi
if timeout 60 "$bin/headroom" train --model cnn --device cuda --epochs 1 >"$out/cli-train.txt" 2>&1; then
  res=$(grep '^RESULT' "$out/cli-train.txt" || true)
  planned=$(sed -n 's/.* planned_peak_bytes=\([0-9]*\).*/\1/p' <<<"$res")
  measured=$(sed -n 's/.* measured_peak_bytes=\([0-9]*\).*/\1/p' <<<"$res")
  echo "headroom train --model cnn --device cuda: planned_peak_bytes=$planned measured_peak_bytes=$measured $(grep -o 'samples_per_sec=[0-9.]*' <<<"$res")"
  [ -n "$planned" ] && [ "$planned" = "$measured" ] || fails+=("headroom train --device cuda: planned $planned, measured $measured")
else
  tail -20 "$out/cli-train.txt"; fails+=("headroom train --device cuda")
fi
took "$t"

step "3. PyTorch on the same GPU"
t=$(date +%s)
torch_args=()
if "$py" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  # a run that fails or runs out of time is a line (or missing): the table says so
  timeout 150 "$py" scripts/gpu_check_torch.py --out "$out/torch.jsonl" 2>&1 | tee "$out/torch.log" || echo "gpu_check_torch.py stopped (status $?); its finished runs are kept"
  torch_args=(-torch "$out/torch.jsonl")
else
  echo "no python3 with PyTorch and CUDA here: the table has no PyTorch columns"
fi
took "$t"

step "4. bench/gpucheck: the reference models, 50 steps, host against GPU"
t=$(date +%s)
if ! timeout 200 "$bin/gpucheck" -steps 50 -models mlp,cnn,resnet,gpt "${torch_args[@]}" 2>&1 | tee "$out/table.md"; then
  fails+=("gpucheck (see the table)")
fi
took "$t"

step "summary"
if ((${#fails[@]})); then
  printf 'FAILED: %s\n' "${fails[@]}" | tee "$out/summary.txt"
  exit 1
fi
echo "gpu-check: every check passed; the table is $out/table.md" | tee "$out/summary.txt"
