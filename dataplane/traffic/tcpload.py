"""TCP load with the kernel's own TCP: an echo server, long-lived connections and short-lived ones (CPS).

The two traffic profiles of a firewall test bed, as connections of real TCP stacks (the lab's host
namespaces), counted per connection:

    python -m dataplane.traffic.tcpload serve --bind 203.0.113.9 --port 8000 --seconds 60
    python -m dataplane.traffic.tcpload long --sources 100.64.8.0/22 --count 1000 --to 203.0.113.9:8000 \\
        --interval 0.1 --seconds 30
    python -m dataplane.traffic.tcpload cps --sources 100.64.8.0/22 --to 203.0.113.9:8000 --rate 2000 --seconds 10

`long` opens COUNT connections (one source address each while the prefix has enough, the kernel
picks the port) and, on each, sends a 16-byte request every INTERVAL and waits for its echo. It prints
one JSON object: per outcome how many connections (completed: open and answering until the end;
reset; timed_out: a request unanswered for --timeout; failed: never established after its retries),
retried (connection attempts after the first), the longest gap between two answers of one
connection, with the connections whose gap passed --stall, and silent_at_end: open at the end but
unanswered for longer than --stall (stuck, not yet timed out). SIGTERM ends a `long` run early:
with --drain D it first waits (at most D seconds) until every open connection has answered once
after the signal, so a connection still backing off its retransmissions is not taken for a stuck one.
SIGTERM ends a `serve` early too, with its report.

`cps` opens connections at RATE per second: connect, send 1 byte, read the 1-byte answer, close;
it prints completed / reset / failed / timed out and the connections per second reached. A failed
connect is retried after --retry-after seconds, --retries times (an Ixia-style "retry 1 s x 3").

`serve` answers both: it echoes what it reads and closes when the client closes. Single-threaded,
epoll, non-blocking sockets: one process per profile.

A process holds one descriptor per connection, and the open-files limit may not be raised past its
hard limit (raising it takes CAP_SYS_RESOURCE, which a container or a VM's init may withhold). So
`long` shares COUNT among as many worker processes as that limit needs (each opens its own part at
its share of --open-rate; one report, summed), and `serve --workers N` runs N processes on N
listening sockets of one port (SO_REUSEPORT: the kernel spreads the connections by their addresses).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import functools
import json
import os
import resource
import selectors
import signal
import socket
import sys
import time
from collections.abc import Callable
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

IP_BIND_ADDRESS_NO_PORT = 24  # linux/in.h: the port is chosen at connect(), per destination
REQUEST = 16
TICK = 0.005
FD_SPARE = 64  # descriptors besides the connections: the selector, stdio, the interpreter's own

CONNECTING, IDLE, WAITING, DONE = range(4)
OUTCOMES = ("completed", "reset", "timed_out", "failed")


def _raise_fd_limit() -> int:
    """Allow as many open files as the process may have: the kernel's ceiling (fs.nr_open) when it is
    privileged, since every connection holds a descriptor and a run of 100,000 needs that many (a
    login's hard limit is often 20,000 or less); else the hard limit. Returns the limit in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        ceiling = int(Path("/proc/sys/fs/nr_open").read_text())
    except (OSError, ValueError):
        ceiling = hard
    for limit in (max(hard, ceiling), hard):
        if soft >= limit:
            break
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (limit, limit))
            return limit
        except (ValueError, OSError):
            continue  # not privileged: the hard limit is as far as it goes
    return soft


def _target(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    if not host or not port.isdigit():
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {text!r}")
    return host, int(port)


def serve(address: str, port: int, seconds: float, workers: int = 1) -> int:
    """Echo every byte back on the connection it came from; close when the client closes. With
    WORKERS > 1, that many processes, each on its own listening socket of the port (SO_REUSEPORT)."""
    _raise_fd_limit()
    # SIGTERM ends the serving early with its report (installed before the workers fork: they inherit it)
    stop: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _frame: stop.append(signum))
    listeners = []
    for _ in range(workers):
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if workers > 1:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        listener.bind((address, port))
        listener.listen(65535)
        listener.setblocking(False)
        listeners.append(listener)
    print(json.dumps({"serving": f"{address}:{port}"}), flush=True)
    if workers == 1:
        print(json.dumps(_serve_on(listeners[0], seconds, lambda: bool(stop))), flush=True)
        return 0
    reports = _in_workers([functools.partial(_serve_on, listener, seconds, lambda: bool(stop))
                           for listener in listeners])
    print(json.dumps({key: sum(r[key] for r in reports) for key in ("accepted", "reset")}), flush=True)
    return 0


