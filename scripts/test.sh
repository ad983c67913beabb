#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh) and runs every CPU test: CTest (C++) and pytest (Python).
set -euo pipefail
cd "$(dirname "$0")/.."
JET_CMAKE_ARGS="-DJET_WERROR=ON ${JET_CMAKE_ARGS:-}" scripts/setup.sh
ctest --test-dir build --output-on-failure -j"$(nproc)"
/usr/bin/python3 -m pytest -q tests/python tests/reference
