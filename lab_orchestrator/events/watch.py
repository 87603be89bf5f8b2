"""What a running lab shows while a failure event runs under traffic (`eventrun`), read from the lab.

Which SRX carries each flow (its conntrack packet counters growing), the packets each MX delivers per
SRX over time (its per-SRX nft counters), every selector table the MXs publish (`mxlb` status files)
and the flows those tables say must move; and the two waits around an event: the selectors ready
before the traffic starts, quiet again after the event.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataplane.kernel.selcounters import SelectorCounters
from labkit.configs import SelectorConfig
from labkit.contracts import MNHA_STATUS, MXLB_CONFIG, MXLB_STATUS
from labkit.status import MnhaStatus, MxlbStatus, read_status

from .. import kinds
from ..plan.pipeline import LabPlan, NodePlan
from ..runtime import readiness
from ..runtime.state import LabState
from . import flowlookup, movers, sessions


def load_balancers(plan: LabPlan) -> list[NodePlan]:
    """The load balancers (MX) of the lab, in plan order."""
    return [n for n in plan.nodes if kinds.get(n.kind).load_balancer]


def selector_configs(plan: LabPlan, mxs: list[str] | None = None) -> list[SelectorConfig]:
    """The selector daemon's configuration of each MX (of MXS), as written into the state folder."""
    out = []
    for node in load_balancers(plan):
        path = Path(plan.state_dir) / "nodes" / node.name / MXLB_CONFIG
        if (mxs is None or node.name in mxs) and path.exists():
            out.append(SelectorConfig.read(path))
    return out


def _mx_forwards(plan: LabPlan, mx: str, gap: float = 0.3) -> bool:
    """Does this MX carry any of the traffic now (its per-SRX counters grow)?"""

    def total(reader: SelectorCounters) -> int:
        return sum(c["packets"] for side in reader.read().values() for c in side.values())

    reader = SelectorCounters(selector_configs(plan, [mx]))
    try:
        first = total(reader)
        time.sleep(gap)
        return total(reader) > first
    finally:
        reader.close()


def carried_by(plan: LabPlan, target: str) -> set[str] | None:
    """The SRXs whose flows a daemon crash on TARGET may touch (None: every flow): an SRX its own; an
    MX every flow if it forwards any traffic, none if it does not (an SRD standby); a gateway every
    flow; the lab-wide SSH server none."""
    kind = next((kinds.get(n.kind) for n in plan.nodes if n.name == target), None)
    if kind is None:
        return set()
    if kind.firewall:
        return {target}
    if kind.load_balancer:
        return None if _mx_forwards(plan, target) else set()
    return None


