#!/usr/bin/env python3
"""An RL rollout loop, the way TraceRL-style trainers drive the engine between training steps:
roll out several samples per problem, score each, keep its step map (the denoising step that
unmasked each completion token, what TraceRL trains on), hand the trainer's new weights to the
engine with update_weights (in place; the KV cache stays), and roll out again. While the trainer
runs, the engine sleeps (its weights in host memory, its GPU memory free) and wakes before the
weight update.

    python3 examples/rl_loop.py [--model DIR] [--steps N] [--samples K] [--out rollouts.jsonl]

The default model is the shipped demo model, whose arithmetic answers can be checked
(tools/arith_tasks.py). The "trainer" here nudges a dict of numpy arrays read from the model
folder; with PyTorch it would be your module: update_weights(policy.state_dict()) takes torch
tensors too (CUDA ones stay on the GPU). --out writes one JSON line per sample: step, prompt,
completion, answer, reward, advantage (reward minus its problem's mean), step_map. At the end,
the long-training variant: sleep(level=2) frees the weights too, reload_from_hf_model(policy) loads
the trainer's model back.
"""
import argparse
import json
import random
import sys
from pathlib import Path

import numpy as np

from jetengine import LLM, SamplingParams

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "tools"))
import arith_tasks  # noqa: E402  (the demo model's checkable tasks)
import safetensors_io  # noqa: E402  (numpy-only safetensors reader of this repository)


class Policy:
    """Stands in for the trainer's model: named weights behind state_dict()."""

    def __init__(self, model_dir):
        self.weights = {}
        for path in sorted(Path(model_dir).glob("*.safetensors")):
            self.weights.update(safetensors_io.read_safetensors(path))

    def state_dict(self):
        return self.weights

    def train_step(self, rng, scale):
        for name, w in self.weights.items():
            self.weights[name] = (w + scale * w.std() * rng.standard_normal(w.shape)).astype(np.float32)


def rollout(llm, problems, samples, seed):
    """One record per sample: the completion, its reward (1 if right), its advantage within its
    problem's group, and its step map."""
    prompts, answers = [], []
    for question, answer in problems:
        prompt = llm.tokenizer.apply_chat_template([{"role": "user", "content": question}],
                                                   add_generation_prompt=True)
        prompts += [prompt] * samples
        answers += [answer] * samples
    params = [SamplingParams(temperature=0.7, max_tokens=32, seed=seed * 100003 + i,
                             remasking_strategy="low_confidence_dynamic", dynamic_threshold=0.9)
              for i in range(len(prompts))]
    outputs = llm.generate_streaming(prompts, params, max_active=64, use_tqdm=False)
    records = []
    for i, (out, answer) in enumerate(zip(outputs, answers)):
        records.append({"prompt": llm.tokenizer.decode(out["token_ids"][:out["prompt_len"]]),
                        "completion": out["completion_text"], "completion_ids": out["completion_ids"],
                        "answer": answer, "reward": float(arith_tasks.check(out["completion_text"], answer)),
                        "step_map": out["first_unmask_times"]})
    for start in range(0, len(records), samples):
        group = records[start:start + samples]
        mean = sum(r["reward"] for r in group) / len(group)
        for r in group:
            r["advantage"] = r["reward"] - mean
    return records


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default=str(REPO / "models" / "sdar-tiny-arith"), help="HuggingFace model folder")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--problems", type=int, default=16)
    parser.add_argument("--samples", type=int, default=4, help="samples per problem")
    parser.add_argument("--noise", type=float, default=0.01, help="the stand-in trainer's step size")
    parser.add_argument("--out", help="write every sample as a JSON line here")
    args = parser.parse_args()

    llm = LLM(args.model, device=args.device)
    policy = Policy(args.model)
    data_rng, train_rng = random.Random(0), np.random.default_rng(0)
    out = open(args.out, "w") if args.out else None
    for step in range(args.steps):
        problems = [arith_tasks.make_problem(data_rng) for _ in range(args.problems)]
        records = rollout(llm, problems, args.samples, seed=step)
        tokens = sum(len(r["step_map"]) for r in records)
        steps = sum(max(r["step_map"], default=0) for r in records)
        print(f"step {step}: reward {np.mean([r['reward'] for r in records]):.3f} over {len(records)} samples, "
              f"{tokens} tokens in {steps} denoising steps ({tokens / max(steps, 1):.2f} tokens/step)")
        for r in records:
            if out:
                out.write(json.dumps({"step": step, **r}) + "\n")
        llm.sleep(level=1)  # the trainer has the GPU now
        policy.train_step(train_rng, args.noise)
        llm.wake_up(tags=["weights"])
        llm.update_weights(policy.state_dict())  # same shapes: an in-place copy
        llm.wake_up(tags=["kv_cache"])
    if out:
        out.close()

    # A long training phase: sleep(level=2) frees the weights too, and the trainer's whole model
    # comes back with reload_from_hf_model.
    llm.sleep(level=2)
    policy.train_step(train_rng, args.noise)
    llm.reload_from_hf_model(policy)
    records = rollout(llm, [arith_tasks.make_problem(data_rng) for _ in range(args.problems)], args.samples,
                      seed=args.steps)
    print(f"after reload_from_hf_model: reward {np.mean([r['reward'] for r in records]):.3f} "
          f"over {len(records)} samples")


if __name__ == "__main__":
    main()
