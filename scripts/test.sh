#!/usr/bin/env bash
# Builds crfx and runs every test (GPU tests skip with a reason where no GPU is usable; the same
# suite runs on the emulated GPU, label gpu-emu, where a skip is a failure), then the emulated GPU
# suite once more under ASan + UBSan (scripts/test-emu-sanitize.sh, build-asan/; CRFX_SANITIZE=0
# leaves that pass out).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
scripts/deps.sh
scripts/build.sh "$@"
log=$(mktemp)
kernels=$(mktemp)  # the kernels each emulated test launched (tests/emu/test_kernel_log.cpp)
trap 'rm -f "$log" "$kernels"' EXIT
CRFX_EMU_KERNEL_LOG="$kernels" ctest --test-dir "$build" --output-on-failure -j "$(nproc)" | tee "$log"
# Why the skipped tests skipped (GTEST_SKIP's message, from ctest's log), one line per reason.
awk '/: Skipped$/ { getline reason; next }
     /^\[  SKIPPED \] [^ ]+ \(/ && reason != "" { n[reason]++; if (!(reason in eg)) eg[reason] = $4; reason = "" }
     END { for (r in n) printf "skipped: %d test%s (%s%s): %s\n", n[r], (n[r] > 1 ? "s" : ""), eg[r], (n[r] > 1 ? ", …" : ""), r }' \
  "$build/Testing/Temporary/LastTest.log" | sort
emu=$(ctest --test-dir "$build" -N -L gpu-emu | sed -n 's/^Total Tests: //p')
if [ "${emu:-0}" -gt 0 ]; then
  seeds=$(ctest --test-dir "$build" -N -L gpu-emu | sed -n 's/.*Test *#[0-9]*: \(seed[0-9]*\)\/.*/\1/p' | sort -u | paste -sd' ' -)
  skipped=$(grep -cE 'Test +#[0-9]+: seed[0-9]+/.*Skipped' "$log" || true)
  echo "GPU suite on the emulated device: $emu tests ($seeds), $skipped skipped"
  [ "$skipped" -eq 0 ] || { echo "a test of the emulated GPU suite skipped: it must run there" >&2; exit 1; }
  # Every kernel the backend launches ran in some emulated test (a kernel no test runs is untested).
  if ! coverage=$(scripts/emu-kernel-coverage.sh --log "$kernels"); then
    grep -F '**none**' <<<"$coverage" >&2 || true
    echo "$coverage" | tail -1 >&2
    exit 1
  fi
  echo "$coverage" | tail -1
  if [ "${CRFX_SANITIZE:-1}" != 0 ]; then
    scripts/test-emu-sanitize.sh
    echo "GPU suite on the emulated device under ASan + UBSan (seed 3): clean"
  fi
else
  echo "GPU suite on the emulated device: not built (-DCRFX_CUDA_EMULATION=OFF)"
fi
# In-process fuzzing of the parsers (libFuzzer, ASan + UBSan; clang-14 from scripts/deps.sh):
# each target ~15 s from its seeds in tests/fuzz/; a finding fails the run, naming its reproducer.
scripts/fuzz.sh smoke
