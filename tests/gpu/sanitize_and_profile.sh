#!/usr/bin/env bash
# The GPU checks that are too slow for every run: compute-sanitizer (memcheck and racecheck) on
# the op tests and memcheck on a CUDA-graph decode of the demo model, then the long-context
# benchmark of issue Core 6/6 (prompt 2,048 + 1,024 generated tokens at batch 32) with and without
# --profile, and Nsight Compute's speed-of-light of a few denoise attention launches of that shape.
#
#   tests/gpu/sanitize_and_profile.sh BUILD_DIR MODEL_DIR
#
# BUILD_DIR must hold tests/gpu/test_ops, apps/cli/jetengine (see
# tests/gpu/run.sh and bench/run_gpu.sh); MODEL_DIR is a model of SDAR-4B's shapes (bench/run_gpu.sh
# makes one, build/models/sdar-4b-shapes: config and tokenizer only, run with --load-format dummy).
# Logs go to $OUT when set, else BUILD_DIR/gpu-logs; a summary is printed. Each step has a time
# limit and runs even when an earlier one failed; the exit status is non-zero if any did.
set -uo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
build=$(realpath "${1:?usage: sanitize_and_profile.sh BUILD_DIR MODEL_DIR}")
model=$(realpath "${2:?usage: sanitize_and_profile.sh BUILD_DIR MODEL_DIR}")
logs=${OUT:-$build/gpu-logs}
mkdir -p "$logs"
export PATH=/usr/local/cuda/bin:$PATH
cd "$repo"
status=0

# step NAME SECONDS COMMAND...: output to NAME.log; prints the result and the log's last lines.
step() {
  local name=$1 limit=$2
  shift 2
  timeout "$limit" "$@" >"$logs/$name.log" 2>&1
  local rc=$?
  echo "== $name: exit $rc"
  tail -n 3 "$logs/$name.log"
  [[ $rc == 0 ]] || status=1
}

step memcheck_ops 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$build/tests/gpu/test_ops"
step racecheck_ops 150 compute-sanitizer --tool racecheck --error-exitcode 9 "$build/tests/gpu/test_ops"
# A streaming decode of several prompts repeats batch shapes, so CUDA graphs are captured and replayed.
prompts=$(mktemp --suffix .jsonl)
printf '%s\n' '"What is 4821 + 937?"' '"What is 90417 - 5828?"' '"Sort: 42, 7, 19, 3"' '"What is 512 * 7?"' >"$prompts"
step memcheck_engine 120 compute-sanitizer --tool memcheck --error-exitcode 9 "$build/apps/cli/jetengine" generate \
  --model models/sdar-tiny-arith --prompts "$prompts" --chat --temperature 0 --device cuda --max-active 2
rm -f "$prompts"

# A model folder without a checkpoint (bench/run_gpu.sh's) runs with random weights of its shapes.
weights=()
compgen -G "$model/*.safetensors" >/dev/null || weights=(--load-format dummy)
long=(--model "$model" "${weights[@]}" --device cuda --batches 32 --prompt-len 2048 --max-tokens 1024)
step long_context 150 "$build/apps/cli/jetengine" bench "${long[@]}"
step long_context_profile 200 "$build/apps/cli/jetengine" bench "${long[@]}" --profile
# Skips the 36 prefill launches of the warm-up and a few denoise ones; ncu replays each profiled
# kernel, so only 3 are taken. A small KV cache leaves ncu room to save and restore device memory
# for its replays (with the default budget, the cache takes ~120 GB and ncu failed to profile).
step ncu_attention 150 ncu --clock-control none -k regex:attention_kernel -s 40 -c 3 --section SpeedOfLight \
  --section LaunchStats --section Occupancy "$build/apps/cli/jetengine" bench --model "$model" "${weights[@]}" \
  --device cuda --batches 32 \
  --prompt-len 2048 --max-tokens 8 --enforce-eager --kv-cache-mb 16384
grep -E 'attention_kernel|DRAM Throughput|Memory Throughput|Duration|Achieved Occupancy|Grid Size' \
  "$logs/ncu_attention.log" | head -n 24
exit $status
