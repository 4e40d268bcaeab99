#!/usr/bin/env bash
# Tagging throughput: `crfx tag` end to end (model load, read, template expansion, Viterbi,
# output) on CoNLL-2000's test set repeated REPEAT times, with the model of the Foundation
# benchmark (L-BFGS, c2 = 1, chunking.template; trained here unless MODEL names one).
# Usage: benchmarks/tag.sh                       (CPU, all cores)
#        DEVICE=cuda THREADS=16 REPEAT=50 MODEL=chunk.model benchmarks/tag.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
crfx=$build/crfx
data=${DATA:-../shared/data/conll2000}
out=${OUT_DIR:-$build/bench-tag}
device=${DEVICE:-cpu}
threads=${THREADS:-0}
repeat=${REPEAT:-10}
[ -x "$crfx" ] || scripts/build.sh
mkdir -p "$out"

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "== commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ local changes)'), $(date -u +%F)"

model=${MODEL:-$out/chunk.model}
if [ ! -f "$model" ]; then
  echo "== training the model (L-BFGS, c2 = 1)"
  "$crfx" train "$data/train.txt" -t "$data/chunking.template" --algo lbfgs --c2 1 --device cpu --features all -q -m "$model"
fi

input=$out/test-x$repeat.txt
: > "$input"
for _ in $(seq "$repeat"); do cat "$data/test.txt" >> "$input"; done
tokens=$(grep -c . "$input")
echo "== input: $repeat × test.txt = $tokens tokens; device $device, threads $threads (0 = all cores)"

best=""
for run in 1 2 3; do
  start=$(date +%s.%N)
  "$crfx" tag "$input" -m "$model" -o "$out/tagged.txt" --device "$device" --threads "$threads" -q
  end=$(date +%s.%N)
  secs=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')
  awk -v r="$run" -v s="$secs" -v n="$tokens" 'BEGIN { printf "run %d: %.3f s, %.3f M tokens/s\n", r, s, n / s / 1e6 }'
  if [ -z "$best" ] || awk -v s="$secs" -v b="$best" 'BEGIN { exit !(s < b) }'; then best=$secs; fi
done
awk -v s="$best" -v n="$tokens" 'BEGIN { printf "best: %.3f s, %.3f M tokens/s\n", s, n / s / 1e6 }'
"$crfx" eval "$out/tagged.txt" | sed -n 2p
