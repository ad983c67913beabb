"""`jetengine tokenize` / `detokenize` with the Qwen3 tokenizer: round trips, the --jsonl modes
against HuggingFace's ids (tests/data/tokenizer), and bad input (exit code 1, message on stderr)."""
import json

import pytest

from jet_test_utils import REPO, run_cli

MODEL = REPO / "models" / "qwen3-tokenizer"
CASES = REPO / "tests" / "data" / "tokenizer" / "qwen3_tokenizer_cases.jsonl"

ROUND_TRIP_TEXTS = [
    "Hello world",
    "  leading spaces, trailing tabs\t\t\n\n",
    "中文和English混合，数字 12345。",
    "emoji 🌍👨‍👩‍👧 and math ∑ x² ≤ ∞",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n",
    "def f(x):\n    return {'a': [1, 2.5, None]}\n",
    "",
]


def run(verb, *flags, stdin=b""):
    """Runs a verb with the Qwen3 tokenizer; stdin and stdout are bytes."""
    return run_cli([verb, "--model", MODEL, *flags], stdin=stdin, text=False)


def tokenize(text, *flags):
    result = run("tokenize", *flags, stdin=text.encode("utf-8"))
    assert result.returncode == 0, result.stderr.decode()
    return json.loads(result.stdout)


def detokenize(ids, *flags):
    result = run("detokenize", *flags, stdin=json.dumps(ids).encode())
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode("utf-8")


def test_known_ids():
    assert tokenize("Hello world") == [9707, 1879]
    assert tokenize("<|im_start|>user\n") == [151644, 872, 198]


@pytest.mark.parametrize("text", ROUND_TRIP_TEXTS)
def test_round_trip(text):
    assert detokenize(tokenize(text)) == text


def test_skip_special_tokens():
    ids = tokenize("<|im_start|>user\nHello<|im_end|>")
    assert detokenize(ids, "--skip-special-tokens") == "user\nHello"
    assert detokenize([9707, 151800, 1879]) == "Hello world"  # an id beyond the tokenizer decodes to nothing


def test_jsonl_matches_huggingface_ids():
    cases = [json.loads(line) for line in CASES.read_text().splitlines() if line]
    stdin = "".join(json.dumps(case["text"]) + "\n" for case in cases).encode()
    result = run("tokenize", "--jsonl", stdin=stdin)
    assert result.returncode == 0, result.stderr.decode()
    lines = result.stdout.decode().splitlines()
    assert len(lines) == len(cases)
    for case, line in zip(cases, lines):
        assert json.loads(line) == case["ids"], case["name"]

    back = run("detokenize", "--jsonl", stdin=result.stdout)
    assert back.returncode == 0, back.stderr.decode()
    out = back.stdout.decode("ascii")  # non-ASCII is escaped, so U+2028 & co. cannot split lines
    decoded = [json.loads(line) for line in out.split("\n")[:-1]]
    assert decoded == [case.get("decoded", case["text"]) for case in cases]


def test_jsonl_last_line_without_newline():
    result = run("tokenize", "--jsonl", stdin=b'"a"\n"b"')
    assert result.returncode == 0
    assert result.stdout.decode().splitlines() == ["[64]", "[65]"]


def test_jsonl_skips_blank_lines():
    result = run("tokenize", "--jsonl", stdin=b'"a"\n\n  \r\n"b"\n')
    assert result.returncode == 0, result.stderr.decode()
    assert result.stdout.decode().splitlines() == ["[64]", "[65]"]


def test_help():
    for verb in ("tokenize", "detokenize"):
        result = run_cli([verb, "--help"], text=False)
        assert result.returncode == 0
        assert b"usage: jetengine " + verb.encode() in result.stdout


@pytest.mark.parametrize("verb, flags, stdin, message", [
    ("tokenize", [], b"abc\xff", "invalid UTF-8 at byte offset 3"),
    ("tokenize", ["--jsonl"], b'"fine"\nnot json\n', "line 2"),
    ("tokenize", ["--jsonl"], b'"fine"\n[1, 2]\n', "line 2: expected a JSON string"),
    ("detokenize", [], b'{"ids": [1]}', "expected a JSON array of token ids"),
    ("detokenize", [], b'[1, "x"]', "element 1"),
    ("detokenize", [], b"[1, 18446744073709551615]", "element 1 of the id array is 18446744073709551615"),
    ("detokenize", [], b"[4294967296]", "element 0 of the id array is 4294967296, not a 32-bit integer"),
    ("detokenize", ["--jsonl"], b"[1]\n[2\n", "line 2"),
])
def test_bad_input(verb, flags, stdin, message):
    result = run(verb, *flags, stdin=stdin)
    assert result.returncode == 1
    assert message in result.stderr.decode()


def test_bad_model_dir(tmp_path):
    result = run_cli(["tokenize", "--model", tmp_path], stdin=b"x", text=False)
    assert result.returncode == 1
    assert "tokenizer.json" in result.stderr.decode()
