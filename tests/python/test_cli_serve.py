"""`jetengine serve` as a process: it prints the port it picked (--port 0), answers an OpenAI chat
request with the demo model on the CPU, and Ctrl-C (SIGINT) stops it with exit code 0.
Skipped when the binary (jet_test_utils.CLI) was built without the server."""
import json
import re
import signal
import subprocess
import time
import urllib.request

import pytest

from jet_test_utils import CLI, REPO

MODEL = REPO / "models" / "sdar-tiny-arith"


def test_serve_answers_and_stops_on_sigint():
    if b"serve" not in subprocess.run([str(CLI), "--help"], capture_output=True, timeout=60).stdout:
        pytest.skip("built without the HTTP server")
    proc = subprocess.Popen([str(CLI), "serve", "--model", str(MODEL), "--device", "cpu", "--port", "0",
                             "--kv-cache-mb", "64"], stderr=subprocess.PIPE, text=True)
    try:
        port = None
        deadline = time.time() + 60
        while port is None and time.time() < deadline:
            line = proc.stderr.readline()
            if not line:
                break
            match = re.search(r"on http://[^:]+:(\d+)", line)
            if match:
                port = int(match.group(1))
        assert port, "the server did not say where it listens"
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
