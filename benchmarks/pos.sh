#!/usr/bin/env bash
# A tag set without chunk prefixes: part-of-speech tagging on CoNLL-2000's POS column (the
# word → POS columns of train.txt / test.txt, the chunk column dropped; 44 Penn Treebank tags),
# trained with L-BFGS on word unigrams and bigrams in a ±2 window, with the dev figure of the
# training log on the test set (token accuracy, as crfx eval chooses for these labels), then
# `crfx eval --confusion` on the tagged test set: accuracy, sentence accuracy, per-label table,
# macro / micro averages, and the confusion matrix of the most confused tags.
# Usage: benchmarks/pos.sh      (ITERATIONS=… THREADS=… OUT_DIR=… BUILD_DIR=… DATA=…)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
crfx=$build/crfx
data=${DATA:-../shared/data/conll2000}
out=${OUT_DIR:-$build/bench-pos}
iterations=${ITERATIONS:-100}
threads=${THREADS:-$(nproc)}
[ -x "$crfx" ] || scripts/build.sh
mkdir -p "$out"

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "== commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ local changes)'), $(date -u +%F)"
for f in train test; do awk '{ print NF ? $1 " " $2 : "" }' "$data/$f.txt" > "$out/pos.$f.txt"; done
cat > "$out/pos.template" <<'TEMPLATE'
U00:%x[-2,0]
U01:%x[-1,0]
U02:%x[0,0]
U03:%x[1,0]
U04:%x[2,0]
U05:%x[-1,0]/%x[0,0]
U06:%x[0,0]/%x[1,0]
B
TEMPLATE

echo "== train: L-BFGS c2 = 1, $iterations iterations at most, $threads threads, --dev test"
"$crfx" train "$out/pos.train.txt" -t "$out/pos.template" --max-iterations "$iterations" --threads "$threads" \
  --dev "$out/pos.test.txt" --log "$out/pos.csv" -m "$out/pos.model" 2> "$out/train.err"
grep -E '^data:|^done:' "$out/train.err"
grep 'dev accuracy' "$out/train.err" | tail -1
echo "last log row: $(tail -1 "$out/pos.csv") ($(head -1 "$out/pos.csv" | awk -F, '{print $NF}'))"
"$crfx" tag "$out/pos.test.txt" -m "$out/pos.model" -o "$out/pos.tagged" -q
echo "== crfx eval --confusion"
"$crfx" eval "$out/pos.tagged" --confusion
