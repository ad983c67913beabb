"""Sampling one position (docs/decoding.md §3) against closed forms and crafted distributions."""

import math

import numpy as np
import pytest

import rng_np
import sampling_np


def sample(logits, **overrides):
    args = dict(mask_token_id=len(logits) - 1, penalty_token_ids=(), temperature=0.0, top_k=0,
                top_p=1.0, repetition_penalty=1.0, seed=0, position=0, step=0)
    args.update(overrides)
    return sampling_np.sample_position(np.asarray(logits, dtype=np.float32), **args)


def test_softmax_and_entropy_match_closed_forms():
    probs = sampling_np.softmax(np.log(np.array([1.0, 2.0, 4.0])))
    assert probs == pytest.approx([1 / 7, 2 / 7, 4 / 7], rel=1e-15)
    expected_entropy = -sum(p * math.log(p) for p in (1 / 7, 2 / 7, 4 / 7))
    assert sampling_np.entropy(probs) == pytest.approx(expected_entropy, rel=1e-14)
    uniform = np.full(8, 1 / 8)
    assert sampling_np.entropy(uniform) == pytest.approx(math.log(8), rel=1e-15)


def test_softmax_of_minus_infinity_is_zero_and_entropy_skips_it():
    probs = sampling_np.softmax(np.array([0.0, -np.inf, 0.0]))
    assert probs.tolist() == [0.5, 0.0, 0.5]
    assert sampling_np.entropy(probs) == pytest.approx(math.log(2), rel=1e-15)


def test_mask_token_is_never_chosen_and_has_zero_probability():
    result = sample([1.0, 2.0, 9.0], mask_token_id=2)
    assert result.token == 1
    assert result.confidence == pytest.approx(math.e / (math.e + 1), rel=1e-12)


def test_repetition_penalty_divides_positive_and_multiplies_negative_logits():
    row = sampling_np.penalised_logits(np.array([2.0, -1.0, 0.5, 3.0, 0.0]), 4, {0, 1}, 2.0)
    assert row.tolist() == [1.0, -2.0, 0.5, 3.0, -np.inf]
    untouched = sampling_np.penalised_logits(np.array([2.0, -1.0, 0.0]), 2, {0, 1}, 1.0)
    assert untouched.tolist() == [2.0, -1.0, -np.inf]


def test_penalty_can_change_the_greedy_choice():
    assert sample([3.0, 2.0, 0.0]).token == 0
    assert sample([3.0, 2.0, 0.0], penalty_token_ids={0}, repetition_penalty=2.0).token == 1


def test_greedy_breaks_ties_to_the_lowest_id():
    assert sample([1.0, 3.0, 3.0, 0.0, -5.0]).token == 1


def test_greedy_reports_confidence_entropy_margin_of_softmax_at_temperature_one():
    logits = [0.0, math.log(2.0), math.log(4.0), -50.0]  # last id is the mask
    result = sample(logits)
    assert result.token == 2
    assert result.confidence == pytest.approx(4 / 7, rel=1e-6)
    assert result.logprob == pytest.approx(math.log(4 / 7), rel=1e-6)
    assert result.margin == pytest.approx(2 / 7, rel=1e-6)
    expected_entropy = -sum(p * math.log(p) for p in (1 / 7, 2 / 7, 4 / 7))
    assert result.entropy == pytest.approx(expected_entropy, rel=1e-6)


def test_temperature_scales_the_reported_distribution():
    logits = [0.0, math.log(4.0), -50.0]
    result = sample(logits, temperature=2.0, top_k=1)  # top_k = 1 makes the draw deterministic
    assert result.token == 1
    assert result.confidence == pytest.approx(2 / 3, rel=1e-6)  # softmax([0, ln 2])
    assert result.margin == pytest.approx(1 / 3, rel=1e-6)


def test_temperatures_below_the_greedy_bound_are_greedy():
    logits = [0.0, math.log(2.0), math.log(4.0), -50.0]
    assert sample(logits, temperature=1e-40, seed=3) == sample(logits)
    assert sample(logits, temperature=9e-6, seed=3) == sample(logits)


def test_margin_of_a_single_token_is_zero():
    assert sampling_np.margin(np.array([1.0])) == 0.0
    assert sampling_np.margin(np.array([0.1, 0.6, 0.3])) == pytest.approx(0.3)


PROBS = np.array([0.125, 0.5, 0.125, 0.25])  # dyadic: every partial sum is exact


@pytest.mark.parametrize("top_k, top_p, expected", [
    (0, 1.0, [1, 3, 0, 2]), (2, 1.0, [1, 3]), (3, 1.0, [1, 3, 0]), (9, 1.0, [1, 3, 0, 2]),
    (0, 0.5, [1]), (0, 0.625, [1, 3]), (0, 0.75, [1, 3]), (0, 0.875, [1, 3, 0]),
    (0, 0.01, [1]), (2, 0.625, [1]), (2, 0.75, [1, 3]), (3, 0.875, [1, 3, 0])])
def test_kept_set_on_crafted_probabilities(top_k, top_p, expected):
    # top_k = 2 then top_p: renormalised over K = {1, 3}, id 1 has 2/3 (>= 0.625, < 0.75).
    assert sampling_np.kept_set(PROBS, top_k, top_p).tolist() == expected


def test_gumbel_max_draws_follow_the_probabilities():
    probs = np.array([0.1, 0.2, 0.3, 0.4])
    draws = 20_000
    tokens = [sampling_np.gumbel_max_token(probs, np.arange(4), 11, position, 0)
              for position in range(draws)]
    counts = np.bincount(tokens, minlength=4)
    chi_square = float(((counts - draws * probs) ** 2 / (draws * probs)).sum())
    assert chi_square < 16.27  # chi-square, 3 degrees of freedom, p = 0.001


def test_gumbel_max_restricted_to_kept_set_draws_from_renormalised_probabilities():
    probs = np.array([0.1, 0.2, 0.3, 0.4])
    kept = sampling_np.kept_set(probs, 2, 1.0)
    draws = 10_000
    tokens = [sampling_np.gumbel_max_token(probs, kept, 5, position, 3)
              for position in range(draws)]
    counts = np.bincount(tokens, minlength=4)
    assert counts[0] == counts[1] == 0
    expected = draws * np.array([3 / 7, 4 / 7])
    chi_square = float(((counts[2:] - expected) ** 2 / expected).sum())
    assert chi_square < 10.83  # 1 degree of freedom, p = 0.001


def test_gumbel_max_uses_lane_equal_to_token_id():
    # With equal probabilities the winner is the id whose own uniform draw is largest.
    probs = np.full(6, 1 / 6)
    kept = np.array([4, 1, 3])
    draws = {i: rng_np.uniform(3, 8, 2, i) for i in kept.tolist()}
    assert sampling_np.gumbel_max_token(probs, kept, 3, 8, 2) == max(draws, key=draws.get)


def test_seeded_sampling_is_reproducible_and_confidence_is_unfiltered():
    logits = [0.5, 1.0, 0.0, 2.0, -40.0]
    first = sample(logits, temperature=1.0, top_k=2, seed=77, position=12, step=4)
    again = sample(logits, temperature=1.0, top_k=2, seed=77, position=12, step=4)
    assert first == again
    assert first.token in (1, 3)
    probs = sampling_np.softmax(np.array(logits[:-1] + [-np.inf]))
    assert first.confidence == pytest.approx(probs[first.token], rel=1e-12)
