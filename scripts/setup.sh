#!/usr/bin/env bash
# Installs the Debian packages JetEngine needs (only those missing), then configures and builds
# into ./build. Safe to run again: it does only what is left to do.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(cmake ninja-build g++ clang libclang-rt-14-dev pkg-config libgtest-dev libgmock-dev libbenchmark-dev
  nlohmann-json3-dev libpcre2-dev libutf8proc-dev libopenblas-dev libomp-dev libboost-dev libcpp-httplib-dev
  python3 python3-dev python3-numpy python3-pytest python3-jinja2 python3-tqdm python3-pip python3-torch pybind11-dev clang-format
  chromium)  # chromium: tests/python/test_viz_browser.py drives the /viz page headless
# python3-torch: torch.distributed for the data-parallel tests (gloo on the CPU) and the PyTorch references.
# python3-pip: the README's `pip install ./python` into a venv that sees the system's packages.
# Node.js and npm (tests/python/test_openai_node_client.py) from Debian, unless a node with its npm
# is already there (NodeSource's nodejs bundles npm, and conflicts with Debian's npm package).
command -v node >/dev/null && command -v npm >/dev/null || packages+=(nodejs npm)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  sudo_cmd=()
  [ "$(id -u)" -eq 0 ] || sudo_cmd=(sudo)
  "${sudo_cmd[@]}" apt-get update -q
  DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# Add the CUDA toolkit to PATH when it is installed but not on PATH, so JET_CUDA turns on by itself.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then
  export PATH=/usr/local/cuda/bin:$PATH
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release ${JET_CMAKE_ARGS:-}
cmake --build build -j"$(nproc)"
