#!/usr/bin/env bash
# The Python package as pip and python3 -m build make it (pyproject.toml, setup.py), offline: a
# venv (--system-site-packages: Debian's setuptools and wheel) gets `pip install
# --no-build-isolation --no-deps --no-index` of the source tree; a fresh interpreter of the venv,
# without PYTHONPATH and outside the source and build trees, imports crfx from the venv, checks
# that its version is CMakeLists.txt's project() VERSION, fits a tiny model, pickles and unpickles
# it and predicts the same labels; pip's record of the install and a wheel built by `python3 -m
# build --no-isolation --wheel` hold exactly crfx/__init__.py, crfx/metrics.py and
# crfx/_crfx*.so. CRFX_BUILD_DIR=BUILD_DIR: setup.py takes the _crfx built there instead of
# compiling the library again (README: From Python), so this runs in seconds.
# Usage: tests/python/packaging.sh BUILD_DIR PYTHON   (ctest: Python.packaging)
set -euo pipefail
build=$(cd "$1" && pwd)
python=$2
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "packaging check: $*" >&2; exit 1; }
show() { cat "$1" >&2; fail "$2"; }
unset PYTHONPATH PIP_REQUIRE_VIRTUALENV
export PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1 CRFX_BUILD_DIR=$build

version=$(sed -n 's/^ *project( *crfx  *VERSION  *\([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
[ -n "$version" ] || fail "no project(crfx VERSION …) in CMakeLists.txt"
"$python" -c "import venv, ensurepip" 2> /dev/null || fail "$python has no venv module (apt: python3-venv; scripts/deps.sh)"
"$python" -m venv --system-site-packages "$work/venv" > "$work/venv.log" 2>&1 || show "$work/venv.log" "python3 -m venv failed"
venv=$work/venv/bin/python
"$venv" -m pip install --no-build-isolation --no-deps --no-index "$src" > "$work/pip.log" 2>&1 ||
  show "$work/pip.log" "pip install --no-build-isolation --no-deps $src failed"

cd "$work"
"$venv" - "$version" > "$work/use.log" 2>&1 << 'EOF' || show "$work/use.log" "the pip-installed package failed"
import importlib.metadata, os, pickle, sys, sysconfig
import crfx
version = sys.argv[1]
where = os.path.dirname(crfx.__file__)
assert where == os.path.join(sysconfig.get_path("platlib"), "crfx"), f"crfx imported from {where}, not the venv"
assert os.path.dirname(crfx._crfx.__file__) == where, crfx._crfx.__file__
assert importlib.metadata.version("crfx") == version, (importlib.metadata.version("crfx"), version)
assert crfx.__version__ == version, f"crfx.__version__ {crfx.__version__}, CMakeLists.txt's project() VERSION {version}"
X = [[{"w": "the"}, {"w": "dog"}, {"w": "runs"}], [{"w": "a"}, {"w": "cat"}, {"w": "sleeps"}],
     [{"w": "the"}, {"w": "cat"}, {"w": "runs"}]]
y = [["DT", "NN", "VB"], ["DT", "NN", "VB"], ["DT", "NN", "VB"]]
crf = crfx.CRF(algorithm="lbfgs", max_iterations=30, device="cpu")
crf.fit(X, y)
predicted = crf.predict(X)
assert predicted == y, predicted
again = pickle.loads(pickle.dumps(crf))
assert again.predict(X) == predicted, again.predict(X)
print("ok", crfx.__file__)
EOF

# What pip installed: the package's three files (and their bytecode), besides its .dist-info.
record=$(find "$work/venv" -path "*/crfx-$version.dist-info/RECORD" -print -quit)
[ -n "$record" ] || fail "no crfx-$version.dist-info/RECORD in the venv"
check_files() {  # DESCRIPTION < the file list
  local listed wanted='^crfx/__init__\.py crfx/_crfx\.[^ ]+\.so crfx/metrics\.py$'
  listed=$(grep -v -e '\.dist-info/' -e '/__pycache__/' | LC_ALL=C sort | paste -sd' ' -)
  [[ "$listed" =~ $wanted ]] || fail "$1 holds: $listed"
}
cut -d, -f1 "$record" | check_files "pip's install"

# A wheel, as python3 -m build makes it (--no-isolation: offline, from Debian's packages).
"$python" -c "import build" 2> /dev/null || fail "$python has no build module (apt: python3-build; scripts/deps.sh)"
(cd "$src" && "$python" -m build --no-isolation --wheel --outdir "$work/dist" .) > "$work/build.log" 2>&1 ||
  show "$work/build.log" "python3 -m build --no-isolation --wheel failed"
wheel=$(find "$work/dist" -name "crfx-$version-*.whl" -print -quit)
[ -n "$wheel" ] || show "$work/build.log" "no crfx-$version-*.whl"
"$python" -c "import sys, zipfile; print('\n'.join(zipfile.ZipFile(sys.argv[1]).namelist()))" "$wheel" |
  check_files "the wheel $(basename "$wheel")"
echo "pip install and python3 -m build --wheel: crfx $version ($(basename "$wheel")) imports from the venv, fits, pickles and predicts"