def _in_workers(jobs: list[Callable[[], dict[str, Any]]]) -> list[dict[str, Any]]:
    """Run each job in a forked process; their JSON reports, in order. SIGTERM to this process is
    passed on to the workers (a `long` run stopped early stops in every worker)."""
    pids, pipes = [], []
    for job in jobs:
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # the worker: run, write the report, leave without the parent's clean-up
            os.close(read_end)
            code = 0
            try:
                os.write(write_end, json.dumps(job()).encode())
            except BaseException:  # noqa: BLE001 - any failure ends this worker, reported by its exit code
                code = 1
            finally:
                os._exit(code)
        os.close(write_end)
        pids.append(pid)
        pipes.append(read_end)
    stopping: list[int] = []

    def pass_on(signum: int, _frame: object) -> None:
        stopping.append(signum)
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    signal.signal(signal.SIGTERM, pass_on)
    reports = []
    for pid, read_end in zip(pids, pipes, strict=True):
        chunks = []
        while chunk := os.read(read_end, 1 << 16):
            chunks.append(chunk)
        os.close(read_end)
        _, status = os.waitpid(pid, 0)
        if os.waitstatus_to_exitcode(status) != 0 or not chunks:
            if stopping:  # stopped from outside (a server's workers end on the signal): no report
                raise SystemExit(128 + stopping[0])
            raise SystemExit(f"a worker process failed (exit status {os.waitstatus_to_exitcode(status)})")
        reports.append(json.loads(b"".join(chunks)))
    return reports


def _serve_on(listener: socket.socket, seconds: float, stopped: Callable[[], bool] = lambda: False) -> dict[str, int]:
    sel = selectors.DefaultSelector()
    sel.register(listener, selectors.EVENT_READ, None)
    deadline = time.monotonic() + seconds
    accepted = resets = 0
    while time.monotonic() < deadline and not stopped():
        for key, _ in sel.select(0.2):
            if key.data is None:
                for _ in range(256):
                    try:
                        conn, _peer = listener.accept()
                    except OSError:  # none waiting (EAGAIN), aborted, or out of descriptors
                        break
                    conn.setblocking(False)
                    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                    sel.register(conn, selectors.EVENT_READ, True)
                    accepted += 1
                continue
            peer = key.fileobj
            assert isinstance(peer, socket.socket)
            try:
                data = peer.recv(65536)
            except BlockingIOError:
                continue
            except OSError:
                data, resets = b"", resets + 1
            if data:
                try:
                    peer.send(data)  # small answers: the send buffer always has room
                    continue
                except OSError:
                    resets += 1
            sel.unregister(peer)
            peer.close()
    return {"accepted": accepted, "reset": resets}


class _Conn:
    __slots__ = ("sock", "source", "state", "since", "last_answer", "longest_gap", "gap_at", "got",
                 "attempts", "outcome")

    def __init__(self, source: str) -> None:
        self.sock: socket.socket | None = None
        self.source = source
        self.state = CONNECTING
        self.since = 0.0          # connect started / request sent
        self.last_answer = 0.0
        self.longest_gap = 0.0
        self.gap_at = 0.0
        self.got = 0
        self.attempts = 0
        self.outcome = ""


def _sources(network: IPv4Network, count: int) -> list[str]:
    hosts = [str(a) for a, _ in zip(network.hosts(), range(count), strict=False)]
    if not hosts:
        raise SystemExit(f"{network} has no host address")
    return [hosts[i % len(hosts)] for i in range(count)]


