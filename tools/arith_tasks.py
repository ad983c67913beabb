"""Checkable arithmetic tasks posed as chat questions: the training data of the shipped demo model
(models/sdar-tiny-arith, trained by tools/train_tiny_sdar.py) and the problems its benchmark
(bench/quality.py) and tests score it on.

    make_problem(rng)              -> (question, answer)        a task drawn from the weighted mix
    make_labeled_problem(rng)      -> (task, question, answer)  the same draw, with the task's name
    make_problem_of(task, rng)     -> (question, answer)        one problem of a named task
    task_of(question)              -> task name (ValueError when the question is no task's)
    check(completion_text, answer) -> bool                      exact match after stripping whitespace

Tasks (TASKS, drawn with TASK_WEIGHTS):
    addition        "What is 4821 + 937?"   -> "5758"           A of 1-5 digits, B of 1-4 digits
    subtraction     "What is 4821 - 937?"   -> "3884"           the same ranges, A >= B
    multiplication  "What is 482 * 7?"      -> "3374"           A of 1-3 digits, B of one digit
    sorting         "Sort: 42, 7, 19, 3"    -> "3, 7, 19, 42"   3-6 numbers of 1-2 digits, ascending

Operands draw their digit count uniformly, then a number of exactly that many digits, so short
and long numbers are equally common (a uniform number would almost always have the most digits).
Everything depends only on the random.Random passed in: the same seed gives the same problems.
Pure standard library: the training machine and CI both import it.
"""
import random
import re

TASKS = ("addition", "subtraction", "multiplication", "sorting")
# Addition is the headline task (the README's first command asks a sum), so it is the most common.
TASK_WEIGHTS = (40, 20, 20, 20)

MAX_DIGITS_A, MAX_DIGITS_B = 5, 4  # addition and subtraction operands
MAX_DIGITS_FACTOR = 3  # multiplication: A of up to 3 digits times one digit
SORT_COUNT = (3, 6)  # how many numbers a sorting problem lists (inclusive)
SORT_MAX_DIGITS = 2

_BINARY = re.compile(r"What is (\d+) ([-+*]) (\d+)\?")
_SORT = re.compile(r"Sort: (\d+(?:, \d+)*)")
_OPERATORS = {"addition": "+", "subtraction": "-", "multiplication": "*"}


def number(rng, digits):
    """A number of exactly `digits` decimal digits (one digit: 0-9)."""
    if digits == 1:
        return rng.randrange(10)
    return rng.randrange(10 ** (digits - 1), 10**digits)


def _operand(rng, max_digits):
    return number(rng, rng.randint(1, max_digits))


def _addition(rng):
    a, b = _operand(rng, MAX_DIGITS_A), _operand(rng, MAX_DIGITS_B)
    return f"What is {a} + {b}?", str(a + b)


def _subtraction(rng):
    a, b = _operand(rng, MAX_DIGITS_A), _operand(rng, MAX_DIGITS_B)
    if a < b:  # only when both have the same digit count (B has at most 4), so the ranges hold
        a, b = b, a
    return f"What is {a} - {b}?", str(a - b)


def _multiplication(rng):
    a, b = _operand(rng, MAX_DIGITS_FACTOR), number(rng, 1)
    return f"What is {a} * {b}?", str(a * b)


def _sorting(rng):
    values = [_operand(rng, SORT_MAX_DIGITS) for _ in range(rng.randint(*SORT_COUNT))]
    return "Sort: " + ", ".join(map(str, values)), ", ".join(map(str, sorted(values)))


_MAKERS = {"addition": _addition, "subtraction": _subtraction, "multiplication": _multiplication,
           "sorting": _sorting}


def _check_rng(rng):
    if not isinstance(rng, random.Random):
        raise TypeError(f"rng must be a random.Random (e.g. random.Random(seed)), got {type(rng).__name__}")


def make_problem_of(task, rng):
    """(question, answer) of the named task."""
    _check_rng(rng)
    if task not in _MAKERS:
        raise ValueError(f"unknown task {task!r}; the tasks are {', '.join(TASKS)}")
    return _MAKERS[task](rng)


def make_labeled_problem(rng):
    """(task, question, answer), the task drawn from TASKS with TASK_WEIGHTS."""
    _check_rng(rng)
    task = rng.choices(TASKS, weights=TASK_WEIGHTS)[0]
    return (task, *_MAKERS[task](rng))


def make_problem(rng):
    """(question, answer) of a task drawn from the mix."""
    return make_labeled_problem(rng)[1:]


def task_of(question):
    """The task a question of this module poses."""
    if not isinstance(question, str):
        raise TypeError(f"question must be a str, got {type(question).__name__}")
    binary = _BINARY.fullmatch(question)
    if binary:
        return next(task for task, op in _OPERATORS.items() if op == binary.group(2))
    if _SORT.fullmatch(question):
        return "sorting"
    raise ValueError(f"not a question of tools/arith_tasks.py: {question!r}")


def check(completion_text, answer):
    """Whether a completion is the answer (surrounding whitespace, such as a final newline, ignored)."""
    if not isinstance(completion_text, str) or not isinstance(answer, str):
        raise TypeError("check(completion_text, answer) takes two str")
    return completion_text.strip() == answer.strip()
