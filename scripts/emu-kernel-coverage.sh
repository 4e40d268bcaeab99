#!/usr/bin/env bash
# Lists every kernel the CUDA backend launches (each CRFX_LAUNCH in kernels/) with the tests of the
# emulated GPU suite that execute it, and fails when one is never executed.
#   scripts/emu-kernel-coverage.sh [BUILD_DIR]     (default build/; run scripts/test.sh first)
#   scripts/emu-kernel-coverage.sh --log FILE      the table from a run that has already written
#                                                  FILE (CRFX_EMU_KERNEL_LOG; scripts/test.sh's)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --log ]; then
  log=${2:?usage: scripts/emu-kernel-coverage.sh --log FILE}
  [ -s "$log" ] || { echo "no kernel log in $log (was the emulated suite run with CRFX_EMU_KERNEL_LOG?)" >&2; exit 1; }
else
  build=${1:-${BUILD_DIR:-build}}
  bin="$build/tests/crfx_gpu_emu_tests"
  [ -x "$bin" ] || { echo "no $bin: build first (scripts/build.sh)" >&2; exit 1; }
  log=$(mktemp)
  trap 'rm -f "$log" "$log.out"' EXIT
  # (The emulator's self-tests print the faults they provoke on stderr: kept out of the table.)
  CRFX_EMU_KERNEL_LOG="$log" "$bin" --gtest_brief=1 >"$log.out" 2>&1 ||
    { cat "$log.out" >&2; echo "the emulated GPU suite failed" >&2; exit 1; }
fi
# Kernels launched by the backend: the first argument of every CRFX_LAUNCH under kernels/ (not the
# macro's own definition and comments in launch.cuh).
mapfile -t kernels < <(ls kernels/*.cu kernels/*.cuh | grep -v "/launch.cuh$" | xargs grep -ho 'CRFX_LAUNCH(([^,]*,[^)]*)\|CRFX_LAUNCH([A-Za-z_0-9<>]*' \
  | sed -e 's/^CRFX_LAUNCH((//' -e 's/^CRFX_LAUNCH(//' -e 's/<.*//' | sort -u)
missing=0
printf '| kernel | launches | tests that execute it |\n|---|---:|---|\n'
for k in "${kernels[@]}"; do
  launches=$(awk -F'\t' -v k="$k" '{n=$2; sub(/<.*/, "", n); sub(/^\(/, "", n)} n==k {s+=$3} END {print s+0}' "$log")
  tests=$(awk -F'\t' -v k="$k" '{n=$2; sub(/<.*/, "", n); sub(/^\(/, "", n)} n==k {print $1}' "$log" | sort -u | sed 's/^CudaBackend\.//' | paste -sd' ' -)
  [ "$launches" -gt 0 ] || missing=$((missing + 1))
  printf '| `%s` | %s | %s |\n' "$k" "$launches" "${tests:-**none**}"
done
echo
echo "${#kernels[@]} kernels launched by the backend; $missing never executed by the emulated suite"
[ "$missing" -eq 0 ]