class _Client:
    """The connections of one run: open (with retries), read, classify."""

    def __init__(self, target: tuple[str, int], connect_timeout: float, retries: int, retry_after: float):
        self.fd_limit = _raise_fd_limit()
        self.target, self.connect_timeout = target, connect_timeout
        self.retries, self.retry_after = retries, retry_after
        self.sel = selectors.DefaultSelector()
        self.retried = 0
        self.pending_retry: list[tuple[float, _Conn]] = []

    def open(self, conn: _Conn, now: float) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((conn.source, 0))
        err = sock.connect_ex(self.target)
        if conn.attempts:
            self.retried += 1
        conn.attempts += 1
        conn.sock, conn.state, conn.since = sock, CONNECTING, now
        if err not in (0, errno.EINPROGRESS):
            self.drop(conn, "failed", now)
            return
        self.sel.register(sock, selectors.EVENT_WRITE, conn)

    def drop(self, conn: _Conn, outcome: str, now: float, retry: bool = True) -> None:
        """End this attempt; a connect that failed is tried again while retries remain."""
        if conn.sock is not None:
            with contextlib.suppress(KeyError, ValueError):
                self.sel.unregister(conn.sock)
            conn.sock.close()
            conn.sock = None
        if retry and outcome == "failed" and conn.attempts <= self.retries:
            self.pending_retry.append((now + self.retry_after, conn))
            conn.state = CONNECTING
            return
        conn.state, conn.outcome = DONE, outcome

    def connected(self, conn: _Conn, now: float) -> bool:
        assert conn.sock is not None
        if conn.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
            self.drop(conn, "failed", now)
            return False
        self.sel.modify(conn.sock, selectors.EVENT_READ, conn)
        conn.state, conn.last_answer = IDLE, now
        return True

    def due_retries(self, now: float) -> None:
        if not self.pending_retry:
            return
        later = []
        for when, conn in self.pending_retry:
            if when <= now:
                self.open(conn, now)
            else:
                later.append((when, conn))
        self.pending_retry = later

    def read(self, conn: _Conn, now: float) -> bytes | None:
        """What the connection brought; None when it ended (reset, or closed by the server)."""
        assert conn.sock is not None
        try:
            data = conn.sock.recv(65536)
        except BlockingIOError:
            return b""
        except OSError:
            self.drop(conn, "reset", now)
            return None
        if not data:
            self.drop(conn, "reset", now)  # the server never closes first: an end we did not ask for
            return None
        return data


def long_lived(sources: IPv4Network, count: int, target: tuple[str, int], interval: float, seconds: float,
               timeout: float, stall: float, open_rate: float, retries: int, retry_after: float,
               connect_timeout: float, stop: Callable[[], bool] = lambda: False,
               drain: float = 0.0, part: tuple[int, int] = (0, 1)) -> dict[str, object]:
    """COUNT connections for SECONDS after the last one was opened, or until STOP() says so (then
    until every open connection answered once more, at most DRAIN seconds). PART (i, n): only the
    i-th of every n connections, opened at OPEN_RATE (a worker's share)."""
    client = _Client(target, connect_timeout, retries, retry_after)
    conns = [_Conn(s) for s in _sources(sources, count)[part[0]::part[1]]]
    if len(conns) + FD_SPARE > client.fd_limit:
        raise SystemExit(f"{len(conns)} connections need {len(conns) + FD_SPARE} open files; this process "
                         f"may have {client.fd_limit} (ulimit -n)")
    count = len(conns)
    slots = max(1, round(interval / TICK))
    start = time.monotonic()
    opened, slot, next_tick = 0, 0, start
    end = start + count / open_rate + seconds
    stopped_at, next_drain_check = 0.0, 0.0
    while (now := time.monotonic()) < end:
        if not stopped_at and stop():
            stopped_at, end = now, min(end, now + drain)
        if stopped_at and now >= next_drain_check:
            next_drain_check = now + 0.05
            if all(c.last_answer >= stopped_at for c in conns if c.state in (IDLE, WAITING)):
                break
        while opened < count and opened < (now - start) * open_rate + 1:
            client.open(conns[opened], now)
            opened += 1
        client.due_retries(now)
        if now >= next_tick:
            next_tick += TICK
            for conn in conns[slot::slots]:
                if conn.state == IDLE and conn.sock is not None:
                    try:
                        conn.sock.send(b"q" * REQUEST)
                        conn.state, conn.since, conn.got = WAITING, now, 0
                    except OSError:
                        client.drop(conn, "reset", now)
                elif conn.state == WAITING and now - conn.since > timeout:
                    client.drop(conn, "timed_out", now)
                elif conn.state == CONNECTING and conn.sock is not None and now - conn.since > connect_timeout:
                    client.drop(conn, "failed", now)
            slot = (slot + 1) % slots
        for key, _ in client.sel.select(max(0.0, min(next_tick - time.monotonic(), TICK))):
            conn = key.data
            if conn.state == CONNECTING:
                client.connected(conn, now)
                continue
            data = client.read(conn, now)
            if not data:
                continue
            conn.got += len(data)
            if conn.state == WAITING and conn.got >= REQUEST:
                gap = now - conn.last_answer
                if gap > conn.longest_gap:
                    conn.longest_gap, conn.gap_at = gap, conn.last_answer - start
                conn.last_answer, conn.state = now, IDLE
    now = time.monotonic()
    for conn in conns:
        if conn.state in (IDLE, WAITING):
            if conn.state == WAITING and now - conn.last_answer > conn.longest_gap:
                conn.longest_gap, conn.gap_at = now - conn.last_answer, conn.last_answer - start
            client.drop(conn, "completed", now, retry=False)
        elif conn.state == CONNECTING:
            client.drop(conn, "failed", now, retry=False)
    return {**_long_report(conns, client.retried, stall, now), "started_at": round(start, 6),
            "ended_at": round(now, 6)}


