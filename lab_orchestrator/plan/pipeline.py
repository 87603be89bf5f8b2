"""model -> plan: a pure, deterministic description of everything a lab is.

The plan names every namespace, veth, address, route, sysctl, rendered file and process.
Backends only apply it; `lab render` writes it to a folder; golden tests compare it.
Nothing here touches the system.

It is built by the ordered phases of PHASES: each reads the topology and the plan so far and adds
its part (a later phase may read what an earlier one added, never the reverse). The types are in
`plantypes` (re-exported here).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from ipaddress import IPv4Interface, IPv4Network

from .. import kinds
from ..model import naming, usecase
from ..model.naming import default_mgmt_subnet, free_mgmt_subnet
from ..model.schema import Link, Node, Topology
from . import render, sshplan
from .features import flexvpn, ipv6, mnha, mxlb, nat64, srd
from .plantypes import (
    BgpSession,
    Bridge,
    ExpectedRoute,
    Interface,
    LabPlan,
    Mgmt,
    MgmtPort,
    Namespace,
    NodePlan,
    Process,
    Route,
    Rule,
    Ruleset,
    Veth,
)

__all__ = ["PHASES", "BgpSession", "Bridge", "ExpectedRoute", "Interface", "LabPlan", "Mgmt", "MgmtPort",
           "Namespace", "NodePlan", "Process", "Route", "Rule", "Ruleset", "Veth", "build",
           "default_mgmt_subnet", "free_mgmt_subnet"]

DEFAULT_STATE_ROOT = "/run/lab"
FIRST_IFINDEX = 10  # veth ends get distinct, planned ifindexes from here on


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
    return kinds.get(node.kind).zone_instances.get(link.zone or "")


def _local_as(node: Node, instance: str | None, zone: str | None = None) -> int | None:
    if node.bgp is None:
        return None
    if zone == "icl" and kinds.get(node.kind).load_balancer:
        return node.bgp.icl_as  # the MNHA-VR
    value: int | None = getattr(node.bgp, kinds.get(node.kind).as_field(instance))
    return value


Phase = Callable[[Topology, LabPlan, str], None]  # (topology, plan so far, python) -> adds to the plan


def build(topo: Topology, source: str = "", state_root: str = DEFAULT_STATE_ROOT,
          python: str = "python3", mgmt_subnet: IPv4Network | None = None) -> LabPlan:
    """The whole lab, derived only from the validated topology (same input -> same plan)."""
    lab = topo.name
    subnet = topo.addressing.mgmt or mgmt_subnet or default_mgmt_subnet(lab)
    plan = LabPlan(
        name=lab, source=source, state_dir=f"{state_root}/{lab}",
        load_balancing=topo.services.load_balancing, use_case=topo.services.use_case,
        mgmt=Mgmt(naming.mgmt_bridge(lab), str(subnet), f"{next(subnet.hosts())}/{subnet.prefixlen}",
                  naming.root_nft_table(lab), ()),
        nodes=[], namespaces=[], veths=[], bridges=[], routes=[], sessions=[], processes=[], expected_routes=[],
        mnha=[list(pair.nodes) for pair in topo.mnha], srd=list(topo.srd.nodes) if topo.srd else [],
        spares=[name for name, n in topo.nodes.items() if not n.in_service],
        bfd=topo.services.bfd is not None, max_sessions=topo.services.max_sessions,
    )
    for _name, phase in PHASES:
        phase(topo, plan, python)
    return plan


def session_timeouts(topo: Topology) -> tuple[tuple[str, str], ...]:
    """The conntrack timeouts of an SRX (per namespace): UDP with or without a reply, established TCP."""
    udp, tcp = str(topo.services.udp_timeout), str(topo.services.tcp_timeout)
    return (("net.netfilter.nf_conntrack_udp_timeout", udp), ("net.netfilter.nf_conntrack_udp_timeout_stream", udp),
            ("net.netfilter.nf_conntrack_tcp_timeout_established", tcp))


def _nodes(topo: Topology, plan: LabPlan, python: str) -> None:
    """Per node: its namespaces (an MX: one per routing instance) and sysctls, its management port
    and address, loopbacks, the SRX's CGNAT pool (one per MNHA pair where the pair shares it)."""
    loopbacks = _Allocator(topo.addressing.loopback, 32,
                           [IPv4Network(f"{n.loopback}/32") for n in topo.nodes.values() if n.loopback])
    nat_pools = _Allocator(topo.addressing.nat, topo.addressing.nat_prefixlen,
                           [n.nat_pool for n in topo.nodes.values() if n.nat_pool])
    # MNHA pairs that share one NAT pool (services.nat_pool_scope): node -> its pair
    shared = {n: pair for pair in usecase.pair_pools(topo) for n in pair.nodes}
    pair_pool: dict[tuple[str, ...], str] = {}  # a sharing pair's nodes -> its pool
    mgmt_subnet = IPv4Network(plan.mgmt.subnet)
    mgmt_hosts = mgmt_subnet.hosts()
    next(mgmt_hosts)  # the root namespace's end of the management bridge
    reserved_mgmt = {n.mgmt_ip for n in topo.nodes.values() if n.mgmt_ip}
    mgmt_ports: list[MgmtPort] = []
    ifindex = FIRST_IFINDEX
    for index, (name, node) in enumerate(topo.nodes.items()):
        master = naming.namespace(plan.name, name)
        kind = kinds.get(node.kind)
        instances: list[str | None] = [None, *kind.instances]
        sysctls = kind.sysctls
        if kind.firewall:  # an SRX's session timeouts (services.udp_timeout, tcp_timeout)
            sysctls += session_timeouts(topo)
        ns_names = []
        for instance in instances:
            ns = naming.namespace(plan.name, name, instance)
            plan.namespaces.append(Namespace(ns, name, instance, sysctls))
            ns_names.append(ns)
        mgmt_ip = node.mgmt_ip if node.mgmt_ip is not None else next(h for h in mgmt_hosts if h not in reserved_mgmt)
        plan_node = NodePlan(name, node.kind, ns_names, master,
                             f"{mgmt_ip}/{mgmt_subnet.prefixlen}")
        if kind.routes:
            for instance in instances:
                key = instance or ""
                if node.loopback is not None and instance is None:
                    plan_node.loopbacks[key] = str(node.loopback)
                else:
                    plan_node.loopbacks[key] = str(loopbacks.next().network_address)
        if kind.firewall and usecase.translates(topo.services.use_case):
            pair = shared.get(name)
            if pair is None:
                plan_node.nat_pool = str(node.nat_pool or nat_pools.next())
            else:  # one pool for both nodes, allocated at the pair's first node (or the one a node sets)
                members = tuple(pair.nodes)
                if members not in pair_pool:
                    explicit = next((topo.nodes[n].nat_pool for n in pair.nodes if topo.nodes[n].nat_pool), None)
                    pair_pool[members] = str(explicit or nat_pools.next())
                plan_node.nat_pool = pair_pool[members]
        plan.nodes.append(plan_node)
        ifindex += 1
        mgmt_ports.append(MgmtPort(name, master, kind.mgmt_port,
                                   naming.mgmt_host_port(plan.name, index + 1),
                                   plan_node.mgmt_address, ifindex))
    plan.mgmt = replace(plan.mgmt, ports=tuple(mgmt_ports))
    _pair_addresses(topo, plan.nodes, loopbacks)


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


