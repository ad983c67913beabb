#!/usr/bin/env python3
"""Load test of `jetengine serve`: starts the server, sends REQUESTS streamed completions from
CONCURRENCY client threads, and reports completion tokens/s, time to first text (TTFT) and
end-to-end latency. Standard library only.

    python3 bench/serve_load.py --bin build/apps/cli/jetengine --model DIR [--requests 512]
        [--concurrency 128] [--prompt-len 50-600] [--max-tokens 64-512] [--seed 0] [-- SERVER FLAGS]

The workload is Mode 2's (`jetengine bench --mode2`): prompts of random token ids in
[3, vocab / 2) with lengths drawn from --prompt-len, max_tokens from --max-tokens, greedy,
ignore_eos (every request produces exactly its max_tokens), 4 denoising steps. Flags after `--`
go to the server (for example `--device cuda --load-format dummy`). Completion tokens are
counted by the server (/metrics) over the timed window; TTFT is the time to the first event that
carries text.
"""

import argparse
import http.client
import json
import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path


def span(text):
    low, _, high = text.partition("-")
    return int(low), int(high or low)


def start_server(binary, model, flags):
    proc = subprocess.Popen([binary, "serve", "--model", model, "--port", "0", *flags], stderr=subprocess.PIPE,
                            text=True)
    deadline = time.time() + 600
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        sys.stderr.write(line)
        match = re.search(r"on http://[^:]+:(\d+)", line)
        if match:
            # Keep draining the server's log so it never blocks on a full pipe.
            threading.Thread(target=lambda: [sys.stderr.write(l) for l in proc.stderr], daemon=True).start()
            return proc, int(match.group(1))
    proc.kill()
    raise SystemExit("the server did not say where it listens")


def completion_tokens(port):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    return int(re.search(r"^jetengine_completion_tokens_total (\d+)", text, re.M).group(1))


def streamed_request(port, body):
    """(seconds to the first text, seconds to the end) of one streamed completion."""
    start = time.perf_counter()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=3600)
    conn.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {response.read().decode()}")
    first = None
    for raw in response:
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        if first is None and json.loads(line[6:])["choices"][0]["text"]:
            first = time.perf_counter() - start
    end = time.perf_counter() - start
    conn.close()
    return (first if first is not None else end), end


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default="build/apps/cli/jetengine")
    parser.add_argument("--model", required=True)
    parser.add_argument("--requests", type=int, default=512)
    parser.add_argument("--concurrency", type=int, default=128)
    parser.add_argument("--prompt-len", type=span, default=(50, 600))
    parser.add_argument("--max-tokens", type=span, default=(64, 512))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("server_flags", nargs="*")
    args = parser.parse_args()

    vocab = json.loads((Path(args.model) / "config.json").read_text())["vocab_size"]
    rng = random.Random(args.seed)
    bodies = [{"prompt": [rng.randrange(3, vocab // 2) for _ in range(rng.randint(*args.prompt_len))],
               "max_tokens": rng.randint(*args.max_tokens), "temperature": 0, "ignore_eos": True,
               "denoising_steps": 4, "stream": True} for _ in range(args.requests)]

    proc, port = start_server(args.bin, args.model, args.server_flags)
    try:
        # Warm-up outside the timing (first-use costs: GEMM plans, buffers).
        streamed_request(port, {**bodies[0], "max_tokens": 8})
        results, errors, lock = [], [], threading.Lock()
        pending = list(reversed(bodies))

        def client():
            while True:
                with lock:
                    if not pending:
                        return
                    body = pending.pop()
                try:
                    result = streamed_request(port, body)
                    with lock:
                        results.append(result)
                except Exception as e:  # noqa: BLE001 - reported below, the load goes on
                    with lock:
                        errors.append(str(e))

        tokens_before = completion_tokens(port)
        start = time.perf_counter()
        threads = [threading.Thread(target=client) for _ in range(args.concurrency)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        seconds = time.perf_counter() - start
        tokens = completion_tokens(port) - tokens_before
    finally:
        proc.terminate()
        proc.wait(timeout=120)

    ttft = [r[0] for r in results]
    latency = [r[1] for r in results]
    print(f"serve: {len(results)} of {args.requests} requests ({len(errors)} failed), concurrency {args.concurrency}, "
          f"prompt {args.prompt_len[0]}-{args.prompt_len[1]}, max_tokens {args.max_tokens[0]}-{args.max_tokens[1]}")
    print(f"  {tokens} completion tokens in {seconds:.3f} s = {tokens / seconds:.1f} tok/s, "
          f"{len(results) / seconds:.2f} requests/s")
    if results:
        print(f"  TTFT p50 {percentile(ttft, 0.5):.3f} s, p99 {percentile(ttft, 0.99):.3f} s; "
              f"latency p50 {percentile(latency, 0.5):.3f} s, p99 {percentile(latency, 0.99):.3f} s")
    for e in errors[:5]:
        print("  error:", e)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
