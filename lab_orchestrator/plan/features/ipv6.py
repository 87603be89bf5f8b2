"""Plan the IPv6 half of a dual-stack lab (`addressing.v6`), as the JVD runs it: every link and loopback
carries an IPv6 address beside its IPv4 one (a /126 per link, /128 loopbacks), every eBGP session has an
IPv6 twin on the same link (its own BIRD protocol, the JVD's `IPv6_*` groups), hosts answer for their
`prefixes6` and gateways originate them (and `::/0` with `default_originate`).

Runs after the IPv4 phases (nodes, links, static routes, bgp) and adds to what they made: the
IPv4 plan of a lab is the same with or without IPv6.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from ipaddress import IPv6Interface, IPv6Network

from ... import kinds
from ...model import naming
from ...model.schema import Addressing6, Topology
from ..plantypes import BgpSession, ExpectedRoute, Interface, LabPlan, Namespace, NodePlan, Route, Veth

V6_SUFFIX = "_v6"  # BIRD protocol name of a session's IPv6 twin: fw_srx1 -> fw_srx1_v6


class _Pool:
    """IPv6 subnets from a pool in order, stepping around the explicitly taken ones."""

    def __init__(self, pool: IPv6Network, prefixlen: int, taken: list[IPv6Network], skip_first: bool = False):
        self._iter = pool.subnets(new_prefix=prefixlen)
        if skip_first:
            next(self._iter)  # a pool's ::0 as a loopback reads like a network; start at ::1
        self._taken, self._pool = taken, pool

    def next(self) -> IPv6Network:
        for subnet in self._iter:
            if not any(subnet.overlaps(t) for t in self._taken):
                return subnet
        raise ValueError(f"IPv6 address pool {self._pool} is exhausted")


def plan_ipv6(topo: Topology, plan: LabPlan, python: str) -> None:
    v6 = topo.addressing.v6
    if v6 is None:
        return
    plan.dual_stack = True
    plan.namespaces = [_with_ipv6(topo, ns) for ns in plan.namespaces]
    _loopbacks(topo, plan, v6)
    _link_addresses(topo, plan, v6)
    plan.routes += list(_host_routes(topo, plan))
    plan.sessions += list(_sessions(plan))


def _with_ipv6(topo: Topology, ns: Namespace) -> Namespace:
    node = topo.nodes.get(ns.node)
    if node is None:  # a LAN switch: a bridge forwards IPv6 frames without IPv6 of its own
        return ns
    return replace(ns, sysctls=kinds.dual_stack_sysctls(ns.sysctls, forwarding=kinds.get(node.kind).routes))


def _loopbacks(topo: Topology, plan: LabPlan, v6: Addressing6) -> None:
    """lo0.0 inet6 of every routing instance, then the TLB pair addresses (lo0.1/lo0.2): the IPv4 order."""
    pool = _Pool(v6.loopback, 128, [IPv6Network(f"{n.loopback6}/128") for n in topo.nodes.values() if n.loopback6],
                 skip_first=True)
    for node in plan.nodes:
        spec = topo.nodes[node.name]
        for key in node.loopbacks:
            if key == "" and spec.loopback6 is not None:
                node.loopbacks6[key] = str(spec.loopback6)
            else:
                node.loopbacks6[key] = str(pool.next().network_address)
    shared: dict[str, str] = {}  # the IPv4 pair address -> its IPv6 twin (both nodes of a pair)
    for node in plan.nodes:
        for unit, address in sorted(node.lo_units.items()):
            if address not in shared:
                shared[address] = str(pool.next().network_address)
            node.lo_units6[unit] = shared[address]


def _link_addresses(topo: Topology, plan: LabPlan, v6: Addressing6) -> None:
    explicit = [a.network for link in topo.links for a in (link.addresses6 or [])]
    p2p = _Pool(v6.p2p, v6.p2p_prefixlen, explicit)
    lans = _Pool(v6.lan, 64, explicit)
    addresses: dict[int, list[str]] = {}
    for index, link in enumerate(topo.links):
        if link.addresses6:
            addresses[index] = [str(a) for a in link.addresses6]
            continue
        subnet = lans.next() if len(link.endpoints) > 2 else p2p.next()
        hosts = list(subnet.hosts()) if subnet.prefixlen < 127 else list(subnet)
        addresses[index] = [f"{ip}/{subnet.prefixlen}" for ip in hosts[:len(link.endpoints)]]
    position = {(e.partition(":")[0], e.partition(":")[2]): (i, side)
                for i, link in enumerate(topo.links) for side, e in enumerate(link.endpoints)}

    def addressed(iface: Interface) -> Interface:
        if iface.ns == iface.lan:  # a LAN switch port
            return iface
        index, side = position[(iface.node, iface.alias)]
        return replace(iface, address6=addresses[index][side])

    plan.veths = [Veth(addressed(v.a), addressed(v.b), v.link_index) for v in plan.veths]


def ip6(address: str | None) -> str:
    return str(IPv6Interface(address).ip) if address else ""


def gateway6(topo: Topology, plan: LabPlan, host: str) -> str | None:
    """A host's IPv6 default gateway: the peer of its first link, or on a LAN the first router's address."""
    own = [i for i in plan.interfaces() if i.node == host]
    if not own:
        return None
    first = own[0]
    if first.lan is None:
        return ip6(plan.peer_of(first).address6) or None
    for iface in plan.interfaces():
        if iface.lan == first.lan and iface.address6 and kinds.get(topo.nodes[iface.node].kind).routes:
            return ip6(iface.address6)
    return None


def _host_routes(topo: Topology, plan: LabPlan) -> Iterator[Route]:
    """Hosts: AnyIP local routes for their prefixes6 and an IPv6 default route."""
    for name, node in topo.nodes.items():
        if kinds.get(node.kind).routes:
            continue
        ns = naming.namespace(plan.name, name)
        for prefix in node.prefixes6:
            yield Route(ns, str(prefix), "local", dev="lo")
        gateway = gateway6(topo, plan, name)
        if gateway:
            yield Route(ns, "::/0", "unicast", via=gateway)


def _sessions(plan: LabPlan) -> Iterator[BgpSession]:
    """The IPv6 twin of every IPv4 session: the same peers, the addresses of the same interfaces."""
    by_ns_peer = {(i.ns, i.address.split("/")[0]): i for i in plan.interfaces() if i.address}
    for session in list(plan.sessions):
        if session.zone == "icl":  # the MNHA ICL is IPv4 only (the JVD's unit 100: family inet)
            continue
        local = by_ns_peer.get((session.ns, session.local_address))
        if local is None or not local.address6:
            continue
        remote = plan.peer_of(local)
        if not remote.address6:
            continue
        yield replace(session, protocol=session.protocol + V6_SUFFIX, family=6,
                      local_address=ip6(local.address6), peer_address=ip6(remote.address6))


def statics6(topo: Topology, plan: LabPlan, node: NodePlan) -> list[tuple[str, str]]:
    """(prefix, BIRD target) of the IPv6 routes NODE originates: a gateway's routes to its hosts'
    prefixes6, its announce6 and, with default_originate, ::/0 (blackhole)."""
    spec = topo.nodes[node.name]
    if not plan.dual_stack or not kinds.get(spec.kind).gateway:
        return []
    out = []
    for iface in plan.interfaces():
        if iface.node == node.name and iface.peer_node and not kinds.get(topo.nodes[iface.peer_node].kind).routes:
            peer = plan.peer_of(iface)
            out += [(str(p), f"via {ip6(peer.address6)}") for p in topo.nodes[iface.peer_node].prefixes6]
    if spec.bgp is not None:
        out += [(str(p), "blackhole") for p in spec.bgp.announce6]
        if spec.bgp.default_originate:
            out.append(("::/0", "blackhole"))
    return out


def expected_routes6(topo: Topology, plan: LabPlan, gateways: dict[str, list[NodePlan]]) -> list[ExpectedRoute]:
    """Readiness in IPv6: each gateway has learned the prefixes6 the far side originates (the client
    side's also with CGNAT: IPv6 is forwarded without translation)."""
    if not plan.dual_stack:
        return []
    originated = {gw.name: [p for p, _ in statics6(topo, plan, gw)] for side in gateways.values() for gw in side}
    out = []
    for near, far in (("trust", "untrust"), ("untrust", "trust")):
        for gw in gateways[near]:
            out += [ExpectedRoute(gw.master_ns, p) for f in gateways[far] for p in originated[f.name]]
    return out


def export6(export: str) -> str:
    """An IPv4 session's export policy for its IPv6 twin: the IPv6 routes of the same protocols (the
    IPv6 static protocol is `originated6`; a loopback is a /128)."""
    return export.replace('proto = "originated"', 'proto = "originated6"').replace("net.len = 32", "net.len = 128")


def b_nets6(node: NodePlan, b_nets: tuple[str, ...]) -> tuple[str, ...]:
    """The IPv6 routes a B node prepends more (its lo0.1/lo0.2 units; NAT pools are IPv4 only)."""
    if not b_nets:
        return ()
    return tuple(f"{address}/128" for _, address in sorted(node.lo_units6.items()))


def srg2_net6(node: NodePlan) -> str | None:
    return f"{node.lo_units6['2']}/128" if "2" in node.lo_units6 else None
