#!/usr/bin/env bash
# Builds crfx and runs every test (GPU tests skip with a reason where no GPU is usable).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh "$@"
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j "$(nproc)"
