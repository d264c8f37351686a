#!/usr/bin/env bash
# Measures how fast a neighbour in the container may grow and still be
# answered in time (README "The budget follows the container"): the cnn on
# Fashion-MNIST at batch 512 in a memory cgroup of 1.3x what it needs, a
# neighbour growing to half its plan at each rate (MiB/s). Needs root
# (memory cgroups) and Fashion-MNIST; about a minute per rate on 2 cores.
# Usage: bash scripts/neighbour-rates.sh [RATES]   (default 50,100,200,400,800)
set -euo pipefail
cd "$(dirname "$0")/.."
HEADROOM_NEIGHBOUR_RATES=${1:-50,100,200,400,800} go test ./internal/promise -run 'TestNeighbourRates' -count 1 -v -timeout 30m | grep -E '^ *[0-9]+ MiB/s|^neighbour growth|live budget|ok|FAIL'
