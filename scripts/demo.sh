#!/usr/bin/env bash
# Sets everything up (scripts/setup.sh), then generates with the default model, the trained demo
# model models/sdar-tiny-arith (models/sdar-tiny-arith/README.md): without arguments it asks
# "What is 4821 + 937?" through the chat template, greedily, and prints 5758.
# Extra arguments replace that request and go to `jetengine generate`, e.g.
#   scripts/demo.sh --prompt "Sort: 42, 7, 19, 3" --chat --temperature 0 --json
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >/dev/null
model=models/sdar-tiny-arith
if (($# == 0)); then
  set -- --prompt "What is 4821 + 937?" --chat --temperature 0
fi
exec build/apps/cli/jetengine generate --model "$model" "$@"
