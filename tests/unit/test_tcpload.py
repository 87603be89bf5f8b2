"""dataplane.traffic.tcpload over the loopback (rootless): outcomes are counted per connection."""

from __future__ import annotations

import io
import json
import signal
import socket
import subprocess
import sys
import threading
import time
from ipaddress import IPv4Network

import pytest

from dataplane.traffic import tcpload


def _server(port: int, seconds: float) -> subprocess.Popen[str]:
    proc = subprocess.Popen([sys.executable, "-m", "dataplane.traffic.tcpload", "serve", "--bind", "127.0.0.9",
                             "--port", str(port), "--seconds", str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and "serving" in proc.stdout.readline()
    return proc


def test_long_lived_connections_answered_until_the_end_complete() -> None:
    server = _server(18731, 10)
    try:
        result = tcpload.long_lived(IPv4Network("127.1.0.0/28"), 20, ("127.0.0.9", 18731), interval=0.05,
                                    seconds=0.6, timeout=5, stall=2, open_rate=1000, retries=0,
                                    retry_after=1, connect_timeout=2)
    finally:
        server.terminate()
        server.wait(5)
    assert {k: result[k] for k in ("connections", "completed", "reset", "timed_out", "failed", "silent_at_end")} \
        == {"connections": 20, "completed": 20, "reset": 0, "timed_out": 0, "failed": 0, "silent_at_end": 0}


def test_connections_the_server_drops_count_as_reset() -> None:
    server = _server(18732, 10)
    threading.Timer(0.5, server.kill).start()  # the server dies mid-run: every connection ends under it
    try:
        result = tcpload.long_lived(IPv4Network("127.1.0.0/28"), 10, ("127.0.0.9", 18732), interval=0.05,
                                    seconds=1.2, timeout=5, stall=2, open_rate=1000, retries=0,
                                    retry_after=1, connect_timeout=2)
    finally:
        server.wait(5)
    assert result["reset"] == 10 and result["completed"] == 0, result


def test_refused_connections_are_retried_then_failed() -> None:
    result = tcpload.cps(IPv4Network("127.1.0.0/28"), ("127.0.0.9", 18733), rate=20, seconds=0.2,
                         concurrency=10, timeout=1, retries=1, retry_after=0.1)
    assert result["completed"] == 0 and result["failed"] == result["started"] > 0, result
    assert result["retried"] == result["started"], json.dumps(result)


def test_a_stopped_run_reports_at_once_when_every_connection_answers() -> None:
    server = _server(18734, 10)
    began = time.monotonic()
    try:
        result = tcpload.long_lived(IPv4Network("127.1.0.0/28"), 10, ("127.0.0.9", 18734), interval=0.05,
                                    seconds=30, timeout=5, stall=1, open_rate=1000, retries=0, retry_after=1,
                                    connect_timeout=2, stop=lambda: time.monotonic() - began > 0.5, drain=5)
    finally:
        server.terminate()
        server.wait(5)
    assert time.monotonic() - began < 10, "the stop ended the 30 s run"
    assert (result["completed"], result["silent_at_end"]) == (10, 0), result
    assert float(result["started_at"]) < float(result["ended_at"])  # type: ignore[arg-type]


def test_a_stopped_run_waits_its_drain_for_a_silent_connection_then_calls_it_silent() -> None:
    # a server that accepts but never answers: no connection answers after the stop
    listener = socket.socket()
    listener.bind(("127.0.0.9", 18735))
    listener.listen(16)
    began = time.monotonic()
    try:
        result = tcpload.long_lived(IPv4Network("127.1.0.0/29"), 4, ("127.0.0.9", 18735), interval=0.05,
                                    seconds=30, timeout=20, stall=0.5, open_rate=1000, retries=0, retry_after=1,
                                    connect_timeout=2, stop=lambda: time.monotonic() - began > 0.3, drain=1.0)
    finally:
        listener.close()
    assert 1.2 <= time.monotonic() - began < 8, "waited the drain (1 s), not the timeout (20 s) or the run (30 s)"
    assert (result["completed"], result["silent_at_end"]) == (4, 4), result


def test_more_connections_than_open_files_is_refused_before_any_opens(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(tcpload, "_raise_fd_limit", lambda: 100)
    with pytest.raises(SystemExit, match="need 164 open files; this process may have 100"):
        tcpload.long_lived(IPv4Network("127.0.0.0/24"), 100, ("127.0.0.1", 9), 1.0, 1.0, 1.0, 1.0, 1000.0, 0, 1.0, 1.0)


def test_the_open_files_limit_goes_to_the_kernel_ceiling_when_allowed_else_to_the_hard_limit(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    limits = {"now": (1024, 20000)}
    privileged = {"yes": True}

    def setrlimit(_which: int, pair: tuple[int, int]) -> None:
        if pair[1] > 20000 and not privileged["yes"]:
            raise ValueError("not allowed to raise the maximum limit")
        limits["now"] = pair

    monkeypatch.setattr(tcpload.resource, "getrlimit", lambda _which: limits["now"])
    monkeypatch.setattr(tcpload.resource, "setrlimit", setrlimit)
    monkeypatch.setattr(tcpload, "Path", lambda _p: type("P", (), {"read_text": lambda self: "1048576\n"})())
    assert tcpload._raise_fd_limit() == 1048576
    limits["now"], privileged["yes"] = (1024, 20000), False
    assert tcpload._raise_fd_limit() == 20000
    assert limits["now"] == (20000, 20000)


def test_a_run_larger_than_the_open_files_limit_is_shared_by_workers_and_reported_as_one(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # Two server workers on one port (SO_REUSEPORT); the client may hold 10 connections a process,
    # so its 25 connections go to 3 worker processes, whose reports are summed.
    # the server serves until told (SIGTERM, then its report): a slow start of the client's workers on
    # a busy machine must not find it gone
    server = subprocess.Popen([sys.executable, "-m", "dataplane.traffic.tcpload", "serve", "--bind", "127.0.0.9",
                               "--port", "18736", "--seconds", "60", "--workers", "2"], stdout=subprocess.PIPE,
                              text=True)
    assert server.stdout is not None and "serving" in server.stdout.readline()
    monkeypatch.setattr(tcpload, "_raise_fd_limit", lambda: tcpload.FD_SPARE + 10)
    printed = io.StringIO()
    monkeypatch.setattr(sys, "stdout", printed)
    try:
        assert tcpload.main(["long", "--sources", "127.1.0.0/28", "--count", "25", "--to", "127.0.0.9:18736",
                             "--interval", "0.05", "--seconds", "0.6", "--retries", "0"]) == 0
    finally:
        server.send_signal(signal.SIGTERM)
        out, _ = server.communicate(timeout=10)
    result = json.loads(printed.getvalue())
    assert tcpload.long_workers(25, tcpload.FD_SPARE + 10) == 3
    assert {k: result[k] for k in ("connections", "completed", "reset", "timed_out", "failed")} \
        == {"connections": 25, "completed": 25, "reset": 0, "timed_out": 0, "failed": 0}
    assert json.loads(out.strip().splitlines()[-1]) == {"accepted": 25, "reset": 0}


def test_worker_reports_merge_into_one() -> None:
    def report(n: int, gap: float, stalls: list[dict[str, object]]) -> dict[str, object]:
        return {"connections": n, "completed": n - 1, "reset": 1, "timed_out": 0, "failed": 0, "retried": 2,
                "stalled": len(stalls), "silent_at_end": 0, "longest_gap_s": gap, "stalls": stalls,
                "not_completed": [{"source": f"s{n}", "outcome": "reset"}], "started_at": 10.0 + n,
                "ended_at": 20.0 + n}

    merged = tcpload.merge_long([report(3, 0.5, [{"gap_s": 0.5}]), report(4, 1.5, [{"gap_s": 1.5}, {"gap_s": 0.2}])])
    assert merged["connections"] == 7 and merged["completed"] == 5 and merged["reset"] == 2
    assert merged["retried"] == 4 and merged["stalled"] == 3 and merged["longest_gap_s"] == 1.5
    assert [s["gap_s"] for s in merged["stalls"]] == [1.5, 0.5, 0.2]  # type: ignore[attr-defined]
    assert merged["started_at"] == 13.0 and merged["ended_at"] == 24.0
