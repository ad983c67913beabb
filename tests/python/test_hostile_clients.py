"""`jetengine serve` under hostile clients (bench/hostile_clients.py, on the demo model, CPU): slow
clients, oversized and deeply nested bodies, malformed requests, pipelining, aborted and unread
streams, while ordinary clients keep sending requests. The server must not crash, lose or fail an
ordinary request, or let their latency run away; every attacker must get its answer. About 35 s.
Skipped when the binary was built without the HTTP server."""
import importlib.util
import socket

import pytest

from jet_test_utils import CLI, REPO
from test_cli_serve import MODEL, skip_without_server, start_server

READ_TIMEOUT = 2.0


def load_script():
    spec = importlib.util.spec_from_file_location("hostile_clients", REPO / "bench" / "hostile_clients.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def figures():
    skip_without_server()
    script = load_script()
    result = script.run(CLI, MODEL, seconds=15.0, slow_clients=300, read_timeout=READ_TIMEOUT, log=lambda m: None)
    print(script.report(result))
    return result


def test_the_server_never_crashed_and_stops_cleanly(figures):
    assert figures["alive_after_attack"], figures["server_log_tail"]
    # SIGTERM with 50 connections waiting for their request: exit 0, at once, every one closed.
    assert figures["exit_code"] == 0, figures["server_log_tail"]
    assert figures["exit_after_sigterm_s"] < 10
    assert figures["slow_closed_on_sigterm"] == 50


def test_no_ordinary_request_lost_or_failed(figures):
    for phase in ("baseline", "attacked"):
        load = figures[phase]
        assert load["failures"] == [], (phase, load["failures"][:10])
        for kind, latency in load["latency"].items():
            assert latency["n"] >= (50 if kind == "health" else 2), (phase, kind, latency)


def test_ordinary_latency_stays_bounded(figures):
    health = figures["attacked"]["latency"]["health"]
    # /health is answered on the I/O threads, whatever the engine does: the attackers (a few hundred
    # slow connections among them) must not hold it up. 1 s is ~50x its p99 without attackers on a
    # 2-core machine, and half the read deadline.
    assert health["p99"] < 1.0, health
    assert health["max"] < READ_TIMEOUT, health
    # Generation shares the engine with the attackers' valid requests (pipelined, aborted and
    # unread streams) and the 2 cores with the attackers' process: it may slow down, not without
    # bound. Without attackers its p99 is well under 1 s on a 2-core machine (16 tokens, tiny
    # model); 5 s leaves room for a slower or busier machine.
    for kind in ("chat", "completion", "stream"):
        latency = figures["attacked"]["latency"][kind]
        assert latency["p99"] < 5.0, (kind, latency)


@pytest.mark.parametrize("attack", ["slow_header", "slow_body", "short_body", "oversized", "big_header", "nested",
                                    "malformed", "bad_json", "pipelined", "abort", "never_read"])
def test_every_attacker_got_the_expected_answer(figures, attack):
    entry = figures["attackers"].get(attack)
    assert entry and entry["tries"] > 0, f"{attack} never ran"
    assert entry["unexpected"] == [] and entry["as_expected"] == entry["tries"], entry


def test_every_pipelined_request_answered_in_order(figures):
    pipelined = figures["attackers"]["pipelined"]
    assert pipelined["sent"] >= 16
    assert pipelined["answered"] == pipelined["sent"], pipelined


def test_slow_clients_are_closed_at_the_read_deadline(figures):
    slow = figures["attackers"]["slow_header"]
    assert slow["open_at_once"] >= 300  # they were all connected together
    assert slow["closed_late_max_s"] < 1.5  # closed at READ_TIMEOUT, not later (1.5 s: a loaded machine)


def test_aborted_streams_free_their_place(figures):
    # Every aborted stream was dropped by the engine (counted as aborted), and nothing was left
    # running or queued once the attackers stopped.
    assert figures["drained_after_s"] is not None and figures["drained_after_s"] < 20
    assert figures["metrics_during_attack"]["aborted"] >= figures["attackers"]["abort"]["tries"]


def test_a_header_of_many_fields_over_64_kib_is_refused():
    proc, port = start_server("--model", str(MODEL))
    try:
        script = load_script()
        fields = b"".join(b"X-F%d: %s\r\n" % (i, b"b" * 30) for i in range(2000))  # 80,914 bytes
        sock = socket.create_connection(("127.0.0.1", port), timeout=30)
        reader = script._FileSocket(sock)
        sock.sendall(b"GET /health HTTP/1.1\r\n" + fields + b"\r\n")
        status, _, _ = script.read_response(reader)
        sock.close()
        assert status == 431
    finally:
        proc.terminate()
        proc.wait(timeout=60)
