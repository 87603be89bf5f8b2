"""Load a topology file and check it whole: every problem becomes one located Diagnostic.

Two passes: pydantic checks each field's type and range (unknown keys included); then the
cross-reference checks below, which need the entire model. Both passes report together.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from ipaddress import IPv4Interface, IPv4Network
from pathlib import Path
from typing import Any, Iterable

from pydantic import ValidationError

from . import naming
from .diagnostics import Diagnostic, TopologyInvalid, YamlPath, dotted
from .model import NAME_PATTERN, Topology
from .yamlsrc import SourceMap, load

BGP_KINDS = ("mx", "srx", "ios-router")


@dataclass(frozen=True)
class LoadedTopology:
    topology: Topology
    source: SourceMap
    path: Path


def _normalise(data: Any, source: SourceMap) -> Any:
    """Accept the short link form `[a:if, b:if]` by rewriting it (and its line numbers)."""
    if not isinstance(data, dict) or not isinstance(data.get("links"), list):
        return data
    for index, link in enumerate(data["links"]):
        if isinstance(link, list):
            data["links"][index] = {"endpoints": link}
            for j in range(len(link)):
                line = source.lines.get(("links", index, j))
                if line:
                    source.lines[("links", index, "endpoints", j)] = line
            source.lines[("links", index, "endpoints")] = source.lines.get(("links", index), 1)
    return data


def _pydantic_diagnostics(exc: ValidationError, source: SourceMap) -> list[Diagnostic]:
    out = []
    for err in exc.errors():
        loc: YamlPath = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        kind = err["type"]
        if kind == "extra_forbidden":
            msg, hint = f"unknown key '{loc[-1]}'", "check the spelling; see docs/topology.md for the keys"
        elif kind == "missing":
            msg, hint = f"missing required key '{loc[-1]}'", ""
        elif kind == "literal_error":
            msg, hint = err["msg"].replace("Input should be", "must be"), ""
        else:
            msg, hint = err["msg"][0].lower() + err["msg"][1:], ""
        out.append(source.diag(loc, msg, hint))
    return out


def load_topology(path: str | Path, host_routes: Iterable[IPv4Network] = ()) -> LoadedTopology:
    """Parse and validate; raise TopologyInvalid carrying every problem found."""
    file = Path(path)
    try:
        text = file.read_text()
    except OSError as exc:
        raise TopologyInvalid([Diagnostic(str(file), 0, (), f"cannot read file: {exc.strerror}")]) from None
    data, source = load(text, str(file))
    data = _normalise(data, source)
    if not isinstance(data, dict):
        raise TopologyInvalid([source.diag((), "a topology file must be a mapping with 'name' and 'nodes'")])
    try:
        topology = Topology.model_validate(data)
    except ValidationError as exc:
        raise TopologyInvalid(_pydantic_diagnostics(exc, source)) from None
    problems = list(check(topology, source, host_routes))
    if problems:
        raise TopologyInvalid(problems)
    return LoadedTopology(topology, source, file)


def check(topo: Topology, src: SourceMap, host_routes: Iterable[IPv4Network] = ()) -> Iterable[Diagnostic]:
    """Cross-reference checks; yields every problem (never stops at the first)."""
    yield from _check_nodes(topo, src)
    yield from _check_links(topo, src)
    yield from _check_addresses(topo, src, list(host_routes))
    yield from _check_pairs(topo, src)
    yield from _check_flexvpn(topo, src)


def _check_nodes(topo: Topology, src: SourceMap) -> Iterable[Diagnostic]:
    for name, node in topo.nodes.items():
        path: YamlPath = ("nodes", name)
        if not re.match(NAME_PATTERN, name):
            yield src.diag(path, f"node name '{name}' is not usable", "lower-case letters, digits and '-'")
        if node.kind == "mx":
            if node.bgp is None or node.bgp.trust_as is None or node.bgp.untrust_as is None:
                yield src.diag(path + ("bgp",), "an mx needs bgp.trust_as and bgp.untrust_as",
                               "one AS per routing instance (TRUST-VR, UNTRUST-VR)")
            elif node.bgp.as_ is not None:
                yield src.diag(path + ("bgp", "as"), "an mx takes trust_as/untrust_as, not as")
        elif node.kind in ("srx", "ios-router"):
            if node.kind == "srx" and (node.bgp is None or node.bgp.as_ is None):
                yield src.diag(path + ("bgp",), "an srx needs bgp.as", "e.g. bgp: {as: 65001}")
            if node.bgp and (node.bgp.trust_as or node.bgp.untrust_as):
                yield src.diag(path + ("bgp",), f"trust_as/untrust_as apply to an mx, not to {node.kind}")
        elif node.kind == "host" and node.bgp is not None:
            yield src.diag(path + ("bgp",), "a host does not speak BGP", "use kind ios-router for a gateway")
        if node.nat_pool is not None and node.kind != "srx":
            yield src.diag(path + ("nat_pool",), "only an srx has a NAT pool")
        if node.prefixes and node.kind != "host":
            yield src.diag(path + ("prefixes",), "prefixes belong to a host",
                           "routers announce with bgp.announce")
        for ifname in node.interfaces:
            try:
                naming.linux_ifname(ifname)
            except naming.NameError_ as exc:
                yield src.diag(path + ("interfaces", ifname), str(exc))


def _endpoint(text: str) -> tuple[str, str] | None:
    node, sep, ifname = text.partition(":")
    return (node, ifname) if sep and node and ifname else None


def _check_links(topo: Topology, src: SourceMap) -> Iterable[Diagnostic]:
    used: dict[tuple[str, str], YamlPath] = {}
    linux_names: dict[tuple[str, str], str] = {}
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
                yield src.diag(path, f"endpoint names node '{node}', which is not defined",
                               f"defined nodes: {', '.join(sorted(topo.nodes))}")
                continue
            kinds.append(topo.nodes[node].kind)
            if (node, ifname) in used:
                yield src.diag(path, f"interface {node}:{ifname} is already used by links[{used[(node, ifname)][1]}]",
                               "each interface joins one link")
            used[(node, ifname)] = base
            try:
                linux = naming.linux_ifname(ifname)
            except naming.NameError_ as exc:
                yield src.diag(path, str(exc), "shorten it or use another interface")
                continue
            if linux in ("lo", "fxp0", "mgmt0"):
                yield src.diag(path, f"interface name '{ifname}' is reserved for the loopback/management")
            previous = linux_names.get((node, linux))
            if previous and previous != ifname:
                yield src.diag(path, f"{node}:{ifname} and {node}:{previous} both become Linux name '{linux}'",
                               "rename one of them")
            linux_names[(node, linux)] = ifname
        names = [e.partition(":")[0] for e in link.endpoints]
        if len(set(names)) != len(names):
            yield src.diag(base + ("endpoints",), "a link joins different nodes (a node appears twice)")
        if len(names) > 2 and ("mx" in kinds or "srx" in kinds):
            yield src.diag(base + ("endpoints",), "mx and srx connect point-to-point; a LAN (3+ endpoints) "
                           "is for ios-router and host nodes")
        if "mx" in kinds and link.zone not in ("trust", "untrust"):
            yield src.diag(base, "a link of an mx needs zone: trust or untrust",
                           "the zone picks the routing instance (TRUST-VR / UNTRUST-VR)")
        if kinds == ["srx", "srx"] and link.zone != "icl":
            yield src.diag(base, "a link between two srx is an MNHA ICL: set zone: icl")
        if "srx" in kinds and "mx" not in kinds and kinds != ["srx", "srx"] and link.zone is None:
            yield src.diag(base, "a link of an srx needs a zone", "trust or untrust")
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
                    yield src.diag(path, f"address {value} is also used at {dotted(seen[str(value)])}")
                seen[str(value)] = path

    ranges: list[tuple[IPv4Network, YamlPath]] = []
    a = topo.addressing
    for field in ("p2p", "loopback", "nat", "mgmt"):
        net = getattr(a, field)
        if net is not None:
            ranges.append((net, ("addressing", field)))
    for name, node in topo.nodes.items():
        for i, prefix in enumerate(node.prefixes):
            ranges.append((prefix, ("nodes", name, "prefixes", i)))
        if node.nat_pool is not None:
            ranges.append((node.nat_pool, ("nodes", name, "nat_pool")))
    for i, (net, path) in enumerate(ranges):
        for other, other_path in ranges[:i]:
            if net.overlaps(other) and not _nat_pool_inside_pool(path, other_path):
                yield src.diag(path, f"{net} overlaps {other} at {dotted(other_path)}", "pools and prefixes must be disjoint")
    explicit = [(addr.network, ("links", i, "addresses", s)) for i, link in enumerate(topo.links)
                for s, addr in enumerate(link.addresses or []) if s == 0]
    for route in host_routes:
        if route.prefixlen == 0:
            continue  # the host's default route overlaps everything; the lab never uses it
        for net, path in ranges + explicit:
            if net.overlaps(route):
                yield src.diag(path, f"{net} overlaps {route}, a route of this machine's root namespace",
                               "lab addressing must stay off the host's networks: pick another range")


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
                yield src.diag(base + ("nodes", side), f"MNHA pair names node '{node}', which is not defined")
            elif topo.nodes[node].kind != "srx":
                yield src.diag(base + ("nodes", side), f"MNHA pairs are made of srx nodes; {node} is {topo.nodes[node].kind}")
            elif node in paired and paired[node] != index:
                yield src.diag(base + ("nodes", side), f"{node} is already in mnha[{paired[node]}]")
            paired.setdefault(node, index)
        if pair.srg1_active is not None and pair.srg1_active not in pair.nodes:
            yield src.diag(base + ("srg1_active",), f"srg1_active '{pair.srg1_active}' is not in this pair")
        if len(set(pair.nodes)) == 2 and not _has_link(topo, *pair.nodes, zone="icl"):
            yield src.diag(base + ("nodes",), "an MNHA pair needs an ICL link between its nodes",
                           "add a link with zone: icl")
    if topo.srd is not None:
        for side, node in enumerate(topo.srd.nodes):
            if node not in topo.nodes or topo.nodes[node].kind != "mx":
                yield src.diag(("srd", "nodes", side), f"SRD is run by two mx nodes; '{node}' is not one")
        if topo.srd.master is not None and topo.srd.master not in topo.srd.nodes:
            yield src.diag(("srd", "master"), f"master '{topo.srd.master}' is not one of srd.nodes")


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
            if node.kind != "ios-router":
                yield src.diag(("nodes", name, "ikev2_cluster"), "an IKEv2 cluster runs on an ios-router")
            elif node.ikev2_cluster.standby_group not in groups:
                yield src.diag(("nodes", name, "ikev2_cluster", "standby_group"),
                               f"standby group '{node.ikev2_cluster.standby_group}' is not configured on {name}",
                               "name an HSRP group with interfaces.IF.standby.name")
        for ifname, settings in node.interfaces.items():
            if settings.standby is not None and node.kind != "ios-router":
                yield src.diag(("nodes", name, "interfaces", ifname, "standby"), "HSRP runs on an ios-router")
