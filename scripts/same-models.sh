#!/usr/bin/env bash
# Trains every trainer of the registry (host/optim/registry.cpp) with its loss, L1/L2 and Maxent
# variants on the 300-sentence CoNLL-2000 slice, on the CPU backend (1 and 2 threads) and on the
# emulated GPU (crfx_emu --device cuda; the Maxent trainers are CPU-only), one model file per case:
# the check that a refactoring below the trainers changes no model byte.
#   scripts/same-models.sh OUTDIR [REFDIR]
# With REFDIR (an earlier run's OUTDIR) every model is compared with cmp and the script fails on
# the first difference it reports, or on a model missing from either side. BUILD_DIR (default
# build/) holds crfx and crfx_emu. ONLY (an extended regex on "case.device", e.g. 'cpu[12]$')
# keeps the cases it matches, and the comparison to them. Under a second a case on the CPU, up to
# a minute on the emulated GPU (about 8 minutes in all on 2 cores).
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: scripts/same-models.sh OUTDIR [REFDIR]}
ref=${2:-}
build=${BUILD_DIR:-build}
for b in crfx crfx_emu; do
  [ -x "$build/$b" ] || { echo "no $build/$b: build first" >&2; exit 1; }
done
mkdir -p "$out"
data=tests/data/conll2000.train300.txt
tmpl=tests/data/chunking.template

# name | settings (each case short: a few iterations or epochs). "cpu-only" marks the Maxent
# trainers, which read the host corpus and run on the CPU backend only.
cases=(
  "lbfgs-l2|--algo lbfgs --c2 1 --max-iterations 25"
  "lbfgs-l1l2|--algo lbfgs --c1 0.5 --c2 0.5 --max-iterations 25"
  "lbfgs-all|--algo lbfgs --c2 1 --max-iterations 15 --features all"
  "lbfgs-seqexp|--algo lbfgs --c2 1 --max-iterations 15 --loss seq-exp"
  "lbfgs-pointlog|--algo lbfgs --c2 1 --max-iterations 15 --loss point-log"
  "lbfgs-pointexp|--algo lbfgs --c2 1 --max-iterations 15 --loss point-exp"
  "lbfgs-maxent|--algo lbfgs --c2 1 --max-iterations 25 --type maxent"
  "owlqn-l1|--algo owlqn --c1 1 --c2 0 --max-iterations 25"
  "rprop-l2|--algo rprop --c2 1 --max-iterations 25"
  "rprop-l1|--algo rprop --c1 0.5 --c2 0.5 --max-iterations 25"
  "sag-l2|--algo sag --c2 1 --max-epochs 4"
  "saga-l1|--algo saga --c1 0.5 --c2 0.5 --max-epochs 4 --sampling uniform"
  "sag-b8|--algo sag --c2 1 --max-epochs 3 --batch-size 8"
  "saga-b8|--algo saga --c1 0.5 --c2 0.5 --max-epochs 3 --sampling uniform --batch-size 8"
  "sgd-l1|--algo sgd-l1 --c1 1 --epochs 4"
  "sgd-l1-ls|--algo sgd-l1 --c1 1 --c2 0.5 --epochs 3 --line-search heuristic --batch-size 8"
  "two-stage|--algo two-stage --c1 1 --sgd-epochs 2 --max-iterations 10"
  "adf-l2|--algo adf --c2 1 --epochs 4"
  "adf-pointlog|--algo adf --c2 1 --epochs 3 --loss point-log"
  "l2sgd|--algo l2sgd --c2 1 --epochs 4"
  "ap|--algo ap --epochs 4"
  "pa|--algo pa --epochs 4"
  "arow|--algo arow --epochs 4"
  "mira|--algo mira --epochs 4"
  "boost|--algo boost --max-iterations 30"
  "gis|--algo gis --type maxent --max-iterations 30|cpu-only"
  "iis|--algo iis --type maxent --max-iterations 30|cpu-only"
  "scgis|--algo scgis --type maxent --max-iterations 30|cpu-only"
  "cd|--algo cd --type maxent --max-iterations 20|cpu-only"
)
devices=(
  "cpu1|crfx|--device cpu --threads 1"
  "cpu2|crfx|--device cpu --threads 2"
  "emu|crfx_emu|--device cuda"
)

n=0
for c in "${cases[@]}"; do
  IFS='|' read -r name settings only <<<"$c"
  for d in "${devices[@]}"; do
    IFS='|' read -r dev bin devopts <<<"$d"
    [ "$only" = cpu-only ] && [ "$dev" = emu ] && continue
    [[ "$name.$dev" =~ ${ONLY:-.} ]] || continue
    model="$out/$name.$dev.model"
    start=$(date +%s.%N)
    # shellcheck disable=SC2086  # the settings are words
    "$build/$bin" train -q --force $devopts $settings -t "$tmpl" -m "$model" "$data" >"$out/$name.$dev.log" 2>&1 ||
      { cat "$out/$name.$dev.log" >&2; echo "failed: $name on $dev" >&2; exit 1; }
    printf '%-16s %-5s %6.1f s\n' "$name" "$dev" "$(echo "$(date +%s.%N) - $start" | bc)"
    n=$((n + 1))
  done
done
echo "$n models in $out"

[ -n "$ref" ] || exit 0
differ=0
for m in "$out"/*.model "$ref"/*.model; do
  f=$(basename "$m")
  [[ "${f%.model}" =~ ${ONLY:-.} ]] || continue
  if [ ! -f "$out/$f" ] || [ ! -f "$ref/$f" ]; then
    echo "only on one side: $f"
    differ=$((differ + 1))
    continue
  fi
  [ "$m" = "$out/$f" ] || continue
  cmp -s "$out/$f" "$ref/$f" || { echo "differs: $f"; differ=$((differ + 1)); }
done
[ "$differ" -eq 0 ] || { echo "$differ of the models differ from $ref" >&2; exit 1; }
echo "all $n models byte-identical to $ref"
