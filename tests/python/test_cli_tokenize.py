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


def slow_tokenizer_folder(folder, tokenizer_class="Qwen2Tokenizer"):
    """The Qwen3 tokenizer as the slow tokenizer's files (Dream ships these, no tokenizer.json):
    vocab.json, merges.txt and tokenizer_config.json with its added tokens."""
    folder.mkdir()
    model = json.loads((MODEL / "tokenizer.json").read_text(encoding="utf-8"))["model"]
    (folder / "vocab.json").write_text(json.dumps(model["vocab"], ensure_ascii=False), encoding="utf-8")
    pairs = (m if isinstance(m, list) else m.split(" ") for m in model["merges"])
    (folder / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in pairs), encoding="utf-8")
    config = json.loads((MODEL / "tokenizer_config.json").read_text(encoding="utf-8"))
    (folder / "tokenizer_config.json").write_text(json.dumps(dict(config, tokenizer_class=tokenizer_class)))
    return folder


@pytest.mark.parametrize("tokenizer_class", ["Qwen2Tokenizer", "DreamTokenizer"])
def test_vocab_and_merges_without_tokenizer_json_match_huggingface_ids(tmp_path, tokenizer_class):
    folder = slow_tokenizer_folder(tmp_path / "slow", tokenizer_class)
    cases = [json.loads(line) for line in CASES.read_text().splitlines() if line]
    stdin = "".join(json.dumps(case["text"]) + "\n" for case in cases).encode()
    result = run_cli(["tokenize", "--model", folder, "--jsonl"], stdin=stdin, text=False)
    assert result.returncode == 0, result.stderr.decode()
    for case, line in zip(cases, result.stdout.decode().splitlines(), strict=True):
        assert json.loads(line) == case["ids"], case["name"]
    back = run_cli(["detokenize", "--model", folder], stdin=json.dumps([151644, 872, 198, 9707]).encode(), text=False)
    assert back.stdout.decode() == "<|im_start|>user\nHello"


def test_vocab_and_merges_of_another_tokenizer_class_are_refused(tmp_path):
    folder = slow_tokenizer_folder(tmp_path / "slow", "LlamaTokenizer")
    result = run_cli(["tokenize", "--model", folder], stdin=b"x", text=False)
    assert result.returncode == 1
    assert "for Qwen2's byte-level BPE only" in result.stderr.decode()
    assert "not for tokenizer_class LlamaTokenizer" in result.stderr.decode()
    (folder / "merges.txt").write_text("#version: 0.2\nĠ Ġ\nonly-one-token\n", encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "Qwen2Tokenizer"}))
    result = run_cli(["tokenize", "--model", folder], stdin=b"x", text=False)
    assert result.returncode == 1
    assert "merges.txt: line 3 must be two tokens separated by one space" in result.stderr.decode()
