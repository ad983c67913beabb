#!/usr/bin/env bash
# Installs the jetengine package with pip on a machine that lacks the build's Debian libraries
# but has a compiler, CMake, Python with setuptools and pybind11 (and CUDA): the lent GPU machine
# (Ubuntu 24.04, Python 3.12). The libraries come as .deb files fetched on a Debian 12 machine:
#
#   apt-get download nlohmann-json3-dev libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 \
#     libpcre2-posix3 libutf8proc-dev libutf8proc2 libopenblas-dev libopenblas0 libopenblas0-pthread \
#     libopenblas-pthread-dev libgfortran5 pkgconf pkgconf-bin libpkgconf3
#
#   python/install_with_debs.sh DEB_DIR      (from the repository root)
#
# They are unpacked into /tmp/jet-deps (never into /). Processes that import jetengine need
#   export LD_LIBRARY_PATH=/tmp/jet-deps/usr/lib/x86_64-linux-gnu:/tmp/jet-deps/usr/lib/x86_64-linux-gnu/openblas-pthread
set -euo pipefail
debs=$(realpath "${1:?usage: python/install_with_debs.sh DEB_DIR}")
cd "$(dirname "$0")/.."
deps=/tmp/jet-deps
lib=$deps/usr/lib/x86_64-linux-gnu
mkdir -p $deps
for f in "$debs"/*.deb; do dpkg -x "$f" $deps; done
# Debian selects the OpenBLAS variant through alternatives, which dpkg -x does not set up.
ln -sf openblas-pthread/libopenblas.so $lib/libopenblas.so
ln -sf openblas-pthread/libopenblas.so.0 $lib/libopenblas.so.0
export PATH=$deps/usr/bin:/usr/local/cuda/bin:$PATH CMAKE_PREFIX_PATH=$deps/usr
export PKG_CONFIG_PATH=$lib/pkgconfig:$deps/usr/share/pkgconfig PKG_CONFIG_SYSROOT_DIR=$deps
export LD_LIBRARY_PATH=$lib:$lib/openblas-pthread:${LD_LIBRARY_PATH:-}
JET_CMAKE_ARGS="-DCMAKE_CUDA_ARCHITECTURES=90a ${JET_CMAKE_ARGS:-}" python3 -m pip install --no-build-isolation ./python
