#!/usr/bin/env bash
# Memory at scale: a synthetic corpus of TOKENS tokens (default 2 M), 45 labels and ~5 M attributes
# (benchmarks/synthetic_corpus.py), trained with L-BFGS for ITERATIONS iterations (default 5) on
# the observed (attribute, label) pairs — the peak resident memory measured with /usr/bin/time —
# and with every pair (--features all), which must be refused up front with its estimate.
# Usage: benchmarks/scale.sh      (TOKENS=… ITERATIONS=… THREADS=… OUT_DIR=… BUILD_DIR=…)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
crfx=$build/crfx
out=${OUT_DIR:-$build/bench-scale}
tokens=${TOKENS:-2000000}
iterations=${ITERATIONS:-5}
threads=${THREADS:-$(nproc)}
[ -x "$crfx" ] || scripts/build.sh
mkdir -p "$out"
data=$out/synthetic.$tokens.txt

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/^Mem:/ {print $2}') GiB"
echo "== commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ local changes)'), $(date -u +%F)"
[ -s "$data" ] || python3 benchmarks/synthetic_corpus.py --tokens "$tokens" --labels 45 --seed 1 -o "$data"
echo "== corpus: $data ($(du -h "$data" | cut -f1))"

echo "== 1. observed pairs (the default): L-BFGS, $iterations iterations, $threads threads"
/usr/bin/time -f "wall %e s, peak resident memory %M KB" "$crfx" train "$data" --format crfsuite --device cpu \
  --threads "$threads" --max-iterations "$iterations" -m "$out/observed.model" 2> "$out/observed.err"
grep -E '^data:|^memory:|^done:|^wall' "$out/observed.err"

echo "== 2. every pair (--features all): refused before it allocates"
if "$crfx" train "$data" --format crfsuite --device cpu --threads "$threads" --max-iterations "$iterations" \
     --features all -m "$out/all.model" 2> "$out/all.err"; then
  echo "NOT refused (this machine has the memory for it):"; grep -E '^memory:|^done:' "$out/all.err"
else
  grep -E '^data:|^memory:|needs an estimated' "$out/all.err"
  [ ! -e "$out/all.model" ] && echo "no model written"
fi