@dataclass
class Sampler:
    """Delivered packets per SRX over time, from the MX's per-SRX counters (trust side)."""

    namespaces: list[str]
    configs: list[SelectorConfig]  # the MXs' selector configurations (which backend counts where)
    interval: float = 0.1
    samples: list[tuple[int, dict[str, int]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Sampler:
        threading.Thread(target=self._run, daemon=True, name="sampler").start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        reader = SelectorCounters(self.configs, self.namespaces)
        try:
            while not self._stop.is_set():
                totals: dict[str, int] = {}
                for side in reader.read().values():
                    for name, counter in side.items():
                        totals[name] = totals.get(name, 0) + counter["packets"]
                self.samples.append((time.monotonic_ns(), totals))
                self._stop.wait(self.interval)
        finally:
            reader.close()

    def rates(self) -> list[tuple[float, dict[str, float]]]:
        out = []
        for (t0, a), (t1, b) in zip(self.samples, self.samples[1:], strict=False):
            dt = (t1 - t0) / 1e9
            if dt > 0:
                out.append((t1 / 1e9, {k: max(0, b.get(k, 0) - a.get(k, 0)) / dt for k in b}))
        return out


def _session_counts(plan: LabPlan) -> dict[tuple[str, int], dict[str, int]]:
    """(subscriber address, its port) -> {srx: packets} from every SRX's conntrack. Every SRX is
    read at once, from threads (one after the other took ~0.5 s on an 8-SRX lab)."""
    from concurrent.futures import ThreadPoolExecutor

    srxs = [node for node in plan.nodes if kinds.get(node.kind).firewall]
    with ThreadPoolExecutor(max_workers=max(1, len(srxs))) as pool:
        tables = list(pool.map(lambda node: sessions.read_table(node.master_ns), srxs))
    return sessions.udp_counts({node.name: table for node, table in zip(srxs, tables, strict=True)})


@contextlib.contextmanager
def _flow_reader(plan: LabPlan, flows: Sequence[flowlookup.FlowTuple] | None
                 ) -> Iterator[Callable[[], dict[tuple[str, int], dict[str, int]]]]:
    """A reading of the flows' session counters on every SRX: each flow's own session looked up
    (`flowlookup`: the cost follows the flows, never the tables' size), or every SRX's whole table
    when no flows are named."""
    if flows is None:
        yield lambda: _session_counts(plan)
        return
    srxs = {node.name: node.master_ns for node in plan.nodes if kinds.get(node.kind).firewall}
    with flowlookup.FlowCounters(srxs) as counters:
        yield lambda: counters.read(flows)


def carriers(plan: LabPlan, gap: float = 0.4, flows: Sequence[flowlookup.FlowTuple] | None = None,
             rounds: int = 3) -> dict[tuple[str, int], str]:
    """Which SRX carries each flow now: the one whose session counter grows over GAP seconds.
    A flow of FLOWS that no SRX was seen carrying is looked for again (up to ROUNDS samples in all):
    an MNHA pair's session sync rewrites its peer's copies, so one sample can miss a flow that is
    being carried. Without FLOWS: every UDP session of every SRX's table, sampled once."""
    keys = {(f.src, f.sport) for f in flows} if flows is not None else None
    out: dict[tuple[str, int], str] = {}
    with _flow_reader(plan, flows) as read:
        for _ in range(rounds):
            first = read()
            time.sleep(gap)
            for key, srx in sessions.growth_carriers(first, read()).items():
                out.setdefault(key, srx)
            if keys is None or keys <= out.keys():
                break
    return out


def selector_status_files(state: LabState, plan: LabPlan) -> dict[str, Path]:
    """MX -> the status file its selector daemon publishes its table in."""
    return {n.name: Path(state.state_dir) / "nodes" / n.name / MXLB_STATUS for n in load_balancers(plan)}


@dataclass
class TableWatcher:
    """Every selector table each MX publishes while an event runs (polled every INTERVAL s)."""

    files: dict[str, Path]
    interval: float = 0.02
    samples: list[movers.TableSample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> TableWatcher:
        self.poll()
        self._thread = threading.Thread(target=self._run, daemon=True, name="tables")
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
        self.poll()

    def poll(self) -> None:
        last = {s.node: s for s in self.samples}
        for node, path in self.files.items():
            data = read_status(path, MxlbStatus)
            if data is None:
                continue
            changes, table = data.changes, tuple(data.table)
            # TLB per MNHA pair: the member is the pair, and which SRX of it carries the
            # real-service (BGP decides) is part of where a bucket's flows go
            via = {m.name: "/".join(str(v) for _, v in sorted(m.via.items())) for m in data.members}
            if any(via.values()):
                table = tuple(f"{name}{movers.VIA}{via.get(name, '')}" for name in table)
            seen = last.get(node)
            if seen is None or seen.table != table:
                self.samples.append(movers.TableSample(time.monotonic_ns() / 1e9, node, table, changes))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.poll()


PHASE_NAMES = {"nexthop-add": "add", "nexthop-delete": "delete"}


def expected_movers(state: LabState, plan: LabPlan, samples: list[movers.TableSample], flows: list[Any],
                    marks: dict[str, float], event: str) -> dict[str, Any] | None:
    """Per phase (the event, its restore): the flow ids whose bucket changed member in an MX
    selector's table, the ideal count, and the tables seen; None when no table was readable."""
    if not samples or "event" not in marks:
        return None
    config = next((json.loads(p.read_text()) for p in
                   (Path(state.state_dir) / "nodes" / n.name / MXLB_CONFIG for n in load_balancers(plan))
                   if p.exists()), None)
    if config is None:
        return None
    buckets_of = movers.flow_buckets({f.flow_id: f.src for f in flows}, int(config["buckets"]), int(config["seed"]))
    phases = [movers.Phase(PHASE_NAMES.get(event, "event"), marks["event"], marks.get("restore", float("inf")))]
    if "restore" in marks:
        phases.append(movers.Phase("restore", marks["restore"]))
    out: dict[str, Any] = {"missed_tables": movers.missed_tables(samples), "phases": {}}
    for phase in phases:
        moved = movers.phase_movers(samples, phase, buckets_of)
        # two MXs whose tables disagree: a flow whose gateway switches MX changes SRX
        disagree = movers.disagreeing_buckets(samples, phase)
        crossing = {flow for flow, b in buckets_of.items() if b in disagree}
        node = samples[0].node
        frame = movers.window([s for s in samples if s.node == node], phase)
        first, last = (movers.member_count(frame[0].table), movers.member_count(frame[-1].table)) if frame else (0, 0)
        # a member leaving moves its share of the members before; one joining, its share of those after
        members = first if last < first else last
        tables = [s.table for s in frame]
        changed = len(movers.changed_buckets(tables))
        size = max((len(t) for t in tables), default=0)
        out["phases"][phase.name] = {"movers": moved | crossing, "cross_mx": crossing - moved,
                                     "ideal": movers.share_ideal(len(flows), members, abs(first - last))
                                     if first != last else 0, "members": [first, last],
                                     # on the table itself: the share of buckets that changed member vs
                                     # the members that left or joined over the larger set (1/N for one)
                                     "bucket_share_moved": round(changed / size, 5) if size else None,
                                     "bucket_share_ideal": movers.share_of_change(first, last),
                                     "buckets": size}
    return out



def members_pending(config: dict[str, Any], status: MxlbStatus, down: set[str]) -> list[str]:
    """The selector members of one MX (its mxlb config and status) that have an SRX in service but
    are not in its table yet (a TLB real-service still passing its first health checks)."""
    table = {m.name: m.alive and m.buckets > 0 for m in status.members}
    pending = []
    for selector in config.get("selectors", []):
        for member in selector.get("members", []):
            nodes = {h["node"] for h in member.get("hops", [])} or {member["name"]}
            if nodes - down and not table.get(member["name"], False) and member["name"] not in pending:
                pending.append(member["name"])
    return pending


def out_of_selection(state: LabState, plan: LabPlan) -> set[str]:
    """The SRXs no selector should hold now: powered off, or an MNHA node that its own daemon says
    is not active (an SRG1 backup, an SRG0 node whose monitoring failed: both advertise prepended,
    so they are out of the ECMP route)."""
    out = set(state.down_nodes)
    for node in {n for pair in plan.mnha for n in pair} - out:
        data = read_status(Path(state.state_dir) / "nodes" / node / MNHA_STATUS, MnhaStatus)
        if data is None:
            continue  # not written yet (just powered on): counts as in service
        if data.srg1.role != "active" or data.srg0.role == "ineligible":
            out.add(node)
    return out


def selectors_pending(state: LabState, plan: LabPlan) -> list[str]:
    """MX:member for each selector member that has an SRX in service but is not in that MX's table."""
    root = Path(state.state_dir) / "nodes"
    pending: list[str] = []
    out = out_of_selection(state, plan)
    for node in (n.name for n in load_balancers(plan) if n.name not in state.down_nodes):
        try:
            config = json.loads((root / node / MXLB_CONFIG).read_text())
        except (OSError, ValueError):
            continue
        status = read_status(root / node / MXLB_STATUS, MxlbStatus)
        if status is None:
            continue
        pending += [f"{node}:{m}" for m in members_pending(config, status, out)]
    return pending


def wait_selectors_ready(state: LabState, plan: LabPlan, timeout: float = 10.0) -> list[str]:
    """Before the traffic starts: until every MX's selector has each member with an SRX in service
    (a lab just up may still be passing its health checks; flows moving then would count as
    losses of unaffected flows). Returns what was still pending at the TIMEOUT (nothing: ready)."""
    deadline = time.monotonic() + timeout
    while True:
        pending = selectors_pending(state, plan)
        if not pending or time.monotonic() >= deadline:
            return pending
        time.sleep(0.1)


def wait_settled(state: LabState, plan: LabPlan, timeout: float, quiet: float = 2.0) -> tuple[float, bool]:
    """Until every member with an SRX in service is in every MX selector's table (a returning or
    added SRX has its routes back and, with TLB, has passed its health checks: seconds after the
    power-on that brought it) and no table has changed for QUIET seconds since: (the monotonic time
    it happened, True), or (the time of the TIMEOUT, False). Without the first condition the runner
    would read the SRXs' session tables before an added SRX (the second of a pair) had taken its flows."""
    files = [Path(state.state_dir) / "nodes" / n.name / MXLB_STATUS for n in load_balancers(plan)]
    deadline = time.monotonic() + timeout
    last: list[int] = []
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        now: list[int] = []
        for path in files:
            status = read_status(path, MxlbStatus)
            now.append(-1 if status is None else status.changes)
        if now != last or selectors_pending(state, plan):
            last, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= quiet:
            return time.monotonic_ns() / 1e9, True
        time.sleep(0.1)
    return time.monotonic_ns() / 1e9, False


def mnha_unsynced(pairs: list[list[str]], statuses: dict[str, MnhaStatus | None], down: set[str]) -> list[str]:
    """Why the MNHA pairs in service are not in step ([] when they are): `readiness.mnha_pending`."""
    return readiness.mnha_pending(pairs, statuses, down)


def wait_mnha_synced(state: LabState, plan: LabPlan, timeout: float = 10.0) -> list[str]:
    """Until every MNHA pair in service is in step (`mnha_unsynced`); what was still wrong at the TIMEOUT."""
    deadline = time.monotonic() + timeout
    while True:
        statuses = {node: read_status(Path(state.state_dir) / "nodes" / node / MNHA_STATUS, MnhaStatus)
                    for node in {n for pair in plan.mnha for n in pair}}
        why = mnha_unsynced([list(p) for p in plan.mnha], statuses, set(state.down_nodes))
        if not why or time.monotonic() >= deadline:
            return why
        time.sleep(0.1)
