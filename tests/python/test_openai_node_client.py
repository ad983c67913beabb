"""`jetengine serve` through the official `openai` npm client (tests/node/openai_client_test.mjs):
the client is installed once into $JET_BUILD_DIR/npm (from the npm registry), two servers on the
demo model are started on the CPU (one decoding a request at a time, one with --api-key), and
each check of the script is one test here. Skipped when the binary was built without the server
or when node/npm are missing (scripts/setup.sh installs them)."""
import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from jet_test_utils import BUILD, CLI, REPO

# The last 4.x: 5.x and later ask for Node 20+, Debian bookworm has 18. JET_OPENAI_VERSION tries another.
OPENAI_VERSION = os.environ.get("JET_OPENAI_VERSION", "4.104.0")
MODEL = REPO / "models" / "sdar-tiny-arith"
SCRIPT = REPO / "tests" / "node" / "openai_client_test.mjs"
API_KEY = "jet-test-key-4821"
CHECKS = ["models", "chat_non_stream", "completions_non_stream", "chat_stream", "completions_stream",
          "stream_usage", "seed", "max_tokens", "stop", "logprobs", "wrong_model", "api_key", "abort"]


def install_openai():
    """The npm prefix folder holding openai@OPENAI_VERSION, installed there on first use."""
    prefix = BUILD / "npm" / f"openai-{OPENAI_VERSION}"
    package = prefix / "node_modules" / "openai" / "package.json"
    if package.exists() and json.loads(package.read_text())["version"] == OPENAI_VERSION:
        return prefix
    prefix.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix="openai-", dir=prefix.parent))  # renamed once complete
    try:
        result = subprocess.run(["npm", "install", "--prefix", str(staging), f"openai@{OPENAI_VERSION}",
                                 "--no-audit", "--no-fund", "--no-save", "--loglevel", "error"],
                                capture_output=True, text=True, timeout=600)
        assert result.returncode == 0, f"npm install openai@{OPENAI_VERSION} failed:\n{result.stderr}"
        shutil.rmtree(prefix, ignore_errors=True)
        staging.rename(prefix)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return prefix


def start_server(log, *flags):
    """`jetengine serve` on the demo model and a free port, its log in `log`; returns (process, port).
    One CPU thread: the model is tiny, and OpenMP threads on a busy machine can wait on each other
    for seconds per step."""
    proc = subprocess.Popen([str(CLI), "serve", "--model", str(MODEL), "--device", "cpu", "--port", "0",
                             "--kv-cache-mb", "64", "--threads", "1", *flags], stdout=subprocess.DEVNULL, stderr=log.open("w"))
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        match = re.search(r"on http://[^:]+:(\d+)", log.read_text())
        if match:
            return proc, int(match.group(1))
        time.sleep(0.05)
    proc.kill()
    proc.wait()
    raise AssertionError(f"the server did not say where it listens:\n{log.read_text()}")


@pytest.fixture(scope="module")
def node_results(tmp_path_factory):
    if b"serve" not in subprocess.run([str(CLI), "--help"], capture_output=True, timeout=60).stdout:
        pytest.skip("built without the HTTP server")
    if not shutil.which("node") or not shutil.which("npm"):
        pytest.skip("node and npm are needed (scripts/setup.sh installs them)")
    major = int(subprocess.run(["node", "--version"], capture_output=True, text=True).stdout.strip().lstrip("v").split(".")[0])
    if major < 18:
        pytest.skip(f"openai {OPENAI_VERSION} needs Node 18 or later, this is {major}")
    prefix = install_openai()
    logs = tmp_path_factory.mktemp("serve")
    servers = []
    try:
        servers.append(start_server(logs / "plain.log", "--max-active", "1"))
        servers.append(start_server(logs / "auth.log", "--api-key", API_KEY))
        (_, port), (_, auth_port) = servers
        env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}  # no key or URL from outside
        result = subprocess.run(["node", str(SCRIPT), "--openai-prefix", str(prefix),
                                 "--base-url", f"http://127.0.0.1:{port}/v1",
                                 "--auth-base-url", f"http://127.0.0.1:{auth_port}/v1",
                                 "--api-key", API_KEY, "--model", MODEL.name],
                                capture_output=True, text=True, timeout=600, env=env)
        for proc, _ in servers:
            assert proc.poll() is None, "a server died during the checks"
    finally:
        for proc, _ in servers:
            proc.kill()
            proc.wait()
    print(result.stdout)
    results = {}
    for line in result.stdout.splitlines():
        if line.startswith("{"):
            entry = json.loads(line)
            results[entry["check"]] = entry
    return result, results


def test_the_script_ran_every_check(node_results):
    result, results = node_results
    failed = [name for name, entry in results.items() if not entry["ok"]]
    assert sorted(results) == sorted(CHECKS), f"checks reported: {sorted(results)}\nstderr:\n{result.stderr}"
    assert result.returncode == (1 if failed else 0), result.stderr


@pytest.mark.parametrize("check", CHECKS)
def test_openai_client(node_results, check):
    result, results = node_results
    assert check in results, f"the script did not report {check}:\n{result.stdout}\n{result.stderr}"
    entry = results[check]
    assert entry["ok"], f"{check}: {entry['detail']}"
