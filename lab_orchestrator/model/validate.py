"""Load a topology file and check it whole: every problem becomes one located Diagnostic.

Two passes: pydantic checks each field's type and range (unknown keys included; modelpass); then the
cross-reference checks below, which need the entire model. Both passes report together.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from ipaddress import IPv4Interface, IPv4Network, IPv6Network
from pathlib import Path

from .. import kinds as K
from ..kinds import get as kind_of
from . import naming
from .diagnostics import Diagnostic, TopologyInvalid, YamlPath, did_you_mean, dotted
from .modelpass import caused_by_drop, model_pass, pydantic_diagnostics
from .modelpass import normalise as _normalise
from .nat64 import check_nat64
from .schema import NAME_PATTERN, Topology
from .usecase import check_nat_pool_scope, check_use_case, pair_pools
from .validate6 import check_v6
from .yamlsrc import SourceMap, load_checked, read

__all__ = ["LoadedTopology", "check", "load_topology", "pydantic_diagnostics"]


@dataclass(frozen=True)
class LoadedTopology:
    topology: Topology
    source: SourceMap
    path: Path


def load_topology(path: str | Path, host_routes: Iterable[IPv4Network | IPv6Network] = ()) -> LoadedTopology:
    """Parse and validate; raise TopologyInvalid carrying every problem found."""
    from . import shipped

    file = shipped.resolve(path)
    if not file.exists() and file.parent == Path("."):
        names = [lab.stem for lab in shipped.shipped_labs()]
        close = did_you_mean(file.stem, names).strip(" ()")
        raise TopologyInvalid([Diagnostic(str(file), 0, (), "cannot read file: No such file or directory",
                                          (f"{close} " if close else "") + "a file path, or the name of a "
                                          "shipped lab: " + ", ".join(names))])
    data, source, problems = load_checked(read(file), str(file))
    data = _normalise(data, source)
    if not isinstance(data, dict):
        raise TopologyInvalid([*problems, source.diag((), "a topology file must be a mapping with 'name' and 'nodes'")])
    topology, found, dropped, unchecked = model_pass(data, source)
    problems += found
    if topology is not None:
        problems += [d for d in check(topology, source, host_routes)
                     if not caused_by_drop(d, dropped) and not _about(d, unchecked)]
    if problems or topology is None:
        raise TopologyInvalid(problems)
    return LoadedTopology(topology, source, file)


def _about(diag: Diagnostic, nodes: set[str]) -> bool:
    """A cross-reference problem that names a node the first pass could not build (its own errors are
    reported already): a link to it is not a link to an undefined node."""
    return any(f"'{node}'" in diag.message or diag.path[:2] == ("nodes", node) for node in nodes)


def check(topo: Topology, src: SourceMap,
          host_routes: Iterable[IPv4Network | IPv6Network] = ()) -> Iterable[Diagnostic]:
    """Cross-reference checks; yields every problem (never stops at the first)."""
    routes = list(host_routes)
    yield from _check_nodes(topo, src)
    yield from _check_namespaces(topo, src)
    yield from _check_links(topo, src)
    yield from _check_addresses(topo, src, [r for r in routes if isinstance(r, IPv4Network)])
    yield from check_v6(topo, src, [r for r in routes if isinstance(r, IPv6Network)])
    yield from _check_pairs(topo, src)
    yield from _check_flexvpn(topo, src)
    yield from _check_gateways(topo, src)
    yield from check_use_case(topo, src)
    yield from check_nat_pool_scope(topo, src)
    yield from check_nat64(topo, src)


def _check_nodes(topo: Topology, src: SourceMap) -> Iterable[Diagnostic]:
    if not topo.nodes:
        yield src.diag(("nodes",), "a topology needs at least one node",
                       "e.g. nodes: {srx1: {kind: srx, bgp: {as: 65101}}}")
    for name, node in topo.nodes.items():
        path: YamlPath = ("nodes", name)
        if not re.fullmatch(NAME_PATTERN, name):  # fullmatch: '$' alone lets "mx1\n" through
            yield src.diag(path, f"node name '{name}' is not usable", "lower-case letters, digits and '-'")
        kind = K.get(node.kind)
        for below, message, hint in kind.check_node(node):
            yield src.diag(path + below, message, hint or "")
        firewall = kind.firewall
        if node.nat_pool is not None and not firewall:
            yield src.diag(path + ("nat_pool",), "only an srx has a NAT pool")
        if not node.in_service and not firewall:
            yield src.diag(path + ("in_service",), "only an srx can be built out of service",
                           "a spare SRX (or both SRXs of an MNHA pair) joins with `nexthop-add`")
        if node.prefixes and not kind.end_host:
            yield src.diag(path + ("prefixes",), "prefixes belong to a host",
                           "routers announce with bgp.announce")
        if node.gateway is not None and not kind.end_host:
            yield src.diag(path + ("gateway",), "only a host has a default gateway", "routers learn routes by BGP")
        if node.loopback is not None and kind.end_host:
            yield src.diag(path + ("loopback",), "a host has no loopback address", "give it prefixes instead")
        if node.ikev2 is not None and not kind.flexvpn:
            yield src.diag(path + ("ikev2",), "IKEv2 redirect runs on an ios-router")
        linked = {e.partition(":")[2] for link in topo.links for e in link.endpoints if e.partition(":")[0] == name}
        for ifname in node.interfaces:
            try:
                naming.linux_ifname(ifname)
            except naming.NameError_ as exc:
                yield src.diag(path + ("interfaces", ifname), str(exc), exc.hint)
                continue
            if ifname not in linked:
                yield src.diag(path + ("interfaces", ifname), f"no link uses {name}:{ifname}, so these settings "
                               "would be ignored", "add the interface to a link, or check its spelling")


def _check_namespaces(topo: Topology, src: SourceMap) -> Iterable[Diagnostic]:
    """Node names become namespace names next to generated ones (mx routing instances, LANs):
    `mx1` makes `LAB-mx1-trust-vr`, the LAN of links[3] is `LAB-lan3`; a node may not take those."""
    owners: dict[str, str] = {}
    for index, link in enumerate(topo.links):
        if len(link.endpoints) > 2:
            owners[naming.namespace(topo.name, f"lan{index}")] = f"the LAN of links[{index}]"
    for name, node in topo.nodes.items():
        if K.get(node.kind).instances:
            for instance in K.get(node.kind).instances:
                owners.setdefault(naming.namespace(topo.name, name, instance), f"routing instance {instance} of {name}")
    for name in topo.nodes:
        ns = naming.namespace(topo.name, name)
        if ns in owners:
            yield src.diag(("nodes", name), f"node {name} would get namespace '{ns}', which is {owners[ns]}",
                           "rename the node")


def _endpoint(text: str) -> tuple[str, str] | None:
    node, sep, ifname = text.partition(":")
    return (node, ifname) if sep and node and ifname else None


def _check_links(topo: Topology, src: SourceMap) -> Iterable[Diagnostic]:
    used: dict[tuple[str, str], YamlPath] = {}
    linux_names: dict[tuple[str, str], tuple[str, YamlPath]] = {}
    for index, link in enumerate(topo.links):
        base: YamlPath = ("links", index)
        kinds = []
        for side, text in enumerate(link.endpoints):
            path = base + ("endpoints", side)
            parsed = _endpoint(text)
            if parsed is None:
                yield src.diag(path, f"endpoint '{text}' is not NODE:INTERFACE", "e.g. mx1:ge-0/0/0")
                continue
            node, ifname = parsed
            if node not in topo.nodes:
                close = did_you_mean(node, topo.nodes).strip(" ()")
                yield src.diag(path, f"endpoint names node '{node}', which is not defined",
                               f"{close + ' ' if close else ''}defined nodes: {', '.join(sorted(topo.nodes))}")
                continue
            kinds.append(topo.nodes[node].kind)
            if (node, ifname) in used:
                yield src.diag(path, f"interface {node}:{ifname} is already used by links[{used[(node, ifname)][1]}]",
                               "each interface joins one link")
            used[(node, ifname)] = base
            try:
                linux = naming.linux_ifname(ifname)
            except naming.NameError_ as exc:
                yield src.diag(path, str(exc), exc.hint)
                continue
            if linux in ("lo", "fxp0", "mgmt0"):
                yield src.diag(path, f"interface name '{ifname}' is reserved for the loopback/management")
            previous = linux_names.get((node, linux))
            if previous and previous[0] != ifname:
                yield src.diag(path, f"{node}:{ifname} and {node}:{previous[0]} (at {dotted(previous[1])}) both "
                               f"become Linux name '{linux}'", "rename one of them")
            linux_names.setdefault((node, linux), (ifname, path))
        names = [e.partition(":")[0] for e in link.endpoints]
        if len(set(names)) != len(names):
            yield src.diag(base + ("endpoints",), "a link joins different nodes (a node appears twice)")
        facts = [K.get(k) for k in kinds]
        balancers, firewalls = sum(k.load_balancer for k in facts), sum(k.firewall for k in facts)
        two_balancers, two_firewalls = len(facts) == balancers == 2, len(facts) == firewalls == 2
        if len(names) > 2 and (balancers or firewalls):
            yield src.diag(base + ("endpoints",), "mx and srx connect point-to-point; a LAN (3+ endpoints) "
                           "is for ios-router and host nodes")
        if two_balancers and link.zone != "icl":
            yield src.diag(base, "a link between two mx is the SRD inter-chassis link: set zone: icl")
        elif balancers and not two_balancers and link.zone not in ("trust", "untrust") \
                and not (link.zone == "icl" and balancers == firewalls == 1 and len(facts) == 2):
            yield src.diag(base, "a link of an mx needs zone: trust or untrust",
                           "the zone picks the routing instance, TRUST-VR or UNTRUST-VR (icl: an srx's ICL "
                           "through the mx's MNHA-VR)")
        if two_firewalls and link.zone != "icl":
            yield src.diag(base, "a link between two srx is an MNHA ICL: set zone: icl")
        if firewalls and not balancers and not two_firewalls and link.zone is None:
            yield src.diag(base, "a link of an srx needs a zone", "trust or untrust")
        routed_icl = len(facts) == 2 and balancers == firewalls == 1
        if link.zone == "icl" and len(kinds) == len(link.endpoints) and not (two_firewalls or two_balancers
                                                                               or routed_icl):
            yield src.diag(base + ("zone",), "zone icl joins two srx (MNHA), an srx and an mx (the MNHA ICL "
                           "routed through the mx) or two mx (SRD)",
                           f"this link joins {' and '.join(kinds)}")
        if link.addresses is not None:
            yield from _check_link_addresses(link.addresses, len(link.endpoints), base, src)


def _check_link_addresses(addresses: list[IPv4Interface], count: int, base: YamlPath,
                          src: SourceMap) -> Iterable[Diagnostic]:
    if len(addresses) != count:
        yield src.diag(base + ("addresses",), f"give one address per endpoint ({count}), got {len(addresses)}")
        return
    for index, address in enumerate(addresses[1:], start=1):
        if address.network != addresses[0].network:
            yield src.diag(base + ("addresses", index), f"{address} is not in the subnet of {addresses[0]}",
                           "all ends of a link share one subnet")


def _check_addresses(topo: Topology, src: SourceMap, host_routes: list[IPv4Network]) -> Iterable[Diagnostic]:
    """Duplicate addresses, overlapping pools and prefixes, and overlap with the host's routes."""
    seen: dict[str, YamlPath] = {}
    for index, link in enumerate(topo.links):
        for side, addr in enumerate(link.addresses or []):
            path: YamlPath = ("links", index, "addresses", side)
            key = str(addr.ip)
            if key in seen:
                yield src.diag(path, f"address {key} is also used at {dotted(seen[key])}", "addresses are unique")
            seen[key] = path
    for name, node in topo.nodes.items():
        for field in ("loopback", "mgmt_ip"):
            value = getattr(node, field)
            if value is not None:
                path = ("nodes", name, field)
                if str(value) in seen:
                    yield src.diag(path, f"address {value} is also used at {dotted(seen[str(value)])}",
                                   "addresses are unique")
                seen[str(value)] = path
    yield from _check_mgmt(topo, src)

    ranges: list[tuple[IPv4Network, YamlPath]] = []
    a = topo.addressing
    for field in ("p2p", "loopback", "lan", "nat"):
        ranges.append((getattr(a, field), ("addressing", field)))
    # The management subnet is used even when not written: it is then picked from the lab's name.
    ranges.append((a.mgmt or naming.default_mgmt_subnet(topo.name), ("addressing", "mgmt")))
    for name, node in topo.nodes.items():
        for i, prefix in enumerate(node.prefixes):
            ranges.append((prefix, ("nodes", name, "prefixes", i)))
        if node.nat_pool is not None:
            ranges.append((node.nat_pool, ("nodes", name, "nat_pool")))
    # An MNHA pair that shares its NAT pool may write it on both nodes: one pool, not an overlap.
    shared = [{("nodes", n, "nat_pool") for n in pair.nodes} for pair in pair_pools(topo)]

    def where(path: YamlPath) -> str:  # a pool the file does not write is a default
        return dotted(path) if path in src.lines else f"{dotted(path)} (default)"

    for i, (net, path) in enumerate(ranges):
        for other, other_path in ranges[:i]:
            if net == other and {path, other_path} in shared:
                continue
            if net.overlaps(other) and not _nat_pool_inside_pool(path, other_path):
                first, second = (net, path), (other, other_path)
                if path not in src.lines and other_path in src.lines:  # report where the user wrote it
                    first, second = second, first
                yield src.diag(first[1], f"{first[0]} overlaps {second[0]} at {where(second[1])}",
                               "pools and prefixes must be disjoint")
    # Explicit link subnets: the p2p and LAN allocators step around them; nothing else does.
    explicit = [(addr.network, ("links", i, "addresses", s)) for i, link in enumerate(topo.links)
                for s, addr in enumerate(link.addresses or []) if s == 0]
    ips = {i: {a.ip for a in link.addresses or []} for i, link in enumerate(topo.links)}
    for i, (net, path) in enumerate(explicit):
        for other, other_path in explicit[:i]:
            if net.overlaps(other) and not ips[int(path[1])] & ips[int(other_path[1])]:  # else: duplicates, said
                yield src.diag(path, f"subnet {net} overlaps {other} of {dotted(other_path[:2])}",
                               "each link has a subnet of its own")
        for other, other_path in ranges:
            if other_path not in (("addressing", "p2p"), ("addressing", "lan")) and net.overlaps(other):
                yield src.diag(path, f"subnet {net} overlaps {other} at {where(other_path)}",
                               "link addresses must stay off pools and prefixes")
    for route in host_routes:
        if route.prefixlen == 0:
            continue  # the host's default route overlaps everything; the lab never uses it
        for net, path in ranges + explicit:
            if not net.overlaps(route):
                continue
            if path == ("addressing", "mgmt") and path not in src.lines and \
                    not any(n.mgmt_ip for n in topo.nodes.values()):
                continue  # not written: `lab up` picks a free management subnet (naming.free_mgmt_subnet)
            if path in src.lines:
                yield src.diag(path, f"{net} overlaps {route}, a route of this machine's root namespace",
                               "lab addressing must stay off the host's networks: pick another range")
            else:
                yield src.diag(path, f"{net}, the default {dotted(path)}, overlaps {route}, a route of this "
                               "machine's root namespace", f"set {dotted(path)} to a range this machine does not use")


