"""The plan's types: a pure, deterministic description of everything a lab is.

Every planning phase (`plan.PHASES`) adds to a `LabPlan`; backends apply it; `lab render` writes it.
This module imports nothing of the planner, so every phase module can import it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from typing import Any


@dataclass(frozen=True)
class Namespace:
    name: str
    node: str
    instance: str | None  # None: the node's master instance
    sysctls: tuple[tuple[str, str], ...]


@dataclass(frozen=True)
class Interface:
    ns: str
    node: str
    instance: str | None
    name: str  # Linux name
    alias: str  # vendor name, shown in every output
    address: str | None  # "198.18.0.0/31"
    ifindex: int
    mtu: int
    zone: str | None
    peer_node: str | None  # the node at the other end; for a LAN port, None
    peer_alias: str | None
    lan: str | None = None  # namespace of the LAN switch this interface is plugged into
    address6: str | None = None  # dual stack: "2001:db8:1::1/126" beside the IPv4 address


@dataclass(frozen=True)
class Veth:
    a: Interface
    b: Interface
    link_index: int


@dataclass(frozen=True)
class Bridge:
    """A LAN: a Linux bridge in a namespace of its own, one veth port per attached interface."""

    ns: str
    name: str
    ports: tuple[str, ...]
    link_index: int


@dataclass(frozen=True)
class MgmtPort:
    node: str
    ns: str
    name: str  # inside the node
    host_port: str  # root-namespace end, enslaved to the bridge
    address: str  # with prefix length
    ifindex: int


@dataclass(frozen=True)
class Mgmt:
    bridge: str
    subnet: str
    host_address: str  # bridge address in the root namespace, with prefix length
    nft_table: str
    ports: tuple[MgmtPort, ...]


@dataclass(frozen=True)
class Route:
    ns: str
    dst: str
    kind: str  # "unicast" | "local" | "blackhole"
    via: str | None = None
    dev: str | None = None
    table: int | None = None  # None: main


@dataclass(frozen=True)
class Rule:
    """Policy routing: packets with FWMARK look up TABLE (the MX selector's per-SRX tables)."""

    ns: str
    fwmark: int
    table: int
    priority: int
    mask: int | None = None  # None: the whole mark must match
    family: int = 4  # 4 or 6: `ip rule` or `ip -6 rule`


@dataclass(frozen=True)
class BgpSession:
    ns: str
    node: str
    instance: str | None
    protocol: str  # BIRD protocol name
    local_address: str
    local_as: int
    peer_address: str
    peer_as: int
    peer_node: str
    zone: str | None
    family: int = 4  # 6: an IPv6 session on the same link (the JVD's IPv6_* groups), its own BIRD protocol


@dataclass(frozen=True)
class Process:
    node: str
    ns: str
    name: str  # unique within the node: "bird", "bird-trust-vr", ...
    argv: tuple[str, ...]
    control_socket: str | None = None
    stale_files: tuple[str, ...] = ()  # what a killed instance leaves behind and blocks a restart (a lock)


@dataclass(frozen=True)
class Ruleset:
    """An nftables file loaded atomically inside a namespace before the daemons start."""

    node: str
    ns: str
    file: str  # relative to the state dir


@dataclass(frozen=True)
class ExpectedRoute:
    ns: str
    prefix: str


@dataclass
class NodePlan:
    """One emulated device: its namespaces, addresses and derived facts for templates."""

    name: str
    kind: str
    namespaces: list[str]
    master_ns: str
    mgmt_address: str
    loopbacks: dict[str, str] = field(default_factory=dict)  # instance ("" = master) -> address
    nat_pool: str | None = None
    nat64_pool: str | None = None  # services.nat64: the SRX's NAT64 pool (its MNHA pair's)
    files: list[str] = field(default_factory=list)
    # SRX lo0 units beyond lo0.0 ("1" -> address): the TLB real-service address of its MNHA pair,
    # configured on both nodes (the JVD's lo0.1); "2": the SRG2 real-service of an srg1+srg2 pair
    lo_units: dict[str, str] = field(default_factory=dict)
    loopbacks6: dict[str, str] = field(default_factory=dict)  # dual stack: instance -> lo0.0 inet6 address
    lo_units6: dict[str, str] = field(default_factory=dict)  # dual stack: lo0.1 / lo0.2 inet6 addresses


@dataclass(frozen=True)
class Nat64Flows:
    """What the traffic of a NAT64 lab needs (services.nat64): IPv6 clients of SOURCE send to
    ADDRESS and reach the IPv4 SERVER, which answers their bindings in the SRXs' NAT64 pools."""

    source: str
    address: str
    server: str


@dataclass
class LabPlan:
    name: str
    source: str
    state_dir: str
    load_balancing: str
    use_case: str
    mgmt: Mgmt
    nodes: list[NodePlan]
    namespaces: list[Namespace]
    veths: list[Veth]
    bridges: list[Bridge]
    routes: list[Route]
    sessions: list[BgpSession]
    processes: list[Process]
    expected_routes: list[ExpectedRoute]
    rulesets: list[Ruleset] = field(default_factory=list)
    rules: list[Rule] = field(default_factory=list)
    mnha: list[list[str]] = field(default_factory=list)  # MNHA pairs, as in the topology
    srd: list[str] = field(default_factory=list)  # the two MX of an SRD pair
    spares: list[str] = field(default_factory=list)  # SRXs built but not in service (powered off at `lab up`)
    bfd: bool = False  # BFD on every eBGP session (services.bfd)
    dual_stack: bool = False  # IPv6 beside IPv4 (addressing.v6)
    max_sessions: int = 262144  # the kernel's conntrack limit this lab needs (services.max_sessions)
    nat64: Nat64Flows | None = None  # services.nat64, for the traffic of its flows
    files: dict[str, str] = field(default_factory=dict)  # path relative to state_dir -> content

    def node(self, name: str) -> NodePlan:
        for node in self.nodes:
            if node.name == name:
                return node
        raise KeyError(name)

    def interfaces(self) -> Iterator[Interface]:
        """Interfaces of the emulated nodes (LAN switch ports excluded)."""
        for iface in self.all_interfaces():
            if iface.ns != iface.lan:
                yield iface

    def all_interfaces(self) -> Iterator[Interface]:
        for veth in self.veths:
            yield veth.a
            yield veth.b

    def peer_of(self, iface: Interface) -> Interface:
        """The other end of IFACE's veth (for a LAN port: the switch port)."""
        for veth in self.veths:
            if veth.a == iface:
                return veth.b
            if veth.b == iface:
                return veth.a
        raise KeyError(iface.name)

    def to_json(self) -> str:
        data = asdict(self)
        data.pop("files")
        data["file_names"] = sorted(self.files)
        return json.dumps(data, indent=2, sort_keys=True) + "\n"

    @classmethod
    def from_json(cls, text: str, files: dict[str, str] | None = None) -> LabPlan:
        """Read back what to_json wrote (a running lab's plan.json), for operations on a running lab."""
        d = json.loads(text)

        def iface(x: dict[str, Any]) -> Interface:
            return Interface(**x)

        return cls(
            name=d["name"], source=d["source"], state_dir=d["state_dir"],
            load_balancing=d["load_balancing"], use_case=d["use_case"],
            mgmt=Mgmt(d["mgmt"]["bridge"], d["mgmt"]["subnet"], d["mgmt"]["host_address"],
                      d["mgmt"]["nft_table"], tuple(MgmtPort(**p) for p in d["mgmt"]["ports"])),
            nodes=[NodePlan(**n) for n in d["nodes"]],
            namespaces=[Namespace(n["name"], n["node"], n["instance"], tuple(tuple(kv) for kv in n["sysctls"]))
                        for n in d["namespaces"]],
            veths=[Veth(iface(v["a"]), iface(v["b"]), v["link_index"]) for v in d["veths"]],
            bridges=[Bridge(b["ns"], b["name"], tuple(b["ports"]), b["link_index"]) for b in d["bridges"]],
            routes=[Route(**r) for r in d["routes"]],
            sessions=[BgpSession(**s) for s in d["sessions"]],
            processes=[Process(p["node"], p["ns"], p["name"], tuple(p["argv"]), p.get("control_socket"),
                               tuple(p.get("stale_files", ())))
                       for p in d["processes"]],
            expected_routes=[ExpectedRoute(**e) for e in d["expected_routes"]],
            rulesets=[Ruleset(**r) for r in d.get("rulesets", [])],
            rules=[Rule(**r) for r in d.get("rules", [])],
            mnha=[list(p) for p in d.get("mnha", [])], spares=list(d.get("spares", [])),
            srd=list(d.get("srd", [])), bfd=bool(d.get("bfd", False)), dual_stack=bool(d.get("dual_stack", False)),
            max_sessions=int(d.get("max_sessions", 262144)),
            nat64=Nat64Flows(**d["nat64"]) if d.get("nat64") else None,
            files=dict(files or {}),
        )
