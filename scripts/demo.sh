#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh), then generates text with the default model.
# Until the trained demo model ships, the default model is a tiny random SDAR model made by
# tools/make_tiny_model.py (its output is gibberish; the point is the whole pipeline running).
# Extra arguments go to `jetengine generate`, e.g. scripts/demo.sh --prompt "Hi" --json
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
model=build/models/tiny-sdar
[ -f "$model/config.json" ] || /usr/bin/python3 tools/make_tiny_model.py --arch sdar --vocab qwen3 --seed 0 --out "$model"
if (($# == 0)); then
  set -- --prompt "What is 4821 + 937?" --chat --temperature 0 --max-tokens 16
fi
exec build/apps/cli/jetengine generate --model "$model" "$@"
