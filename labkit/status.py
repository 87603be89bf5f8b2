"""Typed daemon status files: the daemon builds the model and writes it (atomically), every reader
(`lab` commands, the SSH CLI, benchmarks, the daemon itself resuming after a crash) parses it with
the same type: a field renamed or mistyped on one end fails on the other, not as a KeyError later.
Unknown keys are errors. The file names are in labkit.contracts; the IOS-like FlexVPN routers' status
models are in labkit.flexstatus.

    write_status(path, SrdStatus(node=..., ...))                             # daemon
    status = read_status(path, SrdStatus)   # None: no file, or one being rewritten / not this shape
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, ValidationError

from .files import write_atomic

S = TypeVar("S", bound="StatusModel")


class StatusModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    def to_dict(self) -> dict[str, Any]:
        """The JSON object, keys in field order (what `--json` output and `| display json` show)."""
        return self.model_dump(mode="json")

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent) + "\n"


def write_status(path: str | Path, status: StatusModel, indent: int | None = 2) -> None:
    """Replace the status file at once: a reader never sees half of it."""
    write_atomic(path, status.to_json(indent))


def parse_status(data: Any, model: type[S]) -> S | None:
    """DATA (an already loaded JSON value) as MODEL; None when it is not one."""
    try:
        return model.model_validate(data)
    except ValidationError:
        return None


def read_status(path: str | Path, model: type[S]) -> S | None:
    """The status file at PATH as MODEL; None when it is missing, unreadable or not (yet) a MODEL."""
    try:
        return model.model_validate_json(Path(path).read_text())
    except (OSError, ValueError):  # pydantic's ValidationError is a ValueError
        return None


# ---------------------------------------------------------------- dataplane.daemons.srdd (labkit.contracts.SRD_STATUS)
SrdRole = Literal["init", "master", "standby", "ineligible"]  # Junos' words for the SRD states


class SrdSignalRoute(StatusModel):
    prefix: str  # the signal route, /32
    installed: bool


class SrdHeartbeat(StatusModel):
    sent: int
    received: int
    errors: int
    peer_alive: bool


class SrdTransition(StatusModel):
    at: float  # wall clock
    role: Literal["init", "active", "backup", "ineligible"]  # dataplane.core.mnha.Role values
    why: str


class SrdStatus(StatusModel):
    """Services Redundancy on one MX of the SRD pair."""

    node: str
    peer: str
    pid: int
    updated_at: float  # wall clock of the last write
    role: SrdRole
    priority: int
    preempt: bool
    healthy: bool  # every monitored link has carrier
    signal_route: SrdSignalRoute
    peer_role: Literal["master", "standby", "unknown"]
    heartbeat: SrdHeartbeat
    resumed: str | None  # the role taken up from the previous instance after a crash
    transitions: list[SrdTransition]


# -------------------------------------------------------- dataplane.daemons.mnhad (labkit.contracts.MNHA_STATUS)
RoleTransition = SrdTransition  # a role change of an SRG (MNHA) or of the SRD mastership
UpDown = Literal["UP", "DOWN"]


class MnhaIcl(StatusModel):
    device: str
    up: bool
    peer_ip: str


class MnhaHeartbeat(StatusModel):
    interval_ms: int
    threshold: int
    sent: int
    received: int
    errors: int
    peer_alive: bool
    last_heard_s_ago: float | None


class MnhaSignalRoute(StatusModel):
    prefix: str  # /32
    table: int
    installed: bool


class MnhaDestination(StatusModel):
    ip: str
    src_ip: str
    interface: str
    weight: int
    state: UpDown


class MnhaMonitorObject(StatusModel):
    name: str
    threshold: int
    object_threshold: int
    weight: int  # of its destinations down now
    state: UpDown
    destinations: list[MnhaDestination]


class MnhaMonitor(StatusModel):
    srg_threshold: int
    srg_weight: int  # of the objects down now
    interval_ms: int
    multiplier: int
    objects: list[MnhaMonitorObject]


class MnhaMonitorEvent(StatusModel):
    at: float
    what: str


class MnhaSrg0(StatusModel):
    role: Literal["active", "ineligible"]
    signal_route: MnhaSignalRoute
    monitor: MnhaMonitor | None  # None: no monitored objects
    events: list[MnhaMonitorEvent]
    # links to the MXs with carrier but no BGP route over them yet (after a carrier loss, or since
    # the start): no shorter AS path is announced until it is empty
    links_unrouted: list[str] = []


PeerRole = Literal["init", "active", "backup", "ineligible", "unknown"]


class MnhaSrg2(StatusModel):
    role: Literal["init", "active", "backup", "ineligible"]
    priority: int
    peer_role: PeerRole
    transitions: list[RoleTransition]


class MnhaSrg1(StatusModel):
    role: Literal["init", "active", "backup", "ineligible"]
    priority: int
    preempt: bool
    peer_role: PeerRole
    transitions: list[RoleTransition]


# How a node's wait for its peer's session table ended: the table arrived, no peer was heard (nothing to
# wait for), or the wait's cap passed first (the node took up its activeness without the peer's sessions).
ColdSyncEnd = Literal["received", "no peer", "timed out"]


class MnhaSync(StatusModel):
    """MNHA session sync of one SRX: the kernel's sessions, conntrackd's counters (None: conntrackd
    not answering), the refresh windows and the cold-sync handshake."""

    sessions: int | None  # sessions in this node's kernel table (its own and the peer's copies)
    cache: int | None  # sessions conntrackd tracks here (opened or carried here: sent to the peer)
    sent_packets: int | None
    received_packets: int | None
    sent_bytes: int | None
    received_bytes: int | None
    injected: int | None  # the peer's sessions written into the kernel here (created + updated)
    removed: int | None  # the peer's sessions deleted here when they ended there
    errors: int | None  # failed injections, send/receive errors, malformed messages
    lost: int | None  # sync messages lost (sequence gaps)
    # the peer's messages dropped as older than the last one accepted (conntrackd's "Packets before":
    # a peer that restarted numbers its messages anew, and what it sends below that number is lost)
    stale: int | None = None
    resend_queue: int | None  # sent messages not yet acknowledged by the peer
    daemon_answering: bool
    refresh_s: float
    refresh_tcp_s: float
    refreshes: int  # refresh windows begun
    awaiting_peer: bool  # this node holds its activeness until the peer's table has arrived
    awaited_s: float | None  # how long the last wait lasted
    cold_sync_ended: ColdSyncEnd | None = None  # how the last wait ended (a timed-out one is not a complete one)
    peer_awaiting: bool
    sending: bool  # a cold sync to the peer runs
    cold_syncs: int  # cold syncs sent to the peer and acknowledged
    last_cold_sync_s: float | None
    last_cold_sync_sessions: int | None


class MnhaStatus(StatusModel):
    """MNHA on one SRX: the ICL, heartbeats, SRG0 (monitoring, signal route), SRG1 and SRG2 roles."""

    node: str
    peer: str
    mode: Literal["srg0", "srg1", "srg1+srg2"]
    pid: int
    updated_at: float  # wall clock of the last write
    icl: MnhaIcl
    heartbeat: MnhaHeartbeat
    healthy: bool
    peer_seen_in_network: bool
    resumed: str | None  # the roles taken up from the previous instance after a crash
    sync: MnhaSync | None  # None: the pair has no session sync
    srg0: MnhaSrg0
    srg2: MnhaSrg2 | None  # None unless the mode is srg1+srg2
    srg1: MnhaSrg1


# ------------------------------------------------------ dataplane.daemons.healthd (labkit.contracts.HEALTH_STATUS)
class HealthProfileState(StatusModel):
    """One health-check profile of one real-service (dataplane.core.health.HealthState)."""

    up: bool
    last_result: str
    probes: int
    fail_streak: int
    ok_streak: int
    last_change: float  # wall clock of the last up/down flip (0: never)
    last_sent: float = 0.0  # wall clock when the last probe counted was sent (0: none yet)


class HealthMember(StatusModel):
    up: bool
    last_result: str
    profiles: dict[str, HealthProfileState]


class HealthStatus(StatusModel):
    """The TLB health monitor of one MX: every real-service's health; also what it sends the selector."""

    node: str
    pid: int
    at: float  # wall clock of this report
    seq: int
    resumed: bool
    members: dict[str, HealthMember]


