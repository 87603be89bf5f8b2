"""Long-lived TCP connections beside an event's UDP flows (`lab events run --tcp`).

The JVD's long-lived TCP profile through the kernel's own TCP stacks: `dataplane.traffic.tcpload
serve` in the lab's server host, `tcpload long` in its client host, so the connections cross the
same MX/SRX path as the UDP flows. Each connection sends a 16-byte request every INTERVAL_S and
waits for its echo. The connections come from the upper half of the client host's prefix (the UDP
flows use its first addresses), one source address each while the half has enough.

Per event the client reports its connections as completed (answering to the end), reset, failed
(never established after its retries: the JVD's "retry 1 s x 3"), timed out (a request unanswered
for TIMEOUT_S) and stuck (open at the end, unanswered for longer than STALL_S after the runner
stopped the traffic and waited up to DRAIN_S for it), with the attempts retried and the longest gap
of any connection. Before the event a baseline of the same connections must answer whole
(`judge_baseline`); the budgets on these figures are in `budgets`. `judge_baseline` and `figures`
are pure; `TcpLoad` runs the two processes, `carried` reads the SRXs' session tables.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
from collections import Counter
from ipaddress import IPv4Network
from typing import Any

import dataplane

from .. import kinds
from ..model.diagnostics import LabError
from ..plan.pipeline import LabPlan
from ..plan.trafficsetup import endpoints
from . import sessions

PORT = 8000  # the echo server's port (the UDP flows go to 7000)
INTERVAL_S = 0.1  # a request on each connection this often
TIMEOUT_S = 20.0  # a request unanswered this long: the connection timed out
STALL_S = 1.0  # a gap longer than this is a stall; unanswered this long at the end: stuck
DRAIN_S = 8.0  # after the traffic stops: the longest wait for every open connection to answer once more
OPEN_RATE = 1000.0  # connections opened per second
DEFAULT_CONNECTIONS = 200  # what a 2-CPU machine carries beside the UDP flows without either falling behind
BASELINE_MIN_S = 1.5  # a baseline's connections answer at least this long (a silent one shows)
STALLS_KEPT = 10  # the longest stalls listed in a result


def sources(client_prefix: str, count: int) -> IPv4Network:
    """The client addresses of COUNT connections: the upper half of the client host's prefix."""
    net = IPv4Network(client_prefix, strict=False)
    if net.prefixlen >= 31:
        return net
    return list(net.subnets(prefixlen_diff=1))[1]


def judge_baseline(report: dict[str, Any]) -> list[str]:
    """Why the connections of a baseline did not all answer ([] when they did): any failed, reset,
    timed out, or open but silent at the end."""
    total = int(report.get("connections", 0))
    why = []
    for key, words in (("failed", "never established"), ("reset", "reset"), ("timed_out", "timed out"),
                       ("silent_at_end", f"silent for over {STALL_S:g} s at the end")):
        if report.get(key):
            why.append(f"{report[key]} of {total} TCP connections {words}")
    if not total:
        why.append("no TCP connection measured")
    return why


def baseline_detail(report: dict[str, Any], why: list[str]) -> str:
    """The sentence of a baseline check on the TCP connections."""
    total = int(report.get("connections", 0))
    if why:
        return (f"the path does not carry {total} long-lived TCP connections here ({'; '.join(why)}): "
                "lower --tcp-connections, or look at the SRXs' TCP checks")
    return (f"{total} TCP connections established and answering (longest gap "
            f"{float(report.get('longest_gap_s', 0)) * 1000:.0f} ms, {report.get('retried', 0)} connects retried)")


def figures(report: dict[str, Any], carried_before: dict[str, int], event_at: float | None) -> dict[str, Any]:
    """The TCP part of an event's result from the client's REPORT (`tcpload long`), CARRIED_BEFORE
    (SRX -> connections it carried before the event) and EVENT_AT (the event's monotonic time)."""
    started = report.get("started_at")
    shift = started - event_at if started is not None and event_at is not None else None
    stalls = [{"source": s["source"], "gap_ms": round(float(s["gap_s"]) * 1000, 1),
               "at_s": round(float(s["at_s"]) + shift, 3) if shift is not None else None,
               "outcome": s["outcome"]} for s in report.get("stalls", [])[:STALLS_KEPT]]
    return {
        "connections": int(report["connections"]), "completed": int(report["completed"]),
        "reset": int(report["reset"]), "failed": int(report["failed"]), "timed_out": int(report["timed_out"]),
        "stuck": int(report["silent_at_end"]), "retried": int(report["retried"]),
        "longest_gap_ms": round(float(report["longest_gap_s"]) * 1000, 1),
        "stalled": int(report["stalled"]), "stall_ms": STALL_S * 1000, "interval_ms": INTERVAL_S * 1000,
        "carried_before": dict(sorted(carried_before.items())), "stalls": stalls,
    }


