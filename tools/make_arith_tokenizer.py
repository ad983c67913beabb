#!/usr/bin/python3
"""Writes the tokenizer of the shipped demo model, models/sdar-tiny-arith: tokenizer.json and
tokenizer_config.json (byte-level BPE in the Qwen2 layout, SDAR's added tokens, a ChatML template).

    make_arith_tokenizer.py [--out models/sdar-tiny-arith] [--problems N] [--seed S]

The BPE merges are learned from the chats the model is trained on (tools/arith_tasks.py problems
in the ChatML layout), so "What", " is", "Sort", "user", "assistant" become single tokens while
digits stay one per token (the Qwen2 split isolates them), which keeps arithmetic digit-wise.
The output depends only on the arguments; the committed files come from the defaults.
"""
import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import arith_tasks  # noqa: E402
import tiny_tokenizer  # noqa: E402

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "models" / "sdar-tiny-arith"
MAX_MERGES = 200  # a cap only: learning stops once every piece of the corpus is one token
MAX_VOCAB = 512


def corpus(problems, seed):
    """The text of `problems` training chats between their special tokens, piece by piece:
    <|im_start|>user\\nQ<|im_end|>\\n<|im_start|>assistant\\nA<|im_end|>\\n."""
    rng = random.Random(seed)
    texts = []
    for _ in range(problems):
        question, answer = arith_tasks.make_problem(rng)
        texts += ["user\n" + question, "\n", "assistant\n" + answer, "\n"]
    return texts


def write_json(path, obj):
    path.write_text(json.dumps(obj, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=DEFAULT_OUT, help="model folder (created; other files are kept)")
    p.add_argument("--problems", type=int, default=5000, help="problems in the BPE training corpus")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.problems <= 0:
        p.error("--problems must be positive")
    tokenizer, config = tiny_tokenizer.chatml_sdar_tokenizer(corpus(args.problems, args.seed), MAX_MERGES)
    size = len(tokenizer["model"]["vocab"]) + len(tokenizer["added_tokens"])
    if size >= MAX_VOCAB:
        raise SystemExit(f"the vocabulary has {size} entries; the demo model's must stay below {MAX_VOCAB}")
    args.out.mkdir(parents=True, exist_ok=True)
    write_json(args.out / "tokenizer.json", tokenizer)
    write_json(args.out / "tokenizer_config.json", config)
    ids = {e["content"]: e["id"] for e in tokenizer["added_tokens"]}
    print(f"{args.out}: {size} tokens ({len(tokenizer['model']['merges'])} merges); added {ids}")


if __name__ == "__main__":
    main()
