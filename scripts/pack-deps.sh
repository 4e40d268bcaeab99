#!/usr/bin/env bash
# Packs what a build needs but the GPU machine lacks (it has nvcc, CMake, ninja; no apt, no
# network) into the ignored folder .carry/deps: the cxxopts header and GoogleTest's headers,
# static libraries and CMake package files. Carry `.carry` to that machine and configure with
#   scripts/build.sh -DCRFX_DEPS_DIR=$PWD/.carry/deps
set -euo pipefail
cd "$(dirname "$0")/.."
dst=.carry/deps
rm -rf "$dst"
mkdir -p "$dst/include" "$dst/lib/cmake"
cp /usr/include/cxxopts.hpp "$dst/include/"
cp -r /usr/include/gtest /usr/include/gmock "$dst/include/"
cp /usr/lib/x86_64-linux-gnu/libgtest*.a /usr/lib/x86_64-linux-gnu/libgmock*.a "$dst/lib/"
cp -r /usr/lib/x86_64-linux-gnu/cmake/GTest "$dst/lib/cmake/"
# GTest's package files locate the libraries relative to their own folder: keep that layout.
sed -i 's|/usr/lib/x86_64-linux-gnu|${_IMPORT_PREFIX}/lib|g; s|/usr/include|${_IMPORT_PREFIX}/include|g' \
  "$dst"/lib/cmake/GTest/*.cmake
du -sh "$dst"