def _long_report(conns: list[_Conn], retried: int, stall: float, end: float) -> dict[str, object]:
    counts = {o: sum(c.outcome == o for c in conns) for o in OUTCOMES}
    # still open at the end but without an answer for longer than STALL: stuck, not yet timed out
    silent = [c for c in conns if c.outcome == "completed" and end - c.last_answer > stall]
    stalled = sorted((c for c in conns if c.longest_gap > stall), key=lambda c: -c.longest_gap)
    return {"connections": len(conns), **counts, "retried": retried,
            "longest_gap_s": round(max((c.longest_gap for c in conns), default=0.0), 3),
            "stalled": len(stalled), "silent_at_end": len(silent),
            "stalls": [{"source": c.source, "gap_s": round(c.longest_gap, 3), "at_s": round(c.gap_at, 3),
                        "outcome": c.outcome} for c in stalled[:50]],
            "not_completed": [{"source": c.source, "outcome": c.outcome} for c in conns
                              if c.outcome != "completed"][:50]}


def merge_long(reports: list[dict[str, Any]]) -> dict[str, object]:
    """One report of a `long` run from its workers' reports."""
    merged: dict[str, Any] = {key: sum(r[key] for r in reports)
                              for key in ("connections", *OUTCOMES, "retried", "stalled", "silent_at_end")}
    merged["longest_gap_s"] = max(r["longest_gap_s"] for r in reports)
    merged["stalls"] = sorted((s for r in reports for s in r["stalls"]), key=lambda s: -s["gap_s"])[:50]
    merged["not_completed"] = [c for r in reports for c in r["not_completed"]][:50]
    merged["started_at"] = min(r["started_at"] for r in reports)
    merged["ended_at"] = max(r["ended_at"] for r in reports)
    return merged


