#!/usr/bin/env bash
# crfx used from outside its tree: `cmake --install` into a fresh prefix; an outside CMake project
# (tests/install/CMakeLists.txt) finds it with find_package(crfx) and builds crfx_example, which
# trains a model through crfx::TrainingRun, saves it, loads it and tags a file (its model must be
# the installed crfx tool's, byte for byte, and its output the tool's `crfx tag`; the same program
# built with pkg-config's flags alone must give the same output), and the README's example
# (examples/train_and_tag.cpp), which trains on sentences in memory and tags them.
# Usage: tests/install/check.sh BUILD_DIR   (ctest: Install.FindPackageAndPkgConfig)
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
data=$src/tests/data
fail() { echo "install check: $*" >&2; exit 1; }
show() { cat "$1" >&2; fail "$2"; }

cmake --install "$build" --prefix "$prefix" > "$work/install.log" || show "$work/install.log" "cmake --install failed"
[ -x "$prefix/bin/crfx" ] || fail "no bin/crfx in the installed tree"
[ -f "$prefix/include/crfx/tagger.hpp" ] || fail "no include/crfx/tagger.hpp in the installed tree"
pc=$(find "$prefix" -name crfx.pc -print -quit)
[ -n "$pc" ] || fail "no crfx.pc in the installed tree"

generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
cmake -S "$src/tests/install" -B "$work/outside" "${generator[@]}" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" > "$work/configure.log" 2>&1 || show "$work/configure.log" "find_package(crfx) failed"
cmake --build "$work/outside" > "$work/build.log" 2>&1 || show "$work/build.log" "building against crfx::crfx failed"

train=$data/conll2000.train300.txt
test=$data/conll2000.test100.txt
"$work/outside/crfx_example" "$train" "$data/chunking.template" 5 "$work/lib.model" "$test" > "$work/lib.tagged"
"$prefix/bin/crfx" train "$train" -t "$data/chunking.template" --max-iterations 5 --device cpu -q -m "$work/cli.model"
cmp "$work/lib.model" "$work/cli.model" || fail "the library's model differs from crfx train's"
"$prefix/bin/crfx" tag "$test" -m "$work/lib.model" --device cpu -q > "$work/cli.tagged"
[ -s "$work/cli.tagged" ] || fail "crfx tag wrote nothing"
cmp "$work/lib.tagged" "$work/cli.tagged" || fail "the library's tagging differs from crfx tag's"

# examples/train_and_tag.cpp: sentences in memory, trained on and tagged (its training words
# tagged as they were labelled).
"$work/outside/crfx_train_and_tag" > "$work/in-memory.txt" || fail "examples/train_and_tag.cpp failed"
[ "$(cat "$work/in-memory.txt")" = "B-NP I-NP B-VP " ] || show "$work/in-memory.txt" "examples/train_and_tag.cpp tagged otherwise"

flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs crfx) || fail "pkg-config crfx failed"
# shellcheck disable=SC2086  # the flags are words
"${CXX:-c++}" -O1 "$src/tests/install/example.cpp" -o "$work/example-pc" $flags 2> "$work/pc.log" ||
  show "$work/pc.log" "building with pkg-config's flags ($flags) failed"
"$work/example-pc" "$train" "$data/chunking.template" 5 "$work/pc.model" "$test" > "$work/pc.tagged"
cmp "$work/pc.tagged" "$work/cli.tagged" || fail "the pkg-config build's tagging differs from crfx tag's"
# The Python package, where this build has it (CMakeLists.txt: installed where the build's
# interpreter looks below the prefix, as its sysconfig says): installed, on that interpreter's own
# sys.path below the build's install prefix (/usr/local: /usr/bin/python3 imports it with no
# PYTHONPATH), and importable from the temporary prefix by that interpreter.
python_note=""
if compgen -G "$build/python/crfx/_crfx*.so" > /dev/null; then
  python=$(sed -n 's/^Python_EXECUTABLE:[A-Z]*=//p' "$build/CMakeCache.txt")
  install_prefix=$(sed -n 's/^CMAKE_INSTALL_PREFIX:[A-Z]*=//p' "$build/CMakeCache.txt")
  [ -x "$python" ] || fail "no Python_EXECUTABLE in $build/CMakeCache.txt"
  so=$(find "$prefix" -name '_crfx*.so' -path '*/crfx/_crfx*' -print -quit)
  [ -n "$so" ] || fail "the build has the Python module, the installed tree has no crfx/_crfx*.so"
  python_dir=$(dirname "$(dirname "$so")")
  for file in __init__.py metrics.py; do
    [ -f "$python_dir/crfx/$file" ] || fail "no crfx/$file next to the installed $so"
  done
  rel=${python_dir#"$prefix"/}
  env -u PYTHONPATH "$python" -c '
import sys
prefix, rel = sys.argv[1:]
wanted = prefix + "/" + rel
if wanted in sys.path:
    print("on the path")
elif any(p.startswith(prefix + "/") for p in sys.path):
    sys.exit("%s: %s is not on its sys.path, which searches %s" % (sys.executable, wanted,
             ", ".join(p for p in sys.path if p.startswith(prefix + "/"))))
else:
    print("not searched")' "$install_prefix" "$rel" > "$work/python-path.txt" 2>&1 ||
    show "$work/python-path.txt" "the Python package is not installed where $python looks"
  [ "$(cat "$work/python-path.txt")" = "on the path" ] ||
    python_note=" (${install_prefix} is not a prefix $python searches: its path there not checked)"
  (cd "$work" && env -u PYTHONPATH "$python" -c '
import os, sys
sys.path.insert(0, sys.argv[1])
import crfx
assert os.path.dirname(crfx.__file__) == os.path.join(sys.argv[1], "crfx"), crfx.__file__
assert "lbfgs" in crfx.algorithms()' "$python_dir") > "$work/python-import.txt" 2>&1 ||
    show "$work/python-import.txt" "the installed Python package does not import"
fi
echo "installed crfx: find_package(crfx) and pkg-config builds train and tag as the crfx tool does${python_dir:+; the Python package, in <prefix>/$rel, imports$python_note}"
