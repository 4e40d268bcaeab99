#!/usr/bin/env bash
# The checks the CUDA backend owes, in as few device calls as possible (for the lent GPU machine:
# nvcc, CMake, ninja, compute-sanitizer, ncu; no apt, no network). Steps, in order, any subset:
#   build     configure + build into $BUILD_DIR (default build-cuda) for sm_90, with the packed
#             dependencies in .carry/deps when there (scripts/pack-deps.sh here, then carry .carry);
#             NCCL's device sum where the toolkit has it (-DCRFX_NCCL=AUTO: tests/gpu/test_nccl.cpp);
#             CMAKE_EXTRA adds arguments (e.g. BUILD_DIR=build-nofma CMAKE_EXTRA=-DCRFX_CUDA_FMAD=OFF:
#             device arithmetic without fused multiply-adds, to compare models with the CPU's)
#   test      ctest -L gpu (must run, not skip), then the same tagging (3-best lists, marginals)
#             on both backends, compared byte for byte
#   suite     the whole ctest suite (the CLI's tests pick the GPU under --device auto)
#   bench     DEVICE=cuda benchmarks/gpu.sh (per shape: GPU and CPU pass, roofline, RESULT lines;
#             L-BFGS on CoNLL-2000; the other losses), after the device's measured copy rate
#   profile   ncu (--clock-control none, the SpeedOfLight section) over one pass per shape of
#             PROFILE_SHAPES [conll2000,zipf-L8,zipf-L128]: each kernel's time, memory and SM
#             throughput (benchmarks/ncu_summary.py), to say where a pass's time goes
#   sanitize  compute-sanitizer (SANITIZE_TOOLS [memcheck racecheck initcheck synccheck]) over
#             small runs that reach every kernel of a pass: crfx train (observed pairs, every
#             pair) and crfx tag on the 300-sentence slice, one L = 45 pass; each tool at most
#             SANITIZE_SECONDS [120]
#   tag       DEVICE=cuda benchmarks/tag.sh, then the CPU run beside it: CoNLL-2000 test ×TAG_REPEAT
#             [200] (9.5 M tokens, issue 38) on TAG_THREADS [all cores], TAG_RUNS [3] runs each
#   compile   benchmarks/compile.sh on the machine's host: read + compile of CoNLL-2000 ×10 (CoNLL
#             columns with the chunking template, and as a CRFsuite attribute file) on
#             1, 2, 4, 8 and all threads (issue 38: ≥ 10 M tokens/s on 16), models compared
# Logs go to $BUILD_DIR/gpu-checks; one line per step is printed last. Usage:
#   GPU_CHECKS_BUDGET=540 scripts/gpu-checks.sh build test bench profile sanitize tag compile
# Each step's exit status is recorded; the script exits non-zero if any step failed.
# GPU_CHECKS_BUDGET=S bounds the whole run to S seconds (a lease is short): each command runs under
# `timeout` with what is left, a step cut short is recorded as such, and later steps are not run.
# With OUT set, the logs also come back packed as $OUT/gpu-checks-logs.tgz (the device tool
# returns at most 8 files), beside summary.txt.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-cuda}
logs=$build/gpu-checks
rm -rf "$logs"
mkdir -p "$logs"
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(build test bench profile sanitize tag)
summary=()
failed=0
budget=${GPU_CHECKS_BUDGET:-0}
left() {  # seconds left of the budget (a large number without one; 0 once spent)
  if [ "$budget" -le 0 ]; then echo 86400; else echo $(( budget > SECONDS ? budget - SECONDS : 0 )); fi
}
bounded() {  # bounded CMD...: CMD under timeout with the budget's remainder (124 when cut)
  local t
  t=$(left)
  [ -z "${cap:-}" ] || [ "$cap" -ge "$t" ] || t=$cap  # a step's own limit, when lower
  [ "$t" -gt 0 ] || return 124
  timeout --kill-after=10 "$t" "$@"
}

record() {  # record STEP STATUS DETAIL
  local verdict=FAIL
  [ "$2" -eq 0 ] && verdict=ok
  [ "$2" -eq 124 ] || [ "$2" -eq 137 ] && [ "$budget" -gt 0 ] && [ "$(left)" -le 0 ] && verdict=CUT
  summary+=("$(printf '%-9s %-4s %s' "$1" "$verdict" "$3")")
  [ "$2" -eq 0 ] || failed=1
}

{
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ local changes)'), $(date -u '+%F %T') UTC"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 || echo "no nvidia-smi"
  nvcc --version 2>&1 | tail -1
} | tee "$logs/machine.txt"

