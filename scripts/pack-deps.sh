#!/usr/bin/env bash
# Packs what a build needs but the GPU machine lacks (it has nvcc, CMake, ninja; no apt, no
# network) into the ignored folder .carry/deps: the cxxopts header, GoogleTest's headers, static
# libraries and CMake package files, and zlib's headers and static library (in case the machine
# has no zlib development files; CMake's FindZLIB looks in the prefix first); and the CoNLL-2000
# and CoNLL-2002 files the GPU benchmarks read, into .carry/data (scripts/gpu-checks.sh passes
# them on). Carry `.carry` to that machine and configure with
#   scripts/build.sh -DCRFX_DEPS_DIR=$PWD/.carry/deps
set -euo pipefail
cd "$(dirname "$0")/.."
dst=.carry/deps
arch=x86_64-linux-gnu
rm -rf "$dst"
# Debian's layout under the prefix, unchanged: GTest's package files find the libraries relative
# to their own folder (four levels up from lib/$arch/cmake/GTest).
mkdir -p "$dst/include" "$dst/lib/$arch/cmake"
cp /usr/include/cxxopts.hpp /usr/include/zlib.h /usr/include/zconf.h "$dst/include/"
cp -r /usr/include/gtest /usr/include/gmock "$dst/include/"
cp /usr/lib/$arch/libgtest*.a /usr/lib/$arch/libgmock*.a /usr/lib/$arch/libz.a "$dst/lib/$arch/"
cp -r /usr/lib/$arch/cmake/GTest "$dst/lib/$arch/cmake/"
# The benchmarks' data: ../shared beside the checkout does not travel to the device machine.
data=.carry/data/conll2000
rm -rf "$data"
mkdir -p "$data"
cp ../shared/data/conll2000/train.txt ../shared/data/conll2000/test.txt \
  ../shared/data/conll2000/chunking.template "$data/"
mkdir -p "$data/crfsuite"  # benchmarks/compile.sh FORMAT=crfsuite (gpu-checks.sh's compile step)
cp ../shared/data/conll2000/crfsuite/train.crfsuite.txt.gz "$data/crfsuite/"
data2002=.carry/data/conll2002  # benchmarks/gpu.sh's NER shapes (Spanish, Dutch)
rm -rf "$data2002"
mkdir -p "$data2002"
cp ../shared/data/conll2002/esp.train ../shared/data/conll2002/ned.train "$data2002/"
du -sh "$dst" "$data" "$data2002"
