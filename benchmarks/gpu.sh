#!/usr/bin/env bash
# The CUDA backend's measurements, in one command (docs/ARCHITECTURE.md, "Benchmarks"). Steps:
#   table    per shape — synthetic corpora with Zipf-distributed attributes at L ∈ {5, 8, 23, 45,
#            128}, CoNLL-2000 (observed pairs and every pair), CoNLL-2002 Spanish and Dutch
#            (benchmarks/ner.template) — one objective+gradient pass over the whole corpus on the
#            GPU and on the CPU backend (all cores): time, tokens/s, their ratio, and the pass's
#            roofline time at the GPU's peaks (crfx_gpu_bench; pass_work there says what is
#            counted); one `RESULT shape=…` line per shape, for grep;
#   train    L-BFGS on CoNLL-2000 on the GPU (c2 = 1, chunking.template, observed pairs and every
#            pair), wall time and test F1;
#   passes   one pass over CoNLL-2000 as a Maxent model and with each of the other losses
#            (crfx bench), GPU and CPU;
#   stochastic (only when named) one epoch of sag (also with --sampling uniform), sgd-l1 (also with
#            --line-search heuristic: sgd-l1-ls), adf, ap, pa, arow, mira and l2sgd (STOCH_TRAINERS; the
#            last two at batch size 1 only)
#            on CoNLL-2000 at batch sizes STOCH_BATCHES [1 8 64 256], GPU and CPU (all cores), each run bounded by
#            EPOCH_SECONDS [60]: the mini-batch trainers' epoch time (issue 37; with benchmarks/batch.sh's
#            passes to the optimum per batch size, the time to it on each device);
#   fb       (only when named) the table's pass with each forward-backward (CRFX_FB=fused, split,
#            scan: split with long sentences' recursions as a scan, block: a block a sentence at L > 32; the shapes of
#            L ≤ 32 with CoNLL-2002's long sentences and Zipf L = 45, 128 by
#            default): which to run when, on this GPU;
#   stream   one pass per shape resident, resident in about STREAM_CHUNKS [8] chunks, and streamed
#            from pinned host memory in the same chunks (crfx_gpu_bench --stream; issue 38's
#            criterion: the streamed pass ≤ 1.5× the resident one; the GPU only): the shapes at
#            TOKENS (chunks of ~25,000 tokens: each chunk's launches and its longest sentence weigh
#            most), then the Zipf shapes at STREAM_TOKENS [2000000] (chunks of ~250,000 tokens, the
#            size a corpus larger than the GPU streams in);
#   pytorch  (only when named) pure-PyTorch log-space forward, pytorch-crf's algorithm.
# Without a usable GPU the GPU columns read NA, `train` is skipped and `passes` runs on the CPU.
# Figures go to stdout and to $OUT/gpu-bench.txt (or benchmarks/results/gpu-<date>.txt).
# Environment (defaults in brackets):
#   DEVICE      auto | cuda | cpu [auto]: cuda fails without a usable GPU, cpu never uses one
#   STEPS       [table train passes stream] SHAPES  comma list [all of the above; CoNLL-2002 when found]
#   TOKENS      synthetic corpus size [200000]      REPEAT / CPU_REPEAT  timed passes [5 / 3]
#   PEAK_GFLOPS / PEAK_GBS  the roofline's peaks [34000 / 3350: H100 SXM fp64, HBM3; 4800 GB/s on an H200]
#   BUILD_DIR [build-cuda]  DATA  the CoNLL-2000 folder  DATA2002  the CoNLL-2002 folder
# Usage: benchmarks/gpu.sh      DEVICE=cpu SHAPES=zipf-L8,conll2000 TOKENS=20000 BUILD_DIR=build benchmarks/gpu.sh
set -Eeuo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-cuda}
data=${DATA:-/work/shared/data/conll2000}
[ -n "${DATA:-}" ] || [ -d "$data" ] || data=../shared/data/conll2000
data2002=${DATA2002:-$data/../conll2002}
[ -n "${DATA2002:-}" ] || [ -d "$data2002" ] || data2002=/work/shared/data/conll2002
[ -n "${DATA2002:-}" ] || [ -d "$data2002" ] || data2002=../shared/data/conll2002
steps=" ${STEPS:-table train passes stream} "
case "${DEVICE:-auto}" in
  auto) gpu_mode=auto ;;
  cuda) gpu_mode=require ;;
  cpu) gpu_mode=off ;;
  *) echo "gpu.sh: DEVICE must be auto, cuda or cpu, not '$DEVICE'" >&2; exit 2 ;;