for step in "${steps[@]}"; do
  start=$SECONDS
  if [ "$(left)" -le 0 ]; then
    record "$step" 124 "not run: the budget of $budget s is spent"
    continue
  fi
  case "$step" in
    build)
      deps=()
      [ -d .carry/deps ] && deps=(-DCRFX_DEPS_DIR="$PWD/.carry/deps")
      bounded cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DCRFX_CUDA_EMULATION=OFF -DCRFX_PYTHON=OFF -DCRFX_NCCL=AUTO "${deps[@]}" ${CMAKE_EXTRA:-} > "$logs/build.log" 2>&1 &&
        bounded cmake --build "$build" -j "$(nproc)" >> "$logs/build.log" 2>&1
      status=$?
      if [ $status -eq 0 ] && ! grep -q "CUDA backend ON" "$logs/build.log"; then
        status=1; echo "the CUDA backend was not configured" >> "$logs/build.log"
      fi
      record build $status "$((SECONDS - start)) s, log build.log"
      ;;
    test)
      bounded ctest --test-dir "$build" -L gpu --output-on-failure > "$logs/test-gpu.log" 2>&1
      status=$?
      skipped=$(grep -c "(Skipped)" "$logs/test-gpu.log")
      ran=$(grep -oE 'out of [0-9]+' "$logs/test-gpu.log" | tail -1 | grep -oE '[0-9]+' || echo 0)
      [ "$skipped" -eq 0 ] || status=1  # on the GPU machine a skip means the device was not usable
      [ "${ran:-0}" -gt 0 ] || status=1
      record test-gpu $status "$((SECONDS - start)) s, $(grep -E 'tests passed|tests failed' "$logs/test-gpu.log" | tail -1); $skipped skipped"
      # End to end: one model, tagged on both backends with 3-best lists and marginals (labels,
      # ranks, probabilities to six decimals). Identical output expected; a difference is
      # reported with its line count (a probability's last decimal may differ by rounding).
      (
        "$build/crfx" train tests/data/conll2000.train300.txt -t tests/data/chunking.template \
          -m "$logs/e2e.model" --device cpu --max-iterations 40 -q &&
          for device in cpu cuda; do
            "$build/crfx" tag tests/data/conll2000.test100.txt -m "$logs/e2e.model" --device $device \
              -q -n 3 --marginals -o "$logs/e2e-$device.txt" || exit 1
          done
      ) > "$logs/e2e-tag.log" 2>&1
      status=$?
      if [ $status -eq 0 ] && ! cmp -s "$logs/e2e-cpu.txt" "$logs/e2e-cuda.txt"; then
        status=1
        echo "$(diff "$logs/e2e-cpu.txt" "$logs/e2e-cuda.txt" | grep -c '^<') lines differ" >> "$logs/e2e-tag.log"
      fi
      record e2e-tag $status "crfx tag -n 3 --marginals, cpu vs cuda: $(tail -1 "$logs/e2e-tag.log" 2>/dev/null || true)"
      ;;
    suite)
      bounded ctest --test-dir "$build" -j "$(nproc)" --output-on-failure > "$logs/test-all.log" 2>&1
      record test-all $? "$((SECONDS - start)) s, $(grep -E 'tests passed|tests failed' "$logs/test-all.log" | tail -1)"
      ;;
    sanitize)
      # Small runs that reach every kernel of a pass (the GPU suite takes minutes under the tools):
      # L-BFGS with observed pairs (sparse emission rows, the warp forward-backward, the segmented
      # gather) and with every pair (dense rows), a synthetic L = 45 pass (the block
      # forward-backward), tagging with 2-best lists and marginals. SANITIZE_SECONDS per tool.
      slice=tests/data/conll2000.train300.txt
      for tool in ${SANITIZE_TOOLS:-memcheck racecheck initcheck synccheck}; do
        t0=$SECONDS
        tool_end=$((SECONDS + ${SANITIZE_SECONDS:-120}))
        san() { cap=$((tool_end > SECONDS ? tool_end - SECONDS : 0)); [ "$cap" -gt 0 ] || return 124
          bounded compute-sanitizer --tool "$tool" --error-exitcode 3 "$@"; }
        {
          san "$build/crfx" train "$slice" -t tests/data/chunking.template --device cuda --max-iterations 4 -q \
            -m "$logs/san.model" &&
            san "$build/crfx" train "$slice" -t tests/data/chunking.template --device cuda --max-iterations 2 -q \
              --features all -m "$logs/san-all.model" &&
            san "$build/crfx_gpu_bench" --shapes zipf-L45 --tokens 3000 --repeat 1 --cpu-repeat 1 --gpu require &&
            san "$build/crfx" tag tests/data/conll2000.test100.txt -m "$logs/san.model" --device cuda -q -n 2 \
              --marginals -o "$logs/san-tag.txt"
        } > "$logs/sanitize-$tool.log" 2>&1
        status=$?
        unset cap
        cut=""
        [ $status -eq 124 ] || [ $status -eq 137 ] && cut="cut at its ${SANITIZE_SECONDS:-120} s before the runs ended; "
        record "$tool" $status "$((SECONDS - t0)) s, $cut$(grep -E 'ERROR SUMMARY' "$logs/sanitize-$tool.log" | tr '\n' ' ')"
      done
      ;;
    profile)
      # One pass per shape under ncu (no clock control: the card's settings stay as found).
      t0=$SECONDS
      [ -d .carry/data/conll2000 ] && export DATA="$PWD/.carry/data/conll2000"
      [ -d .carry/data/conll2002 ] && export DATA2002="$PWD/.carry/data/conll2002"
      status=0
      for shape in $(echo "${PROFILE_SHAPES:-conll2000,zipf-L8,zipf-L128}" | tr , ' '); do
        bounded ncu --clock-control none --section SpeedOfLight --csv \
          "$build/crfx_gpu_bench" --shapes "$shape" --gpu require --repeat 1 --cpu-repeat 1 \
          --conll2000 "${DATA:-../shared/data/conll2000}" --conll2002 "${DATA2002:-../shared/data/conll2002}" \
          --ner-template benchmarks/ner.template > "$logs/ncu-$shape.csv" 2> "$logs/ncu-$shape.err" || status=$?
        python3 benchmarks/ncu_summary.py "$logs/ncu-$shape.csv" > "$logs/ncu-$shape.txt" 2>&1 || status=$?
        { echo "== $shape"; cat "$logs/ncu-$shape.txt"; } >> "$logs/profile.txt"
      done
      record profile $status "$((SECONDS - t0)) s, profile.txt"
      ;;
    bench)
      # The data travels in .carry/data (scripts/pack-deps.sh); ../shared does not.
      [ -d .carry/data/conll2000 ] && export DATA="$PWD/.carry/data/conll2000"
      [ -d .carry/data/conll2002 ] && export DATA2002="$PWD/.carry/data/conll2002"
      # The ceiling the memory-bound shapes meet: a device-to-device copy, bytes read + written.
      bounded python3 -c 'import torch
