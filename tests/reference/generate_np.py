#!/usr/bin/python3
"""The block-diffusion decode loop of docs/decoding.md §1-§5 over the float64 reference model,
one prompt at a time (the engine's outputs must not depend on batching), plus a CLI:

    python3 tests/reference/generate_np.py --model DIR --prompts FILE.jsonl --params JSON
        [--max-model-len N] [--mask-token-id M]

FILE.jsonl: one prompt per line, a JSON list of token ids or an object with "token_ids".
--params: one JSON object for every prompt, or a JSON list with one object per prompt.
Prints one JSON object per prompt, in order.

Every denoise step recomputes the whole sequence (model_np explains why that equals the cached
decode), so the save pass changes nothing here; and it rides in the next block's first denoise
forward (docs/decoding.md §1), so num_forwards counts the prefill and the denoise steps only,
plus, for a family with shifted logits (Fast-dLLM v2, Dream), the head step of every block whose
first position is masked; the prefill of such a family stops at P - B when B divides P (§1).
"""

import argparse
import json
import sys

import numpy as np

import rng_np
import sampling_np
import strategies_np
from model_np import ReferenceModel, head_logits, sampling_logits

# The original JetEngine's SamplingParams defaults (reference/jetengine.md §1.2), plus
# dynamic_factor (docs/decoding.md §4) and a fixed seed. block_length falls back to the
# config's block_size hint, then 4.
DEFAULT_PARAMS = dict(
    block_length=None, denoising_steps=4, temperature=1.0, top_k=0, top_p=1.0,
    repetition_penalty=1.0, remasking_strategy="low_confidence_static", max_tokens=64,
    stop_token_ids=(), ignore_eos=False, seed=0, diversity_enforce_barrier=-1, epsilon_greedy=0.0,
    sub_block_length=0, editing_threshold=None, max_post_steps=16,
    **strategies_np.DEFAULT_THRESHOLDS)


def resolve_params(params, config):
    """params with defaults filled in; ValueError naming any unknown or out-of-range field."""
    unknown = sorted(set(params) - set(DEFAULT_PARAMS))
    if unknown:
        raise ValueError(f"unknown sampling parameters: {', '.join(unknown)}")
    p = dict(DEFAULT_PARAMS, **params)
    if p["block_length"] is None:
        p["block_length"] = int(config.block_size or 4)
    checks = [("block_length", p["block_length"] >= 1, ">= 1"),
              ("temperature", p["temperature"] >= 0, ">= 0"),
              ("top_p", 0 < p["top_p"] <= 1, "in (0, 1]"),
              ("repetition_penalty", p["repetition_penalty"] > 0, "> 0"),
              ("max_tokens", p["max_tokens"] >= 1, ">= 1"),
              ("seed", 0 <= p["seed"] < 2 ** 64, "in [0, 2^64)"),
              ("diversity_enforce_barrier", p["diversity_enforce_barrier"] >= -1, ">= -1"),
              ("epsilon_greedy", 0 <= p["epsilon_greedy"] <= 1, "in [0, 1]"),
              ("remasking_strategy", p["remasking_strategy"] in strategies_np.STRATEGIES,
               "one of " + ", ".join(strategies_np.STRATEGIES))]
    for name, ok, allowed in checks:
        if not ok:
            raise ValueError(f"sampling parameter {name} = {p[name]!r} must be {allowed}")
    t = p["editing_threshold"]
    if t is not None and not (0 <= t <= 1 and not config.shifted_logits and p["sub_block_length"] in (0, p["block_length"])):
        raise ValueError(f"sampling parameter editing_threshold = {t!r} must be in [0, 1], for a model "
                         "without shifted logits and without sub-blocks")
    if not 0 <= p["max_post_steps"] <= 1024:
        raise ValueError(f"sampling parameter max_post_steps = {p['max_post_steps']!r} must be in [0, 1024]")
    b = p["sub_block_length"]
    if b < 0 or (b > 0 and p["block_length"] % b):
        raise ValueError(f"sampling parameter sub_block_length = {b!r} must divide block_length "
                         f"{p['block_length']} (or be 0)")
    # checks 1 <= S <= b (b = B without sub-blocks)
    strategies_np.step_schedule(b or p["block_length"], p["denoising_steps"])
    return p


