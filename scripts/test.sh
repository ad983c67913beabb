#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs every CPU test: CTest (C++), pytest (Python and
# the NumPy reference), and short libFuzzer runs of the safetensors parser and the tokenizer.
set -euo pipefail
cd "$(dirname "$0")/.."
JET_CMAKE_ARGS="-DJET_WERROR=ON ${JET_CMAKE_ARGS:-}" scripts/setup.sh
ctest --test-dir build --output-on-failure -j"$(nproc)"
/usr/bin/python3 -m pytest -q tests/python tests/reference

# Fuzzers need clang with AddressSanitizer; their library build is CPU-only (nvcc would not take
# the sanitizer flags). fuzz/*.cpp headers say how to run them longer.
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DJET_FUZZ=ON -DJET_TESTS=OFF -DJET_BENCH=OFF -DJET_CUDA=OFF -DJET_PYTHON=OFF -DJET_FUZZ_SECONDS=15
cmake --build build-fuzz -j"$(nproc)" --target fuzz_safetensors fuzz_tokenizer
ctest --test-dir build-fuzz -L fuzz --output-on-failure
