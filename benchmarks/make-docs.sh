#!/usr/bin/env bash
# Splits a CoNLL file into many small documents (a batch-tagging workload): SENTENCES sentences
# per document (default 2: ~47 tokens from CoNLL-2000), PER_DIR documents per subdirectory
# (default 100), written as DIR/000000/doc00000000.txt, DIR/000000/doc00000001.txt, … in input
# order, so that the documents' sorted concatenation is the input (blank-line separated, final
# blank line kept; the widths hold 10^8 documents: at 3 and 5 digits the order broke past 100,000,
# test ×200's 201,200 documents).
# Usage: benchmarks/make-docs.sh INPUT DIR
#   benchmarks/make-docs.sh build/bench-tag/test-x10.txt build/bench-tag/docs   # 10,060 documents
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: $0 INPUT DIR" >&2; exit 2; }
input=$1
dir=$2
rm -rf "$dir"
mkdir -p "$dir"
awk -v out="$dir" -v per_doc="${SENTENCES:-2}" -v per_dir="${PER_DIR:-100}" '
  function open_doc() {
    sub_dir = sprintf("%s/%06d", out, int(doc / per_dir))
    if (doc % per_dir == 0) system("mkdir -p \"" sub_dir "\"")
    file = sprintf("%s/doc%08d.txt", sub_dir, doc)
  }
  BEGIN { doc = 0; in_sentence = 0; sentences = 0; open_doc() }
  /^[ \t]*$/ {
    if (!in_sentence) next
    print "" > file
    in_sentence = 0
    if (++sentences % per_doc == 0) { close(file); ++doc; open_doc() }
    next
  }
  { print > file; in_sentence = 1 }
  END {
    if (in_sentence) { print "" > file; ++sentences }
    printf "%d sentences in %d documents under %s\n", sentences, int((sentences + per_doc - 1) / per_doc), out
  }' "$input"
