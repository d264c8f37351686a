#!/usr/bin/env bash
# Long-run memory checks (issue 25: "flat for a million steps"), too slow
# for scripts/test.sh (about 15 minutes on 2 cores). Each prints the
# process's resident memory per epoch (every 0.2 s for predict) and
# fails unless the peak RSS from epoch 2 to the end moves by at most 1 MiB
# and the ledger does not grow:
#   1. 100 epochs of the small model on the digits, evaluated each epoch;
#   2. 20 epochs of the cnn on Fashion-MNIST streamed from its files
#      (--stream), evaluated each epoch;
#   3. predict over a data set 20x larger than its --budget.
# Usage: bash scripts/long-run.sh [small|cnn|predict]...  (default: all)
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/headroom" ./cmd/headroom
hr="$tmp/headroom"
status=0

# flat NAME FILE: the epoch lines' RSS, and the peak's move from epoch 2 on.
flat() {
	local name=$1 out=$2
	echo "$name: resident memory per epoch (MiB)"
	awk '/^epoch [0-9]+\/[0-9]+:/ { for (i = 1; i < NF; i++) { if ($i == "rss") rss = $(i+1); if ($i == "peak") peak = $(i+1) }
		split($2, e, "/"); printf "  epoch %s rss %s peak %s\n", e[1], rss, peak }' "$out"
	local moved
	moved=$(awk '/^epoch [0-9]+\/[0-9]+:/ { for (i = 1; i < NF; i++) if ($i == "peak") p = $(i+1); n++; if (n == 2) first = p; last = p }
		END { if (n < 2) print "none"; else printf "%.1f\n", last - first }' "$out")
	local growth
	growth=$(grep -o 'ledger_growth_bytes=[0-9-]*' "$out" | cut -d= -f2)
	echo "$name: peak RSS moved by $moved MiB from epoch 2 to the end; ledger growth $growth B"
	if [ "$moved" = none ] || awk -v m="$moved" 'BEGIN { exit !(m > 1.0 || m < -1.0) }' || [ "$growth" != 0 ]; then
		echo "$name: FAIL (want the peak to move by at most 1 MiB and the ledger growth 0)"
		status=1
	fi
}

small() {
	"$hr" train --epochs 100 --threads 2 >"$tmp/small.out"
	flat "small, 100 epochs" "$tmp/small.out"
}

cnn() {
	"$hr" train --model cnn --dataset fashion-mnist --stream --epochs 20 --threads 2 >"$tmp/cnn.out"
	grep -q 'streamed from' "$tmp/cnn.out" || { echo "cnn: FAIL (the data set was not streamed)"; status=1; }
	flat "cnn, Fashion-MNIST streamed, 20 epochs" "$tmp/cnn.out"
}

predict() {
	local budget=$((48 << 20)) n
	n=$((20 * budget / 256 + 1)) # examples of 64 float32 values: 20x the budget
	"$hr" train --epochs 5 --save "$tmp/small.safetensors" --quiet >/dev/null
	python3 - "$tmp/big.npy" "$n" <<'EOF'
import array, random, sys
path, n = sys.argv[1], int(sys.argv[2])
header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, 64), }" % n
header += " " * (63 - (10 + len(header)) % 64) + "\n"
rng = random.Random(1)
chunk = array.array("f", (rng.random() * 16 for _ in range(64 * 4096)))
with open(path, "wb") as f:
    f.write(b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode())
    left = n
    while left > 0:
        k = min(left, 4096)
        chunk[: 64 * k].tofile(f) if k < 4096 else chunk.tofile(f)
        left -= k
EOF
	echo "predict: $(du -m "$tmp/big.npy" | cut -f1) MiB of data, --budget $((budget >> 20))MiB"
	"$hr" predict --load "$tmp/small.safetensors" --data "$tmp/big.npy" --out "$tmp/out.npy" --budget "$((budget >> 20))MiB" >"$tmp/predict.out" 2>&1 &
	local pid=$! t=0
	: >"$tmp/predict.rss"
	while kill -0 "$pid" 2>/dev/null; do
		awk -v t="$t" '/^VmRSS:/ { r = $2 } /^VmHWM:/ { h = $2 } END { if (r != "") printf "%.1f %.1f %.1f\n", t / 10, r / 1024, h / 1024 }' "/proc/$pid/status" >>"$tmp/predict.rss" 2>/dev/null || true
		sleep 0.2
		t=$((t + 2))
	done
	wait "$pid" || { echo "predict: FAIL"; cat "$tmp/predict.out"; status=1; return; }
	echo "predict: resident memory every 0.2 s (MiB)"
	awk '{ printf "  %5.1fs rss %s peak %s\n", $1, $2, $3 }' "$tmp/predict.rss"
	local moved # from the first sample after 1 s (the pipeline warmed up) to the end
	moved=$(awk '$1 >= 1 && first == "" { first = $3 } { last = $3; n++ } END { if (n < 5 || first == "") print "none"; else printf "%.1f\n", last - first }' "$tmp/predict.rss")
	echo "predict: peak RSS moved by $moved MiB from 1 s to the end"
	if [ "$moved" = none ] || awk -v m="$moved" 'BEGIN { exit !(m > 1.0 || m < -1.0) }'; then
		echo "predict: FAIL (want at least 5 samples and the peak to move by at most 1 MiB)"
		status=1
	fi
	tail -3 "$tmp/predict.out"
}

checks=("$@")
[ ${#checks[@]} -gt 0 ] || checks=(small cnn predict)
for c in "${checks[@]}"; do
	case $c in
	small | cnn | predict) "$c" ;;
	*) echo "unknown check $c (small, cnn, predict)"; exit 2 ;;
	esac
done
exit $status
