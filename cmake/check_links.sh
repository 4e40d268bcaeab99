#!/usr/bin/env bash
# crfx — the layering of the symbols: every crfx symbol an object of a part uses (undefined in it)
# must be defined in that part or in one it may use. The include check (check_layering.cmake) sees
# the sources; this one sees what the compiler made of them (a declaration reached some other way,
# a definition in the wrong folder). Run by the build after crfx_core (target check_links) and by
# ctest (Layering.*), from a manifest CMakeLists.txt writes:
#     part <name> <allowed parts...>
#     obj <part> <object file>
#   cmake/check_links.sh <manifest> [nm]
set -euo pipefail
manifest=$1
nm=${2:-nm}
declare -A allowed objs
while read -r kind part rest; do
  case $kind in
    part) allowed[$part]=$rest ;;
    obj) objs[$part]+=" $rest" ;;
  esac
done < "$manifest"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
crfx='^(vtable for |typeinfo for |typeinfo name for |VTT for )?crfx::'
for part in "${!objs[@]}"; do
  # BSD format: 16 hex digits (or spaces), the type at column 18, the name from column 20.
  # shellcheck disable=SC2086
  "$nm" -C ${objs[$part]} 2> /dev/null | grep -v ':$' | cut -c18- > "$tmp/$part.all" || true
  grep -v '^U ' "$tmp/$part.all" | cut -c3- | grep -E "$crfx" | sort -u > "$tmp/$part.def" || true
  grep '^U ' "$tmp/$part.all" | cut -c3- | grep -E "$crfx" | sort -u > "$tmp/$part.undef" || true
done

violations=0
for part in "${!objs[@]}"; do
  sort -u "$tmp/$part.def" $(for a in ${allowed[$part]:-}; do [ -f "$tmp/$a.def" ] && echo "$tmp/$a.def"; done) \
    > "$tmp/$part.reach"
  while IFS= read -r sym; do
    [ -n "$sym" ] || continue
    owner=$( (grep -lxF -- "$sym" "$tmp"/*.def 2> /dev/null || true) | head -1 | xargs -r basename | sed 's/\.def$//')
    where="no part"
    [ -z "$owner" ] || where="part '$owner'"
    echo "part '$part' uses $sym, defined in $where (it may use: ${allowed[$part]:-nothing})"
    violations=$((violations + 1))
  done < <(comm -23 "$tmp/$part.undef" "$tmp/$part.reach")
done
if [ "$violations" -gt 0 ]; then
  echo "links: $violations use(s) outside the allowed parts" >&2
  exit 1
fi
echo "links: ${#objs[@]} parts, every crfx symbol they use is defined where they may look"
