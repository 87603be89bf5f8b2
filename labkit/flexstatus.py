"""Typed status files of the IOS-like FlexVPN routers (see labkit.status for the rules): a FlexVPN
router's daemon (dataplane.daemons.flexvpnd) writes `hsrp-status.json` (HsrpStatus) and
`ikev2-status.json` (GatewayStatus: the CLB cluster and the IKEv2 gateway); a FlexVPN client's daemon
(dataplane.daemons.flexclientd) writes `ikev2-status.json` as a FlexclientStatus. A reader of
`ikev2-status.json` that does not know which router wrote it asks `parse_ikev2` / `read_ikev2`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from .status import StatusModel, parse_status, read_status


# ------------------------------------------------------ dataplane.daemons.flexvpnd (labkit.contracts.HSRP_STATUS)
class HsrpPeer(StatusModel):
    """The Active or Standby router of a group as one router sees it ("local": itself)."""

    address: str
    priority: int
    expires_at: float | None = None  # wall clock its timer runs out (None: this router itself)


class HsrpGroupStatus(StatusModel):
    """One HSRP group (dataplane.core.hsrp.HsrpMachine.status, plus the daemon's interface)."""

    group: int
    state: str  # Init, Learn, Listen, Speak, Standby, Active
    vip: str | None
    virtual_mac: str
    version: int
    active_mac: str | None
    hello_ms: int
    hold_ms: int
    preempt: bool
    preempt_delay: float  # seconds
    active: HsrpPeer | None
    standby: HsrpPeer | None
    priority: int
    name: str | None
    authentication: str
    changes: int
    last_change_at: float | None
    ignored: dict[str, int]  # why -> hellos ignored
    interface: str  # its IOS name
    linux_interface: str
    address: str  # the interface's own address
    vip_interface: str  # the macvlan holding the VIP while Active
    vip_owned: bool


class HsrpStatus(StatusModel):
    """The HSRP groups of one FlexVPN router."""

    node: str
    pid: int
    updated_at: float
    started_at: float
    groups: list[HsrpGroupStatus]
    counters: dict[str, int]  # malformed input per protocol


# ------------------------------------------------------ dataplane.daemons.flexvpnd (labkit.contracts.IKEV2_STATUS)
class ClbRow(StatusModel):
    """One gateway of the cluster as its master sees it (`show crypto ikev2 cluster`)."""

    address: str
    role: str  # Master, Slave
    priority: int
    load: float
    ike: int
    ipsec: int
    half_open: int
    pending: int  # redirects it has not reported yet
    code: str  # "*" least loaded, "-" overloaded
    cpu: float
    memory: float
    max_session: int
    last_seen_at: float | None


class ClbDropped(StatusModel):
    at: float
    address: str
    why: str


class ClbOwn(StatusModel):
    """A member's own load, as it reports it to the master."""

    address: str
    priority: int
    load: float
    ike: int
    ipsec: int
    overloaded: bool
    last_ack_at: float | None


class ClbStatus(StatusModel):
    """The IKEv2 load-balancer cluster (CLB) of one router: master, slave (member) or none."""

    role: Literal["master", "slave", "none"]
    shutdown: bool
    cluster_ip: str
    address: str
    holdtime_ms: int
    hello_ms: int
    update_ms: int
    overload_limit: int
    port: int
    events: list[str]
    strict_overload: bool
    standby_group: str
    status: Literal["Up", "Down"] | None = None  # master and slave only
    rows: list[ClbRow] | None = None  # master only
    redirects: int | None = None  # master only
    dropped: list[ClbDropped] | None = None  # master only
    own: ClbOwn | None = None  # slave only


class IkeCounts(StatusModel):
    ike: int  # established IKE SAs
    ipsec: int  # IPsec SAs (2 per CHILD_SA)
    half_open: int
    arrivals: int
    settled: int


class GatewayChild(StatusModel):
    spi_in: str
    spi_out: str
    suite: str
    ts_i: list[str]
    ts_r: list[str]
    installed: bool


class GatewaySa(StatusModel):
    """One IKE SA of the gateway (dataplane.ikev2.showsa.status; `show crypto ikev2 sa`)."""

    id: int
    local: str
    remote: str
    state: str  # READY, IN-NEG, REDIRECTED, ...
    spi_i: str
    spi_r: str
    suite: str
    encr: str
    keysize: int
    dh: int | None
    peer_id: str
    auth_verify: str
    auth_sign: str
    address: str | None
    redirected_from: str | None
    redirected_to: str | None
    active_s: float
    created_at: float
    child: GatewayChild | None


class EspTunnelStatus(StatusModel):
    name: str
    peer: str  # address:port
    spi_in: str
    spi_out: str
    remote: list[str]
    local: list[str]
    inbound: dict[str, int]
    outbound: dict[str, int]


class EspStatus(StatusModel):
    """The user-space ESP engine of a gateway (dataplane.esp.engine.EspEngine.status)."""

    device: str
    counters: dict[str, int]
    tunnels: list[EspTunnelStatus]


# ------------------------------------------- dataplane.daemons.flexclientd (labkit.contracts.IKEV2_STATUS, a client)
class FlexClient(StatusModel):
    """The client's state (dataplane.core.flexclient.ClientStatus)."""

    name: str
    interface: str
    peers: list[str]
    state: Literal["connecting", "up", "down"]
    gateway: str | None  # the member the IKE SA is with
    redirected_from: str | None  # the address that redirected the client there (the VIP)
    path: list[str]
    address: str | None
    local: str | None
    up_since: float | None
    connects: int
    dead_peers: int
    last_error: str | None
    history: list[dict[str, Any]]  # {"at", "event", details of that event}


class FlexDpd(StatusModel):
    probes: int


class FlexClientSa(StatusModel):
    """The client's IKE SA (`show crypto ikev2 sa`)."""

    id: int
    local: str
    remote: str
    state: str
    spi_i: str
    spi_r: str
    suite: str
    encr: str
    keysize: int
    dh: int | None
    auth_sign: str
    auth_verify: str
    address: str | None
    redirected_from: str | None
    redirected_to: str | None
    active_s: float
    dpd: FlexDpd


class IpsecSa(StatusModel):
    """One CHILD_SA with its ESP counters (`show crypto ipsec sa`)."""

    interface: str
    local: str | None
    remote: str
    port: int
    local_ident: list[str]
    remote_ident: list[str]
    spi_in: str
    spi_out: str
    transform: str
    encaps: int
    decaps: int
    bytes_out: int
    bytes_in: int
    verify_failed: int
    replay_failed: int
    malformed: int


class FlexclientStatus(StatusModel):
    """An IOS-like FlexVPN client router: its session toward the cluster."""

    node: str
    role: Literal["flexvpn-client"]
    updated: float
    client: FlexClient
    sas: list[FlexClientSa]
    ipsec_sas: list[IpsecSa]
    esp: dict[str, Any] | None = None  # the ESP engine's counters, while up


# ----------------------------------------- dataplane.daemons.flexvpnd (labkit.contracts.IKEV2_STATUS, a gateway)
class GatewayStatus(StatusModel):
    """A FlexVPN router: its CLB cluster and, with an IKEv2 gateway, its SAs and ESP engine."""

    node: str
    pid: int
    updated_at: float
    started_at: float
    cluster: ClbStatus | None  # None: not in a cluster
    warnings: list[str]
    counters: dict[str, int]  # malformed input per protocol
    cpu: float  # % of one core over about 5 s
    memory: float  # % of the router's memory
    # the IKEv2 gateway (None / empty: the router has none)
    ike: IkeCounts | None = None
    gateway_counters: dict[str, int] | None = None
    redirect: Literal["init", "auth", "none"] | None = None
    pool: str | None = None
    pool_free: int | None = None
    sas: list[GatewaySa] = []
    certificates: bool = False
    esp: EspStatus | None = None
    ipsec_sas: list[IpsecSa] = []


Ikev2Status = GatewayStatus | FlexclientStatus  # what `ikev2-status.json` holds: a gateway's or a client's


def parse_ikev2(data: Any) -> Ikev2Status | None:
    """An already loaded `ikev2-status.json` as the status of whichever router wrote it (None: neither)."""
    client = isinstance(data, dict) and data.get("role") == "flexvpn-client"
    return parse_status(data, FlexclientStatus) if client else parse_status(data, GatewayStatus)


def read_ikev2(path: str | Path) -> Ikev2Status | None:
    """`ikev2-status.json` at PATH (None: missing, being rewritten, or not a status)."""
    return read_status(path, GatewayStatus) or read_status(path, FlexclientStatus)
