#!/usr/bin/env python3
"""Our engine's SDAR forward + greedy sampling against the independent PyTorch reference
(tests/reference/torch_sdar.py), by teacher-forced replay of the engine's own decode.

    python3 tests/gpu/torch_parity.py BUILD_DIR      (needs torch and a CUDA GPU; BUILD_DIR has apps/cli/jetengine)

A mid-size random SDAR (4 layers, hidden 1024, 16 q / 4 kv heads of 64, MLP 2816, bf16) decodes 16
prompts of 1-40 tokens, 32 completion tokens each (greedy, low_confidence_static, B = S = 4,
ignore_eos) through the CLI, on --device cuda and, as a control, on --device cpu. From each
output's trajectory the replay rebuilds every denoise step: the committed prefix, then the block
holding the prompt tail (first block only), the tokens committed at earlier steps and masks
elsewhere. The reference (fp32 weights upcast from the bf16 checkpoint, on the GPU, TF32 off)
computes that block's logits with the block-causal mask, sets the mask token's logit to -inf
(DESIGN.md §3) and, for every position the engine committed at that step, compares: logprob,
entropy, whether the engine's token is the reference's argmax (near-ties allowed), and whether the
committed positions are the reference's most confident ones (low_confidence_static's rule).
Free-running comparisons diverge at the first near-tie; a replay compares every step anyway.

Bars. CUDA (bf16 weights and activations, fp32 accumulation) vs fp32: the engine rounds every
activation, the residual stream included, to bf16 (unit roundoff u = 2^-9) about ten times per
layer; forty independent roundings of relative std u/sqrt(3) add up to ~sqrt(40) * 0.0011 = 0.7%
of the final hidden state, so logits of std ~2 (tools/make_tiny_model.py) move by ~0.015, and a
logprob (a logit minus a logsumexp that averages its vocabulary's errors away) by about as much.
TOL = 0.05 is ~3 sigma of that: at least 99% of positions must be within TOL in logprob and in
entropy (whose error averages over the vocabulary, so the bar is conservative). Argmax: the
engine's token must be within 2 TOL (two logits each off by TOL) of the reference's best logprob;
selection: no uncommitted masked position may be more confident than a committed one by over
2 TOL; both for at least 99% of the items. CPU (fp32 throughout) vs fp32: roundings of 2^-24
compound to ~1e-5 in the logits; every item must be within 1e-3 (2e-3 for argmax and selection).
Blocks cut by max_tokens are not replayed: the positions cut off were committed at steps the
output does not record, so those steps' block contents are unknown.
Prints PASS/FAIL lines; exits non-zero on any FAIL.
"""

import json
import math
import random
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
MODEL_FLAGS = ["--arch", "sdar", "--vocab", "small", "--seed", "5", "--layers", "4", "--hidden", "1024",
               "--heads", "16", "--kv-heads", "4", "--head-dim", "64", "--intermediate", "2816", "--dtype", "bf16"]
NUM_PROMPTS, MAX_PROMPT_LEN, MAX_TOKENS = 16, 40, 32
BLOCK, STEPS = 4, 4
# device -> (tolerance, fraction of items that must be within it); see the header for why.
BARS = {"cuda": (0.05, 0.99), "cpu": (1e-3, 1.0)}


@dataclass
class Step:
    """One denoise forward of one prompt, as the engine ran it."""
    prompt: int        # index into the outputs
    context: list      # committed prefix + the block as it was before this step (block = last BLOCK ids)
    committed: list    # (block index, completion index) of the positions committed at this step
    pending: list      # block indices still masked after this step


def engine_outputs(cli, model, prompts_path, device):
    """The CLI's --json outputs (one dict per prompt) of a greedy decode on `device`."""
    out = subprocess.run([cli, "generate", "--model", model, "--prompts", prompts_path, "--json",
                          "--device", device, "--temperature", "0", "--max-tokens", str(MAX_TOKENS),
                          "--ignore-eos", "--block-length", str(BLOCK), "--denoising-steps", str(STEPS),
                          "--strategy", "low_confidence_static"],
                         check=True, stdout=subprocess.PIPE, text=True).stdout
    return [json.loads(line) for line in out.splitlines()]


