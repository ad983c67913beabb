#!/usr/bin/env python3
"""Fast-dLLM v2 and Dream (the Qwen2 families: q/k/v biases, shifted logits) on the GPU: the
engine's teacher-forced logits against HF transformers' Qwen2, and its decode on the GPU against
the CPU backend.

    python3 tests/gpu/hf_qwen2_parity.py BUILD_DIR   (needs torch, transformers and a CUDA GPU;
                                                      BUILD_DIR has tests/forward_probe and apps/cli/jetengine)

For each family a random model (4 layers, hidden 1024, 16 q / 4 kv heads of 64, MLP 2816, bf16,
nonzero q/k/v biases) is written by tools/make_tiny_model.py. Both families are Qwen2 networks;
transformers' Qwen2ForCausalLM loads the same safetensors (the config with model_type qwen2), in
fp32 and in bf16 on the GPU, eager attention, and is given the family's attention rule as a 4D
additive mask: block-causal (key block <= query block) for Fast-dLLM v2, LLaDA's segments for
Dream (the prefilled part one segment, then one per block; docs/decoding.md §1).

* Teacher-forced logits: tests/forward_probe writes the K/V of random committed tokens as the
  engine does (a prefill forward, then a save forward per block) and prints the logits of a block
  of random ids and masks, on --device cuda and --device cpu. Bars, per request, as the largest
  logit error over the largest |logit| of the fp32 reference: CPU (fp32) <= 1e-4; CUDA (bf16
  weights and activations) <= 1.5 x bf16 transformers' own error on the same request, plus 1e-3
  (both round every activation to bf16; the engine's roundings differ in place, not in count).
* Decode: 32 random prompts (1-40 tokens, block 4, greedy, 24 tokens, ignore_eos) on the GPU and
  the CPU: the share of completion tokens equal is reported (a random model's near-flat
  distributions make bf16-vs-fp32 near-ties flip an argmax, after which a sequence diverges), and
  the GPU's outputs with CUDA graphs must equal --enforce-eager's in every field (head-step
  entries change the forward's shape; a graph replaying a stale shape would show here).
Prints PASS/FAIL/INFO lines; exits non-zero on any FAIL.
"""

import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import hf_checkpoint  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SIZES = ["--vocab", "small", "--layers", "4", "--hidden", "1024", "--heads", "16", "--kv-heads", "4",
         "--intermediate", "2816", "--dtype", "bf16"]
FAMILIES = {"fast_dllm_v2": ["--block-size", "4"], "dream": []}
# Keys of the engine families that transformers' Qwen2Config does not know.
QWEN2_DROPS = ("bd_size", "mask_token_id")
CPU_BAR = 1e-4
BF16_FACTOR, BF16_SLACK = 1.5, 1e-3
NUM_PROMPTS, MAX_TOKENS, BLOCK = 32, 24, 4


def requests_for(vocab, mask_id, rng):
    """Teacher-forced cases: a prefilled part, then committed blocks, then a block of random ids
    and masks, at block lengths 4 and 32, with and without a prefill."""
    out = []
    for B, prefill, blocks in [(4, 8, 0), (4, 12, 1), (4, 0, 1), (4, 4, 3), (32, 32, 1), (32, 0, 0)]:
        committed = [rng.randrange(3, vocab) for _ in range(prefill + blocks * B)]
        block = [mask_id if rng.random() < 0.5 else rng.randrange(3, vocab) for _ in range(B)]
        out.append(dict(committed=committed, num_prefill=prefill, block=block, block_length=B))
    return out


def probe(build, model_dir, device, requests):
    lines = "".join(json.dumps(r) + "\n" for r in requests)
    done = subprocess.run([str(Path(build) / "tests" / "forward_probe"), "--model", str(model_dir), "--device",
                           device], input=lines, capture_output=True, text=True, check=True)
    return [np.array(json.loads(line)["logits"]) for line in done.stdout.splitlines()]


def hf_block_logits(model, family, req):
    """The logits of the block's positions from one forward of committed + block under the
    family's attention rule."""
    import torch

    ids = req["committed"] + req["block"]
    length, B, prefill = len(ids), req["block_length"], req["num_prefill"]
    x = torch.arange(length, device="cuda")
    if family == "dream":
        segment = torch.where(x < prefill, 0, 1 + (x - prefill) // B)
    else:
        segment = x // B
    allowed = segment[None, :] <= segment[:, None]
    mask = torch.zeros(length, length, device="cuda")
    mask.masked_fill_(~allowed, torch.finfo(torch.float32).min)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids], device="cuda"), attention_mask=mask[None, None].to(model.dtype),
                       position_ids=x[None]).logits[0]
    return logits[len(req["committed"]):].float().cpu().numpy()


