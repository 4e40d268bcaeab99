#!/usr/bin/env bash
# Installs what crfx needs from Debian's packages, skipping what is already there.
# (The CUDA toolkit is not a Debian package here: with nvcc at /usr/local/cuda the CUDA backend
# is built, without it the build is CPU-only.) python3-venv … python3-build: pip install . and
# python3 -m build --wheel offline, from Debian's setuptools (tests/python/packaging.sh).
# libopenmpi-dev openmpi-bin: data-parallel training under mpirun (-DCRFX_MPI, tests label mpi).
# universal-ctags: the functions' lengths (scripts/check-function-length.sh, test Style.*).
# `scripts/deps.sh --bench` also installs what the benchmarks use (gnuplot for the figures).
set -euo pipefail
packages=(cmake ninja-build g++ libcxxopts-dev libgtest-dev zlib1g-dev libboost-context-dev
          pybind11-dev python3-dev python3-pytest python3-sklearn clang-14 libclang-rt-14-dev
          python3-venv python3-pip python3-setuptools python3-wheel python3-build
          libopenmpi-dev openmpi-bin universal-ctags)
[ "${1:-}" = "--bench" ] && packages+=(gnuplot-nox)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  echo "installing: ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
fi
