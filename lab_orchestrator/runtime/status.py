"""What a running lab looks like right now: nodes, namespaces, daemons, BGP sessions."""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from labkit import birdctl, netnsutil
from labkit.contracts import MNHA_STATUS

from . import supervisor
from .state import LabState


@dataclass
class DaemonStatus:
    name: str
    pid: int
    running: bool
    log: str
    state: str = "running"  # running | backoff (dead, restart scheduled) | stopped (on purpose) | exited | dead
    restarts: int = 0  # automatic restarts by the supervisor after a crash
    last_exit: str = ""  # how it last ended ("killed by SIGKILL")
    restart_in_s: float | None = None  # backoff: seconds until the supervisor starts it again


@dataclass
class SessionStatus:
    protocol: str
    state: str
    info: str


@dataclass
class NodeStatus:
    name: str
    kind: str
    namespaces: list[str]
    mgmt_address: str
    powered_off: bool = False
    daemons: list[DaemonStatus] = field(default_factory=list)
    bgp: list[SessionStatus] = field(default_factory=list)
    # an SRX of an MNHA pair with session sync: the counters of its MNHA status, and what is wrong
    session_sync: dict[str, object] | None = None


@dataclass
class LabStatus:
    name: str
    source: str
    status: str  # the record's status, except that a "ready" lab with a daemon down is "degraded"
    mgmt_subnet: str
    namespaces_present: int
    namespaces_expected: int
    nodes: list[NodeStatus]
    ready: bool = False
    problems: list[str] = field(default_factory=list)  # why it is not ready
    supervisor_running: bool = True


def problems(record_status: str, supervisor_running: bool, slots: list[supervisor.Slot],
             now: float) -> list[str]:
    """Why a lab is not ready: its record says otherwise, the supervisor is gone, or a supervised
    daemon that nobody stopped on purpose is dead or waiting out its restart backoff."""
    out = [] if record_status == "ready" else [f"lab is {record_status}"]
    if not supervisor_running:
        out.append("the lab supervisor is not running: nothing restarts a daemon that dies")
    for slot in slots:
        if not slot.restart or slot.state == "stopped":
            continue  # not supervised (traffic), or intentionally down (power off, restart in progress)
        who = f"{slot.node}/{slot.name}"
        if slot.state == "backoff":
            out.append(f"{who} down ({slot.last_exit}), restart in {max(0.0, slot.restart_at - now):.1f} s "
                       f"({slot.restarts} restarts so far)")
        elif not supervisor.slot_alive(slot):
            out.append(f"{who} is not running")
    return out


def _plan_nodes(state: LabState) -> list[dict]:  # type: ignore[type-arg]
    plan_file = Path(state.state_dir) / "plan.json"
    try:
        return list(json.loads(plan_file.read_text())["nodes"])
    except (OSError, ValueError, KeyError):
        return []


def collect(state: LabState) -> LabStatus:
    now = time.time()
    running = supervisor.Supervisor(state.state_dir).running()
    table = supervisor.read_table(state.state_dir) or []
    slots = {slot.key: slot for slot in table}
    nodes = []
    for spec in _plan_nodes(state):
        node = NodeStatus(spec["name"], spec["kind"], spec["namespaces"], spec["mgmt_address"],
                          powered_off=spec["name"] in state.down_nodes)
        for record in state.processes:
            if record.node != node.name:
                continue
            node.daemons.append(_daemon(record, slots.get((record.node, record.name)), now))
            alive = node.daemons[-1].running
            sock = _control_socket(record.argv)
            if alive and sock:
                try:
                    for proto in birdctl.protocols(sock):
                        if proto.proto == "BGP":
                            node.bgp.append(SessionStatus(proto.name, proto.state, proto.info))
                except birdctl.BirdError as exc:
                    node.bgp.append(SessionStatus("?", "unreachable", str(exc)))
        node.session_sync = _session_sync(Path(state.state_dir, "nodes", node.name, MNHA_STATUS), now)
        nodes.append(node)
    planned = {n.name for n in nodes}
    for record in state.processes:  # lab-wide daemons (the SSH server, node "_lab")
        if record.restart and record.node not in planned:
            extra = next((n for n in nodes if n.name == record.node), None)
            if extra is None:
                extra = NodeStatus(record.node, "lab-wide", [record.ns], "")
                nodes.append(extra)
            extra.daemons.append(_daemon(record, slots.get((record.node, record.name)), now))
    present = sum(1 for ns in state.namespaces if netnsutil.exists(ns))
    found = problems(state.status, running, table, now)
    if present < len(state.namespaces):
        found.append(f"{len(state.namespaces) - present} of {len(state.namespaces)} namespaces are missing")
    status = "degraded" if state.status == "ready" and found else state.status
    return LabStatus(state.name, state.source, status, state.mgmt_subnet, present, len(state.namespaces), nodes,
                     ready=not found, problems=found, supervisor_running=running)


UNACKED_LIMIT = 10000  # sync messages the peer has not acknowledged: more means it does not keep up


def sync_problems(sync: dict[str, object], age_s: float) -> list[str]:
    """What is wrong with one node's session sync, from its MNHA status (written AGE_S ago)."""
    found = []
    if age_s > 10:
        found.append(f"MNHA status not updated for {age_s:.0f} s")
    if not sync.get("daemon_answering"):
        found.append("conntrackd not answering")
    for key, what in (("errors", "sync errors"), ("lost", "sync messages lost"),
                      ("stale", "sync messages from the peer dropped as older than the last accepted")):
        value = sync.get(key)
        if isinstance(value, int) and value > 0:
            found.append(f"{value} {what}")
    queue = sync.get("resend_queue")
    if isinstance(queue, int) and queue > UNACKED_LIMIT:
        found.append(f"{queue} sync messages not acknowledged by the peer")
    if sync.get("awaiting_peer"):
        found.append("waiting for the peer's cold sync")
    elif sync.get("cold_sync_ended") == "timed out":  # until a later cold sync completes
        found.append(f"the last cold sync timed out after {sync.get('awaited_s')} s: this node took over "
                     f"without its peer's sessions")
    return found


def _session_sync(path: Path, now: float) -> dict[str, object] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    sync = data.get("sync") if isinstance(data, dict) else None
    if not isinstance(sync, dict):
        return None
    return sync | {"problems": sync_problems(sync, now - float(data.get("updated_at", 0.0)))}


def _daemon(record: supervisor.ProcessRecord, slot: supervisor.Slot | None, now: float) -> DaemonStatus:
    if slot is None:  # no table yet (an old supervisor): the record alone
        alive = supervisor.alive(record)
        return DaemonStatus(record.name, record.pid, alive, record.log, "running" if alive else "dead")
    alive = supervisor.slot_alive(slot)
    state = slot.state if slot.state != "running" or alive else "dead"
    return DaemonStatus(record.name, slot.pid, alive, record.log, state, slot.restarts, slot.last_exit,
                        round(max(0.0, slot.restart_at - now), 2) if slot.state == "backoff" else None)


def _control_socket(argv: list[str]) -> str | None:
    return argv[argv.index("-s") + 1] if "-s" in argv and argv[0] == "bird" else None


def to_json(statuses: list[LabStatus]) -> str:
    return json.dumps([asdict(s) for s in statuses], indent=2) + "\n"
