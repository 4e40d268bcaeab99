#!/usr/bin/env bash
# The emulated GPU suite (label gpu-emu) under AddressSanitizer + UndefinedBehaviorSanitizer: device
# buffers are host allocations with poisoned canaries, so an out-of-bounds kernel access is reported
# as compute-sanitizer's memcheck would; fibers switch with the sanitizer's annotations.
# Builds into ${SANITIZE_BUILD_DIR:-build-asan} (CPU-only otherwise, no nvcc needed); extra arguments go to
# ctest (default: the whole suite under schedule seed 1).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
build=${SANITIZE_BUILD_DIR:-build-asan}
# -Wno-maybe-uninitialized: GCC 12 under the sanitizers reports libstdc++'s own <regex> (which
# cxxopts includes in apps/cli.cpp) as maybe-uninitialized, 196 lines of it; no crfx code is named.
flags="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer -Wno-maybe-uninitialized"
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCRFX_CUDA=OFF \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$build" -j "$(nproc)" --target crfx crfx_gpu_emu_tests
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# The long tests' cases (schedule_share in tests/gpu/gpu_check.hpp) every other one here: the odd
# ones (seed 3's); the plain pass runs them all. CRFX_EMU_SHARE=1 takes every case.
export CRFX_EMU_SHARE=${CRFX_EMU_SHARE:-2}
if [ $# -eq 0 ]; then set -- -R '^seed1/'; fi
ctest --test-dir "$build" -L gpu-emu --output-on-failure -j "$(nproc)" "$@"
