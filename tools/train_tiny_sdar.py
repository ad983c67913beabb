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

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_tiny_model  # noqa: E402
import tiny_training  # noqa: E402
import torch_sdar  # noqa: E402  (tiny_training puts tests/reference on the path)


def completion_mask(starts, ends, length, block, eps, generator):
    """[n, L] bool: which completion positions (starts <= pos < ends) to mask. One ratio
    t ~ U(eps, 1] per block; every block holding completion positions gets at least one mask."""
    n, device = starts.shape[0], starts.device
    col = torch.arange(length, device=device)
    eligible = (col >= starts[:, None]) & (col < ends[:, None])
    ratio = 1.0 - (1.0 - eps) * torch.rand(n, length // block, device=device, generator=generator)
    masked = eligible & (torch.rand(n, length, device=device, generator=generator)
                         < ratio.repeat_interleave(block, dim=1))
    shape = (n, length // block, block)
    needs_one = eligible.view(shape).any(-1) & ~masked.view(shape).any(-1)
    score = torch.rand(n, length, device=device, generator=generator).masked_fill(~eligible, -1.0)
    # A random eligible position of each block (no F.one_hot: it syncs to validate its input).
    pick = torch.arange(block, device=device) == score.view(shape).argmax(-1, keepdim=True)
    return masked | (pick & needs_one[..., None]).view(n, length)


class SdarObjective:
    def __init__(self, args, buckets, mask_id, device):
        self.block, self.eps, self.mask_id = args.block_size, args.eps, mask_id
        lengths = [ids.shape[1] for ids, _, _ in buckets]
        # Per bucket: both halves at positions 0..L-1, and the SDAR training mask.
        self.positions = [torch.arange(L, device=device).repeat(2)[None] for L in lengths]
        self.masks = [torch_sdar.sdar_training_mask(L, self.block, device) for L in lengths]

    def __call__(self, model, b, ids, starts, ends, generator):
        length = ids.shape[1]
        masked = completion_mask(starts, ends, length, self.block, self.eps, generator)
        noisy = ids.masked_fill(masked, self.mask_id)
        logits = tiny_training.forward_logits(model, torch.cat([noisy, ids], dim=1), self.positions[b],
                                              self.masks[b], rows=slice(0, length))
        ce = F.cross_entropy(logits.view(-1, logits.shape[-1]), ids.view(-1), reduction="none").view_as(ids)
        return (ce * masked).sum() / masked.sum().clamp(min=1)


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
