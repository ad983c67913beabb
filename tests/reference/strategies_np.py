"""The step schedule and the 11 remasking strategies of docs/decoding.md §2 and §4.

Every function is pure: it sees the masked block indices (increasing), their confidence c,
entropy H and margin, the scheduled count n, whether this is the block's last allowed step, the
strategy thresholds, and (for `random` only) one uniform draw per masked index. It returns the
selected block indices in increasing order.
"""

import math

import numpy as np

STRATEGIES = (
    "sequential", "anti_sequential", "random", "dilated", "low_confidence_static",
    "margin_static", "entropy_static", "low_confidence_dynamic", "dynamic_factor",
    "dynamic_pmax", "entropy_bounded",
)

DEFAULT_THRESHOLDS = {"dynamic_threshold": 0.9, "dynamic_factor": 1.0, "eb_threshold": 0.35}


def step_schedule(block_length, denoising_steps):
    """n_s = floor(B/S) + (1 if s < B mod S else 0) for s in 0..S-1; requires 1 <= S <= B."""
    if not 1 <= denoising_steps <= block_length:
        raise ValueError(f"denoising_steps {denoising_steps} must be in [1, block_length = "
                         f"{block_length}]")
    base, extra = divmod(block_length, denoising_steps)
    return [base + (1 if s < extra else 0) for s in range(denoising_steps)]


def dilated_order(block_length):
    """Block indices ordered by their bit reversal in ceil(log2 B) bits (B = 4: 0, 2, 1, 3)."""
    bits = math.ceil(math.log2(block_length)) if block_length > 1 else 0

    def reversed_bits(index):
        return int(format(index, f"0{bits}b")[::-1], 2) if bits else 0

    return sorted(range(block_length), key=reversed_bits)


def _ranked(masked, key_values, descending):
    """masked indices ordered by key (descending or ascending), ties by the lower block index."""
    keys = np.asarray(key_values, dtype=np.float64)
    order = sorted(range(len(masked)),
                   key=lambda i: (-keys[i] if descending else keys[i], masked[i]))
    return [masked[i] for i in order], keys[order]


def _at_least_one_leading(flags):
    """Length of the run of True at the start of `flags`, but at least 1."""
    false_at = np.flatnonzero(~np.asarray(flags, dtype=bool))
    return max(int(false_at[0]) if false_at.size else len(flags), 1)


def select_positions(strategy, masked, confidence, entropy, margin, n, is_last, block_length,
                     thresholds=None, random_draws=None):
    """Block indices to commit this step (increasing order)."""
    if strategy not in STRATEGIES:
        raise ValueError(f"unknown remasking_strategy {strategy!r}; expected one of "
                         f"{', '.join(STRATEGIES)}")
    masked = [int(j) for j in masked]
    if not masked:
        return []
    if is_last:
        return sorted(masked)
    limits = dict(DEFAULT_THRESHOLDS, **(thresholds or {}))
    count = min(n, len(masked))
    if strategy == "sequential":
        chosen = masked[:count]
    elif strategy == "anti_sequential":
        chosen = masked[len(masked) - count:]
    elif strategy == "random":
        if random_draws is None:
            raise ValueError("strategy 'random' needs one uniform draw per masked position")
        chosen = _ranked(masked, random_draws, descending=True)[0][:count]
    elif strategy == "dilated":
        masked_set = set(masked)
        chosen = [j for j in dilated_order(block_length) if j in masked_set][:count]
    elif strategy == "low_confidence_static":
        chosen = _ranked(masked, confidence, descending=True)[0][:count]
    elif strategy == "margin_static":
        chosen = _ranked(masked, margin, descending=True)[0][:count]
    elif strategy == "entropy_static":
        chosen = _ranked(masked, entropy, descending=False)[0][:count]
    elif strategy == "low_confidence_dynamic":
        ranked, c = _ranked(masked, confidence, descending=True)
        above = [j for j, cj in zip(ranked, c) if cj > limits["dynamic_threshold"]]
        chosen = above if len(above) >= count else ranked[:count]
    elif strategy == "dynamic_factor":
        ranked, c = _ranked(masked, confidence, descending=True)
        ks = np.arange(1, len(ranked) + 1)
        satisfied = ks[(ks + 1) * (1.0 - c) < limits["dynamic_factor"]]
        chosen = ranked[:int(satisfied.max()) if satisfied.size else 1]
    elif strategy == "dynamic_pmax":
        ranked, c = _ranked(masked, confidence, descending=True)
        chosen = ranked[:_at_least_one_leading(np.cumprod(c) >= limits["dynamic_threshold"])]
    else:  # entropy_bounded
        ranked, h = _ranked(masked, entropy, descending=False)
        chosen = ranked[:_at_least_one_leading(np.cumsum(h) <= limits["eb_threshold"])]
    return sorted(chosen)