x = torch.empty(1 << 30, dtype=torch.uint8, device="cuda"); y = torch.empty_like(x)
for _ in range(3): y.copy_(x)
a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
a.record()
for _ in range(20): y.copy_(x)
b.record(); torch.cuda.synchronize()
print("device-to-device copy: %.0f GB/s (read + written, 1 GiB x 20)" % (2 * 20 * x.numel() / (a.elapsed_time(b) / 1e3) / 1e9))' \
        > "$logs/copy-rate.txt" 2>&1 || echo "copy rate not measured (python3 with torch?)" >> "$logs/copy-rate.txt"
      DEVICE=cuda BUILD_DIR="$build" OUT="$logs" bounded benchmarks/gpu.sh > "$logs/bench-gpu.log" 2>&1
      status=$?
      record bench-gpu $status "$((SECONDS - start)) s, $(grep -c '^RESULT' "$logs/gpu-bench.txt" 2>/dev/null || true) RESULT lines; $(tail -1 "$logs/copy-rate.txt")"
      ;;
    tag)
      [ -d .carry/data/conll2000 ] && export DATA="$PWD/.carry/data/conll2000"
      for device in cuda cpu; do
        BUILD_DIR="$build" DEVICE=$device OUT_DIR="$build/bench-tag" REPEAT=${TAG_REPEAT:-200} \
          THREAD_LIST=${TAG_THREADS:-$(nproc)} RUNS=${TAG_RUNS:-3} bounded benchmarks/tag.sh > "$logs/bench-tag-$device.log" 2>&1
        status=$?
        record "tag-$device" $status "$(grep -E '^best' "$logs/bench-tag-$device.log" || tail -1 "$logs/bench-tag-$device.log")"
      done
      ;;
    compile)
      [ -d .carry/data/conll2000 ] && export DATA="$PWD/.carry/data/conll2000"
      for format in conll crfsuite; do
        BUILD_DIR="$build" OUT_DIR="$build/bench-compile-$format" THREADS_LIST="1 2 4 8 $(nproc)" RUNS=3 \
          FORMAT=$format bounded benchmarks/compile.sh > "$logs/bench-compile-$format.log" 2>&1
        record "compile-$format" $? "$(grep -c '^run' "$logs/bench-compile-$format.log") runs; $(tail -1 "$logs/bench-compile-$format.log")"
      done
      ;;
    *)
      record "$step" 1 "unknown step (build, test, suite, bench, profile, sanitize, tag, compile)"
      ;;
  esac
done

echo
printf '%s\n' "${summary[@]}" | tee "$logs/summary.txt"
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  cp "$logs/summary.txt" "$logs/machine.txt" "$OUT/"
  [ -f "$logs/gpu-bench.txt" ] && cp "$logs/gpu-bench.txt" "$OUT/"
  [ -f "$logs/profile.txt" ] && cp "$logs/profile.txt" "$OUT/"
  tar czf "$OUT/gpu-checks-logs.tgz" -C "$logs" --exclude '*.model' . 2>/dev/null
fi
exit $failed
