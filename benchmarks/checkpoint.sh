#!/usr/bin/env bash
# Checkpoints on CoNLL-2000 (crfx train --checkpoint / --resume):
#   1. for L-BFGS (observed pairs, c2 = 1) and SAG (its stored marginals): an uninterrupted run; the
#      same run stopped by SIGINT once its log shows STOP_AT reports, then resumed with --resume;
#      the two models compared byte for byte (cmp);
#   2. the checkpoint's size, and the cost of writing one: 30 L-BFGS iterations with a checkpoint
#      after every iteration and without (whole runs; the --log seconds leave the checkpoints out).
# Usage: [THREADS=2] [STOP_AT=10] [OUT_DIR=...] benchmarks/checkpoint.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
crfx=$build/crfx
data=${DATA:-../shared/data/conll2000}
out=${OUT_DIR:-$build/bench-checkpoint}
threads=${THREADS:-$(nproc)}
stop_at=${STOP_AT:-10}
[ -x "$crfx" ] || scripts/build.sh
mkdir -p "$out"

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "== commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ local changes)'), $(date -u +%F)"

rows() { [ -f "$1" ] && echo $(( $(wc -l < "$1") - 1 )) || echo 0; }

run_pair() {  # name, then the training options
  local name=$1
  shift
  local train=("$crfx" train "$data/train.txt" -t "$data/chunking.template" --threads "$threads" --device cpu -q "$@")
  echo "== 1. $name: uninterrupted, stopped at report $stop_at by SIGTERM, resumed"
  "${train[@]}" -m "$out/$name.full.model" --log "$out/$name.full.csv"
  rm -f "$out/$name.ckpt" "$out/$name.csv"
  "${train[@]}" -m "$out/$name.stopped.model" --log "$out/$name.csv" --checkpoint "$out/$name.ckpt" &
  local pid=$!
  while [ "$(rows "$out/$name.csv")" -lt "$stop_at" ] && kill -0 "$pid" 2>/dev/null; do sleep 0.05; done
  kill -TERM "$pid"  # (SIGINT is ignored by background jobs of a script)
  local rc=0
  wait "$pid" || rc=$?
  echo "stopped: exit status $rc after $(rows "$out/$name.csv") reports; checkpoint $(stat -c %s "$out/$name.ckpt") bytes"
  "${train[@]}" -m "$out/$name.resumed.model" --log "$out/$name.csv" --resume "$out/$name.ckpt"
  echo "resumed to $(rows "$out/$name.csv") reports (uninterrupted: $(rows "$out/$name.full.csv"))"
  cmp "$out/$name.full.model" "$out/$name.resumed.model" && echo "$name: resumed model identical to the uninterrupted one"
}

run_pair lbfgs --max-iterations 40
run_pair sag -a sag --c2 0.5 --max-epochs 15

echo "== 2. the cost of a checkpoint after every L-BFGS iteration (30 iterations, $threads threads)"
base=("$crfx" train "$data/train.txt" -t "$data/chunking.template" --threads "$threads" --device cpu -q
      --max-iterations 30 -m "$out/cost.model")
seconds() { local t0 t1; t0=$(date +%s.%N); "$@"; t1=$(date +%s.%N); awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }'; }
echo "whole run without checkpoints: $(seconds "${base[@]}") s"
echo "whole run, a checkpoint every iteration: $(seconds "${base[@]}" --checkpoint "$out/cost.ckpt" --checkpoint-every 1) s"
echo "checkpoint: $(stat -c %s "$out/cost.ckpt") bytes"
echo "(one run each; for a figure, time the two commands in paired repeated runs)"
