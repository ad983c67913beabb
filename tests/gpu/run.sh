#!/usr/bin/env bash
# Builds and runs every GPU test (tests/gpu/test_*.{cpp,cu}) on a machine with an NVIDIA GPU.
#
#   tests/gpu/run.sh [BUILD_DIR]      (default BUILD_DIR: build-gpu under the repository root)
#
# Configures BUILD_DIR with the CUDA backend and the tests, builds the `gpu_tests` target with
# 16 jobs, then runs each test binary from the repository root. Logs go to $OUT when it is set
# (the device tool's result folder), else to BUILD_DIR/gpu-logs: build.log, tests.log (every
# test's output, one section each) and summary.txt (one line per test). Exits non-zero when the
# build or any test fails.
#   JET_GPU_DEPS=DIR      a prefix with dependencies the machine lacks (see tests/gpu/pack_deps.sh)
#   JET_GPU_SKIP_BUILD=1  run the binaries already in BUILD_DIR/tests/gpu
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(realpath -m "${1:-$repo/build-gpu}")
logs=${OUT:-$build/gpu-logs}
mkdir -p "$logs"
export PATH=/usr/local/cuda/bin:$PATH
if [[ -n ${JET_GPU_DEPS:-} ]]; then
  deps=$(realpath "$JET_GPU_DEPS")
  export PKG_CONFIG_PATH=$deps/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
  export CMAKE_PREFIX_PATH=$deps${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
fi

if [[ ${JET_GPU_SKIP_BUILD:-0} != 1 ]]; then
  if ! {
    cmake -S "$repo" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DJET_CUDA=ON -DJET_TESTS=ON \
      -DJET_BENCH=OFF -DJET_PYTHON=OFF -DCMAKE_CUDA_ARCHITECTURES=90a &&
      ninja -C "$build" -j16 gpu_tests
  } >"$logs/build.log" 2>&1; then
    echo "build failed; end of $logs/build.log:"
    tail -n 40 "$logs/build.log"
    exit 1
  fi
fi

shopt -s nullglob
tests=("$build"/tests/gpu/test_*)
if [[ ${#tests[@]} == 0 ]]; then
  echo "no GPU test binaries in $build/tests/gpu"
  exit 1
fi

status=0
: >"$logs/tests.log"
: >"$logs/summary.txt"
for bin in "${tests[@]}"; do
  [[ -f $bin && -x $bin ]] || continue
  name=$(basename "$bin")
  echo "===== $name" >>"$logs/tests.log"
  start=$SECONDS
  (cd "$repo" && "$bin") >"$logs/current.log" 2>&1
  rc=$?
  cat "$logs/current.log" >>"$logs/tests.log"
  line="$name: exit $rc, $(grep -c '^PASS' "$logs/current.log") passed, $(grep -c '^FAIL' "$logs/current.log") failed, $((SECONDS - start)) s"
  echo "$line" | tee -a "$logs/summary.txt"
  grep '^FAIL' "$logs/current.log"
  [[ $rc == 0 ]] || status=1
done
rm -f "$logs/current.log"
exit $status
