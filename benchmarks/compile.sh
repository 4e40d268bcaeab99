#!/usr/bin/env bash
# Reading and compiling at scale (issue 38): CoNLL-2000 train.txt ×COPIES (default 10: 2.1 M
# tokens) with chunking.template, `crfx train --max-iterations 1 --device cpu` on each thread count
# of THREADS_LIST (default "1 2"), RUNS times each: the data line's seconds (reading, compiling
# and the weight layout: what the first pass waits for), its reading time and tokens/s (the
# median is the figure to quote), the peak resident memory (/usr/bin/time), and the models of
# every thread count compared byte for byte. BASELINE=path/to/another/crfx runs it before each run
# (alternating, for a paired comparison on a busy machine) and compares its model too.
# FORMAT=crfsuite reads CoNLL-2000's CRFsuite attribute file instead (DATA/crfsuite/
# train.crfsuite.txt.gz ×COPIES: the same tokens, the chunking template's attributes written out).
# Usage: benchmarks/compile.sh      (COPIES=… THREADS_LIST=… RUNS=… OUT_DIR=… BUILD_DIR=… BASELINE=… DATA=…
#                                    FORMAT=conll|crfsuite)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
crfx=$build/crfx
out=${OUT_DIR:-$build/bench-compile}
copies=${COPIES:-10}
threads_list=${THREADS_LIST:-1 2}
runs=${RUNS:-3}
src=${DATA:-../shared/data/conll2000}
format=${FORMAT:-conll}
[ -x "$crfx" ] || scripts/build.sh
mkdir -p "$out"
if [ "$format" = crfsuite ]; then
  data=$out/train.x$copies.crfsuite.txt
  [ -s "$data" ] || for _ in $(seq "$copies"); do gzip -dc "$src/crfsuite/train.crfsuite.txt.gz"; done >"$data"
  input=(--format crfsuite)
else
  data=$out/train.x$copies.txt
  [ -s "$data" ] || for _ in $(seq "$copies"); do cat "$src/train.txt"; done >"$data"
  input=(-t "$src/chunking.template")
fi

echo "== $format data: $data"
echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "== commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ local changes)'), $(date -u +%F)"
# one run: BIN THREADS NAME → the reading's line, the peak and the process's CPU seconds
run() {
  /usr/bin/time -f "peak resident memory %M KB, cpu %U + %S s" "$1" train "${input[@]}" "$data" \
    --max-iterations 1 --device cpu --threads "$2" -m "$out/$3.model" 2>"$out/$3.err"
  echo "$(grep -o '[0-9.]* s, the reading.*tokens/s' "$out/$3.err" | sed 's/^/to the data line /'), $(grep '^peak' "$out/$3.err")"
}
first=
for t in $threads_list; do
  echo "== --threads $t"
  for r in $(seq "$runs"); do
    [ -z "${BASELINE:-}" ] || echo "baseline run $r: $(run "$BASELINE" "$t" "baseline$t")"
    echo "run $r: $(run "$crfx" "$t" "threads$t")"
  done
  if [ -n "${BASELINE:-}" ] && ! cmp -s "$out/baseline$t.model" "$out/threads$t.model"; then
    echo "model: DIFFERS from the baseline's"
    exit 1
  fi
  if [ -z "$first" ]; then
    first=$t
  elif cmp -s "$out/threads$first.model" "$out/threads$t.model"; then
    echo "model: byte-identical to --threads $first's"
  else
    echo "model: DIFFERS from --threads $first's"
    exit 1
  fi
done
