#!/usr/bin/env bash
#   bench/run_gpu.sh [dense|moe|llada|llada2|tp|all] [ENGINE FLAGS...]      (default all: dense and moe)
#
# dense: the GPU benchmarks on a random model of SDAR-4B's shapes (36 layers, hidden 2560, 32 q / 8 kv
# heads of 128, MLP 9728, Qwen3 vocabulary), B = S = 4, greedy, low_confidence_static:
# Mode 1 (the original's bench_throughput): prompts of 64 random tokens, 128 completion tokens
# each, batch 1/32/128/256/512; Mode 2 (streaming): 2,000 requests, prompts 50-600, max_tokens
# 64-512, max_active 128. Then Mode 1 at batch 128 with sampling: T = 1; T = 1 with top-k 1 (SDAR's
# own evaluation); T = 1 with top-p 0.95; T = 0.6 with top-k 20 and top-p 0.95 (Qwen3's config).
# The cuBLASLt GEMM floor of the same shapes: build/tests/gpu/test_gemm_speed (tests/gpu/run.sh).
# The model folder holds config.json and the tokenizer only, and the engine makes random weights of
# those shapes (--load-format dummy): seconds, where writing an 8.8 GB random checkpoint took two
# minutes. (Until 2026-12-01 run 10 the figures in bench/results used such a checkpoint, made by
# tools/make_tiny_model.py without --no-weights: Gaussian values instead of uniform ones, the same
# shapes and scales.)
#
# moe: the same Mode 1 batches and Mode 2 on a random model of SDAR-30B-A3B's
# shapes (48 layers, hidden 2048, 32 q / 4 kv heads of 128, 128 experts of width 768, top-8,
# norm_topk_prob, Qwen3 vocabulary; 61 GB of bf16 weights), B = S = 4, greedy. Its HF
# transformers baseline: bench/torch_moe_eager.py.
#
# llada (issue 25; needs torch): a random model of LLaDA-8B's shapes (32 layers, hidden 4096, 32
# heads of 128, MHA, MLP 12288, vocabulary 126,464, mask 126336; the small tokenizer, whose ids all
# lie below), greedy, low_confidence_static, prompt 64, the rows of bench/llada_shapes.py: B = 1024
# with the prompt inside the block (pure diffusion, 960 tokens) at batch 1 with 1,024 steps and at
# batch 8 with 128 (minutes otherwise; its forwards have the same rows); B = 64, S = 64 at batch 1
# and 64; B = 32, S = 32 at batch 1 and 32 (256 tokens each). Then, in the same run, the GEMM floor
# of the engine's forwards on those rows (bench/llada_gemm_floor.py) and LLaDA's own generate in
# plain PyTorch (bench/torch_llada_generate.py); engine ms/fwd against floor ms/fwd, tok/s
# against the peer's.
#
# llada2 (issue 28): a random model of LLaDA2.0-mini's shapes (20 layers, hidden 2048, 16 q / 4 kv
# heads of 128 with half-rotated RoPE, a dense first layer of width 5120, then 256 experts of width
# 512, top-8 in 4 of 8 groups with one shared expert; vocabulary 157,184, mask 156895), B = S = 32
# (one token a step, what its threshold decoder does on random weights), greedy, prompt 64, 256
# tokens, batch 1 and 128; then, in the same run, the bytes floor of those forwards
# (bench/moe_bytes_floor.py --model llada2-mini) and the same layers in plain PyTorch eager
# (bench/torch_llada2_eager.py).
#
# tp (issue 30; needs 2 GPUs and a build with NCCL): SDAR-4B, SDAR-30B-A3B and LLaDA-8B shapes (LLaDA
# at B = S = 32) at --tensor-parallel-size 1 and 2, Mode 1 at batch 1 and 128 (prompt 64, 128
# tokens), then batch 128 at TP 2 with --profile, whose all_reduce_sum row is the all-reduce share
# of the step time; and SDAR-30B-A3B at TP 2 with --enable-expert-parallel, batch 1 and 128.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${JET_BUILD_DIR:-build}
which=all
if [[ ${1:-} == dense || ${1:-} == moe || ${1:-} == llada || ${1:-} == llada2 || ${1:-} == tp || ${1:-} == all ]]; then
  which=$1
  shift
fi

