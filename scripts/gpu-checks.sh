#!/usr/bin/env bash
# The checks the CUDA backend owes, in as few device calls as possible (for the lent GPU machine:
# nvcc, CMake, ninja, compute-sanitizer; no apt, no network). Steps, in order, any subset:
#   build     configure + build into $BUILD_DIR (default build-cuda) for sm_90, with the packed
#             dependencies in .carry/deps when there (scripts/pack-deps.sh here, then carry .carry)
#   test      ctest -L gpu (must run, not skip), then the whole suite, then the same tagging
#             (3-best lists, marginals) on both backends, compared byte for byte
#   sanitize  compute-sanitizer memcheck, racecheck, initcheck and synccheck over crfx_gpu_tests
#   bench     benchmarks/gpu.sh, then DEVICE=cuda benchmarks/tag.sh (and the CPU run beside it)
# Logs go to $OUT (the device tool brings it back) or $BUILD_DIR/gpu-checks; one line per step
# is printed last. Usage:  scripts/gpu-checks.sh build test      scripts/gpu-checks.sh sanitize
# Each step's exit status is recorded; the script exits non-zero if any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build-cuda}
logs=${OUT:-$build/gpu-checks}
mkdir -p "$logs"
steps=("$@")
[ ${#steps[@]} -gt 0 ] || steps=(build test sanitize bench)
summary=()
failed=0

record() {  # record STEP STATUS DETAIL
  summary+=("$(printf '%-9s %-4s %s' "$1" "$([ "$2" -eq 0 ] && echo ok || echo FAIL)" "$3")")
  [ "$2" -eq 0 ] || failed=1
}

{
  echo "commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ local changes)'), $(date -u '+%F %T') UTC"
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 || echo "no nvidia-smi"
  nvcc --version 2>&1 | tail -1
} | tee "$logs/machine.txt"

for step in "${steps[@]}"; do
  start=$SECONDS
  case "$step" in
    build)
      deps=()
      [ -d .carry/deps ] && deps=(-DCRFX_DEPS_DIR="$PWD/.carry/deps")
      cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
        -DCRFX_CUDA_EMULATION=OFF "${deps[@]}" > "$logs/build.log" 2>&1 &&
        cmake --build "$build" -j "$(nproc)" >> "$logs/build.log" 2>&1
      status=$?
      grep -q "CUDA backend ON" "$logs/build.log" || { status=1; echo "the CUDA backend was not configured" >> "$logs/build.log"; }
      record build $status "$((SECONDS - start)) s, log build.log"
      ;;
    test)
      ctest --test-dir "$build" -L gpu --output-on-failure > "$logs/test-gpu.log" 2>&1
      status=$?
      skipped=$(grep -c "(Skipped)" "$logs/test-gpu.log")
      ran=$(grep -oE 'out of [0-9]+' "$logs/test-gpu.log" | tail -1 | grep -oE '[0-9]+' || echo 0)
      [ "$skipped" -eq 0 ] || status=1  # on the GPU machine a skip means the device was not usable
      [ "${ran:-0}" -gt 0 ] || status=1
      record test-gpu $status "$(grep -E 'tests passed|tests failed' "$logs/test-gpu.log" | tail -1); $skipped skipped"
      ctest --test-dir "$build" -j "$(nproc)" --output-on-failure > "$logs/test-all.log" 2>&1
      record test-all $? "$(grep -E 'tests passed|tests failed' "$logs/test-all.log" | tail -1)"
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
    sanitize)
      for tool in memcheck racecheck initcheck synccheck; do
        t0=$SECONDS
        compute-sanitizer --tool "$tool" --error-exitcode 3 "$build/tests/crfx_gpu_tests" \
          > "$logs/sanitize-$tool.log" 2>&1
        status=$?
        record "$tool" $status "$((SECONDS - t0)) s, $(grep -E 'ERROR SUMMARY|PASSED|FAILED' "$logs/sanitize-$tool.log" | tail -1)"
      done
      ;;
    bench)
      # The data travels in .carry/data (scripts/pack-deps.sh); ../shared does not.
      [ -d .carry/data/conll2000 ] && export DATA="$PWD/.carry/data/conll2000"
      BUILD_DIR="$build" OUT="$logs" benchmarks/gpu.sh > "$logs/bench-gpu.log" 2>&1
      record bench-gpu $? "$((SECONDS - start)) s, figures in gpu-bench.txt"
      t0=$SECONDS
      for device in cuda cpu; do
        BUILD_DIR="$build" DEVICE=$device OUT_DIR="$build/bench-tag" benchmarks/tag.sh > "$logs/bench-tag-$device.log" 2>&1
        status=$?
        record "tag-$device" $status "$(grep -E '^best' "$logs/bench-tag-$device.log" || tail -1 "$logs/bench-tag-$device.log")"
      done
      ;;
    *)
      record "$step" 1 "unknown step (build, test, sanitize, bench)"
      ;;
  esac
done

echo
printf '%s\n' "${summary[@]}" | tee "$logs/summary.txt"
exit $failed
