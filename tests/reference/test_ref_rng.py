"""Counter-based RNG (docs/decoding.md §6): known SplitMix64 values, an independent pure-Python
computation, range, determinism, counter sensitivity and uniformity."""

import numpy as np
import pytest

import rng_np

MASK64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15


def python_mix64(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def python_uniform(seed, position, step, lane):
    h = python_mix64(seed ^ GOLDEN)
    h = python_mix64((h + position) & MASK64)
    h = python_mix64((h + step) & MASK64)
    h = python_mix64((h + lane) & MASK64)
    return (float(h >> 12) + 0.5) * 2.0 ** -52


def test_mix64_matches_published_splitmix64_outputs():
    # SplitMix64 seeded with 0 emits mix64(k * golden) as its k-th output.
    states = np.array([GOLDEN, (2 * GOLDEN) & MASK64], dtype=np.uint64)
    assert [int(x) for x in rng_np.mix64(states)] == [0xE220A8397B1DCDAF, 0x6E789E6AA1B965F4]


@pytest.mark.parametrize("seed, position, step, lane", [
    (0, 0, 0, 0), (1, 2, 3, 4), (42, 1000, 7, 151668), (MASK64, MASK64, MASK64, MASK64),
    (123456789, 4095, 200, 1 << 32), (2 ** 63, 5, 0, 126335)])
def test_uniform_matches_pure_python_ints(seed, position, step, lane):
    assert rng_np.uniform(seed, position, step, lane) == python_uniform(seed, position, step, lane)


def test_vectorised_lanes_match_scalar_draws():
    lanes = np.arange(50, dtype=np.uint64)
    draws = rng_np.uniform(9, 17, 3, lanes)
    assert list(draws) == [python_uniform(9, 17, 3, lane) for lane in range(50)]


def test_draws_are_deterministic_and_every_counter_matters():
    base = rng_np.uniform(5, 10, 2, 3)
    assert base == rng_np.uniform(5, 10, 2, 3)
    assert len({base, rng_np.uniform(6, 10, 2, 3), rng_np.uniform(5, 11, 2, 3),
                rng_np.uniform(5, 10, 3, 3), rng_np.uniform(5, 10, 2, 4)}) == 5


def test_different_lanes_differ():
    draws = rng_np.uniform(1, 2, 3, np.arange(1000, dtype=np.uint64))
    assert len(set(draws.tolist())) == 1000


def test_draws_lie_in_open_unit_interval_and_look_uniform():
    draws = rng_np.uniform(2024, np.arange(100_000, dtype=np.uint64), 0, 0)
    assert draws.min() > 0.0 and draws.max() < 1.0
    counts = np.histogram(draws, bins=10, range=(0.0, 1.0))[0]
    expected = draws.size / 10
    chi_square = float(((counts - expected) ** 2 / expected).sum())
    assert chi_square < 27.88  # chi-square, 9 degrees of freedom, p = 0.001
    assert abs(draws.mean() - 0.5) < 0.005


def test_out_of_range_counters_are_rejected():
    with pytest.raises(ValueError, match="seed"):
        rng_np.uniform(-1, 0, 0, 0)
    with pytest.raises(ValueError, match="lane"):
        rng_np.uniform(0, 0, 0, 1 << 64)