def _links(topo: Topology, plan: LabPlan, python: str) -> None:
    """Per link: a veth (point to point) or a LAN switch (bridge in a namespace of its own, one veth
    per port), addresses from the pools unless the link fixes them, distinct ifindexes."""
    explicit = [a.network for link in topo.links for a in (link.addresses or [])]
    p2p = _Allocator(topo.addressing.p2p, 31, explicit)
    lans = _Allocator(topo.addressing.lan, 24, explicit)
    ifindex = max((p.ifindex for p in plan.mgmt.ports), default=FIRST_IFINDEX)
    lab = plan.name
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
            plan.namespaces.append(Namespace(lan_ns, f"lan{link_index}", None, kinds.NO_IPV6))
            plan.bridges.append(Bridge(lan_ns, "br0", tuple(f"p{j}" for j in range(len(ends))), link_index))
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
                plan.veths.append(Veth(iface, port, link_index))
            else:
                pair.append(iface)
        if not is_lan:
            plan.veths.append(Veth(pair[0], pair[1], link_index))


def _static_routes(topo: Topology, plan: LabPlan, python: str) -> None:
    plan.routes = list(_host_routes(topo, plan))


def _bgp(topo: Topology, plan: LabPlan, python: str) -> None:
    plan.sessions = list(_bgp_sessions(topo, plan))


