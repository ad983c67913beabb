#!/usr/bin/env python3
"""SDAR-MoE: the engine's forward + greedy sampling against HF transformers' Qwen3-MoE, by
teacher-forced replay of the engine's own decode (tests/gpu/torch_parity.py's method and
comparisons), and the engine's GPU-vs-CPU greedy token agreement.

    python3 tests/gpu/hf_moe_parity.py BUILD_DIR      (needs torch, transformers and a CUDA GPU)

A random SDAR-MoE (4 layers, hidden 512, 8 q / 2 kv heads of 64, 24 experts of width 128, top-4,
norm_topk_prob, bf16) decodes 16 prompts of 1-40 tokens, 32 completion tokens each (greedy,
low_confidence_static, B = S = 4, ignore_eos) on --device cuda and --device cpu. The reference is
transformers' Qwen3MoeForCausalLM loaded from the same safetensors (SDAR-MoE is Qwen3-MoE with a
block-causal mask; the config is the checkpoint's with model_type qwen3_moe), fp32 on the GPU,
eager attention, given the block-causal mask as a 4D additive mask.

Bars. As torch_parity.py's for the fp32 CPU backend (99% of the items within 1e-3; near-ties
in routing are rare at 2^-24). For CUDA, routing sets the bar: a token whose k-th and (k+1)-th
router probabilities lie within bf16 rounding of each other takes another expert in that layer,
and every position that attends it moves by more than rounding, so no fixed share of positions
within TOL follows from the rounding alone. The bar is instead transformers' own model in bf16
(the same checkpoint, bf16 weights and activations) on the same replayed steps and tokens: the
engine must be within TOL = 0.05 of the fp32 reference for at least the share of items that
bf16 transformers is, less two standard errors of that share (sqrt(p (1 - p) / n)).
Prints PASS/FAIL lines and the token agreement; exits non-zero on any FAIL.
"""

import math
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hf_checkpoint  # noqa: E402
import torch_parity  # noqa: E402

MODEL_FLAGS = ["--arch", "sdar_moe", "--vocab", "small", "--seed", "7", "--layers", "4", "--hidden", "512",
               "--heads", "8", "--kv-heads", "2", "--head-dim", "64", "--experts", "24", "--top-k", "4",
               "--moe-intermediate", "128", "--dtype", "bf16"]
TOL = 0.05
BARS = {"cuda": (TOL, None), "cpu": (1e-3, 0.99)}  # cuda's share: set by bf16 transformers (header)


def load_hf_reference(model_dir, tmp, dtype_name):
    """transformers' Qwen3-MoE over the checkpoint on the GPU, in float32 or bfloat16."""
    return hf_checkpoint.load_as(model_dir, tmp, dtype_name, "qwen3_moe", "Qwen3MoeForCausalLM")


def block_causal_additive_mask(length, block):
    """[1, 1, L, L] fp32: 0 where query q may see key k (floor(k / B) <= floor(q / B)), else -inf-like."""
    import torch

    blocks = torch.arange(length, device="cuda") // block
    allowed = blocks[None, :] <= blocks[:, None]
    mask = torch.zeros(length, length, device="cuda")
    mask.masked_fill_(~allowed, torch.finfo(torch.float32).min)
    return mask[None, None]


def hf_logprobs(model, steps, mask_id):
    """torch_parity.replay_logprobs through transformers' model, given the block-causal mask."""
    def block_logits(ids, positions, length):
        mask = block_causal_additive_mask(length, torch_parity.BLOCK).expand(len(ids), 1, length, length)
        return model(input_ids=ids, attention_mask=mask.to(model.dtype), position_ids=positions).logits

    return torch_parity.replay_logprobs(steps, mask_id, block_logits)


def bf16_share_within(steps, outputs, fp32_logprobs, bf16_logprobs):
    """Share of the engine's committed tokens whose bf16-transformers logprob is within TOL of the
    fp32 one, and the item count."""
    diffs = [abs(lo[j][outputs[step.prompt]["completion_ids"][k]] - hi[j][outputs[step.prompt]["completion_ids"][k]])
             for step, hi, lo in zip(steps, fp32_logprobs, bf16_logprobs) for j, k in step.committed]
    return float(np.mean(np.asarray(diffs) <= TOL)), len(diffs)


def token_agreement(cuda_outs, cpu_outs):
    """(share of completion tokens equal at the same index, share of prompts equal throughout)."""
    same = total = whole = 0
    for a, b in zip(cuda_outs, cpu_outs):
        x, y = a["completion_ids"], b["completion_ids"]
        same += sum(1 for p, q in zip(x, y) if p == q)
        total += max(len(x), len(y))
        whole += x == y
    return same / max(total, 1), whole / max(len(cuda_outs), 1)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    cli = str(Path(sys.argv[1]) / "apps" / "cli" / "jetengine")
    torch_parity.BARS.update(BARS)
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        model_dir, mask_id, outputs = torch_parity.decode_random_model(cli, tmp, "sdar-moe-mid", MODEL_FLAGS, BARS)
        fp32_model = load_hf_reference(model_dir, tmp, "float32")
        bf16_model = load_hf_reference(model_dir, tmp, "bfloat16")
        for device, outs in outputs.items():
            steps = [s for i, out in enumerate(outs) for s in torch_parity.replay_steps(i, out, mask_id)]
            reference = hf_logprobs(fp32_model, steps, mask_id)
            if device == "cuda":
                share, n = bf16_share_within(steps, outs, reference, hf_logprobs(bf16_model, steps, mask_id))
                bar = max(0.0, share - 2 * math.sqrt(share * (1 - share) / max(n, 1)))
                print(f"     hf_moe_parity: bf16 transformers is within {TOL} of fp32 for {100 * share:.2f}% of "
                      f"{n} items: the cuda bar is {100 * bar:.2f}%")
                torch_parity.BARS["cuda"] = (TOL, bar)
            diffs = torch_parity.compare(outs, steps, reference)
            ok &= torch_parity.report(device, diffs, sum(len(o["completion_ids"]) for o in outs))
        tokens, prompts_equal = token_agreement(outputs["cuda"], outputs["cpu"])
        print(f"     hf_moe_parity: GPU vs CPU greedy decode: {100 * tokens:.1f}% of completion tokens equal, "
              f"{100 * prompts_equal:.1f}% of prompts equal throughout")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