def _check_mgmt(topo: Topology, src: SourceMap) -> Iterable[Diagnostic]:
    """Explicit management addresses sit in the management subnet, off the bridge's own address."""
    subnet = topo.addressing.mgmt or naming.default_mgmt_subnet(topo.name)
    hosts = subnet.hosts()
    bridge = next(hosts, None)
    room = max(subnet.num_addresses - (2 if subnet.prefixlen < 31 else 0) - 1, 0)  # the bridge takes one
    if len(topo.nodes) > room:
        explicit = topo.addressing.mgmt is not None
        yield src.diag(("addressing", "mgmt") if explicit else ("nodes",),
                       f"{len(topo.nodes)} nodes need {len(topo.nodes)} management addresses; "
                       f"{'addressing.mgmt' if explicit else 'the default management subnet'} {subnet} has {room}",
                       f"set addressing.mgmt to a subnet of at least /{32 - (len(topo.nodes) + 2).bit_length()}")
    for name, node in topo.nodes.items():
        ip = node.mgmt_ip
        if ip is None:
            continue
        path: YamlPath = ("nodes", name, "mgmt_ip")
        if ip not in subnet or (ip in (subnet.network_address, subnet.broadcast_address) and subnet.prefixlen < 31):
            where = "addressing.mgmt" if topo.addressing.mgmt else "the default management subnet"
            yield src.diag(path, f"{ip} is not a host address of {where} {subnet}",
                           "set addressing.mgmt to the subnet you want" if not topo.addressing.mgmt else "")
        elif ip == bridge:
            yield src.diag(path, f"{ip} is the management bridge's own address", "the first host of the subnet is "
                           "the root namespace's; pick another")


