"""Step schedule and remasking strategies (docs/decoding.md §2, §4) on crafted inputs."""

import pytest

from strategies_np import STRATEGIES, dilated_order, select_positions, step_schedule


def select(strategy, masked, n, *, c=None, h=None, margin=None, is_last=False, block_length=4,
           draws=None, **thresholds):
    zeros = [0.0] * len(masked)
    return select_positions(strategy, masked, c or zeros, h or zeros, margin or zeros, n,
                            is_last, block_length, thresholds, draws)


@pytest.mark.parametrize("block_length, steps, expected", [
    (4, 4, [1, 1, 1, 1]), (4, 2, [2, 2]), (5, 2, [3, 2]), (8, 3, [3, 3, 2]), (4, 1, [4]),
    (7, 7, [1] * 7)])
def test_schedule(block_length, steps, expected):
    assert step_schedule(block_length, steps) == expected


@pytest.mark.parametrize("steps", [0, 5])
def test_schedule_rejects_steps_outside_one_to_block_length(steps):
    with pytest.raises(ValueError, match="denoising_steps"):
        step_schedule(4, steps)


def test_sequential_and_anti_sequential():
    assert select("sequential", [1, 3, 5, 6], 2, block_length=8) == [1, 3]
    assert select("anti_sequential", [1, 3, 5, 6], 2, block_length=8) == [5, 6]
    assert select("anti_sequential", [0, 1, 2, 3], 1) == [3]


def test_static_counts_are_clamped_to_the_masked_positions():
    assert select("sequential", [2, 3], 3) == [2, 3]
    assert select("low_confidence_static", [2], 2, c=[0.1]) == [2]


def test_dilated_order_is_bit_reversal():
    assert dilated_order(4) == [0, 2, 1, 3]
    assert dilated_order(8) == [0, 4, 2, 6, 1, 5, 3, 7]
    assert dilated_order(1) == [0]
    # 3-bit reversals of 0..4 are 0, 4, 2, 6, 1.
    assert dilated_order(5) == [0, 4, 2, 1, 3]


def test_dilated_takes_masked_positions_in_dilated_order():
    assert select("dilated", [0, 1, 2, 3], 2) == [0, 2]
    assert select("dilated", [1, 2, 3], 1) == [2]
    assert select("dilated", [1, 3, 5, 7], 2, block_length=8) == [1, 5]


def test_low_confidence_static_takes_the_most_confident_ties_to_lower_index():
    assert select("low_confidence_static", [0, 1, 2, 3], 1, c=[0.3, 0.9, 0.9, 0.1]) == [1]
    assert select("low_confidence_static", [0, 1, 2, 3], 3, c=[0.3, 0.9, 0.9, 0.1]) == [0, 1, 2]


def test_margin_static_takes_the_largest_margins():
    margins = [0.1, 0.5, 0.5, 0.2]
    assert select("margin_static", [0, 1, 2, 3], 1, margin=margins) == [1]
    assert select("margin_static", [0, 1, 2, 3], 3, margin=margins) == [1, 2, 3]


def test_entropy_static_takes_the_lowest_entropies():
    entropies = [0.3, 0.1, 0.2, 0.1]
    assert select("entropy_static", [0, 1, 2, 3], 1, h=entropies) == [1]
    assert select("entropy_static", [0, 1, 2, 3], 2, h=entropies) == [1, 3]


def test_random_takes_the_largest_draws_ties_to_lower_index():
    draws = [0.3, 0.9, 0.9, 0.1]
    assert select("random", [0, 1, 2, 3], 1, draws=draws) == [1]
    assert select("random", [4, 5, 6, 7], 2, block_length=8, draws=draws) == [5, 6]
    with pytest.raises(ValueError, match="random"):
        select("random", [0, 1], 1)


