"""Background UDP sessions beside an event's flows (`lab events run --sessions N`): do they survive?

The JVD validates every failure event with a million sessions per MNHA pair in the tables. The
measured flows say how fast traffic recovers; these sessions say whether the firewall state did. N
sessions (`dataplane.traffic.sessionload`: distinct source address and port each, from the second
quarter of the client host's prefix: the UDP flows use its first addresses, the TCP connections its
upper half) are opened once before the event, answered by the server host, and left idle. After the
event (a lasting one: before its restore) the server sends one datagram to every session, the
reverse direction alone. An SRX drops a packet from the untrust side that matches no session, so a
datagram that arrives proves that its session was there, on the node that carried it or on the one
that took over: a synced copy counts exactly.

A probe of every session takes its time (a million at PROBE_RATE: minutes), so it tells that a
session survived, not how soon it passed again. A sample says that: up to SAMPLE_MAX sessions, set
aside before the event, are each sent two reverse datagrams from SAMPLE_AT_S after the event on, at
SAMPLE_RATE, on a thread of their own beside the event (a reboot's power-on included), all sent
before SAMPLE_BY_S; `early` in the figures, judged as the whole.

Which SRX carried each session comes from the SRXs' tables before the event: the session whose
packet counter is not zero (a synced copy has none of its own). The sessions whose carrier the event
took out and whose MNHA peer went with it (or that have none) are expected lost and not judged (the
count of those whose datagram passed anyway, `expected_lost_passed`, shows whether the probe can tell:
0 where the SRXs drop what matches no session); of the rest, `lost` are those whose reverse datagram
did not arrive. `figures` is pure; `SessionLoad`
runs the two processes.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from ipaddress import IPv4Network
from typing import Any

import dataplane
from dataplane.traffic import sessionload

from .. import kinds
from ..model.diagnostics import LabError
from ..plan.pipeline import LabPlan
from ..plan.trafficsetup import endpoints
from . import sessions

PORT = 7100  # the sessions' server port (the UDP flows go to 7000, the TCP connections to 8000)
PORT_MIN = 20000  # the lowest client source port
OPEN_RATE = 20000.0  # sessions opened per second
# reverse datagrams per second: a lasting event's probe runs beside the measured flows, whose senders
# fell up to 375 ms behind their schedule at 20000 a second on a 2-CPU machine (topology3-srg1)
PROBE_RATE = 5000.0
ANSWER_WAIT_S = 5.0  # after opening: the longest wait for every echo
QUIET_S = 1.0  # after the probe: no new datagram for this long ends the count
SAMPLE_MAX = 5000  # sessions in the early sample (every STEP-th, STEP = ceil(N / SAMPLE_MAX))
SAMPLE_RATE = 10000.0  # its reverse datagrams per second: two rounds of 5,000 take a second
SAMPLE_AT_S = 0.8  # after the event: past the flows' convergence (a few hundred ms in every lab)
SAMPLE_BY_S = 2.0  # the JVD's: a failed SRX's sessions pass through its peer within 2 s
SYNC_WAIT_S = 5.0  # before the event: the longest wait for every session's copy on its MNHA peer
LOST_SHOWN = 10


def sources(client_prefix: str) -> IPv4Network:
    """The sessions' source addresses: the second quarter of the client host's prefix."""
    net = IPv4Network(client_prefix, strict=False)
    if net.prefixlen > 30:
        return net
    return list(net.subnets(prefixlen_diff=2))[1]


class NotOpened(LabError):
    """The path did not answer every background session before the event: the case is not judged."""


class Ended(LabError):
    """A process of the background sessions ended before the case was done with it: not judged."""


def work_s(count: int) -> float:
    """Seconds COUNT sessions keep their processes busy at the rates above: opening them (and waiting
    for their echoes as long again), two probe rounds, and reading the tables around the event."""
    tables = 2 * sessions.read_timeout(count)
    return 2 * count / OPEN_RATE + 2 * count / PROBE_RATE + tables


def port_base(count: int, source: IPv4Network, now: float) -> int:
    """The first source port of a run opened at NOW (seconds): each second of the clock its own block
    of ports, so that a run never reuses the 5-tuples of one a minute before (their sessions, still
    in the tables, would be taken for this run's)."""
    need = sessionload.ports_needed(count, source)
    slots = (65536 - PORT_MIN) // need
    if slots < 1:
        raise LabError(f"--sessions {count}: more than the client prefix's quarter {source} holds with "
                       f"source ports {PORT_MIN}-65535")
    return PORT_MIN + (int(now) % slots) * need


def taken_out(plan: LabPlan, event: str, target: str) -> set[str]:
    """The SRXs EVENT on TARGET takes out of service: a power-off, reboot or link failure its target,
    the removal of a pair (or a next-hop) every node of it; other events none."""
    if event in ("mnha-pair-power-off", "nexthop-delete"):
        return set(next((p for p in plan.mnha if target in p), [target]))
    if event in ("srx-power-off", "srx-reboot", "srx-link-failure", "srx-link-blackhole"):
        return {target}
    return set()


def open_all(held: SessionLoad, progress: Callable[[str], None]) -> list[tuple[str, int]]:
    """Open the sessions; `NotOpened` unless every one was answered."""
    progress(f"opening {held.count} background sessions")
    opened, answered, missing = held.open()
    if not opened:
        raise NotOpened(f"the path answered {answered} of the {held.count} background sessions before the event "
                        f"(not answered: {', '.join(missing[:5]) or 'unknown'}): the case cannot be judged; lower "
                        "--sessions, or look at the SRXs' tables")
    return opened


def read_carriers(plan: LabPlan) -> tuple[dict[tuple[str, int], str], dict[tuple[str, int], set[str]]]:
    """From the SRXs' tables now: the carrier of each session to PORT (address, port -> SRX: its entry
    has counted packets) and every SRX holding an entry of it (the copies too)."""
    srxs = [node for node in plan.nodes if kinds.get(node.kind).firewall]
    with ThreadPoolExecutor(max_workers=max(1, len(srxs))) as pool:
        tables = list(pool.map(lambda node: sessions.read_table(node.master_ns), srxs))
    carrier: dict[tuple[str, int], tuple[int, str]] = {}
    holders: dict[tuple[str, int], set[str]] = {}
    for node, table in zip(srxs, tables, strict=True):
        for s in table:
            if s.protocol != "udp" or s.destination_port != PORT:
                continue
            key = (s.source, s.source_port)
            holders.setdefault(key, set()).add(node.name)
            if s.packets and s.packets > carrier.get(key, (0, ""))[0]:
                carrier[key] = (s.packets, node.name)
    return {key: srx for key, (_, srx) in carrier.items()}, holders


def peer_of(plan: LabPlan) -> dict[str, str]:
    return {a: b for pair in plan.mnha for a, b in (tuple(pair), tuple(reversed(pair)))}


def figures(count: int, opened: list[tuple[str, int]], carriers: dict[tuple[str, int], str],
            holders: dict[tuple[str, int], set[str]], peers: dict[str, str], taken_out: set[str],
            lost: set[tuple[str, int]], probe_at_s: float | None,
            early: Early | None = None) -> dict[str, Any]:
    """The sessions' part of an event's result. OPENED: the sessions answered before the event;
    CARRIERS / HOLDERS: `read_carriers` before the event; PEERS: SRX -> its MNHA peer; TAKEN_OUT: the
    SRXs the event took out; LOST: the opened sessions whose reverse datagram did not arrive; EARLY:
    the sample's probe right after the event."""
    carried: Counter[str] = Counter()
    synced: Counter[str] = Counter()
    failed_over = expected_lost = expected_passed = judged = lost_judged = lost_failed_over = unseen = 0
    shown: list[str] = []
    for key in opened:
        srx = carriers.get(key)
        if srx is None:
            unseen += 1
        else:
            carried[srx] += 1
            if peers.get(srx) in holders.get(key, set()):
                synced[srx] += 1
        peer = peers.get(srx or "")
        if srx in taken_out and (peer is None or peer in taken_out):
            expected_lost += 1
            expected_passed += key not in lost
            continue
        judged += 1
        moved = srx in taken_out
        failed_over += moved
        if key in lost:
            lost_judged += 1
            lost_failed_over += moved
            if len(shown) < LOST_SHOWN:
                shown.append(f"{key[0]}:{key[1]} ({srx or 'no carrier seen'})")
    return {
        "sessions": count, "opened": len(opened), "carried_before": dict(sorted(carried.items())),
        "synced_before": dict(sorted(synced.items())), "not_seen": unseen, "taken_out": sorted(taken_out),
        "expected_lost": expected_lost, "expected_lost_passed": expected_passed, "judged": judged,
        "failed_over": failed_over,
        "survived": failed_over - lost_failed_over, "lost": lost_judged,
        "lost_pct": round(100.0 * lost_judged / judged, 4) if judged else 0.0,
        "lost_sessions": shown, "probe_at_s": probe_at_s,
        "early": _early(early, opened, carriers, holders, peers, taken_out) if early is not None else None,
    }


@dataclass(frozen=True)
class Early:
    """The early sample's probe: every STEP-th session, its datagrams sent from AT_S to SENT_BY_S after
    the event; LOST: the sampled sessions that answered neither."""

    step: int
    at_s: float
    sent_by_s: float
    lost: frozenset[tuple[str, int]]


def sample_step(count: int) -> int:
    """Every how many sessions one is in the early sample."""
    return max(1, -(-count // SAMPLE_MAX))


def _early(early: Early, opened: list[tuple[str, int]], carriers: dict[tuple[str, int], str],
           holders: dict[tuple[str, int], set[str]], peers: dict[str, str], taken_out: set[str]) -> dict[str, Any]:
    """The sample's figures, judged as the whole's (sessions of a pair taken out are expected lost)."""
    sampled = opened[::early.step]
    whole = figures(len(sampled), sampled, carriers, holders, peers, taken_out, set(early.lost), early.at_s)
    return {"step": early.step, "sampled": len(sampled), "at_s": early.at_s, "sent_by_s": early.sent_by_s,
            "judged": whole["judged"], "failed_over": whole["failed_over"], "survived": whole["survived"],
            "lost": whole["lost"], "lost_pct": whole["lost_pct"], "expected_lost": whole["expected_lost"]}


class SessionLoad:
    """The server (server host) and the sessions' holder (client host), driven line by line."""

    def __init__(self, plan: LabPlan, count: int):
        if count < 1:
            raise LabError(f"--sessions {count}: at least 1")
        ends = endpoints(plan)
        self.client_ns, self.server_ns, self.address = ends.client_ns, ends.server_ns, ends.server_address
        self.source = sources(ends.client_prefix)
        self.port_base = port_base(count, self.source, time.time())
        self.count = count
        self.server: subprocess.Popen[str] | None = None
        self.client: subprocess.Popen[str] | None = None

    def _spawn(self, ns: str, args: list[str]) -> subprocess.Popen[str]:
        from labkit import netnsutil

        root = os.path.dirname(os.path.dirname(os.path.abspath(dataplane.__file__)))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
        return subprocess.Popen(["nsenter", f"--net={netnsutil.path(ns)}", sys.executable, "-m",
                                 "dataplane.traffic.sessionload", *args], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)

    @staticmethod
    def _answer(proc: subprocess.Popen[str] | None, what: str, timeout: float) -> dict[str, Any]:
        if proc is None or proc.stdout is None:
            raise LabError(f"the background sessions' {what} is not running")
        ready, _, _ = select.select([proc.stdout], [], [], timeout)
        line = proc.stdout.readline() if ready else ""
        try:
            answer: dict[str, Any] = json.loads(line)
        except ValueError:
            err = proc.stderr.read()[-300:] if proc.poll() is not None and proc.stderr else ""
            raise LabError(f"the background sessions' {what} did not answer within {timeout:g} s: "
                           f"{(line.strip() or err.strip()) or 'nothing'}") from None
        if "error" in answer:
            raise LabError(f"the background sessions' {what}: {answer['error']}")
        return answer

    @staticmethod
    def _tell(proc: subprocess.Popen[str] | None, command: str) -> None:
        assert proc is not None and proc.stdin is not None
        try:
            proc.stdin.write(command + "\n")
            proc.stdin.flush()
        except OSError as exc:  # a broken pipe: the process has ended (its own time bound, or a crash)
            try:
                code: int | None = proc.wait(1.0)
            except subprocess.TimeoutExpired:
                code = None
            err = proc.stderr.read()[-300:].strip() if code is not None and proc.stderr else ""
            args = [str(a) for a in proc.args] if isinstance(proc.args, list) else [str(proc.args)]
            raise Ended(f"the background sessions' {' '.join(args[5:6]) or 'process'} ended before "
                        f"'{command.split()[0]}' (exit status {code}; {err or exc.strerror})") from None

    def start(self, seconds: float) -> SessionLoad:
        """Start both processes for at most SECONDS; returns once both listen."""
        self.server = self._spawn(self.server_ns, ["serve", "--bind", self.address, "--port", str(PORT),
                                                   "--seconds", f"{seconds:g}"])
        self._answer(self.server, f"server in {self.server_ns}", 10.0)
        self.client = self._spawn(self.client_ns, [
            "hold", "--sources", str(self.source), "--count", str(self.count), "--to", f"{self.address}:{PORT}",
            "--port-base", str(self.port_base), "--seconds", f"{seconds:g}"])
        self._answer(self.client, f"client in {self.client_ns}", 10.0)
        return self

    def open(self) -> tuple[list[tuple[str, int]], int, list[str]]:
        """Open every session: (the sessions, when every one was answered; how many were; up to 20
        that were not). The echoes may trail the sending by as long as it took (a server behind its
        socket's queue): the wait is that long too, or ends QUIET_S after the last echo."""
        wait = ANSWER_WAIT_S + self.count / OPEN_RATE
        self._tell(self.client, f"open {OPEN_RATE:g} {wait:g} {QUIET_S * 2:g}")
        report = self._answer(self.client, "client", self.count / OPEN_RATE + wait + 30)
        answered, missing = int(report["answered"]), list(report["missing"])
        if answered != self.count:
            return [], answered, missing
        return [self.key(i) for i in range(self.count)], answered, []

    def probe(self) -> set[tuple[str, int]]:
        """A reverse datagram to every session, twice when the first round missed some (a datagram
        lost on a loaded path; a session that is not there drops both): the sessions neither reached."""
        self._tell(self.client, "expect")
        self._answer(self.client, "client", 10.0)
        report: dict[str, Any] = {}
        for _ in range(2):
            self._tell(self.server, f"probe {PROBE_RATE:g}")
            self._answer(self.server, "server", self.count / PROBE_RATE + 30)
            self._tell(self.client, f"count {ANSWER_WAIT_S:g} {QUIET_S:g}")
            report = self._answer(self.client, "client", ANSWER_WAIT_S + 30)
            if not report["missing_indexes"]:
                break
        return {self.key(i) for i in report["missing_indexes"]}

    def prepare_sample(self) -> int:
        """Before the event: the server sets the early sample aside (every `sample_step`-th session);
        how many it holds."""
        self._tell(self.server, f"sample {sample_step(self.count)}")
        sampled = int(self._answer(self.server, "server", 30.0)["sampled"])
        self._tell(self.client, "expect")
        self._answer(self.client, "client", 10.0)
        return sampled

    def probe_sample(self, event_at: float) -> Early:
        """From SAMPLE_AT_S after EVENT_AT (time.monotonic) on, two reverse datagrams to every sampled
        session; which of them neither reached."""
        step = sample_step(self.count)
        time.sleep(max(0.0, event_at + SAMPLE_AT_S - time.monotonic()))
        at = time.monotonic() - event_at
        for _ in range(2):  # a datagram lost on a loaded path: its second one, a round later
            self._tell(self.server, f"probe {SAMPLE_RATE:g} sample")
            self._answer(self.server, "server", SAMPLE_MAX / SAMPLE_RATE + 30)
        sent_by = time.monotonic() - event_at
        self._tell(self.client, f"count {ANSWER_WAIT_S:g} {QUIET_S:g} {step}")
        report = self._answer(self.client, "client", ANSWER_WAIT_S + 30)
        return Early(step, round(at, 3), round(sent_by, 3), frozenset(self.key(i) for i in report["missing_indexes"]))

    def key(self, index: int) -> tuple[str, int]:
        """Session INDEX's source address and port."""
        return sessionload.session_of(index, self.source, self.port_base)

    def close(self) -> None:
        """Stop both processes (nothing is left running)."""
        for proc in (self.client, self.server):
            if proc is None:
                continue
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(5)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    with contextlib.suppress(OSError):  # stdin of an ended process: its unsent command
                        stream.close()


class EarlySampler:
    """`SessionLoad.probe_sample` on a thread of its own, started at the event: the injection (a
    reboot's power-on, a table emptied) goes on beside it."""

    def __init__(self, held: SessionLoad):
        self.held = held
        self.thread: threading.Thread | None = None
        self.early: Early | None = None
        self.error: BaseException | None = None

    def start(self, event_at: float) -> None:
        def run() -> None:
            try:
                self.early = self.held.probe_sample(event_at)
            except BaseException as exc:  # handed to the runner by result()
                self.error = exc

        self.thread = threading.Thread(target=run, name="early-sample", daemon=True)
        self.thread.start()

    def result(self) -> Early | None:
        """The sample's probe once done (None when it never started); its error, raised here."""
        if self.thread is None:
            return None
        self.thread.join()
        if self.error is not None:
            raise self.error
        return self.early


def wait_synced(plan: LabPlan, opened: list[tuple[str, int]], timeout: float = SYNC_WAIT_S) -> tuple[
        dict[tuple[str, int], str], dict[tuple[str, int], set[str]]]:
    """The sessions' carriers and holders, read again until every session seen on an SRX of an MNHA
    pair has its copy on the peer (or TIMEOUT)."""
    peers = peer_of(plan)
    deadline = time.monotonic() + timeout
    while True:
        carriers, holders = read_carriers(plan)
        unsynced = [key for key in opened if (srx := carriers.get(key)) in peers
                    and peers[srx] not in holders.get(key, set())]
        if not unsynced or time.monotonic() > deadline:
            return carriers, holders
        time.sleep(0.5)
