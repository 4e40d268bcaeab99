#!/usr/bin/env bash
# Which mini-batch size to choose (issue 37 item 3): the stochastic trainers at several batch
# sizes on CoNLL-2000 (train → test, chunking template, CRFsuite's observed pairs), L2 with
# c2 = 0.5 (λ = 1/n in seed 004's convention), against f* from a tight L-BFGS run on the same
# device: per run the effective passes and the seconds until the objective is within 1e-3
# (relative) of f*, the final gap, and the test F1.
#   benchmarks/batch.sh                           (DEVICE=cpu, all cores)
#   DEVICE=cuda benchmarks/batch.sh               (on a GPU machine)
# Environment: BUILD_DIR (build), DATA (../shared/data/conll2000), OUT_DIR
# (benchmarks/results/batch-$DEVICE), DEVICE (cpu), THREADS (0: all cores), EPOCHS (15),
# BATCHES ("1 8 64 256"), TRAINERS ("sag sag-uniform sgd-l1 adf sgd-l1-scaled adf-scaled"; -scaled: --eta0 0.1·B).
# Writes OUT_DIR/table.md (benchmarks/batch_report.py) and the per-epoch CSV logs.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
crfx=$build/crfx
data=${DATA:-../shared/data/conll2000}
device=${DEVICE:-cpu}
out=${OUT_DIR:-benchmarks/results/batch-$device}
threads=${THREADS:-0}
epochs=${EPOCHS:-15}
batches=${BATCHES:-1 8 64 256}
trainers=${TRAINERS:-sag sag-uniform sgd-l1 adf sgd-l1-scaled adf-scaled}
[ -x "$crfx" ] || scripts/build.sh
mkdir -p "$out"
train="$data/train.txt"; test="$data/test.txt"; tmpl="$data/chunking.template"

run() {  # run NAME ARGS...: train with a per-epoch log, tag the test set, score it
  local name=$1; shift
  echo "-- $name: crfx train $*" >&2
  "$crfx" train "$train" -t "$tmpl" --threads "$threads" --device "$device" -q -m "$out/$name.model" \
    --log "$out/$name.csv" --c2 0.5 "$@"
  "$crfx" tag "$test" -m "$out/$name.model" --device "$device" -o "$out/$name.tagged" -q
  "$crfx" eval "$out/$name.tagged" | sed -n 2p > "$out/$name.eval"
  rm -f "$out/$name.model" "$out/$name.tagged"
}

commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ local changes)')"
{
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  [ "$device" = cpu ] || nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sed 's/^/gpu: /' || true
  echo "device: $device, threads: $threads (0 = all cores), epochs: $epochs, batch sizes: $batches"
  echo "commit: $commit"
  echo "date: $(date -u +%F)"
} > "$out/machine.txt"

run lbfgs --algo lbfgs --delta 1e-12 --epsilon 1e-12 --max-iterations 1000
for t in $trainers; do
  for b in $batches; do
    case $t in
      sag)         run "$t-b$b" --algo sag --batch-size "$b" --max-epochs "$epochs" --epsilon 0 ;;
      sag-uniform) run "$t-b$b" --algo sag --sampling uniform --batch-size "$b" --max-epochs "$epochs" --epsilon 0 ;;
      sgd-l1)      run "$t-b$b" --algo sgd-l1 --c1 0 --batch-size "$b" --epochs "$epochs" ;;
      adf)         run "$t-b$b" --algo adf --batch-size "$b" --epochs "$epochs" ;;
      # The rate raised with the batch (the default 0.1 times B): a batch's step follows the mean
      # of its gradients, so at the default rate an epoch of batch B moves as far as N/B steps of one.
      sgd-l1-scaled) run "$t-b$b" --algo sgd-l1 --c1 0 --batch-size "$b" --epochs "$epochs" --eta0 "$(awk "BEGIN{print 0.1*$b}")" ;;
      adf-scaled)    run "$t-b$b" --algo adf --batch-size "$b" --epochs "$epochs" --eta0 "$(awk "BEGIN{print 0.1*$b}")" ;;
      *) echo "unknown trainer $t (sag, sag-uniform, sgd-l1, adf, sgd-l1-scaled, adf-scaled)" >&2; exit 2 ;;
    esac
  done
done
python3 benchmarks/batch_report.py "$out" "$trainers" "$batches"
cat "$out/table.md"