def relative_error(got, want):
    return float(np.abs(got - want).max() / np.abs(want).max())


def teacher_forced(build, family, model_dir, tmp):
    config = json.loads((model_dir / "config.json").read_text())
    rng = random.Random(3)
    requests = requests_for(config["vocab_size"], config["mask_token_id"], rng)
    fp32, bf16 = (hf_checkpoint.load_as(model_dir, tmp, dtype, "qwen2", "Qwen2ForCausalLM", drop=QWEN2_DROPS)
                  for dtype in ("float32", "bfloat16"))
    cuda, cpu = probe(build, model_dir, "cuda", requests), probe(build, model_dir, "cpu", requests)
    ok = True
    for req, got_cuda, got_cpu in zip(requests, cuda, cpu):
        want = hf_block_logits(fp32, family, req)
        hf_bf16 = relative_error(hf_block_logits(bf16, family, req), want)
        err_cpu, err_cuda = relative_error(got_cpu, want), relative_error(got_cuda, want)
        bar = BF16_FACTOR * hf_bf16 + BF16_SLACK
        case = f"B={req['block_length']} committed={len(req['committed'])} prefill={req['num_prefill']}"
        good = err_cpu <= CPU_BAR and err_cuda <= bar
        ok &= good
        print(f"{'PASS' if good else 'FAIL'} hf_qwen2_parity {family} logits {case}: cpu {err_cpu:.2e} "
              f"(bar {CPU_BAR:.0e}), cuda {err_cuda:.2e} (bar {bar:.2e}; bf16 transformers {hf_bf16:.2e})")
    return ok


def generate(cli, model_dir, prompts, device, extra=()):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False) as f:
        f.write("".join(json.dumps(p) + "\n" for p in prompts))
    done = subprocess.run([cli, "generate", "--model", str(model_dir), "--prompts", f.name, "--json", "--device",
                           device, "--temperature", "0", "--max-tokens", str(MAX_TOKENS), "--block-length",
                           str(BLOCK), "--ignore-eos", *extra], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"FAIL hf_qwen2_parity generate on {device}: {done.stderr[-2000:]}")
    return [json.loads(line) for line in done.stdout.splitlines()]


def decode(build, model_dir, label, seed):
    """GPU vs CPU greedy decodes of NUM_PROMPTS random prompts (reported) and CUDA graphs vs eager
    (must be identical); PASS/FAIL/INFO lines start with `label`."""
    cli = str(Path(build) / "apps" / "cli" / "jetengine")
    rng = random.Random(seed)
    prompts = [[rng.randrange(3, 200) for _ in range(rng.randrange(1, 41))] for _ in range(NUM_PROMPTS)]
    gpu, cpu = generate(cli, model_dir, prompts, "cuda"), generate(cli, model_dir, prompts, "cpu")
    eager = generate(cli, model_dir, prompts, "cuda", ["--enforce-eager"])
    same = sum(a == b for g, c in zip(gpu, cpu) for a, b in zip(g["completion_ids"], c["completion_ids"]))
    total = sum(len(g["completion_ids"]) for g in gpu)
    identical = sum(g == c for g, c in zip(gpu, cpu))
    print(f"INFO {label} GPU vs CPU greedy decode: {same}/{total} completion tokens equal, "
          f"{identical}/{NUM_PROMPTS} prompts identical")
    graphs_ok = gpu == eager
    print(f"{'PASS' if graphs_ok else 'FAIL'} {label} CUDA graphs vs --enforce-eager: "
          f"{sum(g == e for g, e in zip(gpu, eager))}/{NUM_PROMPTS} outputs identical in every field")
    return graphs_ok


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    build = sys.argv[1]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for family, flags in FAMILIES.items():
            model_dir = Path(tmp) / family
            subprocess.run([sys.executable, str(REPO / "tools" / "make_tiny_model.py"), "--arch", family, "--seed", "9",
                            "--out", str(model_dir), *SIZES, *flags], check=True)
            ok &= teacher_forced(build, family, model_dir, tmp)
            ok &= decode(build, model_dir, f"hf_qwen2_parity {family}", seed=5)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
