#!/usr/bin/python3
"""Trains a small SDAR model on the arithmetic chat tasks of tools/arith_tasks.py with the SDAR
block-diffusion objective, for a bounded wall-clock time, and writes it as a HuggingFace folder
(the data, the loop, the evaluations and the output are tools/tiny_training.py's).

    train_tiny_sdar.py --out DIR --tokenizer-dir models/sdar-tiny-arith [--minutes 7] [--seed 0]
        [--layers 8 --hidden 256 --heads 4 --kv-heads 2 --head-dim 64 --intermediate 768]
        [--batch 1024 --lr 1e-3 --pool 1000000 --block-size 4]

Examples: the answer is padded with <|endoftext|> to the end of its block. Blocks start at
absolute multiples of B from the first prompt token, as in the engine, so the prompt's tail shares
the first block with the answer; completion positions are [prompt length, end of the answer's
last block).

Objective (reference/models.md §1.4): per example and block, a masking ratio t ~ U(eps, 1]; each
completion position of the block is masked with probability t, at least one per block. The input
is [x_noisy ; x_clean] with the SDAR training mask, both halves at positions 0..L-1; the loss is
the mean cross-entropy over the masked positions of the noisy half.

Evaluations decode at B = S = block size. config.json has the SDAR keys of tools/make_tiny_model.py.
"""
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_tiny_model  # noqa: E402
import tiny_training  # noqa: E402
import torch_sdar  # noqa: E402  (tiny_training puts tests/reference on the path)


class SdarObjective:
    def __init__(self, args, buckets, mask_id, device):
        self.block, self.eps, self.mask_id = args.block_size, args.eps, mask_id
        self.masks = [torch_sdar.sdar_training_mask(ids.shape[1], self.block, device) for ids, _, _ in buckets]

    def __call__(self, model, b, ids, starts, ends, generator):
        masked = tiny_training.completion_mask(starts, ends, ids.shape[1], self.block, self.eps, generator)
        return tiny_training.dual_stream_loss(model, ids, masked, self.mask_id, self.masks[b])


class Sdar(tiny_training.Architecture):
    name = "sdar"

    def add_arguments(self, parser):
        parser.add_argument("--head-dim", type=int, default=64)
        parser.add_argument("--block-size", type=int, default=4)

    def check_arguments(self, parser, args):
        if args.head_dim <= 0 or args.block_size <= 0:
            parser.error("--head-dim and --block-size must be positive")
        if args.head_dim % 2:
            parser.error("--head-dim must be even (RoPE pairs dimensions)")

    def config(self, args, vocab):
        return make_tiny_model.sdar_config(SimpleNamespace(**vars(args), arch="sdar"), vocab, "bfloat16")

    def examples(self, args, prompts, targets, pad_id):
        packed, starts, ends = tiny_training.pack(prompts, targets, args.block_size, pad_id)
        return packed, starts, ends, ends

    def objective(self, args, buckets, mask_id, device):
        return SdarObjective(args, buckets, mask_id, device)

    def decodes(self, args):
        return [(args.block_size, args.block_size)]


if __name__ == "__main__":
    tiny_training.main(Sdar(), description=__doc__.split("\n")[0])