def _nat_pool_inside_pool(path: YamlPath, other: YamlPath) -> bool:
    # An srx's explicit nat_pool may be carved from addressing.nat; that is not an overlap.
    return {path[-1], other[-1]} == {"nat_pool", "nat"}


def _check_pairs(topo: Topology, src: SourceMap) -> Iterable[Diagnostic]:
    paired: dict[str, int] = {}
    for index, pair in enumerate(topo.mnha):
        base: YamlPath = ("mnha", index)
        if pair.nodes[0] == pair.nodes[1]:
            yield src.diag(base + ("nodes",), f"an MNHA pair needs two different nodes, got {pair.nodes[0]} twice")
        for side, node in enumerate(pair.nodes):
            if node not in topo.nodes:
                yield src.diag(base + ("nodes", side), f"MNHA pair names node '{node}', which is not defined",
                               did_you_mean(node, topo.nodes).strip(" ()"))
            elif not K.get(topo.nodes[node].kind).firewall:
                yield src.diag(base + ("nodes", side),
                               f"MNHA pairs are made of srx nodes; {node} is {topo.nodes[node].kind}")
            elif node in paired and paired[node] != index:
                yield src.diag(base + ("nodes", side), f"{node} is already in mnha[{paired[node]}]")
            paired.setdefault(node, index)
        if pair.srg1_active is not None and pair.mode == "srg0":
            yield src.diag(base + ("srg1_active",), "srg1_active is set but this pair runs SRG0 only (mode: srg0)",
                           "add mode: srg1 (active/backup) or mode: srg1+srg2, or remove srg1_active")
        elif pair.srg1_active is not None and pair.srg1_active not in pair.nodes:
            yield src.diag(base + ("srg1_active",), f"srg1_active '{pair.srg1_active}' is not in this pair")
        if pair.mode == "srg1+srg2" and topo.services.load_balancing == "tlb" \
                and topo.services.tlb_real_service == "srx":
            yield src.diag(base + ("mode",), "srg1+srg2 with TLB needs one real-service per group",
                           "use services.tlb_real_service: pair")
        both_srx = all(n in topo.nodes and K.get(topo.nodes[n].kind).firewall for n in pair.nodes)
        if both_srx and len({topo.nodes[n].in_service for n in pair.nodes}) > 1:
            spare = next(n for n in pair.nodes if not topo.nodes[n].in_service)
            yield src.diag(("nodes", spare, "in_service"), f"{spare} is out of service but its MNHA peer is not",
                           "a spare MNHA pair has in_service: false on both nodes (it joins as a pair)")
        if len(set(pair.nodes)) == 2 and both_srx and not _has_link(topo, pair.nodes[0], pair.nodes[1], zone="icl") \
                and not icl_routers(topo, pair.nodes[0]) & icl_routers(topo, pair.nodes[1]):
            yield src.diag(base + ("nodes",), "an MNHA pair needs an ICL: a link with zone: icl from each node "
                           "to the same mx (routed through its MNHA-VR) or between its nodes",
                           "add links with zone: icl")
    if topo.srd is not None:
        if topo.srd.nodes[0] == topo.srd.nodes[1]:
            yield src.diag(("srd", "nodes"), f"SRD needs two different mx nodes, got {topo.srd.nodes[0]} twice")
        for side, node in enumerate(topo.srd.nodes):
            if node not in topo.nodes or not K.get(topo.nodes[node].kind).load_balancer:
                yield src.diag(("srd", "nodes", side), f"SRD is run by two mx nodes; '{node}' is not one")
        if topo.srd.master is not None and topo.srd.master not in topo.srd.nodes:
            yield src.diag(("srd", "master"), f"master '{topo.srd.master}' is not one of srd.nodes")


