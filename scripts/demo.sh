#!/usr/bin/env bash
# The main job on the bundled example: install what is missing, build the crfx tool (that target
# alone: not the tests, benchmarks or Python module; scripts/build.sh builds everything), then
# train on 300 sentences of CoNLL-2000 with the standard chunking template, tag 100 test
# sentences and score them with conlleval's rules. Extra arguments go to cmake, as for
# scripts/build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
build=${BUILD_DIR:-build}
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
cmake --build "$build" --target crfx -j "$(nproc)"
crfx=$build/crfx
out=${DEMO_DIR:-$build/demo}
mkdir -p "$out"
"$crfx" train tests/data/conll2000.train300.txt --template tests/data/chunking.template \
  --algo lbfgs --c2 1 -m "$out/chunking.model" --log "$out/train.csv"
"$crfx" tag tests/data/conll2000.test100.txt -m "$out/chunking.model" -o "$out/test.tagged"
"$crfx" eval "$out/test.tagged"
