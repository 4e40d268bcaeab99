#!/usr/bin/env bash
# Seed 001's Figure 2 on CoNLL-2000 (Huang, Hsieh, Chang & Lin 2009): Maxent models (--type maxent)
# with the chunking template, σ² = 10 (the seed's Σ NLL + ‖w‖²/(2σ²), i.e. --c2 0.05), trained by
# cd, scgis, gis, iis and lbfgs for the same wall-clock budget each, one thread, one after the other.
# One command:
#   benchmarks/maxent.sh
# f* comes from a tight L-BFGS run first (--delta 0 --period 0 --epsilon 1e-10). Each trainer then
# runs with --dev on the test set (F1 after every iteration) and is stopped by SIGINT after
# SECONDS (crfx train's graceful stop writes its model; exit status 3), or ends on its own rule.
# Writes under benchmarks/results/maxent/: the per-iteration CSV logs, table.md (s / iteration,
# time to relative differences 1e-1 and 1e-2, the end, test F1, the seed's ordering checked) and
# the figures gap-seconds (relative difference (f − f*)/f* against time, log scale) and
# f1-seconds (test F1 against time), as PNG and SVG (gnuplot).
# Environment: BUILD_DIR (default build), DATA (default ../shared/data/conll2000), OUT_DIR,
# SECONDS_EACH (default 300), TRAINERS (default "lbfgs cd scgis gis iis"), THREADS (default 1).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
crfx=$build/crfx
data=${DATA:-../shared/data/conll2000}
out=${OUT_DIR:-benchmarks/results/maxent}
budget=${SECONDS_EACH:-300}
trainers=${TRAINERS:-lbfgs cd scgis gis iis}
threads=${THREADS:-1}
[ -x "$crfx" ] || scripts/build.sh
scripts/deps.sh --bench  # gnuplot
mkdir -p "$out"
train="$data/train.txt"; test="$data/test.txt"; tmpl="$data/chunking.template"
common=(--type maxent --c2 0.05 --device cpu)  # (not -q: the .err files keep why each stopped)

commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ local changes)')"
{
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "commit: $commit"
  echo "date: $(date -u +%F)"
  echo "load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "budget: $budget s per trainer, $threads thread(s); f*: lbfgs --delta 0 --period 0 --epsilon 1e-10"
} > "$out/machine.txt"

score() {  # score NAME: tag the test set with NAME's model, FB1 into NAME.eval
  "$crfx" tag "$test" -m "$out/$1.model" -o "$out/$1.tagged" -q
  "$crfx" eval "$out/$1.tagged" | sed -n 2p > "$out/$1.eval"
  rm -f "$out/$1.model" "$out/$1.tagged"
}

echo "-- f*: tight L-BFGS" >&2
"$crfx" train "$train" -t "$tmpl" "${common[@]}" -a lbfgs --threads 0 --delta 0 --period 0 --epsilon 1e-10 \
  --max-iterations 2000 -m "$out/reference.model" --log "$out/reference.csv" 2> "$out/reference.err"
score reference

for a in $trainers; do
  echo "-- $a: crfx train … --type maxent -a $a --c2 0.05 --threads $threads, at most $budget s" >&2
  status=0
  timeout --preserve-status -s INT "$budget" "$crfx" train "$train" -t "$tmpl" "${common[@]}" -a "$a" --threads "$threads" \
    --dev "$test" -m "$out/$a.model" --log "$out/$a.csv" 2> "$out/$a.err" || status=$?
  # 3: stopped by the signal at the budget, with its model written; 0: the trainer's own rule.
  [ "$status" -eq 0 ] || [ "$status" -eq 3 ] || { cat "$out/$a.err" >&2; exit 1; }
  score "$a"
done

python3 benchmarks/maxent_report.py "$out" $trainers
for plot in "$out"/*.gp; do (cd "$out" && gnuplot "$(basename "$plot")"); done
cat "$out/table.md"
