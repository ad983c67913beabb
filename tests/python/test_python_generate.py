"""The Python package's generate / generate_streaming: outputs identical to the C++ engine's CLI
(greedy and seeded sampling), the output keys and their lengths, per-prompt SamplingParams,
streaming order, the tokenizer, and Ctrl-C leaving the engine usable."""

import dataclasses
import json
import os
import signal
import sys
import threading
import time

import numpy as np
import pytest

from jet_test_utils import BUILD, make_tiny_model, run_cli

sys.path.insert(0, str(BUILD / "python"))  # the package as the build assembles it
from jetengine import LLM, SamplingParams  # noqa: E402

# Small, single-threaded engines keep the suite fast; the CLI gets the same settings.
ENGINE = dict(device="cpu", num_threads=1, kvcache_block_size=16, num_kvcache_blocks=512)
CLI_ENGINE = ["--device", "cpu", "--threads", "1", "--kv-page-size", "16", "--kv-pages", "512"]
KEYS = {"text", "token_ids", "trajectory", "first_unmask_times", "logprobs", "entropies", "completion_ids",
        "completion_text", "finish_reason", "num_forwards", "prompt_len"}


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return make_tiny_model("sdar", tmp_path_factory.mktemp("sdar"), seed=5)


@pytest.fixture(scope="module")
def llm(model):
    return LLM(model, **ENGINE)


def random_prompts(n, seed, low=3, high=14):
    rng = np.random.default_rng(seed)
    return [rng.integers(3, 500, int(rng.integers(low, high))).tolist() for _ in range(n)]


def cli_outputs(done):
    """The CLI's --json lines as the package returns them: with first_unmask_times, the name TraceRL's
    JetEngine gave trajectory, beside it."""
    assert done.returncode == 0, done.stderr
    outputs = [json.loads(line) for line in done.stdout.splitlines()]
    for out in outputs:
        out["first_unmask_times"] = out["trajectory"]
    return outputs


def cli_generate(model, prompts, *flags):
    path = model / "python_prompts.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in prompts))
    return cli_outputs(run_cli(["generate", "--model", model, "--prompts", path, "--json", *CLI_ENGINE, *flags]))