def icl_routers(topo: Topology, srx: str) -> set[str]:
    """The mx nodes SRX has an ICL link to (its MNHA ICL routed through their MNHA-VR)."""
    out = set()
    for link in topo.links:
        nodes = [e.partition(":")[0] for e in link.endpoints]
        if link.zone == "icl" and srx in nodes and len(nodes) == 2:
            other = nodes[1 - nodes.index(srx)]
            if other in topo.nodes and K.get(topo.nodes[other].kind).load_balancer:
                out.add(other)
    return out


def _has_link(topo: Topology, a: str, b: str, zone: str) -> bool:
    for link in topo.links:
        nodes = {e.partition(":")[0] for e in link.endpoints}
        if nodes == {a, b} and link.zone == zone:
            return True
    return False


def _check_flexvpn(topo: Topology, src: SourceMap) -> Iterable[Diagnostic]:
    for name, node in topo.nodes.items():
        groups = {s.standby.name for s in node.interfaces.values() if s.standby and s.standby.name}
        if node.ikev2_cluster is not None:
            if not K.get(node.kind).flexvpn:
                yield src.diag(("nodes", name, "ikev2_cluster"), "an IKEv2 cluster runs on an ios-router")
            elif node.ikev2_cluster.standby_group not in groups:
                yield src.diag(("nodes", name, "ikev2_cluster", "standby_group"),
                               f"standby group '{node.ikev2_cluster.standby_group}' is not configured on {name}",
                               "name an HSRP group with interfaces.IF.standby.name")
        for ifname, settings in node.interfaces.items():
            if settings.standby is not None and not K.get(node.kind).flexvpn:
                yield src.diag(("nodes", name, "interfaces", ifname, "standby"), "HSRP runs on an ios-router")
            standby = settings.standby
            if standby is not None and standby.hello_ms >= standby.hold_ms:
                yield src.diag(("nodes", name, "interfaces", ifname, "standby", "hello_ms"),
                               f"HSRP hello {standby.hello_ms} ms is not below the hold time {standby.hold_ms} ms",
                               "the hold time must exceed the hello interval; RFC 2281 defaults: hello 3000, "
                               "hold 10000")
        if node.flexvpn_client is not None:
            yield from _check_flexvpn_client(topo, src, name)
    yield from _check_standby_subnets(topo, src)
    yield from _check_ikev2_pools(topo, src)


