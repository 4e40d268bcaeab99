#!/usr/bin/env bash
# The CUDA backend's measurements, in one command (needs a GPU; see docs/ARCHITECTURE.md):
#   1. forward-backward + gradient throughput (tokens/s), L ∈ {5, 23, 45, 128} × batch sizes,
#      on synthetic CoNLL-like data (crfx_gpu_bench), GPU and — for reference — CPU;
#   2. one objective+gradient pass over CoNLL-2000 (crfx bench --device cuda);
#   3. end-to-end L-BFGS training on CoNLL-2000 (crfx train --device cuda), test F1;
#   4. pure-PyTorch log-space forward (pytorch-crf's algorithm) over the same (B, T, L) shapes,
#      when `import torch` works;
#   5. one pass over CoNLL-2000 as a Maxent model (--type maxent: the O(L) path) and with each of
#      seed 002's other losses (--loss), GPU and CPU.
# Figures go to stdout and to $OUT/gpu-bench.txt (or benchmarks/results/gpu-<date>.txt).
# Usage: benchmarks/gpu.sh        BUILD_DIR=build-cuda DATA=/path/to/conll2000 benchmarks/gpu.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-cuda}
data=${DATA:-/work/shared/data/conll2000}
[ -d "$data" ] || data=../shared/data/conll2000
if [ -n "${OUT:-}" ]; then mkdir -p "$OUT"; result=$OUT/gpu-bench.txt
else mkdir -p benchmarks/results; result=benchmarks/results/gpu-$(date -u +%F).txt; fi
if [ ! -x "$build/crfx" ] || [ ! -x "$build/crfx_gpu_bench" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCRFX_BUILD_TESTS=OFF >/dev/null
  cmake --build "$build" -j"$(nproc)" --target crfx crfx_gpu_bench
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
exec > >(tee "$result") 2>&1

echo "== machine: $(nproc) cores; $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi')"
echo "== commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ local changes)'), $(date -u +%F)"

echo "== 1. forward-backward + gradient throughput (synthetic: 4096 sentences, T ~ 15..45, 20 attributes/token)"
"$build/crfx_gpu_bench" --device cuda --labels 5,23,45,128 --batches 1,32,512,0
echo "-- CPU reference (all cores)"
"$build/crfx_gpu_bench" --device cpu --labels 5,23,45,128 --batches 512,0 --repeat 1

for features in all observed; do  # every attribute × label pair, then CRFsuite's observed pairs
echo "== 2. one objective+gradient pass over CoNLL-2000 (--features $features)"
"$build/crfx" bench "$data/train.txt" -t "$data/chunking.template" --features $features --device cuda --thread-list 1 --repeat 5
"$build/crfx" bench "$data/train.txt" -t "$data/chunking.template" --features $features --device cpu --thread-list "$(nproc)" --repeat 2

echo "== 3. L-BFGS, c2 = 1, chunking.template, on the GPU (--features $features)"
start=$(date +%s.%N)
"$build/crfx" train "$data/train.txt" -t "$data/chunking.template" --features $features --algo lbfgs --c2 1 --device cuda \
  -m "$work/gpu.model" --log "$work/gpu.csv" 2> "$work/train.err"
end=$(date +%s.%N)
grep -E '^device|^data:|^done:' "$work/train.err" || tail -3 "$work/train.err"
awk -v a="$start" -v b="$end" 'BEGIN { printf "wall time (incl. reading and compiling the data): %.2f s\n", b - a }'
"$build/crfx" tag "$data/test.txt" -m "$work/gpu.model" -o "$work/test.tagged"
"$build/crfx" eval "$work/test.tagged" | head -2
done

echo "== 4. pure-PyTorch log-space forward (pytorch-crf's algorithm), same shapes"
if python3 -c 'import torch' 2>/dev/null; then
  python3 benchmarks/pytorch_forward.py --labels 5,23,45,128 --batches 1,32,512
else
  echo "skipped: python3 cannot import torch"
fi
echo "== 5. one objective+gradient pass over CoNLL-2000: Maxent, and the other losses (observed pairs)"
for what in "--type maxent" "--loss seq-exp" "--loss point-log" "--loss point-exp"; do
  echo "-- $what"
  "$build/crfx" bench "$data/train.txt" -t "$data/chunking.template" $what --device cuda --thread-list 1 --repeat 5
  "$build/crfx" bench "$data/train.txt" -t "$data/chunking.template" $what --device cpu --thread-list "$(nproc)" --repeat 2
done
echo "== results written to $result"
