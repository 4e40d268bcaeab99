#!/usr/bin/env bash
# The Foundation issue's measurements on CoNLL-2000 (CPU backend), in one command, with every
# attribute × label pair (--features all, as CRF++ and Wapiti build models; benchmarks/observed.sh
# measures CRFsuite's default, the observed pairs):
#   1. one objective+gradient pass over the training set at 1 and 2 threads (crfx bench);
#   2. L-BFGS, c2 = 1, the standard chunking template: whole training at 1 and 2 threads (the two
#      models must be byte-identical), then test chunk F1 with crfx eval;
#   3. the same on CRFsuite's attribute file: the final loss against CRFsuite's 11,602.66.
# Usage: benchmarks/conll2000.sh            (builds into ${BUILD_DIR:-build} if needed)
#        DATA=/path/to/conll2000 OUT_DIR=/tmp/x THREADS="1 2" benchmarks/conll2000.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
crfx=$build/crfx
data=${DATA:-../shared/data/conll2000}
out=${OUT_DIR:-$build/bench-conll2000}
threads=${THREADS:-1 2}
crfsuite_loss=11602.66   # CRFsuite 0.12 lbfgs c2=1, all attribute×label pairs (../shared/data/README.md)
[ -x "$crfx" ] || scripts/build.sh
mkdir -p "$out"

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "== commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ local changes)'), $(date -u +%F)"

echo "== 1. objective+gradient pass (median of 5 after one warm-up)"
"$crfx" bench "$data/train.txt" -t "$data/chunking.template" --device cpu --features all \
  --thread-list "$(echo $threads | tr ' ' ,)" --repeat 5 2>&1

echo "== 2. L-BFGS, c2 = 1, chunking.template"
first=""
for t in $threads; do
  "$crfx" train "$data/train.txt" -t "$data/chunking.template" --algo lbfgs --c2 1 --threads "$t" \
    --device cpu --features all -m "$out/chunking.t$t.model" --log "$out/chunking.t$t.csv" 2> "$out/train.t$t.err"
  echo "threads $t: $(grep '^done:' "$out/train.t$t.err")"
  if [ -z "$first" ]; then first=$t; else
    cmp -s "$out/chunking.t$first.model" "$out/chunking.t$t.model" \
      && echo "models for $first and $t threads: byte-identical" \
      || { echo "models for $first and $t threads DIFFER"; exit 1; }
  fi
done
"$crfx" tag "$data/test.txt" -m "$out/chunking.t$first.model" -o "$out/test.tagged"
"$crfx" eval "$out/test.tagged" | head -2

echo "== 3. CRFsuite attribute file, L-BFGS, c2 = 1 (CRFsuite: loss $crfsuite_loss)"
t=${threads##* }
"$crfx" train "$data/crfsuite/train.crfsuite.txt.gz" --format crfsuite --c2 1 --threads "$t" --device cpu --features all \
  -m "$out/crfsuite.model" --log "$out/crfsuite.csv" 2> "$out/crfsuite.err"
grep -E '^data:|^done:' "$out/crfsuite.err"
loss=$(tail -1 "$out/crfsuite.csv" | cut -d, -f3)
awk -v a="$loss" -v b="$crfsuite_loss" \
  'BEGIN { d = (a - b) / b; printf "final loss %.4f, CRFsuite %.2f: relative difference %.2e (%s 1e-4)\n", a, b, d, (d < 1e-4 && d > -1e-4) ? "within" : "NOT within" }'
"$crfx" tag "$data/crfsuite/test.crfsuite.txt.gz" -m "$out/crfsuite.model" -o "$out/crfsuite.tagged" -q
echo "test (CRFsuite: F1 93.70):"
"$crfx" eval "$out/crfsuite.tagged" | head -2
