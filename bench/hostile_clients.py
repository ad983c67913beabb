#!/usr/bin/env python3
"""Hostile clients against `jetengine serve`, and what ordinary clients see meanwhile. Standard
library only.

    python3 bench/hostile_clients.py --bin build/apps/cli/jetengine --model models/sdar-tiny-arith
        [--seconds 15] [--slow-clients 300] [--read-timeout 2] [--json FILE] [-- SERVER FLAGS]

Starts the server (CPU, --threads 1, --read-timeout and --write-timeout S), then runs the same ordinary load
twice, for --seconds each: first alone, then while a second process (this script, --attack-port)
attacks the server. The ordinary load: /health probes every 50 ms, two clients sending greedy
non-stream requests (chat and completions, in turn) and one sending streamed completions, each
request on a new connection. Every ordinary answer must be a 200 with a complete answer: the
expected JSON with a finish_reason, or an event stream ending in [DONE], with the text the
server gave the same request before any load (greedy decoding). The attackers, all at once:

  slow_header   --slow-clients connections sending their header one byte every 0.9 s (faster
                than the deadline, so only a deadline on the whole request stops them); each one
                closed is replaced at once. Expected: closed, unanswered, at --read-timeout.
  slow_body     a whole header, then the body one byte every 0.9 s: the same.
  short_body    a Content-Length of 1000, 10 bytes sent, then silence: the same.
  oversized     a Content-Length over 16 MiB, with no body, with the whole body, and a chunked
                body of 17 MiB: 413.
  big_header    a 70 KB header field, or 3,000 fields (122 KB): 431.
  nested        100,000 levels of [ or of { in prompt, messages, content, tokens (closed or not),
                on one keep-alive connection: 400 "nested deeper than".
  malformed     bad method, version, field, Content-Length, chunk, binary junk: 400, and the
                connection closed.
  bad_json      an invalid, non-object, out-of-range or non-UTF-8 JSON body: 400.
  pipelined     8 requests written at once on one keep-alive connection (/health, completions,
                a stream, chat, /tokenize, /detokenize, /v1/models, /metrics), twice per
                connection: all 16 answered, in order, with 200.
  abort         a stream of 1,000 tokens, left (closed, or reset) after its first event.
  never_read    4 streams of 300 tokens whose client never reads until the end: the server must
                not wait on them (it writes the stream into the kernel's buffers, or drops the
                client past 1 MiB unsent or --write-timeout), then closes at the read deadline.

At the end the script waits for the engine to drain (no request running or waiting: the aborted
ones freed their place), opens 50 more slow connections and sends SIGTERM: the server must exit 0,
at once (it closes connections that wait for a request). `run()` returns every figure as a dict
(tests/python/test_hostile_clients.py asserts on it); main() prints a table.
"""

import argparse
import collections
import http.client
import json
import os
import re
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

HOST = "127.0.0.1"
MIB = 1 << 20
NESTING = 100_000
SLOW_INTERVAL = 0.9  # seconds between two bytes of a slow client


# ---------------------------------------------------------------------------------------------
# Shared helpers


