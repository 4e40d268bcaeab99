#!/usr/bin/env bash
# Checks that docs/ARCHITECTURE.md names what exists (ctest: Docs.ArchitectureNamesWhatExists).
#   scripts/check-architecture.sh ROOT
# ROOT is the source tree. The checks:
#   (a) the page is at most MAX_LINES lines (the current design in brief; figures belong in
#       benchmarks/RESULTS.md, history in git);
#   (b) every repository path it names exists under ROOT: a backticked `...` or, in a fenced block,
#       a whitespace-separated word that looks like a path — containing a '/' and ending in a file
#       extension (host/train/train.cpp), or ending in '/' (kernels/emu/). Paths starting with
#       ../shared/ and globs (with '*' or '{') are not checked;
#   (c) every trainer of the registry (the names of the TrainerInfo entries in
#       host/optim/registry.cpp: {"name", "summary"…, make_…_trainer) appears in backticks;
#   (d) every part of cmake/check_layering.cmake (its set(allowed_<part> …) lines) has a row in the
#       layer table ("| part | files | may include |"), whose last cell lists exactly the parts
#       that set() allows ("—" for none).
# Prints each problem on a line of its own and exits 1, or prints one OK line.
set -euo pipefail

MAX_LINES=320
root=${1:?usage: scripts/check-architecture.sh ROOT}
doc="$root/docs/ARCHITECTURE.md"
registry="$root/host/optim/registry.cpp"
layering="$root/cmake/check_layering.cmake"
for f in "$doc" "$registry" "$layering"; do
  [ -f "$f" ] || { echo "missing: $f"; exit 1; }
done

problems=0
problem() {
  echo "$*"
  problems=$((problems + 1))
}

# (a) length
lines=$(wc -l <"$doc")
[ "$lines" -le "$MAX_LINES" ] || problem "docs/ARCHITECTURE.md: $lines lines, more than $MAX_LINES"

# (b) paths: backticked spans outside fenced blocks, words inside them.
path_re='^[A-Za-z0-9_.][A-Za-z0-9_.+/-]*$'
mapfile -t candidates < <(awk '
  /^[ \t]*```/ { fenced = !fenced; next }
  fenced { for (i = 1; i <= NF; i++) print $i; next }
  {
    line = $0
    while (match(line, /`[^`]+`/)) {
      print substr(line, RSTART + 1, RLENGTH - 2)
      line = substr(line, RSTART + RLENGTH)
    }
  }' "$doc" | sort -u)
paths=0
for c in "${candidates[@]}"; do
  [[ $c =~ $path_re ]] || continue
  [[ $c == */* ]] || continue
  [[ $c == */ || $c =~ \.[A-Za-z0-9]+$ ]] || continue
  [[ $c == ../shared/* ]] && continue
  paths=$((paths + 1))
  [ -e "$root/$c" ] || problem "no such path: $c"
done

# (c) trainers: the registry's entries are {"name", "summary" ["more summary"…], make_<x>_trainer, …}.
# A small lexer (comments, string and character literals with their escapes) turns the file into
# tokens, so that quotes in comments or summaries cannot pair wrongly; then the pattern is matched.
mapfile -t trainers < <(awk '
  { text = text $0 "\n" }
  END {
    n = length(text); i = 1; k = 0
    while (i <= n) {
      c = substr(text, i, 1); d = substr(text, i, 2)
      if (d == "//") { while (i <= n && substr(text, i, 1) != "\n") i++; continue }
      if (d == "/*") { j = index(substr(text, i + 2), "*/"); i = j ? i + j + 3 : n + 1; continue }
      if (c == "\"" || c == "\047") {
        q = c; s = ""; i++
        while (i <= n && substr(text, i, 1) != q) {
          if (substr(text, i, 1) == "\\") i++
          s = s substr(text, i, 1); i++
        }
        i++
        if (q == "\"") { kind[++k] = "S"; value[k] = s } else kind[++k] = "C"
        continue
      }
      if (c ~ /[A-Za-z_]/) {
        s = ""
        while (i <= n && substr(text, i, 1) ~ /[A-Za-z0-9_]/) { s = s substr(text, i, 1); i++ }
        kind[++k] = "I"; value[k] = s; continue
      }
      if (c !~ /[ \t\n]/) kind[++k] = c
      i++
    }
    for (t = 1; t + 4 <= k; t++) {
      if (kind[t] != "{" || kind[t + 1] != "S" || kind[t + 2] != "," || kind[t + 3] != "S") continue
      u = t + 4
      while (u <= k && kind[u] == "S") u++  # adjacent literals: one summary
      if (kind[u] == "," && kind[u + 1] == "I" && value[u + 1] ~ /^make_/) print value[t + 1]
    }
  }' "$registry")
[ "${#trainers[@]}" -gt 0 ] || problem "host/optim/registry.cpp: no trainer entries found (has the table changed shape?)"
for t in "${trainers[@]}"; do
  grep -qF "\`$t\`" "$doc" || problem "trainer not named (in backticks): $t"
done

# (d) parts: set(allowed_<part> <parts>…) against the layer table's rows.
mapfile -t allowed < <(sed -n 's/^[[:space:]]*set(allowed_\([a-z0-9_]*\)[[:space:]]*\(.*\))[[:space:]]*$/\1 \2/p' "$layering")
[ "${#allowed[@]}" -gt 0 ] || problem "cmake/check_layering.cmake: no set(allowed_<part> …) lines found"
normalise() {  # a list of parts: words, sorted, "" for none
  tr -d '"`' <<<"$1" | tr ',—-' '   ' | tr -s ' \t' '\n' | sed '/^$/d' | sort | paste -sd' ' -
}
for entry in "${allowed[@]}"; do
  part=${entry%% *}
  deps=${entry#"$part"}
  row=$(grep -E "^\|[[:space:]]*\`?$part\`?[[:space:]]*\|" "$doc" | head -n 1 || true)
  if [ -z "$row" ]; then
    problem "part missing from the layer table: $part"
    continue
  fi
  cell=$(sed -E 's/[[:space:]]*\|[[:space:]]*$//; s/.*\|//' <<<"$row")
  want=$(normalise "$deps")
  have=$(normalise "$cell")
  [ "$want" = "$have" ] || problem "layer table, part $part: may include '${have:-—}', cmake/check_layering.cmake says '${want:-—}'"
done

if [ "$problems" -gt 0 ]; then
  echo "docs/ARCHITECTURE.md: $problems problem(s)"
  exit 1
fi
echo "docs/ARCHITECTURE.md OK: $lines lines, $paths paths exist, ${#trainers[@]} trainers and ${#allowed[@]} parts named"