esac
for step in $steps; do
  case "$step" in table | train | passes | stochastic | fb | stream | pytorch) ;;
    *) echo "gpu.sh: unknown step '$step' in STEPS (table, train, passes, stochastic, fb, stream, pytorch)" >&2; exit 2 ;;
  esac
done
if [ -n "${OUT:-}" ]; then mkdir -p "$OUT"; result=$OUT/gpu-bench.txt
else mkdir -p benchmarks/results; result=benchmarks/results/gpu-$(date -u +%F).txt; fi
if [ ! -x "$build/crfx" ] || [ ! -x "$build/crfx_gpu_bench" ]; then
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCRFX_BUILD_TESTS=OFF >/dev/null
  cmake --build "$build" -j"$(nproc)" --target crfx crfx_gpu_bench
fi
[ -f "$data/train.txt" ] || { echo "gpu.sh: no CoNLL-2000 data at $data (set DATA)" >&2; exit 1; }
work=$(mktemp -d)
exec > >(tee "$result") 2>&1
tee_pid=$!
trap 'echo "gpu.sh: FAILED (exit $?) at line $LINENO: $BASH_COMMAND" >&2' ERR
finish() {  # the exit status kept; tee has written everything when the script ends
  local status=$?
  rm -rf "$work"
  exec >&- 2>&-
  wait "$tee_pid" 2>/dev/null || true
  exit "$status"
}
trap finish EXIT

echo "== machine: $(nproc) cores; $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null || echo 'no nvidia-smi')"
echo "== commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ local changes)'), $(date -u +%F)"
# Whether the GPU is used (DEVICE=cuda without one stops here, with the reason).
"$build/crfx_gpu_bench" --shapes "" --gpu "$gpu_mode" > "$work/probe.txt"
gpu=1
grep -q '^GPU: not used' "$work/probe.txt" && gpu=0
[[ $steps == *" table "* ]] || grep '^GPU:' "$work/probe.txt"

if [[ $steps == *" table "* ]]; then
  echo "== table: one objective+gradient pass per shape, GPU and CPU, against the roofline"
  shapes=${SHAPES:-}
  if [ -z "$shapes" ]; then
    shapes=zipf-L5,zipf-L8,zipf-L23,zipf-L45,zipf-L128,conll2000,conll2000-all
    if [ -f "$data2002/esp.train" ] && [ -f "$data2002/ned.train" ]; then
      shapes=$shapes,conll2002-esp,conll2002-ned
    else
      echo "conll2002-esp, conll2002-ned left out: no esp.train, ned.train in $data2002 (set DATA2002)"
    fi
  fi
  args=(--shapes "$shapes" --gpu "$gpu_mode" --tokens "${TOKENS:-200000}" --repeat "${REPEAT:-5}"
        --cpu-repeat "${CPU_REPEAT:-3}" --conll2000 "$data" --conll2002 "$data2002"
        --ner-template benchmarks/ner.template)
  [ -z "${PEAK_GFLOPS:-}" ] || args+=(--peak-gflops "$PEAK_GFLOPS")
  [ -z "${PEAK_GBS:-}" ] || args+=(--peak-gbs "$PEAK_GBS")
  "$build/crfx_gpu_bench" "${args[@]}"
fi

if [[ $steps == *" fb "* ]]; then
  echo "== fb: one pass per shape with each forward-backward (CRFX_FB=fused|split|scan|block)"
  fb_shapes=${SHAPES:-zipf-L5,zipf-L23,zipf-L45,zipf-L128,conll2000,conll2002-esp,conll2002-ned}
  for mode in fused split scan block; do
    echo "-- CRFX_FB=$mode"
    CRFX_FB=$mode "$build/crfx_gpu_bench" --shapes "$fb_shapes" --gpu "$gpu_mode" --tokens "${TOKENS:-200000}" \
      --repeat "${REPEAT:-5}" --cpu-repeat 1 --conll2000 "$data" --conll2002 "$data2002" \
      --ner-template benchmarks/ner.template | sed "s/^RESULT /RESULT fb=$mode /"
  done
fi

