"""model -> plan: a pure, deterministic description of everything a lab is.

The plan names every namespace, veth, address, route, sysctl, rendered file and process.
Backends only apply it; `lab render` writes it to a folder; golden tests compare it.
Nothing here touches the system.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from ipaddress import IPv4Interface, IPv4Network
from typing import Any

from . import naming
from .model import Link, Node, Topology

DEFAULT_STATE_ROOT = "/run/lab"
MX_INSTANCES = {"trust": "TRUST-VR", "untrust": "UNTRUST-VR"}
# IPv6 off: the lab is IPv4 (as the JVD), and link-local chatter would pollute packet counters.
_NO_IPV6 = (
    ("net.ipv6.conf.all.disable_ipv6", "1"),
    ("net.ipv6.conf.default.disable_ipv6", "1"),
)
ROUTER_SYSCTLS = _NO_IPV6 + (
    ("net.ipv4.ip_forward", "1"),
    ("net.ipv4.conf.all.rp_filter", "0"),
    ("net.ipv4.conf.default.rp_filter", "0"),
)
# Per-session packet and byte counters on the SRX (`show security flow session`).
SRX_SYSCTLS = ROUTER_SYSCTLS + (("net.netfilter.nf_conntrack_acct", "1"),)
HOST_SYSCTLS = _NO_IPV6 + (
    ("net.ipv4.conf.all.rp_filter", "0"),
    ("net.ipv4.conf.default.rp_filter", "0"),
)


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
    files: list[str] = field(default_factory=list)
    # SRX lo0 units beyond lo0.0 ("1" -> address): the TLB real-service address of its MNHA pair,
    # configured on both nodes (the JVD's lo0.1); "2": the SRG2 real-service of an srg1+srg2 pair
    lo_units: dict[str, str] = field(default_factory=dict)


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
            mnha=[list(p) for p in d.get("mnha", [])],
            srd=list(d.get("srd", [])),
            files=dict(files or {}),
        )


def default_mgmt_subnet(lab: str) -> IPv4Network:
    """A /24 in 198.19.0.0/16 picked from the lab's name, so two labs rarely collide."""
    return IPv4Network(f"198.19.{zlib.crc32(lab.encode()) % 256}.0/24")


def free_mgmt_subnet(lab: str, taken: list[IPv4Network]) -> IPv4Network:
    """The default subnet, or the next /24 of 198.19.0.0/16 (from the same start) that no route
    of this host overlaps: what `lab up` uses when the file does not fix addressing.mgmt."""
    start = zlib.crc32(lab.encode()) % 256
    for step in range(256):
        candidate = IPv4Network(f"198.19.{(start + step) % 256}.0/24")
        if not any(candidate.overlaps(t) for t in taken if t.prefixlen):
            return candidate
    raise ValueError("every /24 of 198.19.0.0/16 is in use on this host: set addressing.mgmt")


class _Allocator:
    """Hands out subnets from a pool in order, skipping what is explicitly taken."""

    def __init__(self, pool: IPv4Network, prefixlen: int, taken: list[IPv4Network]):
        self._iter = pool.subnets(new_prefix=prefixlen)
        if prefixlen == 32:
            next(self._iter)  # a pool's .0 as a loopback confuses readers; start at .1
        self._taken = taken
        self._pool = pool

    def next(self) -> IPv4Network:
        for subnet in self._iter:
            if not any(subnet.overlaps(t) for t in self._taken):
                return subnet
        raise ValueError(f"address pool {self._pool} is exhausted")


def _instance_of(node: Node, link: Link) -> str | None:
    if node.kind == "mx" and link.zone in MX_INSTANCES:
        return MX_INSTANCES[link.zone]
    return None


def _local_as(node: Node, instance: str | None) -> int | None:
    if node.bgp is None:
        return None
    if node.kind == "mx":
        return node.bgp.trust_as if instance == "TRUST-VR" else node.bgp.untrust_as
    return node.bgp.as_


