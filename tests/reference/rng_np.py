"""Counter-based RNG of docs/decoding.md §6: uniform(seed, position, step, lane) in float64.

Every draw is a pure function of its four counters, so a seeded request's samples do not depend
on batching or preemption. All integer arithmetic is modulo 2^64: NumPy uint64 *arrays* wrap
silently, so every input is turned into an array before any arithmetic (uint64 *scalars* would
warn on overflow).
"""

import numpy as np

_U64 = np.uint64
_GOLDEN = 0x9E3779B97F4A7C15
_MUL1 = _U64(0xBF58476D1CE4E5B9)
_MUL2 = _U64(0x94D049BB133111EB)
_U64_LIMIT = 1 << 64

# Lane used by the `random` remasking strategy (docs/decoding.md §4): above every token id, so
# it never collides with a Gumbel lane of the same (position, step).
RANDOM_STRATEGY_LANE = 1 << 32
# Lane of epsilon-greedy's draw (docs/decoding.md §4, exploration): one per block and step, at the
# block's first position.
EPSILON_GREEDY_LANE = RANDOM_STRATEGY_LANE + 1


def _as_u64_array(name, value):
    array = np.asarray(value)
    if array.dtype == np.uint64:
        return np.atleast_1d(array)
    as_ints = np.atleast_1d(array).astype(object)
    for item in as_ints.flat:
        if not 0 <= int(item) < _U64_LIMIT:
            raise ValueError(f"rng {name} {int(item)} is outside [0, 2^64)")
    return as_ints.astype(np.uint64)


def mix64(z):
    """The SplitMix64 finaliser on a uint64 array (modulo 2^64)."""
    z = (z ^ (z >> _U64(30))) * _MUL1
    z = (z ^ (z >> _U64(27))) * _MUL2
    return z ^ (z >> _U64(31))


def uniform(seed, position, step, lane):
    """uniform(seed, position, step, lane) of §6 in float64.

    Arguments broadcast against each other; all-scalar arguments give a Python float.

    `(h >> 12) + 0.5` has at most 53 significant bits, so it is exact in float64 and the
    result lies strictly inside (0, 1).
    """
    all_scalars = all(np.ndim(x) == 0 for x in (seed, position, step, lane))
    seed, position, step, lane = np.broadcast_arrays(
        _as_u64_array("seed", seed), _as_u64_array("position", position),
        _as_u64_array("step", step), _as_u64_array("lane", lane))
    h = mix64(seed ^ _U64(_GOLDEN))
    h = mix64(h + position)
    h = mix64(h + step)
    h = mix64(h + lane)
    result = ((h >> _U64(12)).astype(np.float64) + 0.5) * 2.0 ** -52
    return float(result[0]) if all_scalars else result
