"""Typed daemon configurations: the planner builds them (lab_orchestrator.plan.features.srd, .mnha, .mxlb,
.flexvpn), writes them as JSON into the lab's state folder, and the daemon (dataplane.daemons.srdd, .mnhad,
.mxlb, .flexvpnd, .flexclientd) reads them back with the same type: a field renamed or mistyped
on one end fails on the other at once, not as a KeyError at run time. Unknown keys are errors.

    config = SrdConfig(node=..., ...); plan.files[name] = config.to_json()     # planner
    config = SrdConfig.read(path)                                                # daemon
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

C = TypeVar("C", bound="DaemonConfig")


class DaemonConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    def to_json(self) -> str:
        """The file the daemon reads: sorted keys, indented (stable, diffable, golden-tested)."""
        return json.dumps(self.model_dump(mode="json"), indent=2, sort_keys=True) + "\n"

    @classmethod
    def read(cls: type[C], path: str | Path) -> C:
        return cls.model_validate_json(Path(path).read_text())


class SrdConfig(DaemonConfig):
    """dataplane.daemons.srdd on one MX of an SRD pair."""

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
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    ip: str
    src_ip: str
    dev: str
    interface: str  # the Junos unit name (ge-0/0/1.0)
    weight: int
    peer_node: str


class MonitorConfig(BaseModel):
    """MNHA SRG0 monitoring (the JVD's monitor-object): weights and thresholds."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    object: str
    threshold: int
    object_threshold: int
    srg_threshold: int
    interval_ms: int
    multiplier: int
    destinations: list[MonitorDestination]


class MnhaConfig(DaemonConfig):
    """dataplane.daemons.mnhad on one SRX of an MNHA pair."""

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
    peer_loopback: str  # a route to it not over the ICL tells a dead ICL from a dead peer
    # the ICL routed through the MXs (icl_dev is then lo): the node's links to them; the ICL is up
    # while the peer's loopback is routed over one of them (their MNHA-VR still has it)
    icl_routed: list[str] = []
    monitored: list[str]  # trust/untrust links whose carrier makes the SRX healthy
    role_file: str  # the BIRD include (SRG roles, signal) the daemon rewrites
    bird_socket: str
    status_file: str
    monitor: MonitorConfig | None
    signal_route: str
    signal_table: int
    # session sync (conntrackd's configuration; None: no sync): refresh windows, cold-sync wait
    sync_config: str | None
    refresh_s: float = 15.0
    refresh_tcp_s: float = 450.0
    cold_sync_hold_s: float = 60.0


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class Hop(_Part):
    """One SRX through which a member (a TLB real-service of a pair) is reached on one side."""

    node: str
    dev: str
    nexthop: str
    nexthop6: str = ""  # dual stack: the SRX's IPv6 address on the same link


class Member(_Part):
    """A selector entry: an SRX (ECMP, TLB per SRX) or a TLB real-service (an MNHA pair's address on
    lo0.1 of both nodes, or lo0.2 for the SRG2 of an srg1+srg2 pair; a standalone SRX's own loopback)."""

    name: str
    mark: int
    dev: str  # the first hop's (the initial route of the member's table)
    nexthop: str
    loopback: str  # health-check target (TLB): the real-service address
    hops: tuple[Hop, ...] = Field(min_length=1)  # every SRX that can carry it, in pair order; BGP picks
    nexthop6: str = ""  # dual stack: the first hop's IPv6 address


class Selector(_Part):
    """The selector of one routing instance (side) of the MX."""

    side: str  # trust | untrust
    ns: str
    hash_field: str  # saddr | daddr
    ingress: tuple[str, ...]  # core-facing interfaces whose traffic is steered
    match_prefixes: tuple[str, ...]  # TLB filter-based forwarding; empty: everything from ingress
    watch_prefixes: tuple[str, ...]  # routes whose BGP next hops say an SRX is alive (ECMP)
    # dual stack (ECMP): the IPv6 routes that must hold the SRX's IPv6 next hop too; an SRX whose
    # IPv4 sessions are back before its IPv6 ones would be handed IPv6 flows it cannot route
    watch_prefixes6: tuple[str, ...] = ()
    members: tuple[Member, ...]
    # the nft table's family: ip (IPv4 labs), inet (dual stack: one map, an ip and an ip6 rule)
    nft_family: Literal["ip", "inet"] = "ip"

    @property
    def dual_stack(self) -> bool:
        """IPv6 is steered too (into the same buckets and marks), by either backend."""
        return self.nft_family == "inet"


class HealthProfile(_Part):
    """A TLB network-monitoring profile (the topology's services.health_checks, filled in)."""

    name: str
    type: Literal["icmp", "tcp", "udp", "http"]
    port: int | None
    interval_ms: int
    timeout_ms: int
    failures: int
    recoveries: int
    http_path: str


class SelectorConfig(DaemonConfig):
    """dataplane.daemons.mxlb (the MX selector) and, with TLB, dataplane.daemons.healthd (its monitor) on one MX."""

    node: str
    mode: Literal["chash", "ecmp", "tlb"]
    buckets: int
    seed: int
    order: tuple[str, ...]  # the members in the topology's SRX order (the JVD's unilist)
    selectors: tuple[Selector, ...]
    status_file: str
    fallback_table: int
    health: dict[Literal["profiles"], tuple[HealthProfile, ...]]  # TLB: {"profiles": [...]}; else {}
    peers: dict[str, str]  # MNHA pair peer of each SRX: a failed SRX's buckets go to its peer
    mark_table_base: int = 100  # member with mark M: table base + (M & 0xff)
    health_status_file: str = ""  # TLB: the health monitor's published state (dataplane.daemons.healthd)
    health_socket: str = ""  # TLB: where the monitor sends each round's state to the selector
    restore_policy: str = "proportional"  # a returning member: an equal share from each, or its old buckets
    backend: Literal["nftables", "ebpf"] = "nftables"  # the map the daemon programs: nft map or tc eBPF program

    @property
    def profiles(self) -> tuple[HealthProfile, ...]:
        return self.health.get("profiles", ())


class ResponderNode(_Part):
    """The check ports answered in one SRX's namespace."""

    name: str
    ns: str
    tcp: tuple[int, ...]
    http: tuple[int, ...]
    udp: tuple[int, ...]


class ResponderConfig(DaemonConfig):
    """dataplane.daemons.responder: one process for the lab, answering the TLB health checks of every SRX."""

    nodes: tuple[ResponderNode, ...]


class HsrpGroupConfig(_Part):
    """One HSRP group of a FlexVPN router (the model's `standby`, on its interface)."""

    interface: str  # the Linux name of the interface
    alias: str  # its IOS name
    address: str  # the interface's own address
    prefixlen: int
    group: int
    vip: str
    priority: int
    preempt: bool
    preempt_delay: int  # seconds
    hello_ms: int
    hold_ms: int
    timers_configured: bool  # `standby N timers` differs from the defaults (shown by `show standby`)
    authentication: str
    name: str | None
    version: int
    vip_ifname: str  # the macvlan that carries the virtual address while Active


class ClusterConfig(_Part):
    """`crypto ikev2 cluster` (the model's ikev2_cluster) and the memory the CLB reports load against."""

    standby_group: str
    max_session: int
    priority: int
    hello_ms: int
    update_ms: int
    holdtime_ms: int
    port: int
    weight_crypto_load: int
    weight_system_load: int
    overload_limit: int
    shutdown: bool
    strict_overload: bool
    memory_mib: int


class Ikev2GatewayConfig(_Part):
    """The IKEv2 gateway of a FlexVPN router: redirect mode, address pool, credentials."""

    redirect: Literal["init", "auth", "none"]
    pool: str | None  # `ip local pool`: the prefix, and the first and last address handed out
    pool_first: str | None
    pool_last: str | None
    psk_file: str  # a secret file (labkit.files): {"psk": KEY}
    pki_dir: str  # the lab CA and the routers' certificates
    identities: list[str]  # the addresses the gateway answers as (its own and the HSRP VIPs)
    max_redirects: int


class FlexvpnConfig(DaemonConfig):
    """dataplane.daemons.flexvpnd on one FlexVPN router: HSRP groups, the IKEv2 cluster, the IKEv2 gateway."""

    node: str
    lab: str
    state_dir: str
    hsrp_status: str
    ikev2_status: str
    groups: list[HsrpGroupConfig]
    cluster: ClusterConfig | None
    ikev2: Ikev2GatewayConfig | None
    warnings: list[str]  # IOS warnings the configuration raises, logged at start


class FlexclientConfig(DaemonConfig):
    """dataplane.daemons.flexclientd on an IOS FlexVPN client: `crypto ikev2 client flexvpn` and its Tunnel."""

    node: str
    lab: str
    name: str  # the client profile's name
    interface: str  # TunnelN
    device: str  # the TUN device carrying it
    source_interface: str
    source: str  # the address IKE and ESP leave from
    peers: list[str]  # in order: the cluster VIP first
    routes: list[str]  # what goes through the tunnel
    psk_file: str  # a secret file (labkit.files): {"psk": KEY}
    identity: str
    ike: str  # the IKE SA's suite
    esp: str  # the CHILD_SA's suite
    max_redirects: int
    dpd_interval: int  # seconds
    dpd_retry: int  # seconds
    status: str