def _check_flexvpn_client(topo: Topology, src: SourceMap, name: str) -> Iterable[Diagnostic]:
    node = topo.nodes[name]
    client = node.flexvpn_client
    assert client is not None
    path = ("nodes", name, "flexvpn_client")
    if not kind_of(node.kind).flexvpn:
        yield src.diag(path, "a FlexVPN client runs on an ios-router", "kind: ios-router")
        return
    if node.ikev2 is not None or node.ikev2_cluster is not None:
        yield src.diag(path, f"{name} is a FlexVPN gateway already: its IKEv2 and ESP use UDP 500/4500",
                       "put the client on a router of its own")
    linked = {e.partition(":")[2] for link in topo.links for e in link.endpoints if e.partition(":")[0] == name}
    if client.source not in linked:
        yield src.diag(path + ("source",), f"tunnel source {client.source} is not an interface of {name} on a link",
                       f"one of: {', '.join(sorted(linked)) or 'none (link the router first)'}")


def _interface_addresses(topo: Topology) -> dict[tuple[str, str], IPv4Interface]:
    """(node, interface) -> its address, for links whose addresses the file gives."""
    found: dict[tuple[str, str], IPv4Interface] = {}
    for link in topo.links:
        for endpoint, address in zip(link.endpoints, link.addresses or [], strict=False):
            node, _, ifname = endpoint.partition(":")
            found[(node, ifname)] = address
    return found