def assert_same_tokens(a, b):
    """Same decode; probabilities equal up to fp32 noise (BLAS blocking follows the batch shape)."""
    assert len(a) == len(b)
    for x, y in zip(a, b):
        for key in ("token_ids", "completion_ids", "trajectory", "finish_reason", "num_forwards", "text"):
            assert x[key] == y[key], key
        np.testing.assert_allclose(x["logprobs"], y["logprobs"], rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(x["entropies"], y["entropies"], rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("params, flags", [
    (SamplingParams(temperature=0, max_tokens=16), ["--temperature", "0", "--max-tokens", "16"]),
    (SamplingParams(temperature=0.8, topk=20, topp=0.9, seed=11, max_tokens=13, remasking_strategy="random",
                    denoising_steps=2),
     ["--temperature", "0.8", "--top-k", "20", "--top-p", "0.9", "--seed", "11", "--max-tokens", "13",
      "--strategy", "random", "--denoising-steps", "2"]),
    (SamplingParams(temperature=1.0, seed=3, max_tokens=12, remasking_strategy="low_confidence_dynamic",
                    dynamic_threshold=0.5, repetition_penalty=1.3, ignore_eos=True),
     ["--temperature", "1.0", "--seed", "3", "--max-tokens", "12", "--strategy", "low_confidence_dynamic",
      "--dynamic-threshold", "0.5", "--repetition-penalty", "1.3", "--ignore-eos"]),
], ids=["greedy", "seeded-topk-topp", "seeded-dynamic-penalty"])
def test_outputs_identical_to_the_cli(model, llm, params, flags):
    prompts = random_prompts(12, seed=1)
    assert llm.generate(prompts, params, use_tqdm=False) == cli_generate(model, prompts, *flags)


def test_the_clis_tensor_parallel_ranks_decode_what_one_engine_does(model, llm):
    prompts = random_prompts(6, seed=2)
    params = SamplingParams(temperature=0.8, seed=5, max_tokens=12, ignore_eos=True)
    split = cli_generate(model, prompts, "--temperature", "0.8", "--seed", "5", "--max-tokens", "12", "--ignore-eos",
                         "--tensor-parallel-size", "2")
    assert_same_tokens(split, llm.generate(prompts, params, use_tqdm=False))


def test_the_clis_expert_parallel_ranks_decode_what_one_engine_does(tmp_path):
    moe = make_tiny_model("sdar_moe", tmp_path / "moe", seed=2)
    prompts = random_prompts(4, seed=3)
    flags = ("--temperature", "0", "--max-tokens", "8", "--ignore-eos")
    whole = cli_generate(moe, prompts, *flags)
    assert_same_tokens(whole, cli_generate(moe, prompts, *flags, "--tensor-parallel-size", "2",
                                           "--enable-expert-parallel"))


def test_exploration_modifiers_are_the_clis_and_reach_their_limits(model, llm):
    """LLM's diversity_enforce / epsilon_greedy decode as the CLI's per-request flags do; a barrier
    past every block is the sequential strategy, and epsilon 1 the random strategy."""
    prompts = random_prompts(8, seed=6)
    params = SamplingParams(temperature=0.9, seed=4, max_tokens=16)
    explored = LLM(model, **ENGINE, diversity_enforce=True, diversity_enforce_barrier=5, epsilon_greedy=True,
                   epsilon=0.4).generate(prompts, params, use_tqdm=False)
    assert explored == cli_generate(model, prompts, "--temperature", "0.9", "--seed", "4", "--max-tokens", "16",
                                    "--diversity-enforce-barrier", "5", "--epsilon-greedy", "0.4")
    assert explored != llm.generate(prompts, params, use_tqdm=False)

    def with_strategy(name):
        return llm.generate(prompts, dataclasses.replace(params, remasking_strategy=name), use_tqdm=False)

    always_sequential = LLM(model, **ENGINE, diversity_enforce=True, diversity_enforce_barrier=10**6)
    assert always_sequential.generate(prompts, params, use_tqdm=False) == with_strategy("sequential")
    always_random = LLM(model, **ENGINE, epsilon_greedy=True, epsilon=1.0)
    assert always_random.generate(prompts, params, use_tqdm=False) == with_strategy("random")


def test_streaming_identical_to_the_cli(model, llm):
    prompts = random_prompts(10, seed=2)
    params = SamplingParams(temperature=0.7, seed=8, max_tokens=10)
    expected = cli_generate(model, prompts, "--temperature", "0.7", "--seed", "8", "--max-tokens", "10",
                            "--max-active", "3")
    assert llm.generate_streaming(prompts, params, max_active=3, use_tqdm=False) == expected


def test_text_prompts_are_encoded_like_the_cli(model, llm):
    prompts = ["Block diffusion fills a block", "of masked tokens in a few steps."]
    path = model / "text_prompts.jsonl"
    path.write_text("".join(json.dumps(p) + "\n" for p in prompts))
    expected = cli_outputs(run_cli(["generate", "--model", model, "--prompts", path, "--json", "--temperature", "0",
                                    *CLI_ENGINE]))
    assert llm.generate(prompts, SamplingParams(temperature=0), use_tqdm=False) == expected


def test_every_key_with_one_entry_per_completion_token(llm):
    prompts = random_prompts(6, seed=3)
    outputs = llm.generate(prompts, SamplingParams(temperature=0.5, seed=1, max_tokens=11), use_tqdm=False)
    for prompt, out in zip(prompts, outputs):
        assert set(out) == KEYS
        n = len(out["completion_ids"])
        assert 1 <= n <= 11
        assert len(out["trajectory"]) == len(out["logprobs"]) == len(out["entropies"]) == n
        assert out["token_ids"] == prompt + out["completion_ids"]
        assert out["prompt_len"] == len(prompt)
        assert out["finish_reason"] in ("stop", "length")
        assert all(t >= 1 for t in out["trajectory"])
        assert out["first_unmask_times"] == out["trajectory"] and out["first_unmask_times"] is not out["trajectory"]
        assert all(lp <= 0 for lp in out["logprobs"]) and all(h >= 0 for h in out["entropies"])
        assert out["text"] == llm.tokenizer.decode(out["token_ids"])
        assert out["completion_text"] == llm.tokenizer.decode(out["completion_ids"], skip_special_tokens=True)


def test_per_prompt_sampling_params_in_one_call(llm):
    prompts = random_prompts(3, seed=4)
    params = [SamplingParams(temperature=0, max_tokens=5),
              SamplingParams(temperature=1.0, seed=9, max_tokens=9, ignore_eos=True),
              SamplingParams(temperature=0.6, seed=2, max_tokens=14, remasking_strategy="entropy_bounded")]
    together = llm.generate(prompts, params, use_tqdm=False)
    alone = [llm.generate([p], sp, use_tqdm=False)[0] for p, sp in zip(prompts, params)]
    assert_same_tokens(together, alone)
    assert len(together[0]["completion_ids"]) <= 5 and len(together[1]["completion_ids"]) == 9


def test_stop_words_replace_the_eos_default(llm):
    prompt = random_prompts(1, seed=5)
    free = llm.generate(prompt, SamplingParams(temperature=0, max_tokens=24, ignore_eos=True), use_tqdm=False)[0]
    stop = free["completion_ids"][5]
    first = free["completion_ids"].index(stop)
    for params in (SamplingParams(temperature=0, max_tokens=24, stop_words=[stop]),
                   SamplingParams(temperature=0, max_tokens=24, stop_token_ids=[stop])):
        out = llm.generate(prompt, params, use_tqdm=False)[0]
        assert out["completion_ids"] == free["completion_ids"][:first + 1]
        assert out["finish_reason"] == "stop"


def test_stop_strings_cut_the_text_before_them(llm):
    prompt = random_prompts(1, seed=5)
    # Seeded sampling: a random model's greedy text repeats one token.
    free = llm.generate(prompt, SamplingParams(temperature=1, seed=3, max_tokens=24, ignore_eos=True),
                        use_tqdm=False)[0]
    text = free["completion_text"]
    stop = text[len(text) // 2:len(text) // 2 + 2]
    for given in (stop, [stop, "\x01never"]):
        out = llm.generate(prompt, SamplingParams(temperature=1, seed=3, max_tokens=24, ignore_eos=True, stop=given),
                           use_tqdm=False)[0]
        assert out["completion_text"] == text[:text.index(stop)]
        assert out["finish_reason"] == "stop"
        assert out["completion_ids"] == free["completion_ids"][:len(out["completion_ids"])]
    with pytest.raises(TypeError, match="stop must be a string or a list of strings"):
        SamplingParams(stop=[3])


def test_500_prompts_streaming_come_back_in_order(llm):
    prompts = random_prompts(500, seed=6, low=2, high=10)
    params = SamplingParams(temperature=0, max_tokens=4, ignore_eos=True)
    streamed = llm.generate_streaming(prompts, params, max_active=8, use_tqdm=False)
    assert [out["token_ids"][:out["prompt_len"]] for out in streamed] == prompts
    assert_same_tokens(streamed, llm.generate(prompts, params, use_tqdm=False))


def test_profile_writes_a_summary_of_each_call(llm, tmp_path):
    prompts = random_prompts(5, seed=8)
    params = SamplingParams(temperature=0, max_tokens=9)
    plain = llm.generate(prompts, params, use_tqdm=False)
    outs = llm.generate(prompts, params, use_tqdm=False, profile=True, profile_dir=tmp_path / "traces")
    assert_same_tokens(outs, plain)
    llm.generate_streaming(prompts, params, max_active=2, use_tqdm=False, profile=True, profile_dir=tmp_path / "traces")
    files = sorted((tmp_path / "traces").iterdir(), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
    assert len(files) == 2
    first, second = (json.loads(f.read_text()) for f in files)
    assert (first["method"], second["method"]) == ("generating", "streaming")
    for summary in (first, second):
        assert summary["prompts"] == 5 and summary["rank"] == 0
        assert summary["completion_tokens"] == sum(len(o["completion_ids"]) for o in outs)
        assert summary["forwards"] >= 9 // 4 and summary["wall_seconds"] > 0
        assert summary["tokens_per_second"] == pytest.approx(summary["completion_tokens"] / summary["wall_seconds"])
        assert 0 <= summary["device_idle_seconds"] <= summary["wall_seconds"]
    with pytest.raises(TypeError, match="profile must be True or False"):
        llm.generate(prompts, params, profile="yes")
    with pytest.raises(TypeError, match="profile_dir must be a path or None"):
        llm.generate(prompts, params, profile=True, profile_dir=3)


def test_empty_prompt_list_gives_no_outputs(llm):
    assert llm.generate([], SamplingParams()) == []
    assert llm.generate_streaming([], SamplingParams(), max_active=4) == []


def test_progress_bar_counts_every_prompt(llm, capsys):
    llm.generate(random_prompts(4, seed=7), SamplingParams(temperature=0, max_tokens=4), use_tqdm=True)
    assert "4/4" in capsys.readouterr().err


def test_tokenizer(llm):
    tok = llm.tokenizer
    ids = tok.encode("Hello block diffusion")
    assert tok.decode(ids) == "Hello block diffusion"
    assert tok.decode(np.array(ids)) == "Hello block diffusion"
    assert tok.eos_token_id == tok.convert_tokens_to_ids("<|endoftext|>")
    assert tok.convert_ids_to_tokens(tok.eos_token_id) == "<|endoftext|>"
    assert tok.convert_ids_to_tokens(np.array(ids))[0] == tok.convert_ids_to_tokens(np.int64(ids[0]))
    assert tok.convert_tokens_to_ids("no such token") is None
    assert tok.decode([tok.eos_token_id], skip_special_tokens=True) == ""


def test_tokenizer_mask_and_special_tokens_as_transformers_names_them(tmp_path):
    # SDAR's tokenizer_config.json: eos and pad <|endoftext|>, mask <|MASK|>, then 14 additional
    # special tokens (Qwen3's 13 and <|MASK|> again); each is listed once.
    llm = LLM(make_tiny_model("sdar", tmp_path / "q", 1, "--vocab", "qwen3", "--layers", "1"), **ENGINE)
    tok = llm.tokenizer
    assert tok.mask_token_id == 151669 and tok.mask_token == "<|MASK|>"
    # The default stop set is the model's (README, Differences), not the tokenizer's one eos.
    assert tok.eos_token_id == 151643 and sorted(llm.summary.eos_token_ids) == [151643, 151645]
    assert tok.all_special_tokens[:4] == ["<|endoftext|>", "<|MASK|>", "<|im_start|>", "<|im_end|>"]
    assert len(tok.all_special_tokens) == 15 and tok.all_special_tokens[-1] == "<|video_pad|>"
    assert tok.all_special_ids[:4] == [151643, 151669, 151644, 151645]
    assert tok.all_special_ids == [tok.convert_tokens_to_ids(t) for t in tok.all_special_tokens]


def test_shutdown_frees_the_engine_until_a_reload(model):
    llm = LLM(model, **ENGINE)
    expected = llm.generate([[5, 6, 7]], SamplingParams(temperature=0, max_tokens=4), use_tqdm=False)
    llm.shutdown()
    llm.shutdown()
    assert not llm.has_weights()
    with pytest.raises(RuntimeError, match="holds no weights"):
        llm.generate([[5, 6, 7]], SamplingParams(temperature=0, max_tokens=4), use_tqdm=False)
    llm.reload_from_path(model)
    assert llm.generate([[5, 6, 7]], SamplingParams(temperature=0, max_tokens=4), use_tqdm=False) == expected


def test_chat_template(llm):
    tok = llm.tokenizer
    messages = [{"role": "user", "content": "What is 2 + 2?"}]
    text = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    assert text.startswith("<|im_start|>user\nWhat is 2 + 2?<|im_end|>\n")
    assert text.endswith("<|im_start|>assistant\n")
    # transformers' defaults: ids, no generation prompt.
    plain = tok.apply_chat_template(messages)
    assert plain == tok.encode(text.removesuffix("<|im_start|>assistant\n"), add_special_tokens=False)
    assert tok.apply_chat_template(conversation=messages, add_generation_prompt=True) == tok.encode(
        text, add_special_tokens=False)
    assert tok.apply_chat_template(messages=messages, tokenize=False) == tok.decode(plain)
    assert tok.apply_chat_template([messages, messages], add_generation_prompt=True, tokenize=False) == [text, text]
    as_dict = tok.apply_chat_template(messages, return_dict=True)
    assert as_dict == {"input_ids": plain, "attention_mask": [1] * len(plain)}
    # Keys the C++ messages do not carry reach the template as given.
    named = tok.apply_chat_template([{"role": "user", "content": "hi", "name": "ann"}])
    assert named == tok.apply_chat_template([{"role": "user", "content": "hi"}])


def test_chat_template_keeps_an_empty_reasoning_content(tmp_path):
    # As transformers passes them: "" is a string; None and no key are not (Qwen3 tests `is string`
    # or `is not none`). A chat_template.jinja next to the config replaces the model's template.
    folder = make_tiny_model("sdar", tmp_path / "sdar", seed=5)
    probe = "{% for m in messages %}{{ m.reasoning_content is string }} {% endfor %}"
    (folder / "chat_template.jinja").write_text(probe)
    tok = LLM(folder, **ENGINE).tokenizer
    messages = [{"role": "assistant", "content": "a"}] + [
        {"role": "assistant", "content": "a", "reasoning_content": r} for r in (None, "", "r")]
    assert tok.apply_chat_template(messages, tokenize=False) == "False False True True "


def test_chat_template_continues_the_final_message(llm):
    tok = llm.tokenizer
    messages = [{"role": "user", "content": "What is 2 + 2?"}, {"role": "assistant", "content": "It is"}]
    text = tok.apply_chat_template(messages, continue_final_message=True, tokenize=False)
    assert text.endswith("It is") and text.count("<|im_end|>") == 1  # the assistant's turn is left open
    with pytest.raises(ValueError, match="cannot both be set"):
        tok.apply_chat_template(messages, continue_final_message=True, add_generation_prompt=True)
    with pytest.raises(TypeError, match="return_tensors"):
        tok.apply_chat_template(messages, return_tensors="pt")
    with pytest.raises(ValueError, match="tokenize=True"):
        tok.apply_chat_template(messages, return_dict=True, tokenize=False)


def test_tokenizer_call_decode_of_one_id_and_token_strings(llm):
    tok = llm.tokenizer
    ids = tok.encode("hello world")
    assert tok("hello world") == {"input_ids": ids, "attention_mask": [1] * len(ids)}
    assert tok(["a", "b"])["input_ids"] == [tok.encode("a"), tok.encode("b")]
    assert tok.decode(ids[0]) == tok.decode([ids[0]])
    assert tok.eos_token == tok.convert_ids_to_tokens(tok.eos_token_id)
    vocab = tok.get_vocab()
    assert vocab[tok.eos_token] == tok.eos_token_id and len(vocab) <= len(tok)


def test_ctrl_c_stops_generation_and_the_engine_stays_usable(llm, monkeypatch):
    # Ctrl-C from another thread while the engine runs, sent once the engine has stepped (a
    # timer of 0.3 s could fire before the call had started on a loaded machine): the progress
    # callback, which the engine calls every step, tells a helper thread when to send it, and
    # waits until it is sent (on a loaded machine the helper thread could otherwise first run
    # after the whole list had been decoded).
    import jetengine.progress

    steps = []
    running, sent = threading.Event(), threading.Event()

    def counting_callback(self):
        def on_step(done, total, tokens):
            steps.append(done)
            running.set()
            sent.wait(60)
        return on_step

    def send():
        if running.wait(60):
            os.kill(os.getpid(), signal.SIGINT)
        sent.set()

    monkeypatch.setattr(jetengine.progress.Progress, "callback", counting_callback)
    # Python leaves SIGINT ignored when it starts with it ignored, as a shell does for a command
    # it runs in the background ('&' without job control): Ctrl-C's handler, for this test.
    previous_handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    sender = threading.Thread(target=send)
    prompts = random_prompts(3000, seed=8)
    params = SamplingParams(temperature=0, max_tokens=64, ignore_eos=True)
    sender.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            llm.generate_streaming(prompts, params, max_active=1, use_tqdm=False)
    finally:
        sender.join()
        signal.signal(signal.SIGINT, previous_handler)
    assert running.is_set()
    assert steps[-1] < len(prompts)  # stopped early: the whole list takes far more steps
    monkeypatch.undo()
    # Nothing of the interrupted call is left behind.
    assert_same_tokens(llm.generate(prompts[:3], params, use_tqdm=False),
                       [llm.generate([p], params, use_tqdm=False)[0] for p in prompts[:3]])


def test_vocab_size_and_len_follow_transformers(tmp_path):
    # Qwen3's tokenizer (SDAR's, plus <|MASK|> at 151669): transformers gives vocab_size 151,643
    # (model.vocab alone) and len 151,669 + 1 (the 26 added tokens and the mask).
    model = make_tiny_model("sdar", tmp_path / "m", 1, "--vocab", "qwen3", "--layers", "1", "--no-weights")
    tok = LLM(str(model), load_format="dummy", **ENGINE).tokenizer
    assert tok.vocab_size == 151643
    assert len(tok) == 151670
    assert len(tok.get_vocab()) == 151670
