"""`jetengine serve` as a process: it prints the port it picked (--port 0), answers an OpenAI chat
request with the demo model on the CPU, Ctrl-C (SIGINT) stops it with exit code 0, SIGTERM lets
a stream in flight finish, bad connection limits are refused, and `logprobs` (chat and
completions, whole and streamed) give the Python API's log-probabilities. Skipped when the binary
(jet_test_utils.CLI) was built without the server."""
import json
import math
import re
import signal
import subprocess
import sys
import time
import urllib.request

import pytest

from jet_test_utils import BUILD, CLI, REPO, run_cli

MODEL = REPO / "models" / "sdar-tiny-arith"


def skip_without_server():
    if b"serve" not in subprocess.run([str(CLI), "--help"], capture_output=True, timeout=60).stdout:
        pytest.skip("built without the HTTP server")


def start_server(*flags):
    skip_without_server()
    proc = subprocess.Popen([str(CLI), "serve", "--device", "cpu", "--port", "0", "--kv-cache-mb", "64", *flags],
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        match = re.search(r"on http://[^:]+:(\d+)", line)
        if match:
            return proc, int(match.group(1))
    proc.kill()
    proc.wait()
    raise AssertionError("the server did not say where it listens")


def test_serve_answers_and_stops_on_sigint():
    proc, port = start_server("--model", str(MODEL) + "/")  # the name is still the folder's
    try:
        body = {"messages": [{"role": "user", "content": "What is 4821 + 937?"}], "temperature": 0}
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/chat/completions",
                                         data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=60) as response:
            answer = json.load(response)
        assert answer["choices"][0]["message"]["content"] == "5758"
        assert answer["model"] == "sdar-tiny-arith"
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigterm_lets_a_stream_in_flight_finish():
    proc, port = start_server("--model", str(MODEL), "--max-active", "1")
    try:
        body = {"prompt": "1+1=", "max_tokens": 1500, "ignore_eos": True, "temperature": 0, "stream": True}
        request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", data=json.dumps(body).encode(),
                                         headers={"Content-Type": "application/json"})
        events = []
        with urllib.request.urlopen(request, timeout=120) as response:
            for line in response:
                if line.startswith(b"data: "):
                    events.append(line[6:].strip())
                    if len(events) == 1:
                        proc.send_signal(signal.SIGTERM)  # mid-stream: the stream must still end properly
        assert events[-1] == b"[DONE]"
        assert json.loads(events[-2])["choices"][0]["finish_reason"] == "length"
        text = "".join(json.loads(e)["choices"][0]["text"] for e in events[:-1])
        assert len(text) > 100
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


@pytest.mark.parametrize("flags, message", [
    (["--read-timeout", "0"], "--read-timeout must be in (0, 86400] seconds, got 0"),
    (["--write-timeout", "-1"], "--write-timeout must be in (0, 86400] seconds, got -1"),
    (["--max-connections", "0"], "--max-connections must be at least 1, got 0"),
    (["--max-buffered-mb", "16"], "--max-buffered-mb must be at least 32 (twice the 16 MiB body limit), got 16"),
])
def test_bad_connection_limits_are_refused(flags, message):
    skip_without_server()
    result = run_cli(["serve", "--model", MODEL, "--device", "cpu", "--port", "0", *flags])
    assert result.returncode != 0
    assert message in result.stderr


def post(port, path, body):
    """The answer to a POST: the JSON of a response, or the JSON of every event of a stream."""
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
        if not body.get("stream"):
            return json.load(response)
        return [json.loads(line[6:]) for line in response if line.startswith(b"data: {")]


def token_logprobs(chat, logprobs):
    """(token texts, logprobs) of a choice's or a chunk's logprobs, in either endpoint's shape."""
    if chat:
        for entry in logprobs["content"]:
            assert entry["top_logprobs"] == [] and bytes(entry["bytes"]) == entry["token"].encode()
        return [e["token"] for e in logprobs["content"]], [e["logprob"] for e in logprobs["content"]]
    assert logprobs["top_logprobs"] is None
    assert len(logprobs["text_offset"]) == len(logprobs["tokens"]) == len(logprobs["token_logprobs"])
    return logprobs["tokens"], logprobs["token_logprobs"]


@pytest.mark.parametrize("chat", [True, False], ids=["chat", "completions"])
def test_logprobs_are_the_python_apis(chat):
    sys.path.insert(0, str(BUILD / "python"))
    jetengine = pytest.importorskip("jetengine")
    proc, port = start_server("--model", str(MODEL), "--threads", "1")
    try:
        if chat:
            path, body = "/v1/chat/completions", {"messages": [{"role": "user", "content": "What is 4821 + 937?"}],
                                                  "temperature": 0, "logprobs": True}
            ids = post(port, "/tokenize", {"messages": body["messages"]})["tokens"]
            params = jetengine.SamplingParams(temperature=0)
        else:
            path, body = "/v1/completions", {"prompt": "12 + 30 =", "temperature": 0, "max_tokens": 16,
                                             "ignore_eos": True, "logprobs": 0}
            ids = post(port, "/tokenize", {"prompt": body["prompt"], "add_special_tokens": False})["tokens"]
            params = jetengine.SamplingParams(temperature=0, max_tokens=16, ignore_eos=True)
        expected = jetengine.LLM(str(MODEL), device="cpu", num_threads=1).generate([ids], params, use_tqdm=False)[0]

        answer = post(port, path, body)
        choice = answer["choices"][0]
        text = choice["message"]["content"] if chat else choice["text"]
        tokens, logprobs = token_logprobs(chat, choice["logprobs"])
        assert text == expected["completion_text"] and "".join(tokens) == text
        assert len(logprobs) == answer["usage"]["completion_tokens"] == len(expected["completion_ids"])
        assert all(math.isfinite(lp) and lp <= 0 for lp in logprobs)
        assert logprobs == expected["logprobs"]  # the engine's float32 values, exactly
        if not chat:
            assert choice["logprobs"]["text_offset"] == [len("".join(tokens[:i])) for i in range(len(tokens))]

        # Streamed: each chunk carries the tokens of its text; together they are the whole answer's.
        streamed_tokens, streamed_logprobs, streamed_text = [], [], ""
        for event in post(port, path, {**body, "stream": True}):
            choice = event["choices"][0]
            piece = choice["delta"].get("content", "") if chat else choice["text"]
            if choice["logprobs"] is None:
                assert piece == ""
                continue
            chunk_tokens, chunk_logprobs = token_logprobs(chat, choice["logprobs"])
            assert "".join(chunk_tokens) == piece
            streamed_tokens += chunk_tokens
            streamed_logprobs += chunk_logprobs
            streamed_text += piece
        assert (streamed_text, streamed_tokens, streamed_logprobs) == (text, tokens, logprobs)
    finally:
        proc.kill()
        proc.wait()