def _check_standby_subnets(topo: Topology, src: SourceMap) -> Iterable[Diagnostic]:
    """A standby VIP lives in the subnet of the link its interface is on (where the addresses are given)."""
    addresses = _interface_addresses(topo)
    for name, node in topo.nodes.items():
        for ifname, settings in node.interfaces.items():
            standby, address = settings.standby, addresses.get((name, ifname))
            if standby is None or address is None:
                continue
            if standby.ip not in address.network:
                yield src.diag(("nodes", name, "interfaces", ifname, "standby", "ip"),
                               f"standby VIP {standby.ip} is outside {address.network}, the subnet of {name}:{ifname}",
                               f"pick an unused address of {address.network}")
            elif standby.ip == address.ip:
                yield src.diag(("nodes", name, "interfaces", ifname, "standby", "ip"),
                               f"standby VIP {standby.ip} is the address of {name}:{ifname} itself",
                               f"pick an unused address of {address.network}")


def _check_ikev2_pools(topo: Topology, src: SourceMap) -> Iterable[Diagnostic]:
    """The routers of one IKEv2 cluster (the same standby group) hand out addresses from pools that must
    not overlap: a client redirected to another member must never get an address already in use."""
    clusters: dict[str, list[str]] = {}
    for name, node in topo.nodes.items():
        if node.ikev2_cluster is not None and node.ikev2 is not None and node.ikev2.pool is not None:
            clusters.setdefault(node.ikev2_cluster.standby_group, []).append(name)
    for group, members in clusters.items():
        for index, name in enumerate(members):
            pool = topo.nodes[name].ikev2.pool  # type: ignore[union-attr]
            for other in members[:index]:
                theirs = topo.nodes[other].ikev2.pool  # type: ignore[union-attr]
                if pool is not None and theirs is not None and pool.overlaps(theirs):
                    yield src.diag(("nodes", name, "ikev2", "pool"),
                                   f"IKEv2 pool {pool} overlaps {theirs} of {other} (same cluster, standby "
                                   f"group '{group}')", "give each router of a cluster its own pool")


def _check_gateways(topo: Topology, src: SourceMap) -> Iterable[Diagnostic]:
    """A host's explicit gateway is a neighbour's address (checked where the links' addresses are given)."""
    for name, node in topo.nodes.items():
        if not K.get(node.kind).end_host or node.gateway is None:
            continue
        own = [link for link in topo.links if any(e.partition(":")[0] == name for e in link.endpoints)]
        if not own or any(link.addresses is None for link in own):
            continue  # addresses are allocated by the plan: nothing to compare with here
        neighbours = {addr.ip for link in own for e, addr in zip(link.endpoints, link.addresses or [], strict=False)
                      if e.partition(":")[0] != name}
        if node.gateway not in neighbours:
            yield src.diag(("nodes", name, "gateway"), f"gateway {node.gateway} is no neighbour's address",
                           f"neighbours: {', '.join(sorted(str(n) for n in neighbours))}")