def test_low_confidence_dynamic_threshold_and_fallback():
    c = [0.95, 0.2, 0.91, 0.5]
    assert select("low_confidence_dynamic", [0, 1, 2, 3], 1, c=c, dynamic_threshold=0.9) == [0, 2]
    # Only two exceed the threshold but three are scheduled: the three most confident.
    assert select("low_confidence_dynamic", [0, 1, 2, 3], 3, c=c, dynamic_threshold=0.9) == \
        [0, 2, 3]
    # Strictly greater: a confidence equal to the threshold does not qualify.
    assert select("low_confidence_dynamic", [0, 1], 1, c=[0.9, 0.95], dynamic_threshold=0.9) == [1]
    assert select("low_confidence_dynamic", [0, 1], 1, c=[0.5, 0.5]) == [0]  # default 0.9


def test_dynamic_factor():
    # Sorted: 0.99 (0), 0.95 (2), 0.8 (1), 0.6 (3); (k+1)(1-c_k) = 0.02, 0.15, 0.8, 2.0.
    c = [0.99, 0.8, 0.95, 0.6]
    assert select("dynamic_factor", [0, 1, 2, 3], 1, c=c, dynamic_factor=1.0) == [0, 1, 2]
    assert select("dynamic_factor", [0, 1, 2, 3], 1, c=c, dynamic_factor=0.1) == [0]
    # Strict "<": with c = 0.75, 0.75 the values are 0.5 and 0.75 (exact in binary).
    assert select("dynamic_factor", [0, 1], 1, c=[0.75, 0.75], dynamic_factor=0.75) == [0]
    assert select("dynamic_factor", [0, 1], 1, c=[0.75, 0.75], dynamic_factor=0.76) == [0, 1]
    # Nothing satisfies the rule: still at least one, the most confident.
    assert select("dynamic_factor", [2, 3], 1, c=[0.2, 0.3]) == [3]


def test_dynamic_pmax():
    # Sorted: 0.99 (1), 0.97 (3), 0.95 (2), 0.5 (0); products 0.99, 0.9603, 0.912285, 0.456.
    c = [0.5, 0.99, 0.95, 0.97]
    assert select("dynamic_pmax", [0, 1, 2, 3], 1, c=c, dynamic_threshold=0.9) == [1, 2, 3]
    # ">=" boundary, exact in binary: products 1.0, 0.75, 0.375.
    assert select("dynamic_pmax", [0, 1, 2], 1, c=[0.5, 1.0, 0.75], dynamic_threshold=0.75) == \
        [1, 2]
    assert select("dynamic_pmax", [0, 1], 1, c=[0.5, 0.6], dynamic_threshold=0.9) == [1]


def test_entropy_bounded():
    # Sorted: 0.0625 (3), 0.125 (1), 0.25 (0), 0.5 (2); sums 0.0625, 0.1875, 0.4375, 0.9375.
    h = [0.25, 0.125, 0.5, 0.0625]
    assert select("entropy_bounded", [0, 1, 2, 3], 1, h=h, eb_threshold=0.4375) == [0, 1, 3]
    assert select("entropy_bounded", [0, 1, 2, 3], 1, h=h, eb_threshold=0.43) == [1, 3]
    assert select("entropy_bounded", [0, 1], 1, h=[1.0, 2.0]) == [0]  # default 0.35: at least 1
    assert select("entropy_bounded", [0, 1], 1, h=[0.5, 0.5], eb_threshold=0.1) == [0]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_last_step_commits_every_masked_position(strategy):
    masked = [0, 2, 3]
    assert select(strategy, masked, 1, c=[0.1, 0.2, 0.3], h=[3.0, 2.0, 1.0],
                  margin=[0.0, 0.1, 0.2], draws=[0.5, 0.2, 0.1], is_last=True) == masked


def test_unknown_strategy_is_rejected_even_on_the_last_step():
    with pytest.raises(ValueError, match="unknown remasking_strategy 'greedy'"):
        select("greedy", [0], 1, is_last=True)
