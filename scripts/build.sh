#!/usr/bin/env bash
# Configures and builds crfx into ${BUILD_DIR:-build}. Extra arguments go to cmake, e.g.
#   scripts/build.sh -DCRFX_CUDA=OFF            (CPU only)
#   scripts/build.sh -DCMAKE_CUDA_ARCHITECTURES="80;90"
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"
