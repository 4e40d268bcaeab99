"""The crfx Python package (python/crfx and its extension _crfx) for pip and python3 -m build.

The metadata is in pyproject.toml; the version is CMakeLists.txt's project(crfx VERSION …). The
extension is built by CMake, the pybind11 cmake_example way: build_ext configures the repository
(-DCRFX_BUILD_TESTS=OFF -DCRFX_PYTHON=ON, CUDA when nvcc is found, as the normal build does) for
the interpreter running it, builds the target _crfx alone and copies _crfx*.so into the package.

Environment:
  CRFX_BUILD_DIR  an existing, built CMake build directory (e.g. build): its _crfx
                  (CRFX_BUILD_DIR/python/crfx/_crfx*.so) is taken as it is, nothing is configured
                  or compiled (build it first: cmake --build build --target _crfx); it must have
                  been built for this interpreter's ABI. pip's own build files then go to
                  CRFX_BUILD_DIR/setuptools.
  CMAKE_ARGS      more arguments for the CMake configure step (e.g. -DCRFX_CUDA=OFF).
  CMAKE_GENERATOR, CMAKE_BUILD_PARALLEL_LEVEL  as CMake reads them (default: Ninja where found).
Without CRFX_BUILD_DIR the build files, its CMake tree included (kept, so that the next build is
incremental), are in build-python/ of the source tree.
"""
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.sdist import sdist

ROOT = Path(__file__).resolve().parent
PREBUILT = os.environ.get("CRFX_BUILD_DIR", "")


def cmake_version():
    """The version in CMakeLists.txt's project() (the one number for the tool, library and package)."""
    text = (ROOT / "CMakeLists.txt").read_text(encoding="utf-8")
    match = re.search(r"^\s*project\(\s*crfx\s+VERSION\s+([0-9]+(?:\.[0-9]+)*)", text, re.MULTILINE)
    if not match:
        sys.exit("setup.py: no project(crfx VERSION …) in CMakeLists.txt")
    return match.group(1)


def build_base():
    """Where setuptools writes (crfx.egg-info included): not the source tree's build/, CMake's."""
    if PREBUILT and not (Path(PREBUILT) / "CMakeCache.txt").is_file():
        sys.exit(f"setup.py: CRFX_BUILD_DIR={PREBUILT} is not a CMake build directory")
    base = Path(PREBUILT).resolve() / "setuptools" if PREBUILT else ROOT / "build-python"
    base.mkdir(parents=True, exist_ok=True)
    return str(base)


class CMakeExtension(Extension):
    """An extension built by CMake (target `target`), not from sources listed here."""

    def __init__(self, name, target):
        super().__init__(name, sources=[])
        self.target = target


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        if PREBUILT:
            build_dir = Path(PREBUILT).resolve()
            print(f"setup.py: taking {ext.target} from CRFX_BUILD_DIR={build_dir} (not configured or built here)")
        else:
            build_dir = Path(self.build_temp).resolve() / "cmake"
            self.run_cmake(build_dir, ext.target)
        built = build_dir / "python" / "crfx" / (ext.target + suffix)
        if not built.is_file():
            found = sorted(p.name for p in built.parent.glob(ext.target + ".*"))
            if found:  # e.g. built for another Python version
                sys.exit(f"setup.py: {built.parent} has {', '.join(found)}, not {built.name} for {sys.executable}")
            sys.exit(f"setup.py: no {built}: build it (cmake --build {build_dir} --target {ext.target})")
        dest = Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built, dest)
        shutil.copymode(built, dest)

    def run_cmake(self, build_dir, target):
        configure = ["cmake", "-S", str(ROOT), "-B", str(build_dir),
                     "-DCRFX_BUILD_TESTS=OFF", "-DCRFX_CUDA=AUTO", "-DCRFX_PYTHON=ON",
                     f"-DPython_EXECUTABLE={sys.executable}"]
        if "CMAKE_GENERATOR" not in os.environ and not (build_dir / "CMakeCache.txt").exists() and shutil.which("ninja"):
            configure += ["-G", "Ninja"]
        try:  # pybind11 from pip rather than Debian's pybind11-dev: tell CMake where
            import pybind11
            configure.append(f"-Dpybind11_DIR={pybind11.get_cmake_dir()}")
        except ImportError:
            pass
        configure += shlex.split(os.environ.get("CMAKE_ARGS", ""))
        build = ["cmake", "--build", str(build_dir), "--target", target]
        if "CMAKE_BUILD_PARALLEL_LEVEL" not in os.environ:
            build += ["--parallel", str(self.parallel or os.cpu_count() or 1)]
        for command in (configure, build):
            print("setup.py:", shlex.join(command), flush=True)
            subprocess.run(command, check=True)


class NoSdist(sdist):
    def run(self):
        sys.exit("setup.py: no source distribution (it would lack the C++ sources); build a wheel "
                 "from the source tree: python3 -m build --no-isolation --wheel, or pip install .")


setup(
    version=cmake_version(),
    packages=["crfx"],
    package_dir={"crfx": "python/crfx"},
    ext_modules=[CMakeExtension("crfx._crfx", target="_crfx")],
    cmdclass={"build_ext": CMakeBuild, "sdist": NoSdist},
    options={"build": {"build_base": build_base()}, "egg_info": {"egg_base": build_base()}},
    zip_safe=False,
)