def build(topo: Topology, source: str = "", state_root: str = DEFAULT_STATE_ROOT,
          python: str = "python3", mgmt_subnet: IPv4Network | None = None) -> LabPlan:
    """The whole lab, derived only from the validated topology (same input -> same plan)."""
    lab = topo.name
    state_dir = f"{state_root}/{lab}"
    explicit = [a.network for link in topo.links for a in (link.addresses or [])]
    p2p = _Allocator(topo.addressing.p2p, 31, explicit)
    loopbacks = _Allocator(topo.addressing.loopback, 32,
                           [IPv4Network(f"{n.loopback}/32") for n in topo.nodes.values() if n.loopback])
    nat_pools = _Allocator(topo.addressing.nat, topo.addressing.nat_prefixlen,
                           [n.nat_pool for n in topo.nodes.values() if n.nat_pool])

    mgmt_subnet = topo.addressing.mgmt or mgmt_subnet or default_mgmt_subnet(lab)
    mgmt_hosts = mgmt_subnet.hosts()
    host_address = next(mgmt_hosts)
    reserved_mgmt = {n.mgmt_ip for n in topo.nodes.values() if n.mgmt_ip}

    nodes: list[NodePlan] = []
    namespaces: list[Namespace] = []
    mgmt_ports: list[MgmtPort] = []
    ifindex = 10
    for index, (name, node) in enumerate(topo.nodes.items()):
        master = naming.namespace(lab, name)
        instances: list[str | None] = [None]
        if node.kind == "mx":
            instances += list(MX_INSTANCES.values())
        sysctls = {"host": HOST_SYSCTLS, "srx": SRX_SYSCTLS}.get(node.kind, ROUTER_SYSCTLS)
        ns_names = []
        for instance in instances:
            ns = naming.namespace(lab, name, instance)
            namespaces.append(Namespace(ns, name, instance, sysctls))
            ns_names.append(ns)
        mgmt_ip = node.mgmt_ip if node.mgmt_ip is not None else next(h for h in mgmt_hosts if h not in reserved_mgmt)
        plan_node = NodePlan(name, node.kind, ns_names, master,
                             f"{mgmt_ip}/{mgmt_subnet.prefixlen}")
        if node.kind != "host":
            for instance in instances:
                key = instance or ""
                if node.loopback is not None and instance is None:
                    plan_node.loopbacks[key] = str(node.loopback)
                else:
                    plan_node.loopbacks[key] = str(loopbacks.next().network_address)
        if node.kind == "srx" and topo.services.use_case == "cgnat":
            plan_node.nat_pool = str(node.nat_pool or nat_pools.next())
        nodes.append(plan_node)
        ifindex += 1
        mgmt_ports.append(MgmtPort(name, master, "fxp0" if node.kind in ("mx", "srx") else "mgmt0",
                                   naming.mgmt_host_port(lab, index + 1),
                                   plan_node.mgmt_address, ifindex))

    _pair_addresses(topo, nodes, loopbacks)
    veths: list[Veth] = []
    bridges: list[Bridge] = []
    lans = _Allocator(topo.addressing.lan, 24, explicit)
    for link_index, link in enumerate(topo.links):
        ends = [e.partition(":") for e in link.endpoints]
        is_lan = len(ends) > 2
        if link.addresses:
            addresses = [str(a) for a in link.addresses]
        else:
            subnet = lans.next() if is_lan else p2p.next()
            hosts = list(subnet.hosts()) if is_lan else list(subnet)
            addresses = [f"{ip}/{subnet.prefixlen}" for ip in hosts[:len(ends)]]
        lan_ns = naming.namespace(lab, f"lan{link_index}") if is_lan else None
        if lan_ns:
            namespaces.append(Namespace(lan_ns, f"lan{link_index}", None, _NO_IPV6))
            bridges.append(Bridge(lan_ns, "br0", tuple(f"p{j}" for j in range(len(ends))), link_index))
        pair = []
        for side, (node_name, _, alias) in enumerate(ends):
            node = topo.nodes[node_name]
            other = None if is_lan else ends[1 - side]
            instance = _instance_of(node, link)
            ifindex += 1
            iface = Interface(
                ns=naming.namespace(lab, node_name, instance), node=node_name, instance=instance,
                name=naming.linux_ifname(alias), alias=alias, address=addresses[side],
                ifindex=ifindex, mtu=link.mtu, zone=link.zone,
                peer_node=other[0] if other else None, peer_alias=other[2] if other else None, lan=lan_ns,
            )
            if lan_ns:
                ifindex += 1
                port = Interface(ns=lan_ns, node=f"lan{link_index}", instance=None, name=f"p{side}",
                                 alias=f"{node_name}:{alias}", address=None, ifindex=ifindex, mtu=link.mtu,
                                 zone=link.zone, peer_node=node_name, peer_alias=alias, lan=lan_ns)
                veths.append(Veth(iface, port, link_index))
            else:
                pair.append(iface)
        if not is_lan:
            veths.append(Veth(pair[0], pair[1], link_index))

    plan = LabPlan(
        name=lab, source=source, state_dir=state_dir,
        load_balancing=topo.services.load_balancing, use_case=topo.services.use_case,
        mgmt=Mgmt(naming.mgmt_bridge(lab), str(mgmt_subnet), f"{host_address}/{mgmt_subnet.prefixlen}",
                  naming.root_nft_table(lab), tuple(mgmt_ports)),
        nodes=nodes, namespaces=namespaces, veths=veths, bridges=bridges, routes=[], sessions=[],
        processes=[], expected_routes=[],
        mnha=[list(pair.nodes) for pair in topo.mnha], srd=list(topo.srd.nodes) if topo.srd else [],
    )
    plan.routes = list(_host_routes(topo, plan))
    plan.sessions = list(_bgp_sessions(topo, plan))
    from . import render  # the renderer reads the plan; kept apart so templates stay the "how"

    render.render_all(topo, plan, python)
    from . import mxlb

    mxlb.plan_selectors(topo, plan, python)
    from . import flexvpn

    flexvpn.plan_flexvpn(topo, plan, python)
    from . import sshplan

    sshplan.plan_ssh(topo, plan, python)
    plan.files["plan.json"] = ""  # listed in its own file_names
    plan.files["plan.json"] = plan.to_json()
    return plan