def replay_steps(index, out, mask_id):
    """The denoise steps of one output, rebuilt from its trajectory (docs/decoding.md §1, §4)."""
    ids, traj, prompt_len = out["token_ids"], out["trajectory"], out["prompt_len"]
    steps = []
    for start in range(prompt_len // BLOCK * BLOCK, len(ids) - BLOCK + 1, BLOCK):
        completion = range(max(start, prompt_len), start + BLOCK)  # completion positions of the block
        for t in sorted({traj[p - prompt_len] for p in completion}):
            block = [ids[p] if p < prompt_len or traj[p - prompt_len] < t else mask_id
                     for p in range(start, start + BLOCK)]
            steps.append(Step(index, ids[:start] + block,
                              [(p - start, p - prompt_len) for p in completion if traj[p - prompt_len] == t],
                              [p - start for p in completion if traj[p - prompt_len] > t]))
    return steps


def load_reference(model_dir):
    """The PyTorch reference model, fp32 on the GPU. torch is imported here, not at the top, so
    that the replay and comparison code runs (and is checked) on machines without it."""
    import torch

    sys.path.insert(0, str(REPO / "tests" / "reference"))
    import torch_sdar

    torch.set_float32_matmul_precision("highest")  # no TF32: the CPU control compares fp32 with fp32
    return torch_sdar, torch_sdar.load_model(model_dir, "cuda", torch.float32)


def replay_logprobs(steps, mask_id, block_logits):
    """Per step, float64 [BLOCK, V]: log_softmax of a reference's block logits, mask at -inf.
    block_logits(ids [n, L], positions [n, L], L) gives the logits [n, L, V] of n contexts of one
    length; the steps run in one batched forward per context length."""
    import torch

    by_length = defaultdict(list)
    for i, step in enumerate(steps):
        by_length[len(step.context)].append(i)
    result = [None] * len(steps)
    with torch.no_grad():
        for length, members in sorted(by_length.items()):
            ids = torch.tensor([steps[i].context for i in members], dtype=torch.long, device="cuda")
            positions = torch.arange(length, device="cuda").expand(len(members), length)
            rows = block_logits(ids, positions, length)[:, length - BLOCK:, :].double()
            rows[..., mask_id] = -math.inf
            logprobs = torch.log_softmax(rows, dim=-1).cpu().numpy()
            for k, i in enumerate(members):
                result[i] = logprobs[k]
    return result


def reference_logprobs(reference, steps, mask_id):
    """replay_logprobs through tests/reference/torch_sdar.py's model."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch_sdar, model = reference
    # The math attention backend: plain fp32 matmuls (fused fp32 kernels may round differently).
    with sdpa_kernel(SDPBackend.MATH):
        return replay_logprobs(steps, mask_id, lambda ids, positions, length: model(
            ids, positions, torch_sdar.block_causal_mask(length, BLOCK, device="cuda")))


def decode_random_model(cli, tmp, name, model_flags, devices):
    """Makes a random model (tools/make_tiny_model.py MODEL_FLAGS) in tmp/name and decodes
    NUM_PROMPTS random prompts on each device: (model folder, mask id, {device: outputs})."""
    model = str(Path(tmp) / name)
    subprocess.run([sys.executable, str(REPO / "tools" / "make_tiny_model.py"), *model_flags, "--out", model],
                   check=True)
    mask_id = json.loads((Path(model) / "config.json").read_text())["mask_token_id"]
    rng = random.Random(0)
    prompts = [[rng.randrange(3, 200) for _ in range(rng.randrange(1, MAX_PROMPT_LEN + 1))]
               for _ in range(NUM_PROMPTS)]
    prompts_path = str(Path(tmp) / "prompts.jsonl")
    Path(prompts_path).write_text("".join(json.dumps(p) + "\n" for p in prompts))
    # The engine runs first, so that its GPU memory budget is not shrunk by torch's.
    return model, mask_id, {device: engine_outputs(cli, model, prompts_path, device) for device in devices}


def compare(outputs, steps, logprobs):
    """Per-item differences: {name: np.array}, names as in report()."""
    d = defaultdict(list)
    for step, lp in zip(steps, logprobs):
        out = outputs[step.prompt]
        committed_conf = []
        for j, k in step.committed:
            row, token = lp[j], out["completion_ids"][k]
            probs = np.exp(row)
            best = int(np.argmax(row))
            entropy = -float(np.sum(probs[probs > 0] * row[probs > 0]))
            d["logprob"].append(abs(out["logprobs"][k] - row[token]))
            d["entropy"].append(abs(out["entropies"][k] - entropy))
            d["argmax_gap"].append(row[best] - row[token])
            d["prob_gap"].append(probs[best] - probs[token])
            committed_conf.append(row[token])  # greedy confidence = probability of the token
        if step.pending:
            d["selection_gap"].append(max(float(np.max(lp[j])) for j in step.pending) - min(committed_conf))
    return {name: np.asarray(values, dtype=np.float64) for name, values in d.items()}


def report(device, diffs, num_tokens):
    """PASS/FAIL lines for one device's replay; True when all pass."""
    tol, fraction = BARS[device]
    checks = [("logprob", "|logprob - reference|", tol), ("entropy", "|entropy - reference|", tol),
              ("argmax_gap", "reference best logprob - logprob of our token", 2 * tol),
              ("selection_gap", "best pending confidence - worst committed (log)", 2 * tol)]
    ok_all = True
    for name, what, bar in checks:
        values = diffs.get(name, np.zeros(0))
        within = float(np.mean(values <= bar)) if values.size else 0.0
        ok = values.size > 0 and within >= fraction
        ok_all &= ok
        extra = ""
        if name in ("logprob", "entropy"):
            extra = f", rms {math.sqrt(float(np.mean(values ** 2))) if values.size else 0:.2e}"
        if name == "argmax_gap":
            exact = float(np.mean(values == 0)) if values.size else 0.0
            extra = f", exact argmax {100 * exact:.2f}%, worst prob gap {float(np.max(diffs['prob_gap'], initial=0)):.2e}"
        print(f"{'PASS' if ok else 'FAIL'} torch_parity {device} {name}: {what} <= {bar:g} for "
              f"{100 * within:.2f}% of {values.size} (bar {100 * fraction:g}%), worst "
              f"{float(np.max(values, initial=0)):.2e}{extra}")
    print(f"     torch_parity {device}: {len(diffs.get('logprob', []))} of {num_tokens} completion tokens replayed")
    return ok_all


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    cli = str(Path(sys.argv[1]) / "apps" / "cli" / "jetengine")
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        model, mask_id, outputs = decode_random_model(cli, tmp, "sdar-mid", MODEL_FLAGS, BARS)
        reference = load_reference(model)
        for device, outs in outputs.items():
            steps = [s for i, out in enumerate(outs) for s in replay_steps(i, out, mask_id)]
            diffs = compare(outs, steps, reference_logprobs(reference, steps, mask_id))
            ok &= report(device, diffs, sum(len(o["completion_ids"]) for o in outs))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