def long_workers(count: int, fd_limit: int) -> int:
    """How many processes COUNT connections need when one may hold FD_LIMIT descriptors."""
    return max(1, -(-count // max(1, fd_limit - FD_SPARE)))


def cps(sources: IPv4Network, target: tuple[str, int], rate: float, seconds: float, concurrency: int,
        timeout: float, retries: int, retry_after: float) -> dict[str, object]:
    """Short-lived connections: connect, 1 byte each way, close; at RATE per second."""
    client = _Client(target, timeout, retries, retry_after)
    addresses = _sources(sources, min(sources.num_addresses, 65536))
    live: set[_Conn] = set()
    outcomes = dict.fromkeys(OUTCOMES, 0)
    started = 0
    start = time.monotonic()
    next_check = start
    while (now := time.monotonic()) < start + seconds or live or client.pending_retry:
        if now < start + seconds:
            while started < (now - start) * rate and len(live) < concurrency:
                conn = _Conn(addresses[started % len(addresses)])
                client.open(conn, now)
                live.add(conn)
                started += 1
        elif now > start + seconds + timeout + retries * retry_after + 1:
            break
        client.due_retries(now)
        if now >= next_check:
            next_check = now + 0.05
            for conn in list(live):
                if conn.state != DONE and conn.sock is not None and now - conn.since > timeout:
                    client.drop(conn, "failed" if conn.state == CONNECTING else "timed_out", now)
        for key, _ in client.sel.select(TICK):
            conn = key.data
            if conn.state == CONNECTING:
                if client.connected(conn, now) and conn.sock is not None:
                    conn.sock.send(b"x")
                    conn.state, conn.since = WAITING, now
            elif client.read(conn, now):
                client.drop(conn, "completed", now, retry=False)
        for conn in [c for c in live if c.state == DONE]:
            live.discard(conn)
            outcomes[conn.outcome] += 1
    for conn in live:
        client.drop(conn, "timed_out", time.monotonic(), retry=False)
        outcomes["timed_out"] += 1
    elapsed = time.monotonic() - start
    return {"started": started, **outcomes, "retried": client.retried, "target_cps": rate,
            "cps": round(outcomes["completed"] / min(elapsed, seconds) if seconds else 0.0, 1),
            "seconds": round(elapsed, 3)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m dataplane.traffic.tcpload", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="echo server for both profiles")
    s.add_argument("--bind", required=True)
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--seconds", type=float, default=60.0, help="stop after this long (bounded by design)")
    s.add_argument("--workers", type=int, default=1, help="processes, each on its own socket of the port "
                   "(SO_REUSEPORT); one holds at most its open-files limit of connections")
    lg = sub.add_parser("long", help="long-lived connections, a request/answer on each every interval")
    lg.add_argument("--count", type=int, default=100)
    lg.add_argument("--interval", type=float, default=0.1, help="seconds between two requests of a connection")
    lg.add_argument("--timeout", type=float, default=20.0, help="a request unanswered this long: timed out")
    lg.add_argument("--stall", type=float, default=1.0, help="list connections with a gap longer than this")
    lg.add_argument("--open-rate", type=float, default=2000.0, help="new connections per second while opening")
    lg.add_argument("--drain", type=float, default=0.0, help="on SIGTERM: wait at most this long for every open "
                    "connection to answer once more before reporting")
    cp = sub.add_parser("cps", help="short-lived connections: connect, 1 byte each way, close")
    cp.add_argument("--rate", type=float, default=1000.0, help="new connections per second")
    cp.add_argument("--concurrency", type=int, default=4096, help="at most this many open at once")
    cp.add_argument("--timeout", type=float, default=3.0, help="connect or answer slower than this: failed")
    for p in (lg, cp):
        p.add_argument("--sources", type=IPv4Network, required=True, help="client addresses (AnyIP prefix)")
        p.add_argument("--to", type=_target, required=True, help="HOST:PORT of the echo server")
        p.add_argument("--seconds", type=float, default=10.0)
        p.add_argument("--retries", type=int, default=3, help="connect attempts after a failed one")
        p.add_argument("--retry-after", type=float, default=1.0)
    lg.add_argument("--connect-timeout", type=float, default=1.0)
    args = parser.parse_args(argv)
    if args.command == "serve":
        return serve(args.bind, args.port, args.seconds, args.workers)
    if args.command == "long":
        stop: list[int] = []
        signal.signal(signal.SIGTERM, lambda signum, _frame: stop.append(signum))
        workers = long_workers(args.count, _raise_fd_limit())

        def run(part: tuple[int, int]) -> dict[str, object]:
            return long_lived(args.sources, args.count, args.to, args.interval, args.seconds, args.timeout,
                              args.stall, args.open_rate / part[1], args.retries, args.retry_after,
                              args.connect_timeout, stop=lambda: bool(stop), drain=args.drain, part=part)

        result = run((0, 1)) if workers == 1 else merge_long(
            _in_workers([functools.partial(run, (i, workers)) for i in range(workers)]))
    else:
        result = cps(args.sources, args.to, args.rate, args.seconds, args.concurrency, args.timeout,
                     args.retries, args.retry_after)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
