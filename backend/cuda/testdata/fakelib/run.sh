#!/usr/bin/env bash
# Checks the purego bindings of package cuda (load_cuda.go) on a machine
# without a GPU: builds fakecuda.c as libcuda.so.1 and fakecublas.c as
# libcublas.so.12 in a temporary directory and runs the GPU tests (-tags cuda, cgo off)
# against them. Needs a C compiler (cc). The tests' figures (memory, the
# device name) are the fake's, not a GPU's. Usage: backend/cuda/testdata/fakelib/run.sh [go test flags]
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cc -O1 -shared -fPIC -Wall -Werror -o "$dir/libcuda.so.1" "$here/fakecuda.c"
cc -O1 -shared -fPIC -Wall -Werror -o "$dir/libcublas.so.12" "$here/fakecublas.c" "$dir/libcuda.so.1" -Wl,-rpath,"$dir"
cd "$here/../../../.."
# the kernel suite and the training runs need a real GPU: this fake runs no kernel
CGO_ENABLED=0 LD_LIBRARY_PATH="$dir" go test -count=1 -tags cuda -skip 'TestKernelSuiteOnGPU|TestTrainOnGPU' "$@" ./backend/cuda
