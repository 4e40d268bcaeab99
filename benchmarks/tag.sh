#!/usr/bin/env bash
# Tagging throughput: the whole `crfx tag` process (model load, reading, template expansion,
# Viterbi, writing the output atomically) with the model of the Foundation benchmark (L-BFGS,
# c2 = 1, chunking.template, every pair; trained here unless MODEL names one), on
#   one file   CoNLL-2000's test set repeated REPEAT times (473,770 tokens at REPEAT=10), at each
#              thread count of THREAD_LIST;
#   documents  the same sentences as 10,060 documents of two sentences (benchmarks/make-docs.sh),
#              in one run: into one output (-o) and one output per document (-O DIR), at each
#              thread count;
# each the median of RUNS runs (wall clock), with the output checked against the one-file run, and
# for the one file one more run's breakdown (crfx tag --timing: model and device, then each stage).
# Usage: benchmarks/tag.sh                       (CPU; THREAD_LIST="1 2", RUNS=5)
#        DEVICE=cuda THREAD_LIST=16 REPEAT=50 MODEL=chunk.model benchmarks/tag.sh
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
crfx=$build/crfx
data=${DATA:-../shared/data/conll2000}
out=${OUT_DIR:-$build/bench-tag}
device=${DEVICE:-cpu}
threads_list=${THREAD_LIST:-1 2}
repeat=${REPEAT:-10}
runs=${RUNS:-5}
[ -x "$crfx" ] || scripts/build.sh
mkdir -p "$out"
rm -rf "$out/tagged-dirs"

echo "== machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
echo "== commit: $(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (+ local changes)'), $(date -u +%F)"

model=${MODEL:-$out/chunk.model}
if [ ! -f "$model" ]; then
  echo "== training the model (L-BFGS, c2 = 1)"
  "$crfx" train "$data/train.txt" -t "$data/chunking.template" --algo lbfgs --c2 1 --device cpu --features all -q -m "$model"
fi

input=$out/test-x$repeat.txt
: > "$input"
for _ in $(seq "$repeat"); do cat "$data/test.txt" >> "$input"; done
tokens=$(grep -c . "$input")
docs=$out/docs-x$repeat
[ -d "$docs" ] || benchmarks/make-docs.sh "$input" "$docs" > /dev/null
ndocs=$(find "$docs" -type f | wc -l)
echo "== input: $repeat × test.txt = $tokens tokens; as $ndocs documents; device $device; median of $runs runs"

# median_seconds CMD...: runs CMD $runs times, prints the median wall-clock seconds.
median_seconds() {
  local times=()
  for _ in $(seq "$runs"); do
    local start end
    start=$(date +%s.%N)
    "$@"
    end=$(date +%s.%N)
    times+=("$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.3f", b - a }')")
  done
  printf '%s\n' "${times[@]}" | sort -n | awk '{ t[NR] = $1 } END { print (NR % 2) ? t[(NR + 1) / 2] : (t[NR / 2] + t[NR / 2 + 1]) / 2 }'
}

report() {  # report LABEL SECONDS [BASELINE_SECONDS]
  awk -v l="$1" -v s="$2" -v b="${3:-}" -v n="$tokens" 'BEGIN {
    printf "%-34s %7.3f s  %6.3f M tokens/s", l, s, n / s / 1e6
    if (b != "") printf "  (%.0f%% of one file)", 100 * b / s
    printf "\n" }'
}

for t in $threads_list; do
  one=$(median_seconds "$crfx" tag "$input" -m "$model" -o "$out/tagged.txt" --device "$device" --threads "$t" -q)
  report "one file, $t thread(s)" "$one"
  # One more run, with where its time went (crfx tag --timing).
  "$crfx" tag "$input" -m "$model" -o "$out/tagged.txt" --device "$device" --threads "$t" -q --timing 2>&1 |
    sed 's/^crfx tag: timing: /    one run: /'
  [ "$t" = "$(echo "$threads_list" | awk '{ print $1 }')" ] && first=$one
  many=$(median_seconds "$crfx" tag -r "$docs" -m "$model" -o "$out/tagged-docs.txt" --device "$device" --threads "$t" -q)
  report "$ndocs documents -o, $t thread(s)" "$many" "$one"
  cmp -s "$out/tagged.txt" "$out/tagged-docs.txt" || { echo "the documents' output differs from the file's" >&2; exit 1; }
  # Each run into a directory of its own: files deleted just before would make the file system
  # (ext4) search past their inodes, and time that rather than tagging. Removed at the end.
  mkdir -p "$out/tagged-dirs/$t"
  sync
  dir_run() { "$crfx" tag -r "$docs" -m "$model" -O "$(mktemp -d -p "$out/tagged-dirs/$t")" --device "$device" --threads "$t" -q; }
  each=$(median_seconds dir_run)
  report "$ndocs documents -O, $t thread(s)" "$each" "$one"
  for d in "$out/tagged-dirs/$t"/*; do
    (cd "$d" && find . -type f | sort | xargs cat) | cmp -s - "$out/tagged.txt" ||
      { echo "the per-document outputs in $d differ from the file's" >&2; exit 1; }
  done
done
rm -rf "$out/tagged-dirs"
awk -v a="$first" -v b="$one" 'BEGIN { printf "one file: last thread count %.2f× the first\n", a / b }'
"$crfx" eval "$out/tagged.txt" | sed -n 2p
