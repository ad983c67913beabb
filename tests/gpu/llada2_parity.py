#!/usr/bin/env python3
"""LLaDA2-MoE on the GPU: the engine's teacher-forced logits against an independent PyTorch
forward of the family (tests/reference/torch_llada2.py, written from the HF modeling code), and
its decode on the GPU against the CPU backend.

    python3 tests/gpu/llada2_parity.py BUILD_DIR   (needs torch and a CUDA GPU; BUILD_DIR has
                                                    tests/forward_probe and apps/cli/jetengine)

A random LLaDA2 (4 layers, the first dense; hidden 512, 8 q / 2 kv heads of 64 with half of each
rotated; 32 experts of width 128 in 8 groups of which 4 are kept, top-4, a shared expert,
routed_scaling_factor 2.5, an fp32 expert bias; bf16) is written by tools/make_tiny_model.py.

* Teacher-forced logits: tests/forward_probe writes the K/V of random committed tokens as the
  engine does and prints the logits of a block of random ids and masks, on --device cuda and
  --device cpu; the reference is torch_llada2.forward in float32 over the whole sequence under
  the block-causal mask. Bars, per request, as the largest logit error over the largest |logit| of
  the reference: CPU (fp32) <= 1e-4; CUDA (bf16) <= 1.5 x the same forward's own error in
  bfloat16, plus 1e-3 (both round every activation to bf16; routing near-ties may flip in either).
* Decode: 32 random prompts (block 4, greedy, 24 tokens, ignore_eos) on the GPU and the CPU: the
  share of completion tokens equal is reported (near-flat random distributions flip on bf16
  near-ties), and the GPU's outputs with CUDA graphs must equal --enforce-eager's in every field.
Prints PASS/FAIL/INFO lines; exits non-zero on any FAIL.
"""

import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path


REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "reference"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from hf_qwen2_parity import decode, probe, relative_error, requests_for  # noqa: E402

MODEL_FLAGS = ["--arch", "llada2_moe", "--vocab", "small", "--seed", "13", "--layers", "4", "--hidden", "512",
               "--heads", "8", "--kv-heads", "2", "--head-dim", "64", "--intermediate", "1024", "--experts", "32",
               "--n-group", "8", "--topk-group", "4", "--top-k", "4", "--moe-intermediate", "128",
               "--shared-experts", "1", "--first-dense", "1", "--rotary-factor", "0.5", "--block-size", "4",
               "--dtype", "bf16"]
CPU_BAR = 1e-4
BF16_FACTOR, BF16_SLACK = 1.5, 1e-3


def torch_block_logits(config, weights, req):
    import torch
    import torch_llada2

    ids = req["committed"] + req["block"]
    segment = torch.arange(len(ids)) // req["block_length"]
    allowed = segment[None, :] <= segment[:, None]
    with torch.no_grad():
        logits = torch_llada2.forward(config, weights, ids, allowed)
    return logits[len(req["committed"]):].float().numpy()


def teacher_forced(build, model_dir):
    import torch
    import torch_llada2

    config = json.loads((model_dir / "config.json").read_text())
    requests = requests_for(config["vocab_size"], config["mask_token_id"], random.Random(4))
    _, fp32 = torch_llada2.load(str(model_dir), torch.float32)
    _, bf16 = torch_llada2.load(str(model_dir), torch.bfloat16)
    bf16.update({k: v for k, v in fp32.items() if k.endswith("expert_bias")})  # the checkpoint keeps it fp32
    cuda, cpu = probe(build, model_dir, "cuda", requests), probe(build, model_dir, "cpu", requests)
    ok = True
    for req, got_cuda, got_cpu in zip(requests, cuda, cpu):
        want = torch_block_logits(config, fp32, req)
        own_bf16 = relative_error(torch_block_logits(config, bf16, req), want)
        err_cpu, err_cuda = relative_error(got_cpu, want), relative_error(got_cuda, want)
        bar = BF16_FACTOR * own_bf16 + BF16_SLACK
        good = err_cpu <= CPU_BAR and err_cuda <= bar
        ok &= good
        print(f"{'PASS' if good else 'FAIL'} llada2_parity logits B={req['block_length']} "
              f"committed={len(req['committed'])}: cpu {err_cpu:.2e} (bar {CPU_BAR:.0e}), cuda {err_cuda:.2e} "
              f"(bar {bar:.2e}; torch bf16 {own_bf16:.2e})")
    return ok


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = Path(tmp) / "llada2"
        subprocess.run([sys.executable, str(REPO / "tools" / "make_tiny_model.py"), *MODEL_FLAGS, "--out",
                        str(model_dir)], check=True)
        ok = teacher_forced(sys.argv[1], model_dir)
        ok &= decode(sys.argv[1], model_dir, "llada2_parity", seed=6)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