if [[ $steps == *" stream "* ]]; then
  if [ $gpu -eq 0 ]; then
    echo "== stream: skipped (no GPU)"
  else
    echo "== stream: one pass resident, chunked, and streamed from pinned host memory in the same chunks"
    "$build/crfx_gpu_bench" --shapes "${SHAPES:-zipf-L23,conll2000,conll2000-all}" --gpu require \
      --tokens "${TOKENS:-200000}" --repeat "${REPEAT:-5}" --stream "${STREAM_CHUNKS:-8}" --conll2000 "$data" \
      --conll2002 "$data2002" --ner-template benchmarks/ner.template
    stream_shapes=$(tr , '\n' <<<"${SHAPES:-zipf-L5,zipf-L23}" | grep '^zipf-' | paste -sd, - || true)
    if [ -n "$stream_shapes" ]; then
      echo "-- the Zipf shapes at ${STREAM_TOKENS:-2000000} tokens"
      "$build/crfx_gpu_bench" --shapes "$stream_shapes" --gpu require --tokens "${STREAM_TOKENS:-2000000}" \
        --repeat "${REPEAT:-5}" --stream "${STREAM_CHUNKS:-8}" | sed "s/^RESULT stream /RESULT stream large=1 /"
    fi
  fi
fi

if [[ $steps == *" train "* ]]; then
  if [ $gpu -eq 0 ]; then
    echo "== train: skipped (no GPU)"
  else
    for features in observed all; do
      echo "== train: L-BFGS, c2 = 1, chunking.template, on the GPU (--features $features)"
      start=$(date +%s.%N)
      "$build/crfx" train "$data/train.txt" -t "$data/chunking.template" --features $features --algo lbfgs --c2 1 \
        --device cuda -m "$work/gpu.model" --log "$work/gpu.csv" 2> "$work/train.err"
      end=$(date +%s.%N)
      grep -E '^device|^data:|^done:' "$work/train.err" || tail -3 "$work/train.err"
      awk -v a="$start" -v b="$end" 'BEGIN { printf "wall time (incl. reading and compiling the data): %.2f s\n", b - a }'
      "$build/crfx" tag "$data/test.txt" -m "$work/gpu.model" -o "$work/test.tagged"
      "$build/crfx" eval "$work/test.tagged" | sed -n 1,2p
    done
  fi
fi

if [[ $steps == *" passes "* ]]; then
  echo "== passes: one objective+gradient pass over CoNLL-2000: Maxent, and the other losses (observed pairs)"
  for what in "--type maxent" "--loss seq-exp" "--loss point-log" "--loss point-exp"; do
    echo "-- $what"
    read -r -a opts <<< "$what"
    [ $gpu -eq 0 ] ||
      "$build/crfx" bench "$data/train.txt" -t "$data/chunking.template" "${opts[@]}" --device cuda --thread-list 1 --repeat 5
    "$build/crfx" bench "$data/train.txt" -t "$data/chunking.template" "${opts[@]}" --device cpu --thread-list "$(nproc)" \
      --repeat 2
  done
fi

if [[ $steps == *" stochastic "* ]]; then
  echo "== stochastic: one epoch on CoNLL-2000 (observed pairs, c2 = 1), GPU and CPU, at most ${EPOCH_SECONDS:-60} s a run"
  devices="cpu"
  [ $gpu -eq 0 ] || devices="cuda cpu"
  for run in ${STOCH_TRAINERS:-sag sag-uniform sgd-l1 sgd-l1-ls adf ap pa arow mira l2sgd}; do  # sag-uniform: batch-1 steps queued
    algo=${run%-uniform}
    algo=${algo%-ls}
    case $run in
      sag) one="--max-epochs 1" ;;
      sag-uniform) one="--max-epochs 1 --sampling uniform" ;;
      sgd-l1-ls) one="--epochs 1 --line-search heuristic" ;;
      *) one="--epochs 1" ;;
    esac
    for batch in ${STOCH_BATCHES:-1 8 64 256}; do
      bopt=(--batch-size "$batch")
      if [[ $run == mira || $run == l2sgd ]]; then  # one sentence a step: no such setting
        [ "$batch" = 1 ] || continue
        bopt=()
      fi
      for device in $devices; do
        read -r -a opts <<< "$one"
        line=$(timeout "${EPOCH_SECONDS:-60}" "$build/crfx" train "$data/train.txt" -t "$data/chunking.template" \
          -a $algo "${opts[@]}" "${bopt[@]}" --device $device -m "$work/epoch.model" 2>&1 | grep '^done:' ||
          echo "not finished in ${EPOCH_SECONDS:-60} s")
        printf '%-11s batch %-4s %-5s %s\n' "$run" "$batch" "$device" "$line"
      done
    done
  done
fi

if [[ $steps == *" pytorch "* ]]; then
  echo "== pytorch: pure-PyTorch log-space forward (pytorch-crf's algorithm)"
  if python3 -c 'import torch' 2>/dev/null; then
    python3 benchmarks/pytorch_forward.py --labels 5,23,45,128 --batches 1,32,512
  else
    echo "skipped: python3 cannot import torch"
  fi
fi
echo "== results written to $result"