def percentile(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else None


def summary(latencies):
    return {"n": len(latencies), "median": percentile(latencies, 0.5), "p99": percentile(latencies, 0.99),
            "max": max(latencies) if latencies else None}


class _FileSocket:
    """What http.client.HTTPResponse needs of a socket: one buffered reader shared by every
    response of a connection, so pipelined answers are read one after the other, none lost."""

    class _Reader:
        """The reader, less close(): HTTPResponse closes its file once a response is read."""

        def __init__(self, file):
            self._file = file

        def __getattr__(self, name):
            return getattr(self._file, name)

        def close(self):
            pass

    def __init__(self, sock):
        self.file = self._Reader(sock.makefile("rb"))

    def makefile(self, *args, **kwargs):
        return self.file


def read_response(reader, method="GET"):
    """(status, headers dict, body bytes) of the next response on `reader` (a _FileSocket)."""
    response = http.client.HTTPResponse(reader, method=method)
    response.begin()
    body = response.read()
    return response.status, {k.lower(): v for k, v in response.getheaders()}, body


def closed_after(sock, reader, timeout=5.0):
    """Whether the server closes the connection (EOF or reset) within `timeout`, nothing more sent."""
    sock.settimeout(timeout)
    try:
        return reader.file.read(1) == b""
    except TimeoutError:
        return False
    except OSError:  # a reset
        return True


def raw_request(method, path, body=b"", headers=()):
    head = [f"{method} {path} HTTP/1.1", f"Host: {HOST}"]
    if body or method == "POST":
        head.append(f"Content-Length: {len(body)}")
        head.append("Content-Type: application/json")
    head.extend(headers)
    return ("\r\n".join(head) + "\r\n\r\n").encode() + body


def metrics(port):
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    conn.close()
    values = {}
    for name, key in [("requests_total{outcome=\"ok\"}", "ok"), ("requests_total{outcome=\"rejected\"}", "rejected"),
                      ("requests_total{outcome=\"aborted\"}", "aborted"), ("requests_running", "running"),
                      ("requests_waiting", "waiting")]:
        match = re.search(r"^jetengine_" + re.escape(name) + r" (\d+)", text, re.M)
        values[key] = int(match.group(1)) if match else None
    return values


def sse_events(body):
    """The data of each server-sent event of a stream's body."""
    return [block[6:] for block in body.decode().split("\n\n") if block.startswith("data: ")]


def stream_text(events):
    """(text, finish_reason, usage) of a complete stream; raises ValueError if it is not one."""
    if not events or events[-1] != "[DONE]":
        raise ValueError(f"the stream does not end with [DONE] ({len(events)} events)")
    text, finish, usage = "", None, None
    for data in events[:-1]:
        chunk = json.loads(data)
        if chunk.get("usage"):
            usage = chunk["usage"]
        for choice in chunk.get("choices", []):
            text += choice.get("text", choice.get("delta", {}).get("content", "")) or ""
            finish = choice.get("finish_reason") or finish
    if finish not in ("stop", "length"):
        raise ValueError(f"the stream ends with finish_reason {finish!r}")
    return text, finish, usage


# ---------------------------------------------------------------------------------------------
# Ordinary clients

CHAT = {"messages": [{"role": "user", "content": "What is 4821 + 937?"}], "temperature": 0}
COMPLETION = {"prompt": "12 + 30 =", "max_tokens": 16, "temperature": 0}
STREAM = {**COMPLETION, "stream": True, "stream_options": {"include_usage": True}}


def ordinary_request(port, kind, path, body):
    """One ordinary request on a new connection: (answer text or None, error or None)."""
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    try:
        if body is None:
            conn.request("GET", path)
        else:
            conn.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
        response = conn.getresponse()
        data = response.read()
        if response.status != 200:
            return None, f"HTTP {response.status}: {data[:200]!r}"
        if kind == "health":
            return (None, None) if json.loads(data) == {"status": "ok"} else (None, f"health said {data[:200]!r}")
        if kind == "stream":
            text, _, usage = stream_text(sse_events(data))
            if not usage or usage.get("completion_tokens", 0) < 1:
                return None, f"the stream's usage chunk is missing or empty: {usage}"
            return text, None
        answer = json.loads(data)
        choice = answer["choices"][0]
        if choice.get("finish_reason") not in ("stop", "length"):
            return None, f"finish_reason {choice.get('finish_reason')!r}"
        text = choice["message"]["content"] if kind == "chat" else choice["text"]
        return text, None
    except Exception as e:  # noqa: BLE001 - a failure of an ordinary request is the finding
        return None, f"{type(e).__name__}: {e}"
    finally:
        conn.close()


class OrdinaryLoad:
    """The ordinary clients for `seconds`: each request's latency by kind, and every failure."""

    KINDS = {"health": ("/health", None), "chat": ("/v1/chat/completions", CHAT),
             "completion": ("/v1/completions", COMPLETION), "stream": ("/v1/completions", STREAM)}

    def __init__(self, port, reference):
        self.port, self.reference = port, reference
        self.latency = {kind: [] for kind in self.KINDS}
        self.failures = []
        self.lock = threading.Lock()

    def one(self, kind):
        path, body = self.KINDS[kind]
        start = time.perf_counter()
        text, error = ordinary_request(self.port, kind, path, body)
        seconds = time.perf_counter() - start
        if error is None and kind in self.reference and text != self.reference[kind]:
            error = f"answer {text!r}, before any load {self.reference[kind]!r}"
        with self.lock:
            self.latency[kind].append(seconds)
            if error:
                self.failures.append(f"{kind}: {error}")

    def run(self, seconds):
        end = time.monotonic() + seconds

        def health():
            while time.monotonic() < end:
                self.one("health")
                time.sleep(0.05)

        def generating(kinds):
            i = 0
            while time.monotonic() < end:
                self.one(kinds[i % len(kinds)])
                i += 1

        threads = [threading.Thread(target=health), threading.Thread(target=generating, args=(["chat", "completion"],)),
                   threading.Thread(target=generating, args=(["completion", "chat"],)),
                   threading.Thread(target=generating, args=(["stream"],))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return {"latency": {kind: summary(values) for kind, values in self.latency.items()},
                "requests": sum(len(v) for v in self.latency.values()), "failures": self.failures}


# ---------------------------------------------------------------------------------------------
# Attackers (run in their own process: their Python work must not delay the ordinary clients')


class Outcomes:
    """Per attack: how many tries, how many ended as expected, samples of the others."""

    def __init__(self):
        self.lock = threading.Lock()
        self.table = {}

    def add(self, kind, expected, ok, detail=""):
        with self.lock:
            entry = self.table.setdefault(kind, {})
            for key, value in {"expected": expected, "tries": 0, "as_expected": 0, "unexpected": []}.items():
                entry.setdefault(key, value)
            entry["tries"] += 1
            if ok:
                entry["as_expected"] += 1
            elif len(entry["unexpected"]) < 5:
                entry["unexpected"].append(detail)

    def note(self, kind, key, value):
        with self.lock:
            self.table.setdefault(kind, {})[key] = value


def connect(port, timeout=10.0):
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.settimeout(timeout)
    sock.connect((HOST, port))
    return sock


def expect_refusal(port, outcomes, kind, data, status, must_close=True, message=None):
    """Sends `data` on a new connection and checks the answer's status (and that the connection
    is then closed, and the error message)."""
    sock = None
    try:
        sock = connect(port)
        reader = _FileSocket(sock)
        sock.sendall(data)
        got, headers, body = read_response(reader)
        ok = got == status and (message is None or message in body.decode(errors="replace"))
        detail = f"HTTP {got}: {body[:120]!r}"
        if ok and must_close:
            ok = closed_after(sock, reader)
            detail = "answered, but the connection stayed open"
        outcomes.add(kind, f"{status}" + (", closed" if must_close else ""), ok, detail)
    except Exception as e:  # noqa: BLE001
        outcomes.add(kind, f"{status}" + (", closed" if must_close else ""), False, f"{type(e).__name__}: {e}")
    finally:
        if sock:
            sock.close()


def trickler(port, outcomes, end, read_timeout, counts):
    """The slow clients, all on one thread (a selector): each kind keeps counts[kind] connections
    open, replacing each one the server closes. A connection must be closed unanswered, at the
    read deadline (measured from its connect)."""
    header_prefix = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nX-Slow: "
    body_header = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 64\r\n\r\n"
    plans = {  # kind: (sent at once, then one byte at a time)
        "slow_header": (b"", header_prefix + b"a" * 10_000),
        "slow_body": (body_header, b'{"prompt": "' + b"1" * 60),
        "short_body": (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n" + b'{"prompt":', b""),
    }
    sel = selectors.DefaultSelector()
    conns = {}  # socket -> state
    late = []  # seconds past the deadline at which each connection was found closed
    peak = [0]

    def open_one(kind):
        # The clock starts before connect: the server's deadline starts at its accept, which comes
        # later, so a client thread descheduled after connect cannot make a close look early.
        start = time.monotonic()
        try:
            sock = connect(port, timeout=5)
        except OSError as e:
            outcomes.add(kind, "closed at the deadline, unanswered", False, f"connect: {e}")
            return
        burst, trickle = plans[kind]
        if burst:
            sock.sendall(burst)
        sock.setblocking(False)
        now = time.monotonic()
        conns[sock] = {"kind": kind, "start": start, "next": now, "sent": 0, "trickle": trickle, "got": b""}
        sel.register(sock, selectors.EVENT_READ)

    def finish(sock, how):
        state = conns.pop(sock)
        sel.unregister(sock)
        sock.close()
        elapsed = time.monotonic() - state["start"]
        late.append(elapsed - read_timeout)
        ok = not state["got"] and read_timeout - 0.1 <= elapsed <= read_timeout + 1.5
        outcomes.add(state["kind"], "closed at the deadline, unanswered", ok,
                     f"{how} after {elapsed:.2f} s, answer {state['got'][:80]!r}")

    # The first connections open over one second, not in one burst; replacements open at once.
    initial = [kind for kind, n in counts.items() for _ in range(n)]
    initial = initial[0::3] + initial[1::3] + initial[2::3]  # the kinds mixed
    total, opened, pending = len(initial), 0, []
    ramp_start = time.monotonic()
    while time.monotonic() < end:
        now = time.monotonic()
        while opened < total and opened < total * min(1.0, (now - ramp_start) / 1.0):
            open_one(initial[opened])
            opened += 1
        while pending:
            open_one(pending.pop())
        due = min([s["next"] for s in conns.values() if s["trickle"]] + [now + 0.05])
        for key, _ in sel.select(max(0.0, min(due - now, 0.05))):
            sock = key.fileobj
            try:
                data = sock.recv(4096)
            except (ConnectionError, OSError):
                data = None
            if data:
                conns[sock]["got"] += data
            else:
                kind = conns[sock]["kind"]
                finish(sock, "closed" if data == b"" else "reset")
                pending.append(kind)  # replaced at once
        now = time.monotonic()
        for sock, state in list(conns.items()):
            if state["trickle"] and state["next"] <= now and state["sent"] < len(state["trickle"]):
                try:
                    sock.send(state["trickle"][state["sent"]:state["sent"] + 1])
                    state["sent"] += 1
                    state["next"] = now + SLOW_INTERVAL
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    kind = state["kind"]
                    finish(sock, "send failed")
                    pending.append(kind)
        peak[0] = max(peak[0], len(conns))
    for sock in list(conns):
        sel.unregister(sock)
        sock.close()
    outcomes.note("slow_header", "open_at_once", peak[0])
    outcomes.note("slow_header", "closed_late_max_s", max(late) if late else None)


def oversized(port, outcomes, end):
    too_big = 17 * MIB
    head = f"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: {too_big}\r\n\r\n".encode()
    body = b"1" * too_big
    chunked_head = b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
    chunk = b"%x\r\n" % MIB + b"1" * MIB + b"\r\n"
    i = 0
    while time.monotonic() < end:
        variant = i % 3
        i += 1
        if variant == 0:  # the header only: refused from its Content-Length
            expect_refusal(port, outcomes, "oversized", head, 413, message="exceeds 16 MiB")
        elif variant == 1:  # the whole 17 MiB, sent while the answer waits
            expect_413_while_sending(port, outcomes, head + body, "")
        else:  # chunked, 17 chunks of 1 MiB: refused once past 16 MiB
            expect_413_while_sending(port, outcomes, chunked_head + chunk * 17 + b"0\r\n\r\n", "chunked: ")
        time.sleep(0.5)


def expect_413_while_sending(port, outcomes, request, label):
    """Sends `request` from another thread while reading the answer: a 413, then the close."""
    sock = None
    try:
        sock = connect(port)
        reader = _FileSocket(sock)
        sender = threading.Thread(target=lambda: _send_quietly(sock, request))
        sender.start()
        status, _, text = read_response(reader)
        sender.join()
        ok = status == 413 and closed_after(sock, reader)
        outcomes.add("oversized", "413, closed", ok, f"{label}HTTP {status}: {text[:100]!r}")
    except Exception as e:  # noqa: BLE001
        outcomes.add("oversized", "413, closed", False, f"{label}{type(e).__name__}: {e}")
    finally:
        if sock:
            sock.close()


def _send_quietly(sock, data):
    try:
        sock.sendall(data)
    except OSError:
        pass  # the server closed first: its answer is what counts


def nested(port, outcomes, end):
    deep_array = "[" * NESTING + "]" * NESTING
    deep_object = '{"a":' * NESTING + "1" + "}" * NESTING
    bodies = [
        ("/v1/completions", '{"prompt": ' + deep_array + "}"),
        ("/v1/completions", '{"prompt": ' + "[" * NESTING),  # never closed
        ("/v1/completions", '{"prompt": "1+1=", "stop": ' + deep_array + "}"),
        ("/v1/chat/completions", '{"messages": ' + deep_array + "}"),
        ("/v1/chat/completions", '{"messages": [{"role": "user", "content": ' + deep_object + "}]}"),
        ("/v1/chat/completions", '{"messages": [{"role": "user", "content": ' + deep_array + "}]}"),
        ("/v1/chat/completions", '{"messages": [{"role": "user", "content": "hi"}], "x": ' + '{"a":' * NESTING),  # never closed
        ("/tokenize", '{"prompt": ' + deep_array + "}"),
        ("/detokenize", '{"tokens": ' + deep_object + "}"),
    ]
    conn = None
    i = 0
    while time.monotonic() < end:
        path, body = bodies[i % len(bodies)]
        i += 1
        try:
            if conn is None:
                conn = http.client.HTTPConnection(HOST, port, timeout=30)
            conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            text = response.read().decode(errors="replace")
            ok = response.status == 400 and "nested deeper than" in text
            outcomes.add("nested", "400 nested deeper than", ok, f"{path}: HTTP {response.status}: {text[:100]}")
            if response.will_close:
                conn.close()
                conn = None
        except Exception as e:  # noqa: BLE001
            outcomes.add("nested", "400 nested deeper than", False, f"{path}: {type(e).__name__}: {e}")
            conn = None
        time.sleep(0.05)
    outcomes.note("nested", "body_bytes", max(len(b) for _, b in bodies))


MALFORMED = [  # (sent, status, connection closed afterwards)
    (b"GARBAGE\r\n\r\n", 400, True),
    (b"GET /health HTTP/9.9\r\n\r\n", 400, True),
    (b"GET /health HTTP/1.1\r\nHost localhost\r\n\r\n", 400, True),
    (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n", 400, True),
    (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 400, True),
    (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 7\r\n\r\n{}", 400, True),
    (b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400, True),
    (b"\x00\xff\xfe\x01\x16\x03\x01\r\n\r\n", 400, True),
    (b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 70_000 + b"\r\n\r\n", 431, True),
    (b"GET /health HTTP/1.1\r\n" + b"".join(b"X-F%d: %s\r\n" % (i, b"b" * 30) for i in range(3000)) + b"\r\n", 431, True),
    (raw_request("POST", "/v1/completions", b'{"prompt": '), 400, False),
    (raw_request("POST", "/v1/chat/completions", b"[1, 2]"), 400, False),
    (raw_request("POST", "/v1/completions", b'{"prompt": "1+1=", "max_tokens": 1e400}'), 400, False),
    (raw_request("POST", "/v1/completions", b'{"prompt": "\xff\xfe"}'), 400, False),
]


def malformed(port, outcomes, end):
    i = 0
    while time.monotonic() < end:
        data, status, must_close = MALFORMED[i % len(MALFORMED)]
        i += 1
        kind = "big_header" if status == 431 else "malformed" if must_close else "bad_json"
        expect_refusal(port, outcomes, kind, data, status, must_close=must_close)
        time.sleep(0.02)


def pipelined(port, outcomes, end):
    """Batches of 8 requests written at once; each answer must be the one of its request."""

    def batch(round_):
        n = 3 + 2 * round_  # prompt lengths differ between rounds and requests
        return [
            ("GET", raw_request("GET", "/health"), lambda b: json.loads(b) == {"status": "ok"}),
            ("POST", raw_request("POST", "/v1/completions",
                                 json.dumps({"prompt": [50] * n, "max_tokens": 4, "temperature": 0}).encode()),
             lambda b, n=n: json.loads(b)["usage"]["prompt_tokens"] == n),
            ("POST", raw_request("POST", "/v1/completions",
                                 json.dumps({"prompt": [51] * (n + 1), "max_tokens": 8, "temperature": 0, "stream": True,
                                             "stream_options": {"include_usage": True}}).encode()),
             lambda b, n=n: stream_text(sse_events(b))[2]["prompt_tokens"] == n + 1),
            ("POST", raw_request("POST", "/tokenize", json.dumps({"prompt": [52] * (n + 2)}).encode()),
             lambda b, n=n: json.loads(b)["count"] == n + 2),
            ("POST", raw_request("POST", "/v1/chat/completions", json.dumps(CHAT).encode()),
             lambda b: json.loads(b)["object"] == "chat.completion"),
            ("POST", raw_request("POST", "/detokenize", json.dumps({"tokens": [50, 51, 52]}).encode()),
             lambda b: "prompt" in json.loads(b)),
            ("GET", raw_request("GET", "/v1/models"), lambda b: json.loads(b)["object"] == "list"),
            ("GET", raw_request("GET", "/metrics"), lambda b: b.startswith(b"# HELP")),
        ]

    sent = answered = connections = 0
    while time.monotonic() < end:
        connections += 1
        sock = None
        try:
            sock = connect(port, timeout=30)
            reader = _FileSocket(sock)
            for round_ in range(2):
                requests = batch(round_)
                sock.sendall(b"".join(data for _, data, _ in requests))
                sent += len(requests)
                for i, (method, _, check) in enumerate(requests):
                    status, _, body = read_response(reader, method)
                    ok = status == 200 and check(body)
                    answered += ok
                    outcomes.add("pipelined", "200, in order", ok, f"request {i} of round {round_}: HTTP {status}: "
                                 f"{body[:100]!r}")
        except Exception as e:  # noqa: BLE001
            outcomes.add("pipelined", "200, in order", False, f"{type(e).__name__}: {e}")
        finally:
            if sock:
                sock.close()
        time.sleep(0.1)
    outcomes.note("pipelined", "sent", sent)
    outcomes.note("pipelined", "answered", answered)
    outcomes.note("pipelined", "connections", connections)


def aborts(port, outcomes, end):
    body = json.dumps({"prompt": "1+1=", "max_tokens": 1000, "ignore_eos": True, "temperature": 0,
                       "stream": True}).encode()
    i = 0
    while time.monotonic() < end:
        i += 1
        sock = None
        try:
            sock = connect(port, timeout=30)
            sock.sendall(raw_request("POST", "/v1/completions", body))
            got = b""
            while b"data: " not in got:
                data = sock.recv(4096)
                if not data:
                    break
                got += data
            ok = got.startswith(b"HTTP/1.1 200") and b"data: " in got
            outcomes.add("abort", "200, a first event, then left", ok, f"got {got[:100]!r}")
            if i % 2:  # a reset rather than a close
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        except Exception as e:  # noqa: BLE001
            outcomes.add("abort", "200, a first event, then left", False, f"{type(e).__name__}: {e}")
        finally:
            if sock:
                sock.close()
        time.sleep(0.2)


def never_read(port, outcomes, end, count=4):
    body = json.dumps({"prompt": "1+1=", "max_tokens": 300, "ignore_eos": True, "temperature": 0,
                       "stream": True}).encode()
    socks = []
    for _ in range(count):
        sock = connect(port)
        sock.sendall(raw_request("POST", "/v1/completions", body))
        socks.append(sock)
    time.sleep(max(0.0, end - time.monotonic()))
    # Only now read what the server left: a whole stream, or a connection it closed.
    for sock in socks:
        got, start, eof = b"", time.monotonic(), False
        sock.settimeout(30)  # a stream still being generated is read to its end
        try:
            while True:
                data = sock.recv(65536)
                if not data:
                    eof = True
                    break
                got += data
        except TimeoutError:
            pass
        except OSError:  # a reset
            eof = True
        sock.close()
        complete = got.startswith(b"HTTP/1.1 200") and b"data: [DONE]" in got and got.endswith(b"\r\n0\r\n\r\n")
        waited = time.monotonic() - start
        # A stream the server finished (into the kernel's buffers), or one it cut off: either way
        # the connection ends (EOF), the server never waits on the client.
        outcomes.add("never_read", "200, then the server finished or dropped it, and closed",
                     got.startswith(b"HTTP/1.1 200") and got.endswith(b"\r\n") and eof,
                     f"{len(got)} bytes, complete {complete}, EOF {eof} after {waited:.1f} s")
        outcomes.note("never_read", "complete_streams", outcomes.table.get("never_read", {}).get("complete_streams", 0)
                      + complete)


def attack(port, seconds, read_timeout, slow_clients):
    """Every attacker at once for `seconds`; returns the outcomes table."""
    outcomes = Outcomes()
    end = time.monotonic() + seconds
    counts = {"slow_header": slow_clients, "slow_body": 20, "short_body": 20}
    workers = [threading.Thread(target=trickler, args=(port, outcomes, end, read_timeout, counts)),
               threading.Thread(target=oversized, args=(port, outcomes, end)),
               threading.Thread(target=nested, args=(port, outcomes, end)),
               threading.Thread(target=malformed, args=(port, outcomes, end)),
               threading.Thread(target=pipelined, args=(port, outcomes, end)),
               threading.Thread(target=aborts, args=(port, outcomes, end)),
               threading.Thread(target=never_read, args=(port, outcomes, end))]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    return outcomes.table


# ---------------------------------------------------------------------------------------------
# The run


def start_server(binary, model, flags):
    proc = subprocess.Popen([str(binary), "serve", "--model", str(model), "--port", "0", *map(str, flags)],
                            stderr=subprocess.PIPE, text=True)
    log = collections.deque(maxlen=200)
    deadline = time.time() + 120
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        log.append(line.rstrip())
        match = re.search(r"on http://[^:]+:(\d+)", line)
        if match:
            # Keep draining the server's log so that it never blocks on a full pipe.
            threading.Thread(target=lambda: [log.append(l.rstrip()) for l in proc.stderr], daemon=True).start()
            return proc, int(match.group(1)), log
    proc.kill()
    proc.wait()
    raise RuntimeError("the server did not say where it listens:\n" + "\n".join(log))


def wait_drained(port, timeout=20.0):
    """Seconds until no request runs or waits in the engine, or None if that never happened."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        m = metrics(port)
        if m["running"] == 0 and m["waiting"] == 0:
            return time.monotonic() - start
        time.sleep(0.2)
    return None


def run(binary, model, seconds=15.0, slow_clients=300, read_timeout=2.0, server_flags=(), log=print):
    """The whole run: returns its figures as a dict."""
    # One engine thread: on a 2-core machine, an engine on both cores fights the I/O threads and
    # every client process for them, and its steps stall (seconds) whenever one core is taken.
    flags = ["--device", "cpu", "--threads", "1", "--kv-cache-mb", "64", "--read-timeout", read_timeout,
             "--write-timeout", read_timeout, *server_flags]
    started = time.monotonic()
    proc, port, server_log = start_server(binary, model, flags)
    result = {"port": port, "server_flags": [str(f) for f in flags], "seconds": seconds,
              "slow_clients": slow_clients, "read_timeout": read_timeout}
    try:
        # Greedy answers before any load: every ordinary answer must be the same text.
        reference = {}
        for kind, (path, body) in OrdinaryLoad.KINDS.items():
            text, error = ordinary_request(port, kind, path, body)
            if error:
                raise RuntimeError(f"the first {kind} request failed: {error}")
            if kind != "health":
                reference[kind] = text
        result["reference_answers"] = reference
        # First-use costs outside the timing, at batch sizes 1 to 4.
        warm = time.monotonic()
        for k in range(1, 5):
            threads = [threading.Thread(target=ordinary_request, args=(port, kind, *OrdinaryLoad.KINDS[kind]))
                       for kind in (["chat", "completion", "stream"] * k)[:k]]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        OrdinaryLoad(port, reference).run(2.0)
        result["warm_up_s"] = time.monotonic() - warm

        log(f"ordinary load alone for {seconds:.0f} s ...")
        result["baseline"] = OrdinaryLoad(port, reference).run(seconds)
        before = metrics(port)

        log(f"ordinary load with attackers for {seconds:.0f} s ...")
        attacker = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--attack-port", str(port),
                                     "--seconds", str(seconds + 1.0), "--read-timeout", str(read_timeout),
                                     "--slow-clients", str(slow_clients)], stdout=subprocess.PIPE, text=True)
        time.sleep(1.0)  # the slow clients connect over their first second
        result["attacked"] = OrdinaryLoad(port, reference).run(seconds)
        out, _ = attacker.communicate(timeout=seconds + 60)
        if attacker.returncode != 0:
            raise RuntimeError(f"the attackers' process failed ({attacker.returncode})")
        result["attackers"] = json.loads(out)
        result["alive_after_attack"] = proc.poll() is None

        result["drained_after_s"] = wait_drained(port) if result["alive_after_attack"] else None
        after = metrics(port) if result["alive_after_attack"] else {}
        result["metrics_during_attack"] = {k: after[k] - before[k] for k in ("ok", "rejected", "aborted")} if after else {}
        result["metrics_end"] = after

        # SIGTERM with 50 connections waiting for their request: they are closed, the server exits 0.
        slow = [connect(port) for _ in range(50)]
        for sock in slow:
            sock.sendall(b"GET /health HTTP/1.1\r\nHo")
        sigterm = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            result["exit_code"] = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            result["exit_code"] = None
        result["exit_after_sigterm_s"] = time.monotonic() - sigterm
        closed = 0
        for sock in slow:
            sock.settimeout(5)
            try:
                closed += sock.recv(1) == b""
            except OSError:
                closed += 1
            sock.close()
        result["slow_closed_on_sigterm"] = closed
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        result["server_log_tail"] = list(server_log)[-20:]
    result["wall_s"] = time.monotonic() - started
    return result


def fmt(seconds):
    return "-" if seconds is None else f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def report(result):
    lines = [f"jetengine serve under hostile clients ({result['seconds']:.0f} s per phase, "
             f"read/write timeout {result['read_timeout']} s, {result['slow_clients']} slow clients)", "",
             f"{'ordinary requests':<20} {'no attackers: n':>16} {'median':>8} {'p99':>8} {'max':>8}"
             f" {'with attackers: n':>18} {'median':>8} {'p99':>8} {'max':>8}"]
    for kind in OrdinaryLoad.KINDS:
        a, b = result["baseline"]["latency"][kind], result["attacked"]["latency"][kind]
        lines.append(f"{kind:<20} {a['n']:>16} {fmt(a['median']):>8} {fmt(a['p99']):>8} {fmt(a['max']):>8}"
                     f" {b['n']:>18} {fmt(b['median']):>8} {fmt(b['p99']):>8} {fmt(b['max']):>8}")
    lines.append(f"{'failed or lost':<20} {len(result['baseline']['failures']):>16}"
                 f" {'':>26} {len(result['attacked']['failures']):>18}")
    lines += ["", f"{'attack':<12} {'tries':>6} {'as expected':>12}  expected"]
    for kind, entry in result["attackers"].items():
        extra = {k: v for k, v in entry.items() if k not in ("expected", "tries", "as_expected", "unexpected")}
        lines.append(f"{kind:<12} {entry.get('tries', 0):>6} {entry.get('as_expected', 0):>12}  "
                     f"{entry.get('expected', '')}" + (f"  {extra}" if extra else ""))
        for sample in entry.get("unexpected", []):
            lines.append(f"{'':<12} unexpected: {sample}")
    lines += ["", f"server alive after the attack: {result['alive_after_attack']}; engine drained "
              f"{fmt(result['drained_after_s'])} after; metrics during the attack: {result['metrics_during_attack']}",
              f"SIGTERM (50 slow connections open): exit code {result['exit_code']} after "
              f"{fmt(result['exit_after_sigterm_s'])}, {result['slow_closed_on_sigterm']} of 50 closed; "
              f"whole run {result['wall_s']:.0f} s"]
    for failure in (result["baseline"]["failures"] + result["attacked"]["failures"])[:10]:
        lines.append(f"  ordinary failure: {failure}")
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default="build/apps/cli/jetengine")
    parser.add_argument("--model", default=str(Path(__file__).resolve().parents[1] / "models" / "sdar-tiny-arith"))
    parser.add_argument("--seconds", type=float, default=15.0, help="length of each phase")
    parser.add_argument("--slow-clients", type=int, default=300)
    parser.add_argument("--read-timeout", type=float, default=2.0, help="the server's --read-timeout and --write-timeout")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--attack-port", type=int, help=argparse.SUPPRESS)  # the attackers' process
    parser.add_argument("server_flags", nargs="*")
    args = parser.parse_args()
    if args.attack_port:
        print(json.dumps(attack(args.attack_port, args.seconds, args.read_timeout, args.slow_clients)))
        return 0
    result = run(args.bin, args.model, args.seconds, args.slow_clients, args.read_timeout, args.server_flags,
                 log=lambda m: print(m, file=sys.stderr))
    print(report(result))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