def carried(plan: LabPlan, port: int = PORT, gap: float = 0.4) -> dict[str, int]:
    """SRX -> how many connections to PORT it carries now: the sessions whose packet counter grows
    over GAP seconds (an MNHA peer's synced copy does not count)."""
    import time
    from concurrent.futures import ThreadPoolExecutor

    srxs = [node for node in plan.nodes if kinds.get(node.kind).firewall]

    def counts() -> dict[tuple[str, int], dict[str, int]]:
        with ThreadPoolExecutor(max_workers=max(1, len(srxs))) as pool:
            tables = list(pool.map(lambda node: sessions.read_table(node.master_ns), srxs))
        return sessions.tcp_counts({node.name: t for node, t in zip(srxs, tables, strict=True)}, port)

    first = counts()
    time.sleep(gap)
    by_srx = Counter(sessions.growth_carriers(first, counts()).values())
    return {node.name: by_srx.get(node.name, 0) for node in srxs}


class TcpLoad:
    """The echo server (server host) and one run of long-lived connections (client host) at a time."""

    def __init__(self, plan: LabPlan, connections: int, port: int = PORT):
        if connections < 1:
            raise LabError(f"--tcp-connections {connections}: at least 1")
        ends = endpoints(plan)
        self.client_ns, self.server_ns, self.address = ends.client_ns, ends.server_ns, ends.server_address
        self.sources = sources(ends.client_prefix, connections)
        self.connections, self.port = connections, port
        self.server: subprocess.Popen[str] | None = None
        self.client: subprocess.Popen[str] | None = None

    @property
    def opening_s(self) -> float:
        """How long opening every connection takes."""
        return self.connections / OPEN_RATE

    def _spawn(self, ns: str, args: list[str]) -> subprocess.Popen[str]:
        from labkit import netnsutil

        root = os.path.dirname(os.path.dirname(os.path.abspath(dataplane.__file__)))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        return subprocess.Popen(["nsenter", f"--net={netnsutil.path(ns)}", sys.executable, "-m",
                                 "dataplane.traffic.tcpload", *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, env=env)

    def serve(self, seconds: float) -> TcpLoad:
        """Start the echo server for at most SECONDS; returns once it listens."""
        self.server = self._spawn(self.server_ns, ["serve", "--bind", self.address, "--port", str(self.port),
                                                   "--seconds", f"{seconds:g}"])
        assert self.server.stdout is not None
        ready, _, _ = select.select([self.server.stdout], [], [], 10.0)
        line = self.server.stdout.readline() if ready else ""
        if "serving" not in line:
            self.close()
            raise LabError(f"the TCP echo server did not start in {self.server_ns}: {line.strip() or 'no answer'}")
        return self

    def start(self, seconds: float, stall: float = STALL_S) -> TcpLoad:
        """Open the connections and keep them answering for SECONDS (or until `stop`)."""
        self.client = self._spawn(self.client_ns, [
            "long", "--sources", str(self.sources), "--count", str(self.connections),
            "--to", f"{self.address}:{self.port}", "--interval", f"{INTERVAL_S:g}", "--seconds", f"{seconds:g}",
            "--timeout", f"{TIMEOUT_S:g}", "--stall", f"{stall:g}", "--open-rate", f"{OPEN_RATE:g}",
            "--drain", f"{DRAIN_S:g}"])
        return self

    def stop(self) -> dict[str, Any]:
        """End the run (after its drain) and return the client's report."""
        if self.client is not None and self.client.poll() is None:
            self.client.send_signal(signal.SIGTERM)
        return self.wait(DRAIN_S + 30)

    def wait(self, timeout: float) -> dict[str, Any]:
        """The report of the run once it ends by itself."""
        client, self.client = self.client, None
        if client is None:
            raise LabError("no TCP connections were started")
        try:
            out, err = client.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            client.kill()
            client.communicate()
            raise LabError(f"the TCP client in {self.client_ns} did not report within {timeout:g} s") from None
        try:
            report: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
        except (ValueError, IndexError):
            raise LabError(f"the TCP client in {self.client_ns} exited {client.returncode}: "
                           f"{err.strip()[-300:] or 'no report'}") from None
        return report

    def close(self) -> None:
        """Stop both processes (nothing is left running)."""
        for proc in (self.client, self.server):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
            if proc is not None:
                with contextlib.suppress(OSError, ValueError):
                    proc.communicate(timeout=1)
        self.client = self.server = None
