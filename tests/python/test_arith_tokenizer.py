"""The demo model's tokenizer (models/sdar-tiny-arith, written by tools/make_arith_tokenizer.py):
the committed files are what the tool writes; the vocabulary is small with task words as single
tokens and digits one per token; the C++ tokenizer agrees with the pure-Python one (tools/byte_bpe.py)
on task chats; the chat template renders the same in jinja2 (as transformers) and in the engine."""
import json
import random
import subprocess
import sys

import pytest

from jet_test_utils import BUILD, REPO, make_tiny_model, run_cli

sys.path.insert(0, str(REPO / "tools"))
sys.path.insert(0, str(BUILD / "python"))
import arith_tasks  # noqa: E402
from byte_bpe import ByteBPE  # noqa: E402
from render_chat_template import hf_variables, render, special_tokens, template_from_config  # noqa: E402

MODEL = REPO / "models" / "sdar-tiny-arith"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
# The chat prompt of the README's question, as the engine feeds it to the model.
PROMPT_4821 = "<|im_start|>user\nWhat is 4821 + 937?<|im_end|>\n<|im_start|>assistant\n"
PROMPT_4821_IDS = [278, 266, 10, 269, 270, 32, 52, 56, 50, 49, 271, 32, 57, 51, 55, 63, 279, 10, 278, 263, 10]


@pytest.fixture(scope="module")
def bpe():
    return ByteBPE.from_file(MODEL / "tokenizer.json")


def chats(n, seed):
    """n task conversations: question alone, the generation prompt, and a full training chat."""
    rng = random.Random(seed)
    texts = []
    for _ in range(n):
        q, a = arith_tasks.make_problem(rng)
        texts += [q, f"<|im_start|>user\n{q}<|im_end|>\n<|im_start|>assistant\n{a}<|im_end|>\n"]
    return texts


def test_committed_files_are_what_the_tool_writes(tmp_path):
    subprocess.run(["/usr/bin/python3", str(REPO / "tools" / "make_arith_tokenizer.py"), "--out", str(tmp_path)],
                   check=True, capture_output=True)
    for name in TOKENIZER_FILES:
        assert (tmp_path / name).read_bytes() == (MODEL / name).read_bytes(), name


def test_small_vocabulary_with_sdar_added_tokens(bpe):
    added = json.loads((MODEL / "tokenizer.json").read_text())["added_tokens"]
    assert [(e["content"], e["special"]) for e in added] == [
        ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True), ("<|MASK|>", False)]
    assert len(bpe.vocab) + len(added) < 512
    config = json.loads((MODEL / "tokenizer_config.json").read_text())
    assert (config["eos_token"], config["pad_token"], config["mask_token"]) == ("<|im_end|>", "<|endoftext|>",
                                                                               "<|MASK|>")


def test_task_words_are_single_tokens_and_digits_one_per_token(bpe):
    for word in ("What", " is", " +", " -", " *", "Sort", "user", "assistant"):
        assert len(bpe.encode(word)) == 1, word
    assert [bpe.id_to_token[i] for i in bpe.encode("What is 4821 + 937?")] == [
        "What", "Ġis", "Ġ", "4", "8", "2", "1", "Ġ+", "Ġ", "9", "3", "7", "?"]
    assert bpe.encode(PROMPT_4821) == PROMPT_4821_IDS


def test_cpp_tokenizer_agrees_with_python(bpe):
    texts = chats(200, seed=1) + ["Hello, world! Not a task.\n\n\ttabs  <|MASK|><|MASK|>x", "", "   "]
    done = run_cli(["tokenize", "--model", MODEL, "--jsonl"], stdin="".join(json.dumps(t) + "\n" for t in texts))
    assert done.returncode == 0, done.stderr
    ids = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(ids) == len(texts)
    for text, cpp in zip(texts, ids):
        assert cpp == bpe.encode(text), text
        assert bpe.decode(cpp) == text
    back = run_cli(["detokenize", "--model", MODEL, "--jsonl"], stdin=done.stdout)
    assert back.returncode == 0, back.stderr
    assert [json.loads(line) for line in back.stdout.splitlines()] == texts


def conversations():
    rng = random.Random(2)
    (q1, a1), (q2, _) = arith_tasks.make_problem(rng), arith_tasks.make_problem(rng)
    return [
        [{"role": "user", "content": "What is 4821 + 937?"}],
        [{"role": "system", "content": "Answer with the number only."}, {"role": "user", "content": q1}],
        [{"role": "user", "content": q1}, {"role": "assistant", "content": a1}, {"role": "user", "content": q2}],
    ]


@pytest.fixture(scope="module")
def llm(tmp_path_factory):
    """The engine on a random model with this tokenizer (the template needs no trained weights)."""
    from jetengine import LLM
    folder = make_tiny_model("sdar", tmp_path_factory.mktemp("arith"), 0, "--tokenizer", MODEL)
    return LLM(str(folder), device="cpu", num_threads=1, kvcache_block_size=16, num_kvcache_blocks=64)


@pytest.mark.parametrize("generation_prompt", [True, False])
def test_chat_template_renders_as_in_jinja2(llm, bpe, generation_prompt):
    config = MODEL / "tokenizer_config.json"
    template = template_from_config(config)
    for messages in conversations():
        expected = render(template, hf_variables(messages, generation_prompt, **special_tokens(config)))
        text = llm.tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt, tokenize=False)
        assert text == expected
        ids = llm.tokenizer.apply_chat_template(messages, add_generation_prompt=generation_prompt)
        assert ids == bpe.encode(expected)
    assert llm.tokenizer.apply_chat_template(conversations()[0], add_generation_prompt=True,
                                             tokenize=False) == PROMPT_4821