class _Sequence:
    """Decode state of one prompt: committed tokens and per-completion-token records."""

    def __init__(self, prompt, block_length, shifted_logits=False):
        self.prompt = list(prompt)
        # The first block starts at floor(P / B) * B. The prefill forward covers [0, num_prefill):
        # the same, except with shifted logits and B dividing P, where the prompt's last block is
        # left to the first block's head step, which needs the row of P - 1 (docs/decoding.md §1).
        self.first_block_start = len(prompt) // block_length * block_length
        self.num_prefill = self.first_block_start
        if shifted_logits and len(prompt) % block_length == 0:
            self.num_prefill -= block_length
        self.committed = self.prompt[:self.first_block_start]
        self.completion, self.trajectory, self.logprobs, self.entropies = [], [], [], []
        # A prefill forward exists only when there is a prefill part (num_prefill > 0).
        self.num_forwards = 1 if self.num_prefill > 0 else 0
        self.global_step = 0
        self.finish_reason = None

    def first_block(self, block_length, mask_token_id):
        """(tokens, mask flags) of the first block: the prompt tail, then masks. Flags, not token
        comparisons, say what is masked: a tail token equal to the mask id stays a prompt token."""
        tail = self.prompt[self.first_block_start:]
        masks = block_length - len(tail)
        return tail + [mask_token_id] * masks, [False] * len(tail) + [True] * masks


def _step_strategy(p, seq, block_start):
    """The strategy of the block's next denoise step (docs/decoding.md §4, exploration): sequential
    while the block begins with at most the barrier's completion tokens before it, else random when
    the step's epsilon-greedy draw is below epsilon (kept in float32, as the engine does)."""
    barrier = p["diversity_enforce_barrier"]
    if barrier >= 0 and block_start - len(seq.prompt) <= barrier:
        return "sequential"
    epsilon = float(np.float32(p["epsilon_greedy"]))
    if epsilon > 0 and rng_np.uniform(p["seed"], block_start, seq.global_step,
                                      rng_np.EPSILON_GREEDY_LANE) < epsilon:
        return "random"
    return p["remasking_strategy"]


def _denoise_block(model, seq, block, is_masked, p, mask_token_id):
    """Runs the block's head step (shifted logits, first position masked) and denoise steps;
    returns per-block-index (trajectory, logprob, entropy)."""
    B = p["block_length"]
    block_start = len(seq.committed)
    records = [None] * B
    penalty_ids = set(seq.prompt) | set(seq.completion)

    def sample(row, j):
        return sampling_np.sample_position(
            row, mask_token_id=mask_token_id, penalty_token_ids=penalty_ids,
            temperature=p["temperature"], top_k=p["top_k"], top_p=p["top_p"],
            repetition_penalty=p["repetition_penalty"], seed=p["seed"],
            position=block_start + j, step=seq.global_step)

    if model.config.shifted_logits and is_masked[0]:
        # Head step: no row inside the block predicts its first position; the row of q0 - 1
        # does, and it never sees the block. Committed whatever the strategy; a step of the
        # sequence (trajectory, global step, a forward) but not one of the block's S steps.
        head = sample(head_logits(model, seq.committed, seq.num_prefill, B), 0)
        block[0], is_masked[0] = head.token, False
        records[0] = (seq.global_step + 1, head.logprob, head.entropy)
        seq.global_step += 1
        seq.num_forwards += 1
    # Sub-blocks (docs/decoding.md §2), left to right, each with its own S steps; without them
    # the block is one sub-block.
    width = p["sub_block_length"] or B
    for window in range(0, B, width):
        _denoise_window(model, seq, block, is_masked, p, records, sample, range(window, window + width))
    # Token editing (docs/decoding.md §4): once no mask is left, up to max_post_steps steps that
    # only edit; the first one that changes nothing ends the block.
    if p["editing_threshold"] is not None:
        for _ in range(p["max_post_steps"]):
            logits = sampling_logits(model, seq.committed, block, seq.num_prefill, B)
            seq.num_forwards += 1
            edits = _apply_edits(seq, block, is_masked, p, records, sample, logits)
            seq.global_step += 1
            if not edits:
                break
    return records


