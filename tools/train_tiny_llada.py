#!/usr/bin/python3
"""Trains a small LLaDA model (bidirectional masked diffusion) on the arithmetic chat tasks of
tools/arith_tasks.py with LLaDA's SFT objective, for a bounded wall-clock time, and writes it as a
HuggingFace folder in LLaDA's layout (the data, the loop, the evaluations and the output are
tools/tiny_training.py's).

    train_tiny_llada.py --out DIR --tokenizer-dir models/sdar-tiny-arith [--minutes 7] [--seed 0]
        [--layers 8 --hidden 256 --heads 4 --kv-heads 4 --intermediate 768]
        [--batch 1024 --lr 1e-3 --pool 1000000] [--block-lengths 4,8,16,32,64]
        [--cached-prefix-share 0.5] [--eval-blocks 64,8]

What the engine feeds a LLaDA model (docs/decoding.md §1), for block length B and a prompt of P
tokens: num_prefill = floor(P / B) * B prompt tokens are prefilled, and the denoise forwards of
block j (positions [num_prefill + jB, num_prefill + (j + 1)B); the first one starts with the
prompt's tail) see the prompt, the committed blocks before j and block j itself, never a later
position: unlike LLaDA's own generate, no masked future follows the block. With B > P that is pure
diffusion: one canvas [0, B) holding the whole prompt and B - P masks.

Examples: so each example is one such engine input. Per batch a block length B is drawn from
--block-lengths; per example a block j, uniformly among the blocks the target spans (the answer,
then <|im_end|>); the canvas ends where block j ends. The prompt and the blocks before j are clean,
the completion positions of block j are the ones that may be masked. Targets past <|im_end|> are
<|endoftext|> (LLaDA's SFT pads answers with EOS, reference/models.md §2.4), so in pure diffusion
the model learns to fill the rest of the canvas with it, and the engine stops at <|im_end|>.

Objective (LLaDA's SFT loss, arXiv 2502.09992): per example a masking ratio t ~ U(eps, 1]; each of
the block's completion positions is masked with probability t (none forced, so the estimate stays
unbiased); the loss is the sum over masked positions of cross-entropy / t, divided by the number
of maskable positions (LLaDA divides by the answer length: here the part of it in the example's
block), averaged over the batch.

Attention: the network is bidirectional; every token of the canvas attends every other (key
padding past the canvas end is hidden). The engine's KV cache adds one difference in the
semi-autoregressive case (P >= B or a second block): the K/V of the prefilled prompt and of a
committed block were computed when they saw only themselves and what precedes them (model_np's
segment rule: key segment <= query segment). In --cached-prefix-share of the examples the attention
has that shape, so that those engine inputs are in distribution too; the others keep LLaDA's full
bidirectional view of the canvas. Pure-diffusion examples are one segment: both views coincide.

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
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import make_tiny_model  # noqa: E402
import tiny_training  # noqa: E402


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


class LladaObjective:
    def __init__(self, args, buckets, mask_id, device):
        self.block_lengths, self.share = args.block_lengths, args.cached_prefix_share
        self.eps, self.mask_id = args.eps, mask_id
        # Columns a batch of bucket b at block length B reads: its examples' longest canvas.
        self.widths = [[int(canvas_ends(starts, ends, block).max()) for block in self.block_lengths]
                       for _, starts, ends in buckets]
        self.rng = np.random.default_rng(args.seed + 1)  # host-side choice of B: no device sync

    def __call__(self, model, b, ids, starts, ends, generator):
        k = int(self.rng.integers(len(self.block_lengths)))
        block, width = self.block_lengths[k], self.widths[b][k]
        ids = ids[:, :width]
        n, device = ids.shape[0], ids.device
        col = torch.arange(width, device=device)

        def uniform(*shape):
            return torch.rand(*shape, device=device, generator=generator)

        prefill = torch.div(starts, block, rounding_mode="floor") * block
        blocks = torch.div(ends - 1 - prefill, block, rounding_mode="floor") + 1  # blocks the target spans
        begin = prefill + (uniform(n) * blocks).long() * block  # the example's block: [begin, end)
        end = begin + block
        maskable = (col >= torch.maximum(starts, begin)[:, None]) & (col < end[:, None])
        ratio = 1.0 - (1.0 - self.eps) * uniform(n)
        masked = maskable & (uniform(n, width) < ratio[:, None])
        noisy = ids.masked_fill(masked, self.mask_id)

        # Segments as the engine's cache has them: 0 = the prefill part, then one per block.
        in_blocks = col[None, :] >= prefill[:, None]
        segment = in_blocks * (1 + torch.div((col[None, :] - prefill[:, None]).clamp(min=0), block,
                                             rounding_mode="floor"))
        cached = (uniform(n) < self.share)[:, None, None]
        allowed = (col[None, None, :] < end[:, None, None]) \
            & (~cached | (segment[:, None, :] <= segment[:, :, None]))  # [n, query, key]
        logits = tiny_training.forward_logits(model, noisy, col[None], allowed)
        ce = F.cross_entropy(logits.view(-1, logits.shape[-1]), ids.reshape(-1), reduction="none").view_as(ids)
        per_example = (ce * masked).sum(1) / (ratio * maskable.sum(1).clamp(min=1))
        return per_example.mean()


class Llada(tiny_training.Architecture):
    name = "llada"
    kv_heads = None  # = --heads: LLaDA-8B is plain multi-head attention

    def add_arguments(self, parser):
        parser.add_argument("--block-lengths", default="4,8,16,32,64",
                            help="block lengths the examples are cut for, one drawn per batch")
        parser.add_argument("--cached-prefix-share", type=float, default=0.5,
                            help="share of examples whose prefix attends as the engine's KV cache has it")
        parser.add_argument("--eval-blocks", default="64,8", help="block lengths of the evaluations (S = B)")

    def check_arguments(self, parser, args):
        try:
            args.block_lengths, args.eval_blocks = int_list(args.block_lengths), int_list(args.eval_blocks)
        except ValueError as error:
            parser.error(f"--block-lengths / --eval-blocks: {error}")
        if not 0 <= args.cached_prefix_share <= 1:
            parser.error("--cached-prefix-share must be in [0, 1]")
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
