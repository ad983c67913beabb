#!/usr/bin/env bash
# Every GPU check in one call: tests/gpu/run.sh (build + the C++ GPU tests), the CLI build, then
# tests/gpu/engine_parity.py (GPU vs CPU decode), tests/gpu/torch_parity.py (engine vs the PyTorch
# reference), tests/gpu/hf_moe_parity.py (SDAR-MoE vs transformers' Qwen3-MoE),
# tests/gpu/hf_qwen2_parity.py (Fast-dLLM v2 and Dream vs transformers' Qwen2),
# tests/gpu/tensor_parallel_gpu.py (TP 2 vs 1; skips with fewer than 2 GPUs) and
# bench/torch_eager.py (the PyTorch eager baseline of Mode 1).
#
#   tests/gpu/run_all.sh [BUILD_DIR]      (default BUILD_DIR: build-gpu under the repository root)
#
# Every step runs even when an earlier one failed, so that one call reports everything. Logs go to
# $OUT when it is set, else to BUILD_DIR/gpu-logs: run.sh's own (build.log, tests.log, summary.txt),
# one <step>.log per step, and run_all.txt, the final table (also printed). Exits non-zero when any
# step fails. The Python steps need torch (torch_parity, hf_moe_parity, hf_qwen2_parity,
# torch_eager), transformers (hf_moe_parity, hf_qwen2_parity), numpy and safetensors.
#   PYTHON=...            the interpreter of the Python steps (default python3)
#   JET_GPU_DEPS=DIR      as for tests/gpu/run.sh
#   JET_GPU_SKIP_BUILD=1  as for tests/gpu/run.sh; also skips the CLI build
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(realpath -m "${1:-$repo/build-gpu}")
logs=${OUT:-$build/gpu-logs}
python=${PYTHON:-python3}
mkdir -p "$logs"
export PATH=/usr/local/cuda/bin:$PATH

rows=()
status=0
# step NAME COMMAND...: runs COMMAND from the repository root, output to the console and NAME.log.
step() {
  local name=$1 start=$SECONDS rc
  shift
  echo "===== $name: $*"
  (cd "$repo" && "$@") 2>&1 | tee "$logs/$name.log"
  rc=${PIPESTATUS[0]}
  rows+=("$(printf '%-14s %-6s %6d s   %s' "$name" "$([[ $rc == 0 ]] && echo ok || echo "FAIL:$rc")" \
    $((SECONDS - start)) "$logs/$name.log")")
  [[ $rc == 0 ]] || status=1
}

step gpu_tests tests/gpu/run.sh "$build"
[[ ${JET_GPU_SKIP_BUILD:-0} == 1 ]] || step cli_build ninja -C "$build" -j16 jetengine_cli forward_probe
step engine_parity "$python" tests/gpu/engine_parity.py "$build"
step torch_parity "$python" tests/gpu/torch_parity.py "$build"
step hf_moe_parity "$python" tests/gpu/hf_moe_parity.py "$build"
step hf_qwen2_parity "$python" tests/gpu/hf_qwen2_parity.py "$build"
step tensor_parallel "$python" tests/gpu/tensor_parallel_gpu.py "$build"
step torch_eager "$python" bench/torch_eager.py

{
  printf '%-14s %-6s %8s   %s\n' step result time log
  printf '%s\n' "${rows[@]}"
} | tee "$logs/run_all.txt"
exit $status