def _apply_edits(seq, block, is_masked, p, records, sample, logits):
    """Token editing of one step: every committed completion position of the block whose sample
    is more confident than editing_threshold and differs takes it. Judged on the block before the
    step's commits (call it first); returns the edited positions."""
    if p["editing_threshold"] is None:
        return []
    block_start = len(seq.committed)
    edited = []
    for j in range(len(block)):
        if is_masked[j] or block_start + j < len(seq.prompt):
            continue
        candidate = sample(logits[j], j)
        if candidate.confidence > p["editing_threshold"] and candidate.token != block[j]:
            block[j] = candidate.token
            records[j] = (seq.global_step + 1, candidate.logprob, candidate.entropy)
            edited.append(j)
    return edited


def _denoise_window(model, seq, block, is_masked, p, records, sample, window):
    """The denoise steps of one sub-block: its masked positions are the candidates (and, under
    token editing, the block's committed completion positions are edited)."""
    B = p["block_length"]
    block_start = len(seq.committed)
    for s, n in enumerate(strategies_np.step_schedule(len(window), p["denoising_steps"])):
        masked = [j for j in window if is_masked[j]]
        if not masked:
            break  # a sub-block finished by a dynamic strategy (or B = 1's head step) stops early
        logits = sampling_logits(model, seq.committed, block, seq.num_prefill, B)
        seq.num_forwards += 1
        _apply_edits(seq, block, is_masked, p, records, sample, logits)
        samples = {j: sample(logits[j], j) for j in masked}
        strategy = _step_strategy(p, seq, block_start)
        random_draws = None
        if strategy == "random":
            positions = np.asarray([block_start + j for j in masked], dtype=np.uint64)
            random_draws = rng_np.uniform(p["seed"], positions, seq.global_step,
                                          rng_np.RANDOM_STRATEGY_LANE)
        chosen = strategies_np.select_positions(
            strategy, masked, [samples[j].confidence for j in masked],
            [samples[j].entropy for j in masked], [samples[j].margin for j in masked], n,
            is_last=(s == p["denoising_steps"] - 1), block_length=B,
            thresholds={k: p[k] for k in strategies_np.DEFAULT_THRESHOLDS},
            random_draws=random_draws)
        for j in chosen:
            block[j] = samples[j].token
            is_masked[j] = False
            records[j] = (seq.global_step + 1, samples[j].logprob, samples[j].entropy)
        seq.global_step += 1


def _commit_and_check_stop(seq, block, records, p, stop_ids, max_model_len):
    """Appends the finished block, then applies §5's stop rules in their order."""
    block_start = len(seq.committed)
    seq.committed += block
    completion_start = len(seq.completion)
    for j, token in enumerate(block):
        if block_start + j >= len(seq.prompt):
            seq.completion.append(token)
            trajectory, logprob, entropy = records[j]
            seq.trajectory.append(trajectory)
            seq.logprobs.append(logprob)
            seq.entropies.append(entropy)
    for index in range(completion_start, len(seq.completion)):
        if seq.completion[index] in stop_ids:
            _cut(seq, index + 1)
            seq.finish_reason = "stop"
            break
    if len(seq.completion) >= p["max_tokens"]:
        stop_survives = seq.finish_reason == "stop" and len(seq.completion) <= p["max_tokens"]
        _cut(seq, p["max_tokens"])
        if not stop_survives:
            seq.finish_reason = "length"
    if seq.finish_reason is None and len(seq.committed) + p["block_length"] > max_model_len:
        seq.finish_reason = "length"


