#!/usr/bin/env bash
# Lists every function longer than MAX_LINES lines in the sources outside the tests
# (ctest: Style.NoLongFunctions).
#   scripts/check-function-length.sh ROOT
# ROOT is the source tree. Read: the C++ and CUDA sources and headers of include/, host/, kernels/
# (the emulation under kernels/emu/ too), factory/, apps/, python/, benchmarks/ and examples/;
# tests/ is not.
# A function's length is its lines from the first of its signature to its closing brace, as
# Universal Ctags (ctags --fields=+ne) finds them; a lambda counts within its function and on its
# own. Prints each long function on a line, "path:line: name: N lines", and exits 1, or prints one
# OK line. Needs Universal Ctags (apt: universal-ctags); exits 2 without it.
set -euo pipefail

MAX_LINES=100
root=${1:?usage: scripts/check-function-length.sh ROOT}

# Exemptions, "path:name" as printed. Each only while it is being mended, and says by what.
exempt=(
)

if ! ctags --version 2>/dev/null | grep -q 'Universal Ctags'; then
  echo "scripts/check-function-length.sh: Universal Ctags is needed (apt: universal-ctags)" >&2
  exit 2
fi

cd "$root"
dirs=()
for d in include host kernels factory apps python benchmarks examples; do
  [ -d "$d" ] && dirs+=("$d")
done
mapfile -t sources < <(find "${dirs[@]}" -type f \
  \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)
[ "${#sources[@]}" -gt 0 ] || { echo "no sources under $root"; exit 1; }

in_list() {  # in_list WORD LIST…
  local w=$1 e
  shift
  for e in "$@"; do [ "$e" = "$w" ] && return 0; done
  return 1
}

# One row a function: path, first line, last line, scope, name (tab-separated).
long=()
used=()  # the exemptions still needed
functions=0
while IFS=$'\t' read -r path first last scope name; do
  [[ $last =~ ^[0-9]+$ ]] || continue  # no end found (a declaration a macro hides, say)
  functions=$((functions + 1))
  lines=$((last - first + 1))
  [ "$lines" -gt "$MAX_LINES" ] || continue
  # "crfx::__anon…::Class" → "Class"; a lambda is named by the function that holds it.
  scope=$(sed -E 's/(^|::)__anon[0-9a-f]+//g; s/^crfx(::|$)//; s/^:://' <<<"$scope")
  if [[ $name == __anon* ]]; then
    name="a lambda in ${scope:-?}"
  elif [ -n "$scope" ] && [[ $scope != "-" ]]; then
    name="$scope::$name"
  fi
  if in_list "$path:$name" "${exempt[@]}"; then
    used+=("$path:$name")
    continue
  fi
  long+=("$path:$first: $name: $lines lines")
done < <(ctags -x --_xformat=$'%F\t%n\t%{end}\t%{scope}\t%N' --fields=+ne --kinds-C++=f \
           --language-force=C++ "${sources[@]}")

# An exemption no longer needed goes, so that the function cannot grow back unseen.
for e in "${exempt[@]}"; do
  in_list "$e" "${used[@]}" || long+=("$e: exempt in scripts/check-function-length.sh but not over $MAX_LINES lines: remove the exemption")
done

if [ "${#long[@]}" -gt 0 ]; then
  printf '%s\n' "${long[@]}"
  echo "${#long[@]} problem(s): split a long function along its seams"
  exit 1
fi
echo "functions OK: ${#sources[@]} files, $functions functions, none over $MAX_LINES lines but the ${#exempt[@]} exempt"
