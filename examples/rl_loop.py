#!/usr/bin/env python3
"""An RL-style loop, the way the original's users drive it between training steps: roll out with
generate, "train" the policy, hand the new weights to the engine with update_weights (in place;
the KV cache stays), roll out again. Then the memory-saving variant: free_all_resources() while
training, reload_from_hf_model(policy) afterwards.

    python3 examples/rl_loop.py --model DIR [--steps N] [--device ...]

The policy here is a dict of numpy arrays read from the model folder, and a training step adds
small noise; with PyTorch it would be your module: update_weights(policy.state_dict()) and
reload_from_hf_model(policy) take torch tensors (any device, any float dtype, bf16 included).
"""
import argparse
import sys
from pathlib import Path

import numpy as np

from jetengine import LLM, SamplingParams

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import safetensors_io  # noqa: E402  (numpy-only safetensors reader of this repository)


class Policy:
    """Stands in for a transformers model: named weights behind state_dict()."""

    def __init__(self, model_dir):
        self.weights = {}
        for path in sorted(Path(model_dir).glob("*.safetensors")):
            self.weights.update(safetensors_io.read_safetensors(path))

    def state_dict(self):
        return self.weights

    def train_step(self, rng, scale=0.02):
        for name, w in self.weights.items():
            self.weights[name] = (w + scale * w.std() * rng.standard_normal(w.shape)).astype(np.float32)


def rollout(llm, prompts, seed):
    params = SamplingParams(temperature=1.0, max_tokens=64, seed=seed, remasking_strategy="low_confidence_dynamic")
    outputs = llm.generate(prompts, params, use_tqdm=False)
    return [out["completion_ids"] for out in outputs], np.mean([np.mean(out["logprobs"]) for out in outputs])


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True, help="HuggingFace model folder")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--steps", type=int, default=3)
    args = parser.parse_args()

    llm = LLM(args.model, device=args.device)
    policy = Policy(args.model)
    prompts = [llm.tokenizer.apply_chat_template([{"role": "user", "content": f"Count to {n}."}],
                                                 add_generation_prompt=True)
               for n in range(3, 11)]
    rng = np.random.default_rng(0)
    for step in range(args.steps):
        completions, mean_logprob = rollout(llm, prompts, seed=step)
        print(f"step {step}: {sum(map(len, completions))} tokens, mean logprob {mean_logprob:.3f}")
        policy.train_step(rng)
        llm.update_weights(policy.state_dict())  # same shapes: an in-place copy

    # Free the engine's memory during a long training phase, then load the policy back.
    llm.free_all_resources()
    policy.train_step(rng)
    llm.reload_from_hf_model(policy)
    completions, mean_logprob = rollout(llm, prompts, seed=args.steps)
    print(f"after reload_from_hf_model: {sum(map(len, completions))} tokens, mean logprob {mean_logprob:.3f}")


if __name__ == "__main__":
    main()