# ---------------------------------------------------------- dataplane.daemons.mxlb (labkit.contracts.MXLB_STATUS)
class MxlbProfile(StatusModel):
    up: bool
    last_result: str
    probes: int


class MxlbMemberHealth(StatusModel):
    """A TLB real-service's health as the selector last heard it from the monitor."""

    up: bool
    last_result: str
    probes: int
    fail_streak: int
    last_change: float
    profiles: dict[str, MxlbProfile]


class MxlbCounters(StatusModel):
    packets: int
    bytes: int


class MxlbMember(StatusModel):
    """One member (an SRX, or a TLB real-service) of the MX selector."""

    name: str
    mark: int
    alive: bool
    carrier: dict[str, bool]  # side -> its link has carrier
    routed: dict[str, bool]  # side -> its next hop is in the watched routes
    buckets: int  # of the table now
    route_gate_open: bool
    health: MxlbMemberHealth | None  # None: no health checks (not TLB)
    via: dict[str, str | None]  # side -> the SRX its traffic goes through (TLB)
    via_settled: bool
    counters: dict[str, MxlbCounters]  # side -> packets and bytes sent to it


class MxlbHealthMonitor(StatusModel):
    reports: int
    last_report_at: float


class MxlbHistoryEntry(StatusModel):
    at: float
    reason: str
    members: list[str]


class MxlbStatus(StatusModel):
    """The MX selector of one MX: members, the table programmed now and how it came to be."""

    node: str
    mode: Literal["chash", "ecmp", "tlb"]
    buckets: int
    pid: int
    updated_at: float
    last_event_at: float
    last_programmed_at: float
    changes: int
    settling: bool
    members: list[MxlbMember]
    fallback_route: dict[str, str | None]
    health_monitor: MxlbHealthMonitor | None  # TLB only
    table: list[str]  # bucket -> member
    history: list[MxlbHistoryEntry]