# The folders of random models of the benchmarked shapes (config.json and the tokenizer), made once.
sdar_4b_shapes() {
  local model=$build/models/sdar-4b-shapes
  [ -f "$model/config.json" ] || python3 tools/make_tiny_model.py --arch sdar --vocab qwen3 --layers 36 --hidden 2560 \
    --heads 32 --kv-heads 8 --head-dim 128 --intermediate 9728 --no-weights --out "$model" >&2
  echo "$model"
}
sdar_30b_shapes() {
  local model=$build/models/sdar-30b-a3b-shapes
  [ -f "$model/config.json" ] || python3 tools/make_tiny_model.py --arch sdar_moe --vocab qwen3 --layers 48 \
    --hidden 2048 --heads 32 --kv-heads 4 --head-dim 128 --experts 128 --top-k 8 --moe-intermediate 768 \
    --no-weights --out "$model" >&2
  echo "$model"
}
llada_8b_shapes() {
  local model=$build/models/llada-8b-shapes
  [ -f "$model/config.json" ] || python3 tools/make_tiny_model.py --arch llada --layers 32 --hidden 4096 --heads 32 \
    --intermediate 12288 --vocab-size 126464 --mask-token-id 126336 --no-weights --out "$model" >&2
  echo "$model"
}

if [[ $which == dense || $which == all ]]; then
  model=$(sdar_4b_shapes)
  "$build"/apps/cli/jetengine bench --model "$model" --load-format dummy --device cuda --batches 1,32,128,256,512 \
    --prompt-len 64 --max-tokens 128 --mode2 2000 --max-active 128 "$@"
  for sampling in "--temperature 1" "--temperature 1 --top-k 1" "--temperature 1 --top-p 0.95" \
    "--temperature 0.6 --top-k 20 --top-p 0.95"; do
    # shellcheck disable=SC2086  # the flags split on purpose
    "$build"/apps/cli/jetengine bench --model "$model" --load-format dummy --device cuda --batches 128 \
      --prompt-len 64 --max-tokens 128 $sampling "$@"
  done
fi

if [[ $which == moe || $which == all ]]; then
  model=$(sdar_30b_shapes)
  "$build"/apps/cli/jetengine bench --model "$model" --load-format dummy --device cuda --batches 1,32,128,256,512 \
    --prompt-len 64 --max-tokens 128 --mode2 2000 --max-active 128 "$@"
fi

if [[ $which == llada ]]; then
  model=$(llada_8b_shapes)
  llada_bench() {
    "$build"/apps/cli/jetengine bench --model "$model" --load-format dummy --device cuda --prompt-len 64 "$@"
  }
  llada_bench --block-length 1024 --max-model-len 1024 --max-tokens 960 --denoising-steps 1024 --batches 1 "$@"
  llada_bench --block-length 1024 --max-model-len 1024 --max-tokens 960 --denoising-steps 128 --batches 8 "$@"
  llada_bench --block-length 64 --max-model-len 320 --max-tokens 256 --denoising-steps 64 --batches 1,64 "$@"
  llada_bench --block-length 32 --max-model-len 320 --max-tokens 256 --denoising-steps 32 --batches 1,32 "$@"
  python3 bench/llada_gemm_floor.py
  python3 bench/torch_llada_generate.py
fi

if [[ $which == llada2 ]]; then
  model=$build/models/llada2-mini-shapes
  [ -f "$model/config.json" ] || python3 tools/make_tiny_model.py --arch llada2_moe --layers 20 --hidden 2048 \
    --heads 16 --kv-heads 4 --head-dim 128 --intermediate 5120 --experts 256 --top-k 8 --moe-intermediate 512 \
    --n-group 8 --topk-group 4 --shared-experts 1 --first-dense 1 --rotary-factor 0.5 --block-size 32 \
    --vocab-size 157184 --mask-token-id 156895 --no-weights --out "$model"
  "$build"/apps/cli/jetengine bench --model "$model" --load-format dummy --device cuda --block-length 32 \
    --denoising-steps 32 --prompt-len 64 --max-tokens 256 --batches 1,128 "$@"
  python3 bench/moe_bytes_floor.py --model llada2-mini --batches 1,128
  python3 bench/torch_llada2_eager.py --batches 1,128
fi

if [[ $which == tp ]]; then
  for model in "$(sdar_4b_shapes)" "$(sdar_30b_shapes)" "$(llada_8b_shapes)"; do
    shape=()
    [[ $model == *llada* ]] && shape=(--block-length 32 --denoising-steps 32)
    for tp in 1 2; do
      "$build"/apps/cli/jetengine bench --model "$model" --load-format dummy --device cuda --tensor-parallel-size $tp \
        "${shape[@]}" --batches 1,128 --prompt-len 64 --max-tokens 128 "$@"
    done
    "$build"/apps/cli/jetengine bench --model "$model" --load-format dummy --device cuda --tensor-parallel-size 2 \
      "${shape[@]}" --batches 128 --prompt-len 64 --max-tokens 128 --profile "$@"
  done
  "$build"/apps/cli/jetengine bench --model "$(sdar_30b_shapes)" --load-format dummy --device cuda \
    --tensor-parallel-size 2 --enable-expert-parallel --batches 1,128 --prompt-len 64 --max-tokens 128 "$@"
fi