def _cut(seq, length):
    del seq.completion[length:], seq.trajectory[length:], seq.logprobs[length:]
    del seq.entropies[length:]


def decode_one(model, prompt, params, max_model_len, mask_token_id=None):
    """Decodes one prompt (token ids) with one params dict; returns its output dict."""
    config = model.config
    p = resolve_params(params, config)
    mask = config.mask_token_id if mask_token_id is None else mask_token_id
    if not 0 <= mask < model.vocab_rows:
        raise ValueError(f"mask_token_id {mask} is outside the {model.vocab_rows} vocabulary rows")
    B = p["block_length"]
    if not prompt:
        raise ValueError("prompt is empty")
    seq = _Sequence(prompt, B, config.shifted_logits)
    # The request must fit its first block; the engine rejects it otherwise.
    if seq.first_block_start + B > max_model_len:
        raise ValueError(f"prompt of {len(prompt)} tokens needs {seq.first_block_start + B} "
                         f"positions with block_length {B}, more than max_model_len "
                         f"{max_model_len}")
    stop_ids = set(p["stop_token_ids"]) | (set() if p["ignore_eos"] else set(config.eos_token_ids))
    block, is_masked = seq.first_block(B, mask)
    while True:
        records = _denoise_block(model, seq, block, is_masked, p, mask)
        _commit_and_check_stop(seq, block, records, p, stop_ids, max_model_len)
        if seq.finish_reason is not None:
            break
        block, is_masked = [mask] * B, [True] * B
    return {"token_ids": seq.prompt + seq.completion, "trajectory": seq.trajectory,
            "logprobs": seq.logprobs, "entropies": seq.entropies,
            "completion_ids": seq.completion, "finish_reason": seq.finish_reason,
            "num_forwards": seq.num_forwards, "prompt_len": len(seq.prompt)}


def generate(model_dir, prompts, params, max_model_len, mask_token_id=None):
    """Outputs for every prompt, in order; params is one dict or one dict per prompt."""
    model = model_dir if isinstance(model_dir, ReferenceModel) else \
        ReferenceModel.from_dir(model_dir)
    per_prompt = params if isinstance(params, list) else [params] * len(prompts)
    if len(per_prompt) != len(prompts):
        raise ValueError(f"{len(per_prompt)} params for {len(prompts)} prompts")
    return [decode_one(model, prompt, prompt_params, max_model_len, mask_token_id)
            for prompt, prompt_params in zip(prompts, per_prompt)]


def _read_prompts(path):
    prompts = []
    with open(path, encoding="utf-8") as handle:
        for line_number, line in enumerate(handle, 1):
            if not line.strip():
                continue
            entry = json.loads(line)
            ids = entry["token_ids"] if isinstance(entry, dict) else entry
            if not isinstance(ids, list) or not all(isinstance(t, int) for t in ids):
                raise ValueError(f"{path}:{line_number}: expected a list of token ids")
            prompts.append(ids)
    return prompts


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="HF model folder")
    parser.add_argument("--prompts", required=True, help="JSON lines of token-id lists")
    parser.add_argument("--params", default="{}", help="JSON object, or list of objects")
    parser.add_argument("--max-model-len", type=int,
                        help="default: the config's max positions")
    parser.add_argument("--mask-token-id", type=int, help="default: from config.json")
    args = parser.parse_args(argv)
    try:
        model = ReferenceModel.from_dir(args.model)
        max_model_len = args.max_model_len or model.config.max_positions
        if max_model_len is None:
            raise ValueError("no --max-model-len and no max positions in config.json")
        outputs = generate(model, _read_prompts(args.prompts), json.loads(args.params),
                           int(max_model_len), args.mask_token_id)
    except (OSError, ValueError, KeyError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    for output in outputs:
        print(json.dumps(output))
    return 0


if __name__ == "__main__":
    sys.exit(main())
