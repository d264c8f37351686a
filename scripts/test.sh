#!/usr/bin/env bash
# Runs every test of headroom: vet, build (also with cgo off), unit tests,
# race tests of the concurrent packages (kernels: the worker pool and its
# jobs; backend/cpu: kernels bound over the pool, packings shared by
# products; train: in-process data-parallel ranks), and a short run of every fuzz
# target. Installs what it needs (Go modules) first. Usage: scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export GOFLAGS=${GOFLAGS:--buildvcs=false}
# mpirun as root (CI runs as root) needs these
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
# Each fuzz target runs for a number of inputs, not a duration: with a
# duration, Go 1.26's fuzzing coordinator can report "context deadline
# exceeded" as a failure when the time runs out under load (Go issue 75804,
# fixed in Go 1.27); a count has no deadline to race. 20000 inputs take
# 0.3-5.5 s a target here. Minimizing each new interesting input is bounded
# the same way (by default it may run for 60 s per input, and the corpus in
# the build cache grows from run to run).
fuzztime=${FUZZTIME:-20000x}
minimizetime=${FUZZMINIMIZETIME:-2000x}

step() { printf '\n== %s\n' "$*"; }

step "system packages"
# Debian packages the tests use: headless Chromium (the HTML report is
# opened in it), a font for its text, the Fashion-MNIST files, Open MPI
# (the distributed tests build with -tags mpi and run under mpirun),
# Node.js and npm (ONNX exports are run in onnxruntime-node, which the test
# installs with npm), NumPy for Debian's python3 (the go-src corpus is
# compared with the PyTorch peer's), h5py (the HDF5 reader and writer
# are checked against files it writes and reads), iproute2 and Slurm.
need=()
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1 || need+=(python3-numpy)
/usr/bin/python3 -c 'import h5py' >/dev/null 2>&1 || need+=(python3-h5py)
command -v mpirun >/dev/null 2>&1 || need+=(openmpi-bin)
[ -f /usr/include/x86_64-linux-gnu/openmpi/mpi.h ] || [ -f /usr/lib/x86_64-linux-gnu/openmpi/include/mpi.h ] || need+=(libopenmpi-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
# ip and tc: two ranks in two network namespaces, over TCP (internal/cli)
{ command -v ip && command -v tc; } >/dev/null 2>&1 || need+=(iproute2)
# a one-node Slurm (internal/cli's TestSlurm starts its own daemons, with
# its own slurm.conf and munge key; the packages' services stay stopped)
[ -x /usr/sbin/slurmctld ] || need+=(slurmctld)
[ -x /usr/sbin/slurmd ] || need+=(slurmd)
command -v srun >/dev/null 2>&1 || need+=(slurm-client)
[ -x /usr/sbin/munged ] || need+=(munge)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
[ -d /usr/share/fonts/truetype/dejavu ] || need+=(fonts-dejavu-core)
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || need+=(dataset-fashion-mnist)
if ((${#need[@]})); then
  if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/test.sh: missing Debian packages ${need[*]}: run as root or install them" >&2
    exit 1
  fi
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

step "NVIDIA's PTX assembler (ptxas)"
# The GPU kernels (backend/cuda/ptx) are assembled by ptxas for sm_80 and
# sm_90 in the unit tests. It is in Debian's non-free section: a sources
# entry for contrib and non-free is made from the machine's own first
# entry (so no host is written here), and nvidia-cuda-toolkit is
# downloaded (84 MB, CUDA 11.8) and unpacked into the cache, not installed
# (installing pulls 2.8 GB): only usr/bin/ptxas is kept, which needs
# nothing but libc. Cached: later runs find it and do nothing.
ptxas_cache=${HEADROOM_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/headroom}/nvidia-cuda-toolkit
export HEADROOM_PTXAS=${HEADROOM_PTXAS:-$ptxas_cache/usr/bin/ptxas}
export HEADROOM_REQUIRE_PTXAS=1
if [ ! -x "$HEADROOM_PTXAS" ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "scripts/test.sh: ptxas is missing ($HEADROOM_PTXAS): run as root once to fetch it, or set HEADROOM_PTXAS" >&2
    exit 1
  fi
  nonfree=/etc/apt/sources.list.d/headroom-nonfree.sources
  if [ ! -f "$nonfree" ]; then
    [ -f /etc/apt/sources.list.d/debian.sources ] || { echo "scripts/test.sh: no /etc/apt/sources.list.d/debian.sources to take the archive from" >&2; exit 1; }
    # the first stanza (up to the first blank line), with contrib and non-free
    awk 'BEGIN { RS = ""; ORS = "\n" } NR == 1 { print; exit }' /etc/apt/sources.list.d/debian.sources |
      sed -E 's/^Components:.*/Components: contrib non-free/' >"$nonfree.tmp"
    mv "$nonfree.tmp" "$nonfree"
  fi
  apt-get update -qq >/dev/null
  dl=$(mktemp -d)
  (cd "$dl" && apt-get download -qq nvidia-cuda-toolkit >/dev/null 2>&1)
  unpacked=$(mktemp -d)
  dpkg -x "$dl"/nvidia-cuda-toolkit_*.deb "$unpacked"
  mkdir -p "$ptxas_cache/usr/bin"
  mv "$unpacked/usr/bin/ptxas" "$ptxas_cache/usr/bin/ptxas.tmp"
  mv "$ptxas_cache/usr/bin/ptxas.tmp" "$ptxas_cache/usr/bin/ptxas"
  rm -rf "$dl" "$unpacked"
fi
"$HEADROOM_PTXAS" --version | tail -1

step "modules"
go mod download

step "vet and build"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
  echo "gofmt: these files are not formatted:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
CGO_ENABLED=0 go build ./...
# backend/cuda loads CUDA at run time: its build needs no cgo and no CUDA
go vet -tags cuda ./...
CGO_ENABLED=0 go build -tags cuda ./...
# the MPI engine is cgo behind its tag
go vet -tags mpi ./...
# the committed assembly is what its generators write
go generate ./kernels/
if ! git diff --quiet -- kernels/ 2>/dev/null; then
  echo "go generate ./kernels/ changed the committed assembly:" >&2
  git diff --stat -- kernels/ >&2
  exit 1
fi

# The kernels are chosen by measurement (the default): every test process
# of this run shares one choices file made afresh, so the run starts from
# no choices, leaves the user's file alone, and its processes take one
# choice per shape (they measure under the file's lock).
if [ -z "${HEADROOM_KERNEL_CACHE:-}" ]; then
  choices_dir=$(mktemp -d)
  trap 'rm -rf "$choices_dir"' EXIT
  export HEADROOM_KERNEL_CACHE=$choices_dir/kernel-choices.tsv
fi

step "unit tests"
# the ONNX tests must run the exports in onnxruntime, not skip
export HEADROOM_REQUIRE_NODE=1
# and the Slurm test must run, not skip, where the packages are installed
if [ "$(id -u)" -eq 0 ]; then export HEADROOM_REQUIRE_SLURM=1; fi
# the whole-process packages (internal/cli, internal/promise: real runs in
# memory cgroups, under mpirun) take minutes; a loaded machine doubles that
export HEADROOM_PTX_REPORT=${TMPDIR:-/tmp}/headroom-ptxas.txt
go test -count=1 -timeout 30m $(go list ./... | grep -v /internal/promise)
echo "ptxas: registers of every kernel of the reference models (backend/cuda TestKernelsAssemble)"
cat "$HEADROOM_PTX_REPORT"
# the kernels' Go paths, which CPUs without AVX-512 (and other
# architectures) run: the purego build has no assembly
go test -count=1 -tags purego ./kernels ./backend/cpu

step "the memory promise (whole runs in memory cgroups, alone on the machine)"
# internal/promise times a neighbour's growth against headroom's steps and
# kills nothing only if headroom answers in time: it runs after the other
# packages, not beside them, so that their load does not decide it
go test -count=1 -timeout 30m ./internal/promise

step "race tests (concurrent packages)"
race_pkgs=$(go list ./mem/... ./data/... ./runtime/... ./kernels ./backend/cpu ./train 2>/dev/null || true)
# shellcheck disable=SC2086
go test -race -count=1 -timeout 30m $race_pkgs

step "fuzz targets, -fuzztime ${fuzztime} each"
go test -list '^Fuzz' ./... | awk '/^Fuzz/ {print}' >/dev/null # compile check
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true); do
    echo "fuzz $pkg $target"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" -fuzzminimizetime "$minimizetime" "$pkg" >/tmp/headroom-fuzz.log 2>&1 || {
      cat /tmp/headroom-fuzz.log
      exit 1
    }
  done
done

echo
echo "all tests passed"
