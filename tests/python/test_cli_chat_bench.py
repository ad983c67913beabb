"""`jetengine chat` and `jetengine bench` as processes, with the demo model on the CPU: chat
answers line by line as generate --chat does, /reset starts over and /exit stops, and bad flags
stop it at startup; bench prints one row per batch size with the tokens it was asked for and the
forwards they took, takes the denoising steps, and rejects bad flags."""
import re

from jet_test_utils import REPO, make_tiny_model, run_cli

MODEL = REPO / "models" / "sdar-tiny-arith"


def run(verb, *flags, stdin=""):
    return run_cli([verb, "--model", MODEL, "--device", "cpu", "--kv-cache-mb", "64", *flags], stdin=stdin)


def bench_rows(stdout):
    """batch, tokens, seconds, tok/s, forwards, ms/fwd, device idle of each Mode 1 row."""
    return [line.split() for line in stdout.splitlines() if re.match(r"\s+\d+\s+\d+\s", line)]


def test_chat_answers_each_line_and_resets():
    result = run("chat", "--temperature", "0",
                 stdin="What is 4821 + 937?\n\n/reset\nWhat is 12 + 30?\n/exit\nWhat is 7 + 8?\n")
    assert result.returncode == 0, result.stderr
    # One reply per message (the blank line is skipped, nothing after /exit runs).
    assert result.stdout.splitlines() == ["5758", "42"]


def test_chat_reads_crlf_lines():
    result = run("chat", "--temperature", "0", stdin="What is 4821 + 937?\r\n/exit\r\nWhat is 7 + 8?\r\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == ["5758"]


def test_chat_replies_match_generate_with_the_chat_template():
    alone = run("generate", "--chat", "--temperature", "0", "--prompt", "What is 100 + 200?")
    assert alone.returncode == 0, alone.stderr
    chat = run("chat", "--temperature", "0", stdin="What is 100 + 200?\n")
    assert chat.stdout.splitlines() == alone.stdout.splitlines() == ["300"]


def test_chat_survives_a_message_the_engine_rejects():
    # max_model_len 64 cannot hold this message's prompt: an error, then the next one is answered.
    result = run("chat", "--temperature", "0", "--max-model-len", "64",
                 stdin="What is " + " + ".join(["1"] * 40) + "?\nWhat is 4821 + 937?\n")
    assert result.returncode == 0, result.stderr
    assert "error" in result.stderr and "max_model_len" in result.stderr
    assert result.stdout.splitlines() == ["5758"]


def test_chat_rejects_a_folder_without_a_chat_template():
    result = run_cli(["chat", "--model", REPO / "models" / "qwen3-tokenizer", "--device", "cpu"], stdin="hi\n")
    assert result.returncode == 1
    assert "error" in result.stderr


def test_chat_rejects_bad_sampling_flags_at_startup():
    # Before reading stdin: with no input at all, and without answering the message that is there.
    result = run("chat", "--temperature", "-1", stdin="")
    assert result.returncode == 1
    assert "jetengine chat: error: temperature must be in [0, 1e+06] (0 = greedy), got -1" in result.stderr
    for flags, named in ((["--denoising-steps", "9"], "denoising_steps must be in [1, block_length = 4], got 9"),
                         (["--strategy", "nope"], "unknown remasking strategy 'nope'"),
                         (["--stop-token-ids", "99999"], "stop_token_ids: id 99999 is outside the vocabulary"),
                         (["--stop", ""], "stop: every stop string must hold 1 to 1024 bytes")):
        result = run("chat", *flags, stdin="What is 4821 + 937?\n")
        assert result.returncode == 1 and result.stdout == "", result.stderr
        assert "jetengine chat: error: " + named in result.stderr


def test_bench_prints_a_row_per_batch_and_mode2():
    result = run("bench", "--batches", "1,3", "--prompt-len", "8", "--max-tokens", "8", "--mode2", "4")
    assert result.returncode == 0, result.stderr
    rows = bench_rows(result.stdout)
    assert [(int(r[0]), int(r[1])) for r in rows] == [(1, 8), (3, 24)]
    assert all(float(r[3]) > 0 for r in rows)  # tok/s
    assert re.search(r"mode 2: 4 requests .* tok/s, device idle [\d.]+%", result.stdout)


def test_bench_runs_blocks_shorter_than_its_four_steps():
    result = run("bench", "--block-length", "2", "--batches", "1", "--prompt-len", "8", "--max-tokens", "8")
    assert result.returncode == 0, result.stderr
    assert "steps 2" in result.stdout


def test_bench_takes_denoising_steps_and_counts_forwards():
    # Prompt 8 is two full blocks of 4: one prefill forward, then 2 blocks of S steps each.
    for steps, forwards in ((2, 5), (4, 9), (1, 3)):
        result = run("bench", "--batches", "1,3", "--prompt-len", "8", "--max-tokens", "8", "--denoising-steps", steps)
        assert result.returncode == 0, result.stderr
        assert f"block 4  steps {steps}  " in result.stdout
        rows = bench_rows(result.stdout)
        assert [(int(r[0]), int(r[1]), int(r[4])) for r in rows] == [(1, 8, forwards), (3, 24, forwards)]
        assert all(float(r[5]) > 0 for r in rows)  # ms per forward
    assert "--denoising-steps S" in run_cli(["bench", "--help"]).stdout


def test_bench_counts_the_forwards_of_pure_diffusion(tmp_path):
    # LLaDA, prompt 4 inside a block of 16: no prefill; 12 masks, one committed per step of 16, so
    # the block is done after 12 forwards.
    model = make_tiny_model("llada", tmp_path / "llada", 1)
    result = run_cli(["bench", "--model", model, "--device", "cpu", "--kv-cache-mb", "16", "--block-length", "16",
                      "--batches", "2", "--prompt-len", "4", "--max-tokens", "12", "--denoising-steps", "16"])
    assert result.returncode == 0, result.stderr
    assert [(int(r[1]), int(r[4])) for r in bench_rows(result.stdout)] == [(24, 12)]


def test_bench_rejects_bad_denoising_steps():
    for steps, message in (("0", "denoising_steps must be in [1, block_length = 4], got 0"),
                           ("5", "denoising_steps must be in [1, block_length = 4], got 5"),
                           ("x", "flag --denoising-steps expects an integer, got 'x'")):
        result = run("bench", "--batches", "1", "--denoising-steps", steps)
        assert result.returncode == 1 and result.stdout == ""
        assert "jetengine bench: error: " + message in result.stderr


def test_bench_rejects_bad_flags():
    for batches in ("2,x", "2x", ""):
        result = run("bench", "--batches", batches)
        assert result.returncode == 1
        assert "--batches" in result.stderr


def test_bench_samples_with_the_sampling_flags():
    result = run("bench", "--batches", "2", "--prompt-len", "8", "--max-tokens", "8", "--temperature", "1",
                 "--top-k", "5", "--top-p", "0.9")
    assert result.returncode == 0, result.stderr
    assert "temperature 1  top_k 5  top_p 0.9" in result.stdout
    rows = bench_rows(result.stdout)
    assert [(int(r[0]), int(r[1])) for r in rows] == [(2, 16)]


def test_bench_rejects_a_bad_top_p():
    result = run("bench", "--batches", "1", "--top-p", "1.5")
    assert result.returncode == 1
    assert "top_p" in result.stderr
