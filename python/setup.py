"""Builds the `jetengine` package: the extension `jetengine._jetengine` comes from the repository's
CMake build (target _jetengine), the rest is the pure-Python package next to this file.

Environment: JET_CMAKE_ARGS adds CMake arguments (e.g. "-DJET_CUDA=OFF"); CMAKE_BUILD_PARALLEL_LEVEL
sets the build's parallelism (default: every core).
"""
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

REPO = Path(__file__).resolve().parent.parent


class CMakeExtension(Extension):
    def __init__(self, name):
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        if not (REPO / "include" / "jet" / "engine.h").exists():
            sys.exit(f"setup.py: {REPO} is not a JetEngine checkout; build from the repository "
                     "(pip >= 21.3 builds in place: pip install ./python)")
        build_dir = Path(self.build_temp).resolve() / "cmake"
        args = ["-DCMAKE_BUILD_TYPE=Release", "-DJET_PYTHON=ON", "-DJET_TESTS=OFF", "-DJET_BENCH=OFF",
                f"-DPython3_EXECUTABLE={sys.executable}", *pybind11_hint(),
                *shlex.split(os.environ.get("JET_CMAKE_ARGS", ""))]
        if shutil.which("ninja") and not (build_dir / "CMakeCache.txt").exists():
            args += ["-G", "Ninja"]
        subprocess.run(["cmake", "-S", str(REPO), "-B", str(build_dir), *args], check=True)
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "_jetengine", "-j", jobs], check=True)
        built = sorted((build_dir / "python" / "jetengine").glob("_jetengine*"))
        if len(built) != 1:
            sys.exit(f"setup.py: expected one built _jetengine module in {build_dir}, found {built}")
        target = Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(built[0], target)


def pybind11_hint():
    """pip's pybind11 tells CMake where it is; Debian's pybind11-dev is found without help."""
    try:
        import pybind11
    except ImportError:
        return []
    return [f"-Dpybind11_DIR={pybind11.get_cmake_dir()}"]


setup(ext_modules=[CMakeExtension("jetengine._jetengine")], cmdclass={"build_ext": CMakeBuild})
