"""tools/arith_tasks.py: the same problems for a seed, correct answers (recomputed here from the
question text, not with the module's code), the stated digit ranges and task mix, task_of and check."""
import collections
import random
import re
import sys

import pytest

from jet_test_utils import REPO

sys.path.insert(0, str(REPO / "tools"))
import arith_tasks  # noqa: E402
from arith_tasks import TASKS, check, make_labeled_problem, make_problem, make_problem_of, task_of  # noqa: E402

N = 4000


def labeled(seed, n=N):
    rng = random.Random(seed)
    return [make_labeled_problem(rng) for _ in range(n)]


def solve(question):
    """The answer, worked out independently of the module."""
    if question.startswith("Sort: "):
        values = [int(v) for v in question[len("Sort: "):].split(", ")]
        return ", ".join(str(v) for v in sorted(values))
    a, op, b = re.fullmatch(r"What is (\d+) (.) (\d+)\?", question).groups()
    a, b = int(a), int(b)
    return str({"+": a + b, "-": a - b, "*": a * b}[op])


def test_same_seed_same_problems_other_seed_others():
    assert labeled(7) == labeled(7)
    assert labeled(7) != labeled(8)
    for task in TASKS:
        rng_a, rng_b = random.Random(3), random.Random(3)
        assert [make_problem_of(task, rng_a) for _ in range(50)] == [make_problem_of(task, rng_b) for _ in range(50)]


def test_make_problem_is_the_labeled_draw_without_the_label():
    rng_a, rng_b = random.Random(11), random.Random(11)
    assert [make_problem(rng_a) for _ in range(200)] == [make_labeled_problem(rng_b)[1:] for _ in range(200)]


def test_answers_are_correct_and_tasks_are_named():
    for task, question, answer in labeled(1):
        assert answer == solve(question), question
        assert task_of(question) == task
        assert check(answer, answer)


def digit_counts(task, seed=2, n=N):
    """Digit counts of the first and second operand of n problems of a binary task."""
    rng = random.Random(seed)
    firsts, seconds = collections.Counter(), collections.Counter()
    for _ in range(n):
        a, _, b = re.fullmatch(r"What is (\d+) (.) (\d+)\?", make_problem_of(task, rng)[0]).groups()
        assert a == str(int(a)) and b == str(int(b))  # no leading zeros
        firsts[len(a)] += 1
        seconds[len(b)] += 1
    return firsts, seconds


@pytest.mark.parametrize("task", ["addition", "subtraction"])
def test_addition_and_subtraction_digit_ranges(task):
    firsts, seconds = digit_counts(task)
    assert set(firsts) == {1, 2, 3, 4, 5} and set(seconds) == {1, 2, 3, 4}
    if task == "addition":  # digit counts are uniform: every count near N / 5 and N / 4
        assert all(abs(c - N / 5) < N / 20 for c in firsts.values())
        assert all(abs(c - N / 4) < N / 20 for c in seconds.values())


def test_subtraction_never_goes_negative():
    rng = random.Random(4)
    for _ in range(N):
        question, answer = make_problem_of("subtraction", rng)
        a, b = map(int, re.findall(r"\d+", question))
        assert a >= b and int(answer) >= 0


def test_multiplication_is_up_to_three_digits_by_one():
    firsts, seconds = digit_counts("multiplication")
    assert set(firsts) == {1, 2, 3} and set(seconds) == {1}


def test_sorting_lists_three_to_six_numbers_of_one_or_two_digits():
    rng = random.Random(5)
    lengths, digits = collections.Counter(), collections.Counter()
    for _ in range(N):
        question, answer = make_problem_of("sorting", rng)
        values = question[len("Sort: "):].split(", ")
        lengths[len(values)] += 1
        digits.update(len(v) for v in values)
        assert sorted(answer.split(", "), key=int) == answer.split(", ")
    assert set(lengths) == {3, 4, 5, 6} and set(digits) == {1, 2}


def test_task_mix_follows_the_weights():
    counts = collections.Counter(task for task, _, _ in labeled(6))
    assert set(counts) == set(TASKS)
    for task, weight in zip(TASKS, arith_tasks.TASK_WEIGHTS):
        assert abs(counts[task] / N - weight / sum(arith_tasks.TASK_WEIGHTS)) < 0.03, task
    assert counts.most_common(1)[0][0] == "addition"


def test_check_is_exact_after_stripping_whitespace():
    assert check("5758", "5758")
    assert check(" 5758\n", "5758")
    assert check("3, 7, 19, 42", "3, 7, 19, 42 ")
    assert not check("5759", "5758")
    assert not check("5758.", "5758")
    assert not check("05758", "5758")
    assert not check("3,7,19,42", "3, 7, 19, 42")
    assert not check("", "5758")
    with pytest.raises(TypeError):
        check(5758, "5758")


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="unknown task 'division'"):
        make_problem_of("division", random.Random(0))
    with pytest.raises(TypeError, match="random.Random"):
        make_problem(0)
    with pytest.raises(ValueError, match="not a question"):
        task_of("What is the capital of France?")
    with pytest.raises(TypeError):
        task_of(None)
