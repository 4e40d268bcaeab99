#!/usr/bin/env bash
# The seed trainers against each other on CoNLL-2000 with the standard chunking template — our
# version of seed 004 Fig. 1 and seed 000 Tables 2–3. One command:
#   benchmarks/convergence.sh
# Every attribute × label pair (--features all, the models the seed papers train); FEATURES=observed
# runs the same comparison on CRFsuite's observed pairs.
# (a) L2 only, λ = 1/n in seed 004's convention, i.e. c2 = λ·n/2 = 0.5 in crfx's
#     (f = Σ NLL + c2·‖w‖²): f* from a long tight L-BFGS run (its log is also the L-BFGS curve),
#     then sgd-l1 (L2 only), sag (uniform, lipschitz, mixed), saga, adf;
# (b) L1, c1 = 1 (c2 = 0): owlqn, sgd-l1, two-stage; f* = the best objective any of them logged.
# (c) for comparison with seed 004, which also used it: CoNLL-2002 Dutch NER (ned.train, scored on
#     ned.testb) with the same word/POS n-gram template, L2 with λ = 1/n: tight L-BFGS and sag mixed.
# (d) the ADF goal compares test F1 to a few hundredths of a point, so its comparison is repeated
#     for the shuffling seeds in SEEDS (default 2 3 4 5; (a) used seed 1): sgd-l1 for EPOCHS epochs,
#     adf with β = 0.6 and β = 0.9 for 10.
# Writes under benchmarks/results/convergence/: the per-epoch CSV logs, table.md (final objective,
# active features, test F1, passes, seconds, and the acceptance checks), and the figures
# l2-passes / l2-seconds / l1-passes / l1-seconds as PNG and SVG (gnuplot).
# Environment: BUILD_DIR (default build), DATA (default ../shared/data/conll2000), NER_DATA (default
# ../shared/data/conll2002), OUT_DIR,
# THREADS (default: all cores), EPOCHS (sgd-l1 and adf epochs, default 30), SAG_EPOCHS (sag and
# saga epoch budget, default 40), SEEDS (section (d); empty: skip it).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
crfx=$build/crfx
data=${DATA:-../shared/data/conll2000}
ner_data=${NER_DATA:-../shared/data/conll2002}
out=${OUT_DIR:-benchmarks/results/convergence}
threads=${THREADS:-0}
epochs=${EPOCHS:-30}
seeds=${SEEDS-2 3 4 5}
sag_epochs=${SAG_EPOCHS:-40}  # SAG/SAGA run longer, so that the pass count where SAG reaches f*·(1 + 1e-4) is measured
[ -x "$crfx" ] || scripts/build.sh
scripts/deps.sh --bench  # gnuplot
mkdir -p "$out"
train="$data/train.txt"; test="$data/test.txt"; tmpl="$data/chunking.template"

run() {  # run NAME ARGS...: train, log per iteration/epoch, tag the test set, score it
  local name=$1; shift
  echo "-- $name: crfx train $*" >&2
  "$crfx" train "$train" -t "$tmpl" --threads "$threads" --device cpu -q --features "${FEATURES:-all}" \
    -m "$out/$name.model" --log "$out/$name.csv" "$@"
  "$crfx" tag "$test" -m "$out/$name.model" -o "$out/$name.tagged" -q
  "$crfx" eval "$out/$name.tagged" | sed -n 2p > "$out/$name.eval"
  rm -f "$out/$name.model" "$out/$name.tagged"
}

# The commit marker is taken before anything under $out is rewritten (those files are tracked).
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ local changes)')"
{
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "commit: $commit"
  echo "date: $(date -u +%F)"
  echo "threads: $threads (0 = all cores), epochs: $epochs (sag/saga: $sag_epochs), seeds of (d): ${seeds:-none}"
} > "$out/machine.txt"

# (a) L2, c2 = 0.5 (λ = 1/n)
run l2-lbfgs     --algo lbfgs --c2 0.5 --delta 1e-12 --epsilon 1e-12 --max-iterations 1000
run l2-sgd       --algo sgd-l1 --c1 0 --c2 0.5 --epochs "$epochs" --dev "$test"
run l2-sag-uniform   --algo sag --c2 0.5 --sampling uniform   --max-epochs "$sag_epochs"
run l2-sag-lipschitz --algo sag --c2 0.5 --sampling lipschitz --max-epochs "$sag_epochs"
run l2-sag-mixed     --algo sag --c2 0.5 --sampling mixed     --max-epochs "$sag_epochs"
run l2-saga      --algo saga --c2 0.5 --max-epochs "$sag_epochs"
run l2-adf       --algo adf --c2 0.5 --epochs "$epochs" --dev "$test"
# ADF with the paper's β = 0.6 freezes the frequent features' rates within ~2 epochs
# (0.6^10 per epoch at q = n/10); β = 0.9 is the one setting we changed, reported beside it.
run l2-adf-beta0.9 --algo adf --c2 0.5 --adf-beta 0.9 --epochs "$epochs" --dev "$test"
# (b) L1, c1 = 1
run l1-owlqn     --algo owlqn --c1 1 --c2 0
run l1-sgd       --algo sgd-l1 --c1 1 --c2 0 --epochs "$epochs"
run l1-two-stage --algo two-stage --c1 1 --c2 0
# (d) the ADF comparison again for other shuffling seeds
for seed in $seeds; do
  run "l2-sgd-seed$seed"          --algo sgd-l1 --c1 0 --c2 0.5 --epochs "$epochs" --dev "$test" --seed "$seed"
  run "l2-adf-seed$seed"          --algo adf --c2 0.5 --epochs 10 --dev "$test" --seed "$seed"
  run "l2-adf-beta0.9-seed$seed"  --algo adf --c2 0.5 --adf-beta 0.9 --epochs 10 --dev "$test" --seed "$seed"
done
# (c) Dutch NER, L2, c2 = 0.5 (λ = 1/n); --epsilon 0: SAG runs its whole epoch budget, so that its
# curve goes past f*·(1 + 1e-4) instead of stopping on the gradient test.
train="$ner_data/ned.train"; test="$ner_data/ned.testb"
run ned-lbfgs     --algo lbfgs --c2 0.5 --delta 1e-12 --epsilon 1e-12 --max-iterations 1000
run ned-sag-mixed --algo sag --c2 0.5 --sampling mixed --max-epochs "$sag_epochs" --epsilon 0

python3 benchmarks/convergence_report.py "$out"
for plot in "$out"/*.gp; do gnuplot "$plot"; done
cat "$out/table.md"