def _pair_addresses(topo: Topology, nodes: list[NodePlan], pool: _Allocator) -> None:
    """TLB per pair (the JVD): one real-service address per MNHA pair on lo0.1 of both nodes (and,
    for srg1+srg2, a second one on lo0.2: the SRG2 real-service). Allocated after every node's
    loopback, so adding them moves no other address."""
    if topo.services.load_balancing != "tlb" or topo.services.tlb_real_service != "pair":
        return
    by_name = {n.name: n for n in nodes}
    for pair in topo.mnha:
        units = ["1", "2"] if pair.mode == "srg1+srg2" else ["1"]
        for unit in units:
            if unit == "1" and pair.pair_address is not None:
                address = str(pair.pair_address)
            else:
                address = str(pool.next().network_address)
            for name in pair.nodes:
                by_name[name].lo_units[unit] = address


def _host_routes(topo: Topology, plan: LabPlan) -> Iterator[Route]:
    """Hosts: AnyIP local routes for their prefixes and a default route; static routes of any node."""
    for name, node in topo.nodes.items():
        ns = naming.namespace(plan.name, name)
        for static in node.routes:
            yield Route(ns, str(static.prefix), "unicast", via=str(static.via))
        if node.kind != "host":
            continue
        for prefix in node.prefixes:
            yield Route(ns, str(prefix), "local", dev="lo")
        gateway = str(node.gateway) if node.gateway else _default_gateway(topo, plan, name)
        if gateway:
            yield Route(ns, "0.0.0.0/0", "unicast", via=gateway)


def _default_gateway(topo: Topology, plan: LabPlan, host: str) -> str | None:
    """The peer of the host's first link, or on a LAN the first router's address."""
    own = [i for i in plan.interfaces() if i.node == host]
    if not own:
        return None
    first = own[0]
    if first.lan is None:
        peer = _peer_of(plan, first)
        return str(IPv4Interface(peer.address).ip) if peer.address else None
    for iface in plan.interfaces():
        if iface.lan == first.lan and iface.address and iface.node in topo.nodes \
                and topo.nodes[iface.node].kind != "host":
            return str(IPv4Interface(iface.address).ip)
    return None


def _peer_of(plan: LabPlan, iface: Interface) -> Interface:
    for veth in plan.veths:
        if veth.a == iface:
            return veth.b
        if veth.b == iface:
            return veth.a
    raise KeyError(iface.name)


def _bgp_sessions(topo: Topology, plan: LabPlan) -> Iterator[BgpSession]:
    """eBGP on every point-to-point link between two BGP speakers, except an MNHA ICL."""
    for veth in plan.veths:
        if veth.a.zone == "icl" or veth.a.lan is not None:
            continue
        for local, remote in ((veth.a, veth.b), (veth.b, veth.a)):
            local_node, remote_node = topo.nodes[local.node], topo.nodes[remote.node]
            local_as = _local_as(local_node, local.instance)
            remote_as = _local_as(remote_node, remote.instance)
            if local_as is None or remote_as is None or not local.address or not remote.address:
                continue
            yield BgpSession(
                ns=local.ns, node=local.node, instance=local.instance,
                protocol=_protocol_name(local_node, remote_node, remote, local.zone),
                local_address=str(IPv4Interface(local.address).ip), local_as=local_as,
                peer_address=str(IPv4Interface(remote.address).ip), peer_as=remote_as,
                peer_node=remote.node, zone=local.zone,
            )


def _protocol_name(local: Node, remote: Node, remote_iface: Interface, zone: str | None) -> str:
    """BIRD protocol names carry the role, so export filters can say 'from the SRXs' by name."""
    peer = remote_iface.node.replace("-", "_")
    if local.kind == "mx":
        return f"fw_{peer}" if remote.kind == "srx" else f"core_{peer}"
    if local.kind == "srx":
        return f"{zone}_{peer}"
    return f"peer_{peer}"
