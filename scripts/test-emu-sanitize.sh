#!/usr/bin/env bash
# The emulated GPU suite (label gpu-emu) under AddressSanitizer + UndefinedBehaviorSanitizer: device
# buffers are host allocations with poisoned canaries, so an out-of-bounds kernel access is reported
# as compute-sanitizer's memcheck would; fibers switch with the sanitizer's annotations.
# Builds into ${SANITIZE_BUILD_DIR:-build-asan} (CPU-only otherwise, no nvcc needed); extra arguments go to
# ctest (default: the whole suite under schedule seed 3, the seed the plain build leaves to this
# pass: tests/CMakeLists.txt, CRFX_EMU_SEEDS).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
build=${SANITIZE_BUILD_DIR:-build-asan}
# -Wno-maybe-uninitialized: GCC 12 under the sanitizers reports libstdc++'s own <regex> (which
# cxxopts includes in apps/cli.cpp) as maybe-uninitialized, 196 lines of it; no crfx code is named.
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -Wno-maybe-uninitialized"
# -O1 -g1 (line tables for the reports' stacks): half the compile time of -O2 -g on CI's two cores
# (12 → 5 minutes) for a sixth more run time.
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1 -DNDEBUG" \
  -DCRFX_CUDA=OFF -DCRFX_EMU_SEEDS=3 -DCMAKE_CXX_FLAGS="$flags" \
  -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$build" -j "$(nproc)" --target crfx_gpu_emu_tests
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# The long tests' cases (schedule_share in tests/gpu/gpu_check.hpp): seed 3 takes every eighth (seeds
# 1 and 2 of the plain pass run them all between them); the heaviest tests take smaller problems
# here (kSanitized there). CRFX_EMU_SHARE=1 takes every case.
if [ $# -eq 0 ]; then set -- -R '^seed3/'; fi
ctest --test-dir "$build" -L gpu-emu --output-on-failure -j "$(nproc)" "$@"
