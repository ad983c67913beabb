#!/usr/bin/python3
"""Trains a small LLaDA model (bidirectional masked diffusion) on the arithmetic chat tasks of
tools/arith_tasks.py with LLaDA's SFT objective, for a bounded wall-clock time, and writes it as a
HuggingFace folder in LLaDA's layout (the data, the loop, the evaluations and the output are
tools/tiny_training.py's).

    train_tiny_llada.py --out DIR --tokenizer-dir models/sdar-tiny-arith [--minutes 7] [--seed 0]
        [--layers 8 --hidden 256 --heads 4 --kv-heads 4 --intermediate 768]
        [--batch 1024 --lr 1e-3 --pool 1000000] [--block-lengths 4,8,16,32,64]
        [--eval-blocks 64,8]

What the engine feeds a LLaDA model (docs/decoding.md §1), for block length B and a prompt of P
tokens: num_prefill = floor(P / B) * B prompt tokens are prefilled, and the denoise forwards of
block j (positions [num_prefill + jB, num_prefill + (j + 1)B); the first one starts with the
prompt's tail) see the prompt, the committed blocks before j and block j itself, never a later
position: unlike LLaDA's own generate, no masked future follows the block. With B > P that is pure
diffusion: one canvas [0, B) holding the whole prompt and B - P masks.

Examples: so each example trains every block of such an input at once. Per batch a block length
B is drawn from --block-lengths; the example's canvas ends where the last block its target (the
answer, then <|im_end|>) spans ends. Targets past <|im_end|> are <|endoftext|> (LLaDA's SFT pads
answers with EOS, reference/models.md §2.4), so in pure diffusion the model learns to fill the
rest of the canvas with it, and the engine stops at <|im_end|>.

Objective (LLaDA's masking objective, arXiv 2502.09992, cut into the engine's blocks): per example
and block a masking ratio t ~ U(eps, 1]; each completion position of the block (the prompt's tail
is never masked) is masked with probability t, at least one per block; the loss is the mean
cross-entropy over the masked positions. LLaDA weights each masked position by 1/t instead (its
likelihood bound); that estimator's variance made the tiny model learn no faster (bench/results/
has the comparison), and greedy decoding needs the argmax, not the bound.

Attention: the input is [x_noisy ; x_clean], both halves at positions 0..L-1, in segments: 0 =
the prefilled prompt blocks, then one per block from there. A noisy position sees its own
segment's noisy positions (the block, bidirectionally, with the prompt's tail) and the clean
positions of the earlier segments; a clean position sees the clean positions of its own segment
and the earlier ones: the K/V the engine caches for the prefill and for each committed block,
which were computed when they saw only themselves and what precedes them. With B > P (pure
diffusion) the canvas is one bidirectional segment holding the prompt, as in LLaDA's own SFT.

Evaluations decode at each B of --eval-blocks with S = B (one token per step for
low_confidence_static, as LLaDA's steps = gen_length), with each strategy of
tiny_training.STRATEGIES: by default 64, pure diffusion for every task (prompt and answer take at
most 56 tokens), and 8, semi-autoregressive.

config.json: the LLaDA keys of tools/make_tiny_model.py (model_type llada, block_type llama, OLMo
names, plain MHA by default, head_dim = hidden / heads, max_sequence_length 4096), mask token
<|MASK|>; tensors under the OLMo names (tests/reference/torch_sdar.py's LladaModel).
"""
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_tiny_model  # noqa: E402
import tiny_training  # noqa: E402
import torch_sdar  # noqa: E402  (tiny_training puts tests/reference on the path)


def canvas_ends(starts, ends, block):
    """Per example, where the canvas of the last block its target spans ends: [n] int64.
    starts = prompt lengths, ends = target ends (NumPy or torch integer arrays)."""
    prefill = starts // block * block
    last = (ends - 1 - prefill) // block  # index of the block that holds the target's last token
    return prefill + (last + 1) * block


def int_list(text):
    values = [int(v) for v in text.split(",")]
    if not values or min(values) <= 0:
        raise ValueError(f"expected positive integers separated by commas, got {text!r}")
    return values


def segments(starts, block, width):
    """Per example, each position's segment [n, width]: 0 for the prefilled prompt blocks, then
    1, 2, ... for the blocks from there."""
    col = torch.arange(width, device=starts.device)
    prefill = torch.div(starts, block, rounding_mode="floor") * block
    return torch.where(col >= prefill[:, None],
                       1 + torch.div(col - prefill[:, None], block, rounding_mode="floor"), 0)


class LladaObjective:
    def __init__(self, args, buckets, mask_id, device):
        self.block_lengths, self.eps, self.mask_id = args.block_lengths, args.eps, mask_id
        # Columns a batch of bucket b at block length B reads: its examples' longest canvas.
        self.widths = [[int(canvas_ends(starts, ends, block).max()) for block in self.block_lengths]
                       for _, starts, ends in buckets]
        self.rng = np.random.default_rng(args.seed + 1)  # host-side choice of B: no device sync

    def __call__(self, model, b, ids, starts, ends, generator):
        k = int(self.rng.integers(len(self.block_lengths)))
        block, width = self.block_lengths[k], self.widths[b][k]
        ids = ids[:, :width]
        canvas_end = canvas_ends(starts, ends, block)
        masked = tiny_training.completion_mask(starts, canvas_end, width, block, self.eps, generator)
        inside = torch.arange(width, device=ids.device)[None, :] < canvas_end[:, None]
        mask = torch_sdar.dual_stream_mask(segments(starts, block, width), inside)
        return tiny_training.dual_stream_loss(model, ids, masked, self.mask_id, mask)


class Llada(tiny_training.Architecture):
    name = "llada"
    kv_heads = None  # = --heads: LLaDA-8B is plain multi-head attention

    def add_arguments(self, parser):
        parser.add_argument("--block-lengths", default="4,8,16,32,64",
                            help="block lengths the examples are cut for, one drawn per batch")
        parser.add_argument("--eval-blocks", default="64,8", help="block lengths of the evaluations (S = B)")

    def check_arguments(self, parser, args):
        try:
            args.block_lengths, args.eval_blocks = int_list(args.block_lengths), int_list(args.eval_blocks)
        except ValueError as error:
            parser.error(f"--block-lengths / --eval-blocks: {error}")
        if args.hidden % args.heads or (args.hidden // args.heads) % 2:
            parser.error("--hidden must be a multiple of --heads with an even quotient (LLaDA's head_dim, "
                         "which RoPE splits in pairs)")

    def config(self, args, vocab):
        return make_tiny_model.llada_config(SimpleNamespace(**vars(args)), vocab, "bfloat16")

    def examples(self, args, prompts, targets, pad_id):
        packed, starts, ends = tiny_training.pack(prompts, targets, 1, pad_id)
        widths = np.max([canvas_ends(starts, ends, block) for block in args.block_lengths], axis=0)
        packed = np.pad(packed, ((0, 0), (0, int(widths.max()) - packed.shape[1])), constant_values=pad_id)
        return packed, starts, ends, widths

    def objective(self, args, buckets, mask_id, device):
        return LladaObjective(args, buckets, mask_id, device)

    def decodes(self, args):
        return [(block, block) for block in args.eval_blocks]


if __name__ == "__main__":
    tiny_training.main(Llada(), description=__doc__.split("\n")[0])
