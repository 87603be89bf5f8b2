"""Typed daemon configurations: the planner builds them (lab_orchestrator.srd, lab_orchestrator.mnha),
writes them as JSON into the lab's state folder, and the daemon (dataplane.srdd, dataplane.mnhad)
reads them back with the same type: a field renamed or mistyped on one end fails on the other at
once, not as a KeyError at run time. Unknown keys are errors.

    config = SrdConfig(node=..., ...); plan.files[name] = config.to_json()     # planner
    config = SrdConfig.read(path)                                                # daemon
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict

C = TypeVar("C", bound="DaemonConfig")


class DaemonConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def to_json(self) -> str:
        """The file the daemon reads: sorted keys, indented (stable, diffable, golden-tested)."""
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"

    @classmethod
    def read(cls: type[C], path: str | Path) -> C:
        return cls.model_validate_json(Path(path).read_text())


class SrdConfig(DaemonConfig):
    """dataplane.srdd on one MX of an SRD pair."""

    node: str
    peer: str
    priority: int
    preempt: bool
    heartbeat_ms: int
    heartbeat_threshold: int
    icl_dev: str  # the inter-MX link (heartbeats)
    local_ip: str
    peer_ip: str
    monitored: dict[str, list[str]]  # routing-instance namespace -> links whose carrier makes the MX healthy
    bird_sockets: list[str]  # every BIRD of the MX: `configure` after a role change
    role_file: str  # the BIRD include (SRD_MASTER) the daemon rewrites
    signal_namespaces: list[str]  # where the signal route is installed while master
    signal_route: str
    control_socket: str  # datagram "switchover" (the CLI's request services redundancy-set)
    status_file: str


class MonitorDestination(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    ip: str
    src_ip: str
    dev: str
    interface: str  # the Junos unit name (ge-0/0/1.0)
    weight: int
    peer_node: str


class MonitorConfig(BaseModel):
    """MNHA SRG0 monitoring (the JVD's monitor-object): weights and thresholds."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    object: str
    threshold: int
    object_threshold: int
    srg_threshold: int
    interval_ms: int
    multiplier: int
    destinations: list[MonitorDestination]


class MnhaConfig(DaemonConfig):
    """dataplane.mnhad on one SRX of an MNHA pair."""

    node: str
    peer: str
    mode: Literal["srg0", "srg1", "srg1+srg2"]
    priority: int
    srg2_priority: int
    preempt: bool
    heartbeat_ms: int
    heartbeat_threshold: int
    icl_dev: str
    local_ip: str
    peer_ip: str
    peer_loopback: str  # a route to it over the ICL tells a dead ICL from a dead peer
    monitored: list[str]  # trust/untrust links whose carrier makes the SRX healthy
    role_file: str  # the BIRD include (SRG roles, signal) the daemon rewrites
    bird_socket: str
    status_file: str
    monitor: MonitorConfig | None
    signal_route: str
    signal_table: int
    # cold sync: when the peer comes back, this node's whole session table is sent to it (conntrackd)
    sync_config: str | None
