"""Run failure events under traffic and measure convergence the way the JVD's IxNetwork does.

For each event: UDP flows (distinct subscriber addresses, IMIX by default) run client -> server and,
on the same 5-tuples, server -> client (so both hash directions are exercised); after a warm-up the
event is injected, restored when it is a lasting one, and the traffic runs on until every flow has
had time to recover. Per flow: packets lost, loss-derived convergence (lost / per-flow rate, RFC
6412's packet-loss duration), longest gap. Which SRX carried each flow comes from the SRXs
themselves (conntrack packet counters, before and after the event); the delivered rate per SRX over
time comes from the MX's per-SRX counters.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dataplane.nft import Nft, NftError
from labkit.contracts import MXLB_STATUS

from . import bgpready, kinds, movers, ops, sessions, trafficsetup
from . import events as eventsmod
from .eventresult import DAEMON_RETURN_S, DaemonCrash, EventResult
from .plan import LabPlan, NodePlan
from .state import LabState
from .trafficsetup import REVERSE_ID_OFFSET, endpoints

MAX_EXTRA_S = 30.0
BGP_WHOLE_S = 20.0  # before an event: every BGP session up and no BIRD still in graceful-restart recovery
LASTING = {"srx-link-failure", "srx-power-off", "mnha-pair-power-off", "nexthop-delete", "srd-link-failure"}

Progress = Callable[[str], None]


@dataclass
class TrafficSpec:
    flows: int = 200
    rate: float = 40000.0  # aggregate packets/s in each direction: 200 flows x 200 pps, a 5 ms resolution
    sizes: str = "imix"
    reverse: bool = True
    warmup: float = 2.0  # seconds of traffic before the event
    hold: float = 3.0  # lasting events: seconds before the restore step
    settle: float = 4.0  # seconds after the event (or its restore) before traffic stops
    down_time: float = 3.0  # reboot events
    # packet: count frames reaching the receiving host's interface (AF_PACKET, before its netfilter);
    # socket: count what a UDP socket of the receiving host gets (after its netfilter)
    receiver: str = "packet"
    realtime: bool = True  # senders SCHED_FIFO (keeps their schedule when the machine is busy)
    sender_cpu: int | None = None  # pin both senders to this CPU (with realtime: the other CPUs stay free)


def _mxs(plan: LabPlan) -> list[NodePlan]:
    """The load balancers (MX) of the lab, in plan order."""
    return [n for n in plan.nodes if kinds.get(n.kind).load_balancer]


def default_target(plan: LabPlan, event: eventsmod.EventKind) -> str:
    if event.target == "node":  # daemon-crash: the first MX, else the first node running a daemon
        nodes = [n.name for n in _mxs(plan)] + [p.node for p in plan.processes]
        return nodes[0]
    if event.target == "flexvpn-member":  # the last FlexVPN router: the lowest HSRP priority, a member
        return [p.node for p in plan.processes if p.name == "flexvpn"][-1]
    if event.name == "nexthop-add" and plan.spares:  # a never-seen SRX (or pair) when the lab has one
        return plan.spares[0]
    kind_of_target = {"srx": "srx", "mx": "mx", "mnha-pair": "srx"}
    return next(n.name for n in plan.nodes if n.kind == kind_of_target[event.target] and n.name not in plan.spares)




def _mx_forwards(plan: LabPlan, mx: str, gap: float = 0.3) -> bool:
    """Does this MX carry any of the traffic now (its per-SRX counters grow)?"""
    namespaces = next((n.namespaces for n in plan.nodes if n.name == mx), [])

    def total(nft: Nft) -> int:
        packets = 0
        for ns in namespaces:
            try:
                data = nft.json("list counters table ip mxlb", ns=ns)
            except NftError:
                continue
            packets += sum(i["counter"]["packets"] for i in data.get("nftables", []) if "counter" in i)
        return packets

    nft = Nft()
    try:
        first = total(nft)
        time.sleep(gap)
        return total(nft) > first
    finally:
        nft.close()


def carried_by(plan: LabPlan, target: str) -> set[str] | None:
    """The SRXs whose flows a daemon crash on TARGET may touch (None: every flow): an SRX its own; an
    MX every flow if it forwards any traffic, none if it does not (an SRD standby); a gateway every
    flow; the lab-wide SSH server none."""
    kind = {n.name: n.kind for n in plan.nodes}.get(target)
    if kind == "srx":
        return {target}
    if kind == "mx":
        return None if _mx_forwards(plan, target) else set()
    if kind is None:
        return set()
    return None


@dataclass
class Sampler:
    """Delivered packets per SRX over time, from the MX's per-SRX counters (trust side)."""

    namespaces: list[str]
    interval: float = 0.1
    samples: list[tuple[int, dict[str, int]]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> Sampler:
        threading.Thread(target=self._run, daemon=True, name="sampler").start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        nft = Nft()
        try:
            while not self._stop.is_set():
                totals: dict[str, int] = {}
                for ns in self.namespaces:
                    try:
                        data = nft.json("list counters table ip mxlb", ns=ns)
                    except NftError:
                        continue
                    for item in data.get("nftables", []):
                        counter = item.get("counter")
                        if counter:
                            totals[counter["name"]] = totals.get(counter["name"], 0) + counter["packets"]
                self.samples.append((time.monotonic_ns(), totals))
                self._stop.wait(self.interval)
        finally:
            nft.close()

    def rates(self) -> list[tuple[float, dict[str, float]]]:
        out = []
        for (t0, a), (t1, b) in zip(self.samples, self.samples[1:], strict=False):
            dt = (t1 - t0) / 1e9
            if dt > 0:
                out.append((t1 / 1e9, {k: max(0, b.get(k, 0) - a.get(k, 0)) / dt for k in b}))
        return out


def _read_sessions(ns: str) -> list[sessions.Session]:
    """One SRX's conntrack table. nsenter rather than a fork-time setns hook: safe to run from
    threads, so every SRX is read at once (one after the other took ~0.5 s on an 8-SRX lab)."""
    from labkit import netnsutil

    try:
        done = subprocess.run(["nsenter", f"--net={netnsutil.path(ns)}", "conntrack", "-L"], capture_output=True,
                              text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return sessions.parse_conntrack(done.stdout)


def _session_counts(plan: LabPlan) -> dict[tuple[str, int], dict[str, int]]:
    """(subscriber address, its port) -> {srx: packets} from every SRX's conntrack."""
    from concurrent.futures import ThreadPoolExecutor

    counts: dict[tuple[str, int], dict[str, int]] = {}
    srxs = [node for node in plan.nodes if kinds.get(node.kind).firewall]
    with ThreadPoolExecutor(max_workers=max(1, len(srxs))) as pool:
        tables = list(pool.map(lambda node: _read_sessions(node.master_ns), srxs))
    for node, table in zip(srxs, tables, strict=True):
        for s in table:
            if s.protocol == "udp":
                counts.setdefault((s.source, s.source_port), {})[node.name] = s.packets
    return counts


def carriers(plan: LabPlan, gap: float = 0.4) -> dict[tuple[str, int], str]:
    """Which SRX carries each flow now: the one whose session counter grows."""
    first = _session_counts(plan)
    time.sleep(gap)
    second = _session_counts(plan)
    out = {}
    for key, now in second.items():
        before = first.get(key, {})
        growth = {srx: packets - before.get(srx, 0) for srx, packets in now.items()}
        best = max(growth, key=lambda srx: growth[srx])
        if growth[best] > 0:
            out[key] = best
    return out


def selector_status_files(state: LabState, plan: LabPlan) -> dict[str, Path]:
    """MX -> the status file its selector daemon publishes its table in."""
    return {n.name: Path(state.state_dir) / "nodes" / n.name / "mxlb-status.json" for n in _mxs(plan)}


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
            try:
                data = json.loads(path.read_text())
                changes, table = int(data["changes"]), tuple(data.get("table") or ())
                # TLB per MNHA pair: the member is the pair, and which SRX of it carries the
                # real-service (BGP decides) is part of where a bucket's flows go
                via = {m["name"]: "/".join(str(v) for _, v in sorted((m.get("via") or {}).items()))
                       for m in data.get("members", [])}
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                continue
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
                   (Path(state.state_dir) / "nodes" / n.name / "mxlb.json" for n in _mxs(plan))
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


def _slot(state: LabState, node: str, name: str) -> Any:
    from . import supervisor

    return next((s for s in supervisor.Supervisor(state.state_dir).table() if s.key == (node, name)), None)


def members_pending(config: dict[str, Any], status: dict[str, Any], down: set[str]) -> list[str]:
    """The selector members of one MX (its mxlb config and status) that have an SRX in service but
    are not in its table yet (a TLB real-service still passing its first health checks)."""
    table = {m["name"]: bool(m.get("alive")) and int(m.get("buckets") or 0) > 0 for m in status.get("members", [])}
    pending = []
    for selector in config.get("selectors", []):
        for member in selector.get("members", []):
            nodes = {h["node"] for h in member.get("hops", [])} or {member["name"]}
            if nodes - down and not table.get(member["name"], False) and member["name"] not in pending:
                pending.append(member["name"])
    return pending


def wait_selectors_ready(state: LabState, plan: LabPlan, timeout: float = 10.0) -> list[str]:
    """Before the traffic starts: until every MX's selector has each member with an SRX in service
    (a lab just up may still be passing its health checks; flows moving then would count as
    losses of unaffected flows). Returns what was still pending at the TIMEOUT (nothing: ready)."""
    root = Path(state.state_dir) / "nodes"
    deadline = time.monotonic() + timeout
    while True:
        pending: list[str] = []
        for node in (n.name for n in _mxs(plan) if n.name not in state.down_nodes):
            try:
                config = json.loads((root / node / "mxlb.json").read_text())
                status = json.loads((root / node / MXLB_STATUS).read_text())
            except (OSError, ValueError):
                continue
            pending += [f"{node}:{m}" for m in members_pending(config, status, set(state.down_nodes))]
        if not pending or time.monotonic() >= deadline:
            return pending
        time.sleep(0.1)


def run_event(state: LabState, plan: LabPlan, event: eventsmod.EventKind, target: str, spec: TrafficSpec,
              progress: Progress = lambda _: None, daemon: str | None = None) -> EventResult:
    ends = endpoints(plan)
    per_flow = spec.rate / spec.flows
    lasting = event.name in LASTING
    # The senders run until stopped (bounded by MAX_EXTRA_S): the traffic goes on until the
    # selectors have settled after the event (and its restore), then for spec.settle more seconds.
    total = spec.warmup + (spec.hold if lasting else 0) + spec.settle + \
        (spec.down_time if event.name.endswith("reboot") else 0) + MAX_EXTRA_S
    if event.name == "nexthop-add" and target not in state.down_nodes:
        ops.power_off(state, plan, target)  # out of service first: the event puts it (back) in
        time.sleep(1.0)
    waiting = wait_selectors_ready(state, plan)
    if waiting:
        progress(f"selector members still not ready after 10 s: {', '.join(waiting)}")
    unsettled = bgpready.wait_whole(plan, set(state.down_nodes), timeout=BGP_WHOLE_S)
    if unsettled:
        progress(f"BGP still not whole after {BGP_WHOLE_S:.0f} s: {', '.join(unsettled[:4])}")
    mx_ns = [ns for n in _mxs(plan) for ns in n.namespaces if ns.endswith("-trust-vr")]
    # CGNAT: the server sees each flow's NAT binding, not the subscriber; the forward receiver
    # publishes the bindings on a FIFO and the reverse sender answers them (and follows a re-bind).
    nat = plan.use_case == "cgnat"
    scratch = tempfile.mkdtemp(prefix="lab-events-") if nat and spec.reverse else None
    setup = trafficsetup.two_way(ends, spec.flows, spec.rate, spec.sizes, total, reverse=spec.reverse, nat=nat,
                                 bindings=trafficsetup.bindings_fifo(scratch) if scratch else None,
                                 socket_mode=spec.receiver == "socket", realtime=spec.realtime,
                                 cpu=spec.sender_cpu)
    flows = setup.flows
    sampler = Sampler(mx_ns).start()
    watcher = TableWatcher(selector_status_files(state, plan)).start()
    rx_f = tx_f = rx_r = tx_r = None
    marks: dict[str, float] = {}
    try:
        rx_f = setup.rx_forward.spawn().wait_ready()
        rx_r = setup.rx_reverse.spawn().wait_ready() if setup.rx_reverse else None
        tx_f = setup.tx_forward.spawn().wait_ready()
        time.sleep(0.3)  # the forward packets open the sessions the reverse flows need
        tx_r = setup.tx_reverse.spawn().wait_ready() if setup.tx_reverse else None
        time.sleep(max(0.0, spec.warmup - 0.8))
        before = carriers(plan)
        crash: dict[str, Any] = {}
        involved: set[str] | None = None
        if event.name == "daemon-crash":
            daemon = daemon or ops.default_daemon(state, target)
            involved = carried_by(plan, target)
            crash = {"daemon": daemon, "restarts_before": getattr(_slot(state, target, daemon), "restarts", 0)}
        progress(f"{event.name} on {target}" + (f" ({daemon})" if crash else ""))
        marks["event"] = time.monotonic_ns() / 1e9
        summary = ops.inject(state, plan, event.name, target, down_time=spec.down_time, daemon=daemon)
        during: dict[tuple[str, int], str] = {}
        if lasting:
            time.sleep(max(0.0, spec.hold - 0.5))
            during = carriers(plan)
            marks["restore"] = time.monotonic_ns() / 1e9
            restored = ops.restore(state, plan, target)
            summary += "; restored: " + ("; ".join(restored) or "nothing")
            progress("restored")
        marks["settled"] = wait_settled(state, plan, timeout=MAX_EXTRA_S - 5)
        time.sleep(max(0.0, spec.settle - 0.4))
        after = carriers(plan)
        sent_f = tx_f.stop(timeout=30)
        sent_r = tx_r.stop(timeout=30) if tx_r else None
        time.sleep(0.3)
        report_f = rx_f.stop(sent=sent_f)
        report_r = rx_r.stop(sent=sent_r) if rx_r else None
    except BaseException:
        for child in (tx_f, tx_r, rx_f, rx_r):
            if child is not None:
                child.kill()
        raise
    finally:
        sampler.stop()
        watcher.stop()
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    pair = next((p for p in plan.mnha if target in p), None) if event.name == "mnha-pair-power-off" else None
    # A lasting event's restore step moves flows too (the returning SRX takes its share back, and
    # those flows' first return packets may reach it before their forward ones open a session):
    # they are affected by the restore, not "unaffected".
    moved_back = {key for key, srx in after.items() if during.get(key) not in (None, srx)} if during else set()
    if involved is None and event.target == "mx" and event.name != "mx-reboot" and watcher.samples:
        involved = set()  # the MX's tables say which flows may move: any other loss is unaffected
    expected = expected_movers(state, plan, watcher.samples, flows, marks, event.name)
    result = analyse(event, target, summary, flows, before, during or after, report_f, report_r, sent_f,
                     per_flow, marks, sampler, spec, pair, moved_back, sent_r, involved=involved,
                     nat=plan.use_case == "cgnat", expected=expected, carriers_after=after if during else None)
    if crash:
        # The supervisor's own account: how long the daemon was down before it ran again.
        slot = _slot(state, target, crash["daemon"])
        from . import supervisor

        crash["restarts_after"] = getattr(slot, "restarts", 0)
        crash["down_s"] = getattr(slot, "last_down_s", None)
        crash["running"] = slot is not None and supervisor.slot_alive(slot)
        crash["returned"] = bool(crash["running"] and crash["restarts_after"] > crash["restarts_before"]
                                 and crash["down_s"] is not None and crash["down_s"] <= DAEMON_RETURN_S)
        result.daemon_crash = DaemonCrash(**crash)
        result.passed = result.passed and bool(crash["returned"])
    # how well the senders kept their schedule (a late packet due during an outage is not lost)
    result.senders = {name: {k: v for k, v in sent.items() if k != "per_flow_sent"}
                      for name, sent in (("forward", sent_f), ("reverse", sent_r)) if sent}
    if during:
        result.flows_moved_on_restore = len(moved_back)
        result.flows_moved_on_restore_ideal_max = round(len(flows) / max(1, len(set(after.values()))))
    return result


def _since(ns: int | None, marks: dict[str, float]) -> float | None:
    return round(ns / 1e9 - marks["event"], 3) if ns and "event" in marks else None


def wait_settled(state: LabState, plan: LabPlan, timeout: float, quiet: float = 2.0) -> float:
    """Until no MX selector has changed its table for QUIET seconds (a returning SRX has passed its
    health checks or its routes are back): the monotonic time it happened, or at the TIMEOUT."""
    files = [Path(state.state_dir) / "nodes" / n.name / MXLB_STATUS for n in _mxs(plan)]
    deadline = time.monotonic() + timeout
    last: list[int] = []
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        now: list[int] = []
        for path in files:
            try:
                now.append(int(json.loads(path.read_text())["changes"]))
            except (OSError, ValueError, KeyError):
                now.append(-1)
        if now != last:
            last, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= quiet:
            break
        time.sleep(0.1)
    return time.monotonic_ns() / 1e9


def analyse(event: eventsmod.EventKind, target: str, summary: str, flows: list[Any],  # noqa: PLR0913
            before: dict[tuple[str, int], str], after: dict[tuple[str, int], str], report_f: dict[str, Any],
            report_r: dict[str, Any] | None, sent_f: dict[str, Any], per_flow: float, marks: dict[str, float],
            sampler: Sampler, spec: TrafficSpec, pair: list[str] | None = None,
            moved_back: set[tuple[str, int]] | None = None, sent_r: dict[str, Any] | None = None,
            involved: set[str] | None = None, nat: bool = False, expected: dict[str, Any] | None = None,
            carriers_after: dict[tuple[str, int], str] | None = None) -> EventResult:
    """Per-event verdict: affected flows and their convergence, losses of unaffected flows, moves.
    INVOLVED (daemon-crash) names the SRXs whose flows the event may touch (None: as the event's
    target kind says; an empty set: none, so any loss fails it). EXPECTED (`expected_movers`): the
    flows each phase must move, from the MX selectors' tables; with it, a flow may lose packets only
    if it is an expected mover of some phase or was carried by an SRX the event hits. AFTER is the
    carrier during a lasting event (before its restore), CARRIERS_AFTER the carrier after the restore."""
    strict = involved is not None
    phases: dict[str, Any] = (expected or {}).get("phases", {})
    phase_names = list(phases)
    by_id = {f["flow"]: f for f in report_f["per_flow"]}
    rev = {f["flow"] - REVERSE_ID_OFFSET: f for f in (report_r or {}).get("per_flow", [])}
    end_ns = sent_f.get("end_ns") or 0
    end_r_ns = (sent_r or {}).get("end_ns") or 0
    rows = []
    for flow in flows:
        key = (flow.src, flow.sport)
        fwd, back = by_id.get(flow.flow_id, {}), rev.get(flow.flow_id, {})
        lost = int(fwd.get("lost", 0)) + int(back.get("lost", 0))
        # Recovered: each direction still delivered in its last second (against its own sender's end).
        ends_seen = [(fwd.get("last_seen_ns"), end_ns)]
        if report_r is not None:
            ends_seen.append((back.get("last_seen_ns"), end_r_ns or end_ns))
        during_srx = after.get(key)
        after_srx = carriers_after.get(key) if carriers_after is not None else during_srx
        actual = {}
        if phase_names:
            actual[phase_names[0]] = None if None in (before.get(key), during_srx) else before.get(key) != during_srx
        if len(phase_names) > 1:
            actual[phase_names[1]] = None if None in (during_srx, after_srx) else during_srx != after_srx
        rows.append({
            "flow": flow.flow_id, "src": flow.src,
            "carrier_before": before.get(key), "carrier_during": during_srx, "carrier_after": after_srx,
            "srx_before": before.get(key), "srx_after": during_srx,  # older names of the first two
            "expected_mover": {name: flow.flow_id in ph["movers"] for name, ph in phases.items()},
            "mover": actual,
            "lost_forward": int(fwd.get("lost", 0)), "lost_reverse": int(back.get("lost", 0)),
            "convergence_ms": round(max(int(fwd.get("lost", 0)), int(back.get("lost", 0))) / per_flow * 1000, 3),
            "max_gap_ms": max(float(fwd.get("max_gap_ms") or 0), float(back.get("max_gap_ms") or 0)),
            # each direction's own longest gap (a capture of one direction is compared with its own)
            "max_gap_forward_ms": float(fwd.get("max_gap_ms") or 0),
            "max_gap_reverse_ms": float(back.get("max_gap_ms") or 0) if report_r is not None else None,
            # where each direction's longest gap started, in seconds from the event
            "gap_at_s": [_since(d.get("max_gap_start_ns"), marks) for d in (fwd, back)],
            "recovered": all(last and end - last < max(1e9, 5e9 / per_flow) for last, end in ends_seen),
            "moved": before.get(key) is not None and after.get(key) is not None and before.get(key) != after.get(key),
            "moved_on_restore": key in (moved_back or set()),
            # CGNAT: the binding (pool address:port) the server saw; more than one: the flow re-bound
            "bindings": fwd.get("bindings") if nat else None,
            "rebound": bool(nat and fwd.get("binding_changes")),
            "lost": lost,
        })
    # The SRXs an event touches: the target, or its whole MNHA pair. An MX event touches every flow.
    if involved is None:
        involved = {r["srx_before"] for r in rows} if event.target in ("mx", "node") else {target, *(pair or [])}
    if phases:
        # The selector's tables say which flows may move; the SRXs the event hits say which flows
        # may lose packets without moving. Everything else must be loss-free.
        def may_lose(r: dict[str, Any]) -> bool:
            return any(r["expected_mover"].values()) or r["srx_before"] in involved
    else:  # no table readable: the carriers observed decide (older verdict)
        def may_lose(r: dict[str, Any]) -> bool:
            return bool(r["moved"] or r["moved_on_restore"] or r["rebound"] or r["srx_before"] in involved)
    affected = [r for r in rows if r["lost"] or may_lose(r) or r["moved"] or r["rebound"]]
    unaffected = [r for r in rows if r not in affected]
    conv = [r["convergence_ms"] for r in affected if r["lost"]]
    unaffected_loss = sum(r["lost"] for r in rows if not may_lose(r))
    phase_figures = {}
    for name, ph in phases.items():
        movers_actual = {r["flow"] for r in rows if r["mover"].get(name)}
        phase_figures[name] = {
            "expected_movers": len(ph["movers"]), "movers": len(movers_actual), "ideal": ph["ideal"],
            "unexpected_movers": len(movers_actual - ph["movers"]),
            # of the expected movers: flows whose buckets the MXs' tables disagree on (SRD labs)
            "cross_mx_movers": len(ph.get("cross_mx", ())),
            # (a flow the MXs disagree on moves only if its gateway switches MX: not counted here)
            "expected_but_stayed": sum(1 for r in rows if r["flow"] in ph["movers"] - ph.get("cross_mx", set())
                                       and r["mover"].get(name) is False),
            "members": ph["members"], "bucket_share_moved": ph["bucket_share_moved"],
            "bucket_share_ideal": ph["bucket_share_ideal"], "buckets": ph["buckets"],
        }
    moved = sum(1 for r in rows if r["moved"])
    recovered = all(r["recovered"] for r in rows)
    passed = recovered and (unaffected_loss == 0 or (event.target == "mx" and not strict))
    return EventResult.model_validate({
        "event": event.name, "title": event.title, "target": target, "action": summary,
        "flows": len(rows), "rate_per_flow_pps": per_flow, "resolution_ms": round(1000 / per_flow, 3),
        "affected_flows": len(affected), "unaffected_flows": len(unaffected),
        "convergence_ms": {"max": max(conv), "median": statistics.median(conv)} if conv else {"max": 0, "median": 0},
        "longest_gap_ms": max((r["max_gap_ms"] for r in rows), default=0),
        "packets_lost_by_unaffected_flows": unaffected_loss,
        "flows_moved": moved,
        "flows_rebound": sum(1 for r in rows if r["rebound"]),
        "phases": phase_figures, "tables_missed": (expected or {}).get("missed_tables"),
        "verdict_from": "selector tables" if phases else "observed carriers",
        "flows_moved_ideal": sum(1 for r in rows if r["srx_before"] in involved)
        if event.target == "srx" or event.target == "mnha-pair" else 0,
        "recovered": recovered, "passed": passed,
        "forward": {k: v for k, v in report_f.items() if k != "per_flow"},
        "reverse": {k: v for k, v in (report_r or {}).items() if k != "per_flow"},
        "marks": marks, "timeline": sampler.rates(),
        "per_flow": rows,
    })


def junit(results: list[EventResult], lab: str) -> str:
    from xml.sax.saxutils import escape, quoteattr

    failures = sum(1 for r in results if r.failure_reasons())
    cases = []
    for r in results:
        name = quoteattr(f"{r.event} on {r.target}")
        why = r.failure_reasons()
        body = f'<failure message={quoteattr("; ".join(why))}/>' if why else ""
        out = escape(json.dumps({"convergence_ms": r.convergence_ms.model_dump(), "affected_flows": r.affected_flows,
                                 "flows_moved": r.flows_moved, "flows_moved_ideal": r.flows_moved_ideal,
                                 "longest_gap_ms": r.longest_gap_ms}))
        cases.append(f'  <testcase classname="lab.{lab}" name={name} time="{r.convergence_ms.max / 1000:.3f}">'
                     f"{body}<system-out>{out}</system-out></testcase>")
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="lab events {lab}" tests="{len(results)}" '
            f'failures="{failures}">\n' + "\n".join(cases) + "\n</testsuite>\n")


def plot(results: list[EventResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 1, figsize=(10, 3 * len(results)), squeeze=False)
    for ax, r in zip(axes[:, 0], results, strict=True):
        timeline = r.timeline
        if not timeline:
            continue
        t0 = r.marks.get("event", timeline[0][0])
        names = sorted({k for _, rates in timeline for k in rates})
        for name in names:
            ax.plot([t - t0 for t, _ in timeline], [rates.get(name, 0) for _, rates in timeline], label=name)
        ax.axvline(0, color="red", linestyle="--", label="event")
        if "restore" in r.marks:
            ax.axvline(r.marks["restore"] - t0, color="green", linestyle="--", label="restore")
        ax.set_title(f"{r.event} on {r.target}: convergence max {r.convergence_ms.max:.0f} ms")
        ax.set_xlabel("seconds from the event")
        ax.set_ylabel("pps via SRX (MX counters)")
        ax.legend(loc="upper right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
