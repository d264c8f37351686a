#!/usr/bin/env bash
# Compiles every CUDA C kernel here to PTX for compute capability 8.0
# (A100) and 9.0 (H100): NAME.sm_80.ptx and NAME.sm_90.ptx beside NAME.cu,
# to be committed and embedded in the binary; the driver JIT-compiles the
# PTX for the GPU it finds (cuModuleLoadData), so no CUDA toolkit is needed
# where headroom runs. Needs nvcc (CUDA 11.8 or later for sm_90).
# No --use_fast_math: the kernels must match the CPU reference kernels
# within 1e-4 relative. Usage: backend/cuda/kernels/build.sh
set -euo pipefail
cd "$(dirname "$0")"
command -v nvcc >/dev/null || { echo "build.sh: nvcc not found (install the CUDA toolkit)" >&2; exit 1; }
for src in *.cu; do
  name=${src%.cu}
  for sm in 80 90; do
    nvcc --ptx -O3 -std=c++17 -arch=compute_${sm} -o "${name}.sm_${sm}.ptx" "$src"
  done
done
ls -l ./*.ptx
