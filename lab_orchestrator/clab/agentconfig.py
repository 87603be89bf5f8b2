"""The containerlab node agent's configuration (one node's slice of the plan, clab-node.json) and
the pure decisions the agent (lab_orchestrator.clab.agent) takes from it: which interfaces to wait
for and move, the order of its daemons, what readiness still waits for."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from ..plan.pipeline import Interface, LabPlan


@dataclass
class NodeConfig:
    lab: str
    node: str
    kind: str
    state_dir: str
    mgmt_alias: str
    wait_sessions: list[str]
    plan: LabPlan
    source_dir: Path

    @property
    def node_dir(self) -> Path:
        return Path(self.state_dir) / "nodes" / self.node

    @property
    def namespaces(self) -> list[str]:
        return [ns.name for ns in self.plan.namespaces]

    @property
    def master_ns(self) -> str:
        for ns in self.plan.namespaces:
            if ns.instance is None:
                return ns.name
        raise ValueError(f"node {self.node} has no master namespace in its plan")

    def own_interfaces(self) -> list[Interface]:
        """This node's ends of its links (a LAN container: its switch ports)."""
        mine = set(self.namespaces)
        return [i for i in self.plan.all_interfaces() if i.ns in mine]


def load_config(path: str | Path) -> NodeConfig:
    path = Path(path)
    data = json.loads(path.read_text())
    if data.get("format") != 1:
        raise SystemExit(f"{path}: unknown node config format {data.get('format')!r}")
    plan = LabPlan.from_json(json.dumps(data["plan"]))
    return NodeConfig(data["lab"], data["node"], data["kind"], data["state_dir"], data["mgmt_alias"],
                      list(data.get("wait_sessions", [])), plan, path.parent)


@dataclass
class Daemon:
    name: str
    ns: str
    argv: list[str]
    control_socket: str | None
    pid: int = 0
    exit_status: int | None = None
    log: str = ""


# ---------------------------------------------------------------- pure helpers (unit-tested)
def interface_names(config: NodeConfig) -> list[str]:
    """The data-plane interfaces containerlab must have created before the node can be built."""
    return [i.name for i in config.own_interfaces()]


def moves(config: NodeConfig) -> list[tuple[str, str]]:
    """(interface, namespace) for every interface that lives in a routing instance (not the master)."""
    master = config.master_ns
    return [(i.name, i.ns) for i in config.own_interfaces() if i.ns != master]


def ordered_daemons(config: NodeConfig) -> tuple[list[Daemon], list[Daemon]]:
    """Routing daemons (BIRD, started as early as links allow) and the others (after the rulesets)."""
    logs = Path(config.state_dir) / "logs"
    routing: list[Daemon] = []
    other: list[Daemon] = []
    for proc in config.plan.processes:
        daemon = Daemon(proc.name, proc.ns, list(proc.argv), proc.control_socket,
                        log=str(logs / f"{proc.node}-{proc.name}.log"))
        (routing if proc.control_socket else other).append(daemon)
    return routing, other


def readiness(config: NodeConfig, protocols: dict[str, dict[str, str]],
              routes: dict[str, set[str]]) -> list[str]:
    """What this node still waits for: sessions not Established (by socket: name -> info), routes missing."""
    pending = []
    states = {name: info for by_name in protocols.values() for name, info in by_name.items()}
    for name in sorted(config.wait_sessions):
        info = states.get(name, "missing")
        if not info.startswith("Established"):
            pending.append(f"{config.node} {name} {info}")
    for expected in config.plan.expected_routes:
        if expected.prefix not in routes.get(expected.ns, set()):
            pending.append(f"route {expected.prefix} missing on {config.node}")
    return pending
