"""Sampling one masked position, docs/decoding.md §3, in float64.

The engine works in fp32; this reference works in float64 on the same logits. Token choices
(greedy argmax, kept sets, Gumbel-max winners) are meant to be compared exactly; confidences,
log-probabilities, entropies and margins only up to a tolerance (fp32 vs float64 rounding).
"""

from dataclasses import dataclass

import numpy as np

import rng_np


@dataclass(frozen=True)
class SampledPosition:
    token: int
    confidence: float  # probs[token], from the unfiltered distribution
    logprob: float     # ln(max(confidence, 1e-12))
    entropy: float     # nats, over the unfiltered distribution
    margin: float      # largest minus second largest probability


def penalised_logits(logits, mask_token_id, penalty_token_ids, repetition_penalty):
    """Steps 1-2: the mask can never be chosen; tokens already seen get the HF/vLLM penalty."""
    row = np.array(logits, dtype=np.float64)
    row[mask_token_id] = -np.inf
    if repetition_penalty != 1.0 and len(penalty_token_ids) > 0:
        ids = np.unique(np.asarray(list(penalty_token_ids), dtype=np.int64))
        seen = row[ids]
        row[ids] = np.where(seen > 0, seen / repetition_penalty, seen * repetition_penalty)
    return row


def softmax(row):
    """Softmax with the row maximum subtracted (exp of -inf entries is exactly 0)."""
    shifted = np.exp(row - np.max(row))
    return shifted / shifted.sum()


def entropy(probs):
    """H = -sum over p_i > 0 of p_i ln p_i."""
    positive = probs[probs > 0]
    return float(-(positive * np.log(positive)).sum())


def margin(probs):
    """p(1) - p(2); 0 for a one-token vocabulary."""
    if probs.size < 2:
        return 0.0
    top_two = np.partition(probs, probs.size - 2)[-2:]
    return float(top_two[1] - top_two[0])


def greedy_token(row):
    """argmax, lowest id on ties (np.argmax returns the first maximum)."""
    return int(np.argmax(row))


def _by_probability(probs, ids):
    """ids sorted by probability descending, ties by lower id (stable sort over ascending ids)."""
    ids = np.sort(np.asarray(ids, dtype=np.int64))
    return ids[np.argsort(-probs[ids], kind="stable")]


def kept_set(probs, top_k, top_p):
    """The candidate ids K after top-k (k <= 0: off) and top-p (>= 1: off), most probable first."""
    kept = _by_probability(probs, np.arange(probs.size))
    if top_k > 0:
        kept = kept[:top_k]
    if top_p < 1.0:
        cumulative = np.cumsum(probs[kept]) / probs[kept].sum()
        # Shortest prefix whose renormalised sum reaches top_p; at least one id.
        reach = int(np.searchsorted(cumulative, top_p, side="left"))
        kept = kept[:min(reach + 1, kept.size)]
    return kept


def gumbel_max_token(probs, kept, seed, position, step):
    """argmax over K of ln(p_i) + g_i with g_i = -ln(-ln(u_i)), u_i = uniform(seed, pos, step, i).

    Lowest id on ties: the candidates are scanned in increasing id order.
    """
    ids = np.sort(np.asarray(kept, dtype=np.int64))
    u = rng_np.uniform(seed, position, step, ids.astype(np.uint64))
    with np.errstate(divide="ignore"):
        scores = np.log(probs[ids]) - np.log(-np.log(u))
    return int(ids[int(np.argmax(scores))])


# Temperatures below this are greedy (docs/decoding.md §3): dividing by them overflows fp32.
GREEDY_BELOW = 1e-5


def sample_position(logits, *, mask_token_id, penalty_token_ids, temperature, top_k, top_p,
                    repetition_penalty, seed, position, step):
    """Steps 1-6 of §3 for one masked position's logit row."""
    row = penalised_logits(logits, mask_token_id, penalty_token_ids, repetition_penalty)
    if temperature >= GREEDY_BELOW:
        probs = softmax(row / temperature)
        token = gumbel_max_token(probs, kept_set(probs, top_k, top_p), seed, position, step)
    else:
        probs = softmax(row)
        token = greedy_token(row)
    confidence = float(probs[token])
    return SampledPosition(token=token, confidence=confidence,
                           logprob=float(np.log(max(confidence, 1e-12))),
                           entropy=entropy(probs), margin=margin(probs))
