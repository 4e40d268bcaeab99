#!/usr/bin/env bash
# CRFsuite's default model on CoNLL-2000 — the (attribute, label) pairs and label bigrams observed
# in training (crfx --features observed, the default) — side by side with CRFsuite itself:
#   1. crfx train on CRFsuite's attribute file, L-BFGS, c2 = 1, CRFsuite's stopping rule (delta
#      1e-5 over 10 iterations), on 1 thread and on THREADS threads: features, final loss, iterations,
#      seconds per iteration (median of the per-iteration times in the --log CSV), test chunk F1;
#   2. with CRFSUITE=/path/to/crfsuite (built from its public sources; none of it is part of crfx):
#      `crfsuite learn -p c2=1` on the same file — its features, loss, iterations, seconds per
#      iteration and test F1 — and the ratios: crfx's seconds per iteration and time to reach
#      CRFsuite's final loss, over CRFsuite's.
# Usage: [CRFSUITE=...] [THREADS=2] [OUT_DIR=...] benchmarks/observed.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
crfx=$build/crfx
data=${DATA:-../shared/data/conll2000}/crfsuite
out=${OUT_DIR:-$build/bench-observed}
threads=${THREADS:-$(nproc)}
[ -x "$crfx" ] || scripts/build.sh
mkdir -p "$out"

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "== commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ local changes)'), $(date -u +%F)"
echo "== $("$crfx" --version | tail -1)"

# median of the per-iteration seconds in a crfx --log CSV (column 6 is cumulative seconds)
median() { sort -g | awk '{ d[n++] = $1 } END { print (n % 2 ? d[(n - 1) / 2] : (d[n / 2 - 1] + d[n / 2]) / 2) }'; }
per_iteration() { awk -F, 'NR > 1 { print $6 - prev; prev = $6 }' "$1" | median; }
f1() { "$crfx" eval "$1" | sed -n 2p | sed 's/.*FB1: *//'; }

for t in 1 $threads; do
  echo "== 1. crfx, observed pairs, L-BFGS c2 = 1, $t thread(s)"
  "$crfx" train "$data/train.crfsuite.txt.gz" --format crfsuite --c2 1 --threads "$t" --device cpu \
    -m "$out/crfx.t$t.model" --log "$out/crfx.t$t.csv" 2> "$out/crfx.t$t.err"
  grep -E '^data:|^memory:|^done:' "$out/crfx.t$t.err"
  "$crfx" tag "$data/test.crfsuite.txt.gz" -m "$out/crfx.t$t.model" -o "$out/crfx.t$t.tagged" -q
  echo "seconds per iteration (median): $(per_iteration "$out/crfx.t$t.csv"); final loss $(tail -1 "$out/crfx.t$t.csv" | cut -d, -f3); test F1 $(f1 "$out/crfx.t$t.tagged")"
done

if [ "$threads" != 1 ]; then
  cmp -s "$out/crfx.t1.model" "$out/crfx.t$threads.model" && echo "1- and $threads-thread models: identical" ||
    echo "1- and $threads-thread models: DIFFER"
fi

[ -n "${CRFSUITE:-}" ] || { echo "== 2. skipped: set CRFSUITE to a crfsuite binary to compare side by side"; exit 0; }
echo "== 2. CRFsuite ($CRFSUITE), the same file, its defaults and c2 = 1"
zcat "$data/train.crfsuite.txt.gz" > "$out/train.txt"
zcat "$data/test.crfsuite.txt.gz" > "$out/test.txt"
"$CRFSUITE" learn -m "$out/crfsuite.model" -p c2=1 "$out/train.txt" > "$out/crfsuite.log"
grep -m1 'Number of features' "$out/crfsuite.log"
cs_loss=$(grep '^Loss:' "$out/crfsuite.log" | tail -1 | awk '{print $2}')
cs_iters=$(grep -c '^Loss:' "$out/crfsuite.log")
cs_total=$(grep '^Total seconds required for training:' "$out/crfsuite.log" | awk '{print $NF}')
cs_iter=$(grep 'Seconds required for this iteration' "$out/crfsuite.log" | awk '{print $NF}' | median)
"$CRFSUITE" tag -m "$out/crfsuite.model" "$out/test.txt" > "$out/crfsuite.pred"
paste <(cut -f1 "$out/test.txt") "$out/crfsuite.pred" | sed 's/^\t$//' > "$out/crfsuite.tagged"
echo "CRFsuite: loss $cs_loss, $cs_iters iterations, $cs_total s, seconds per iteration (median) $cs_iter, test F1 $(f1 "$out/crfsuite.tagged")"
for t in 1 $threads; do
  csv=$out/crfx.t$t.csv
  reach=$(awk -F, -v L="$cs_loss" 'NR > 1 && $3 <= L { print $6; exit }' "$csv")
  awk -v a="$(per_iteration "$csv")" -v b="$cs_iter" -v r="${reach:-nan}" -v T="$cs_total" -v L="$cs_loss" \
      -v f="$(tail -1 "$csv" | cut -d, -f3)" -v t="$t" \
    'BEGIN { printf "crfx %s thread(s): per iteration %.4f s / %.4f s = %.2f; CRFsuite'"'"'s loss reached after %s s / %s s = %.2f; final loss relative difference %.2e\n", t, a, b, a / b, r, T, r / T, (f - L) / L }'
done