def _plan_json(topo: Topology, plan: LabPlan, python: str) -> None:
    plan.files["plan.json"] = ""  # listed in its own file_names
    plan.files["plan.json"] = plan.to_json()


# The order is the contract: a phase reads only what the phases above it added.
PHASES: tuple[tuple[str, Phase], ...] = (
    ("nodes", _nodes),                      # namespaces, sysctls, management ports, loopbacks, NAT pools
    ("links", _links),                      # veths, LAN bridges, addresses, ifindexes
    ("static routes", _static_routes),      # host AnyIP prefixes and default routes, static routes
    ("bgp", _bgp),                          # eBGP sessions on point-to-point links between speakers
    ("ipv6", ipv6.plan_ipv6),               # dual stack: IPv6 addresses, host routes, sessions' IPv6 twins
    ("nat64", nat64.plan_nat64),            # NAT64 pools and translators of the SRXs (services.nat64)
    ("configs", render.configs),            # BIRD configs + processes, device configs, SRX nft rulesets
    ("readiness", render.readiness),        # routes each gateway must learn before `lab up` returns
    ("mnha", mnha.plan_mnha),               # mnhad + conntrackd per SRX of an MNHA pair
    ("srd", srd.plan_srd),                  # srdd per MX of an SRD pair (reads BIRD processes of "configs")
    ("selectors", mxlb.plan_selectors),     # the MX selector (ECMP CHASH / TLB): nft, rules, tables, mxlb
    ("flexvpn", flexvpn.plan_flexvpn),      # HSRP / CLB / IKEv2 daemons of ios-routers
    ("ssh", sshplan.plan_ssh),              # the lab's SSH server, its keys and ssh_config
    ("plan.json", _plan_json),              # the plan itself, last
)


def _host_routes(topo: Topology, plan: LabPlan) -> Iterator[Route]:
    """Hosts: AnyIP local routes for their prefixes and a default route; static routes of any node."""
    for name, node in topo.nodes.items():
        ns = naming.namespace(plan.name, name)
        for static in node.routes:
            yield Route(ns, str(static.prefix), "unicast", via=str(static.via))
        if kinds.get(node.kind).routes:
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
        peer = plan.peer_of(first)
        return str(IPv4Interface(peer.address).ip) if peer.address else None
    for iface in plan.interfaces():
        if iface.lan == first.lan and iface.address and iface.node in topo.nodes \
                and kinds.get(topo.nodes[iface.node].kind).routes:
            return str(IPv4Interface(iface.address).ip)
    return None


def routed_icl(topo: Topology, veth: Veth) -> bool:
    """An ICL link between an SRX and an MX: the MNHA ICL routed through the MX's MNHA-VR."""
    facts = [kinds.get(topo.nodes[end.node].kind) for end in (veth.a, veth.b)]
    return veth.a.zone == "icl" and sorted((f.firewall, f.load_balancer) for f in facts) == [(False, True),
                                                                                             (True, False)]


def _bgp_sessions(topo: Topology, plan: LabPlan) -> Iterator[BgpSession]:
    """eBGP on every point-to-point link between two BGP speakers, except a direct MNHA ICL and the
    SRD inter-MX link (an ICL routed through an MX has eBGP with its MNHA-VR, as the JVD's)."""
    for veth in plan.veths:
        if veth.a.lan is not None or (veth.a.zone == "icl" and not routed_icl(topo, veth)):
            continue
        for local, remote in ((veth.a, veth.b), (veth.b, veth.a)):
            local_node, remote_node = topo.nodes[local.node], topo.nodes[remote.node]
            local_as = _local_as(local_node, local.instance, local.zone)
            remote_as = _local_as(remote_node, remote.instance, remote.zone)
            if local_as is None or remote_as is None or not local.address or not remote.address:
                continue
            yield BgpSession(
                ns=local.ns, node=local.node, instance=local.instance,
                protocol=kinds.get(local_node.kind).protocol_name(kinds.get(remote_node.kind), local.zone,
                                                                  remote.node),
                local_address=str(IPv4Interface(local.address).ip), local_as=local_as,
                peer_address=str(IPv4Interface(remote.address).ip), peer_as=remote_as,
                peer_node=remote.node, zone=local.zone,
            )
