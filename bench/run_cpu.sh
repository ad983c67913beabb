#!/usr/bin/env bash
# CPU throughput benchmark: a small random SDAR model (4 layers, hidden 256, Qwen3 vocabulary),
# batch 1 and 16, prompt 64, 128 completion tokens, B = 4, S = 4, greedy, low_confidence_static.
set -euo pipefail
cd "$(dirname "$0")/.."
model=${JET_BUILD_DIR:-build}/models/bench-sdar
[ -f "$model/config.json" ] || /usr/bin/python3 tools/make_tiny_model.py --arch sdar --vocab qwen3 --seed 0 \
  --layers 4 --hidden 256 --heads 8 --kv-heads 2 --head-dim 32 --intermediate 768 --out "$model"
${JET_BUILD_DIR:-build}/apps/cli/jetengine bench --model "$model" --device cpu --profile "$@"
