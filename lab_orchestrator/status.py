"""What a running lab looks like right now: nodes, namespaces, daemons, BGP sessions."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from . import birdctl, netnsutil, supervisor
from .state import LabState


@dataclass
class DaemonStatus:
    name: str
    pid: int
    running: bool
    log: str


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


@dataclass
class LabStatus:
    name: str
    source: str
    status: str
    mgmt_subnet: str
    namespaces_present: int
    namespaces_expected: int
    nodes: list[NodeStatus]


def _plan_nodes(state: LabState) -> list[dict]:  # type: ignore[type-arg]
    plan_file = Path(state.state_dir) / "plan.json"
    try:
        return list(json.loads(plan_file.read_text())["nodes"])
    except (OSError, ValueError, KeyError):
        return []


def collect(state: LabState) -> LabStatus:
    nodes = []
    for spec in _plan_nodes(state):
        node = NodeStatus(spec["name"], spec["kind"], spec["namespaces"], spec["mgmt_address"],
                          powered_off=spec["name"] in state.down_nodes)
        for record in state.processes:
            if record.node != node.name:
                continue
            running = supervisor.alive(record)
            node.daemons.append(DaemonStatus(record.name, record.pid, running, record.log))
            sock = _control_socket(record.argv)
            if running and sock:
                try:
                    for proto in birdctl.protocols(sock):
                        if proto.proto == "BGP":
                            node.bgp.append(SessionStatus(proto.name, proto.state, proto.info))
                except birdctl.BirdError as exc:
                    node.bgp.append(SessionStatus("?", "unreachable", str(exc)))
        nodes.append(node)
    present = sum(1 for ns in state.namespaces if netnsutil.exists(ns))
    return LabStatus(state.name, state.source, state.status, state.mgmt_subnet, present,
                     len(state.namespaces), nodes)


def _control_socket(argv: list[str]) -> str | None:
    return argv[argv.index("-s") + 1] if "-s" in argv and argv[0] == "bird" else None


def to_json(statuses: list[LabStatus]) -> str:
    return json.dumps([asdict(s) for s in statuses], indent=2) + "\n"
