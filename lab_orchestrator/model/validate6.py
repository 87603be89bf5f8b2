"""The IPv6 checks of a dual-stack topology (`addressing.v6`), as `validate` checks IPv4: the families
of each field, one subnet per link, duplicates, pools and prefixes that overlap each other or a route
of this machine's root namespace. Every problem is a located Diagnostic."""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv6Network

from .. import kinds as K
from .diagnostics import Diagnostic, YamlPath, dotted
from .schema import Topology
from .yamlsrc import SourceMap

V6_FIELDS = ("loopback6", "prefixes6")
# the host's own IPv6 plumbing, never a lab's: link-local, multicast, loopback
HOST_ONLY = (IPv6Network("fe80::/10"), IPv6Network("ff00::/8"), IPv6Network("::1/128"))


def check_v6(topo: Topology, src: SourceMap, host_routes: Iterable[IPv6Network] = ()) -> Iterable[Diagnostic]:
    if topo.addressing.v6 is None:
        yield from _v6_without_pools(topo, src)
        return
    yield from _link_subnets(topo, src)
    ranges = list(_ranges(topo))
    yield from _duplicates(topo, src)
    yield from _overlaps(ranges, src)
    yield from _explicit_overlaps(topo, ranges, src)
    yield from _host_overlaps(ranges + list(_explicit(topo)), list(host_routes), src)


def _v6_without_pools(topo: Topology, src: SourceMap) -> Iterable[Diagnostic]:
    """IPv6 values in an IPv4-only lab would be silently unused: say where, and how to turn IPv6 on."""
    hint = "add `addressing: {v6: {}}` to make the lab dual-stack"
    for index, link in enumerate(topo.links):
        if link.addresses6 is not None:
            yield src.diag(("links", index, "addresses6"), "IPv6 addresses in an IPv4-only lab", hint)
    for name, node in topo.nodes.items():
        for field in V6_FIELDS:
            if getattr(node, field):
                yield src.diag(("nodes", name, field), f"{field} in an IPv4-only lab", hint)
        if node.bgp is not None and node.bgp.announce6:
            yield src.diag(("nodes", name, "bgp", "announce6"), "announce6 in an IPv4-only lab", hint)


def _link_subnets(topo: Topology, src: SourceMap) -> Iterable[Diagnostic]:
    for index, link in enumerate(topo.links):
        addresses = link.addresses6
        if addresses is None:
            continue
        base: YamlPath = ("links", index, "addresses6")
        if len(addresses) != len(link.endpoints):
            yield src.diag(base, f"give one IPv6 address per endpoint ({len(link.endpoints)}), got {len(addresses)}")
            continue
        for side, address in enumerate(addresses):
            if address.network.prefixlen == 128:
                yield src.diag(base + (side,), f"{address} is a /128: no other end fits in it",
                               "a link's subnet holds every end: /126 as the JVD, /127, or /64")
            elif address.ip == address.network.network_address and address.network.prefixlen < 127:
                yield src.diag(base + (side,), f"{address} is the subnet-router anycast address of its subnet",
                               "use another address of the subnet")
            if side and address.network != addresses[0].network:
                yield src.diag(base + (side,), f"{address} is not in the subnet of {addresses[0]}",
                               "all ends of a link share one subnet")
        if topo.addressing.v6 is not None and len(link.endpoints) == 2 and addresses[0].network.prefixlen < 64:
            yield src.diag(base + (0,), f"{addresses[0].network} is wider than a /64 for a point-to-point link",
                           "the JVD uses a /126 per link")


def _duplicates(topo: Topology, src: SourceMap) -> Iterable[Diagnostic]:
    seen: dict[str, YamlPath] = {}
    found: list[tuple[str, YamlPath]] = []
    for index, link in enumerate(topo.links):
        found += [(str(a.ip), ("links", index, "addresses6", side)) for side, a in enumerate(link.addresses6 or [])]
    for name, node in topo.nodes.items():
        if node.loopback6 is not None:
            found.append((str(node.loopback6), ("nodes", name, "loopback6")))
    for key, path in found:
        if key in seen:
            yield src.diag(path, f"address {key} is also used at {dotted(seen[key])}", "addresses are unique")
        seen.setdefault(key, path)
    for name, node in topo.nodes.items():
        if node.loopback6 is not None and K.get(node.kind).end_host:
            yield src.diag(("nodes", name, "loopback6"), "a host has no loopback address", "give it prefixes6 instead")
        if node.prefixes6 and not K.get(node.kind).end_host:
            yield src.diag(("nodes", name, "prefixes6"), "prefixes6 belong to a host",
                           "routers announce with bgp.announce6")


def _ranges(topo: Topology) -> Iterable[tuple[IPv6Network, YamlPath]]:
    v6 = topo.addressing.v6
    assert v6 is not None
    for field in ("p2p", "loopback", "lan"):
        yield getattr(v6, field), ("addressing", "v6", field)
    for name, node in topo.nodes.items():
        for i, prefix in enumerate(node.prefixes6):
            yield prefix, ("nodes", name, "prefixes6", i)
        for i, prefix in enumerate(node.bgp.announce6 if node.bgp else []):
            yield prefix, ("nodes", name, "bgp", "announce6", i)


def _explicit(topo: Topology) -> Iterable[tuple[IPv6Network, YamlPath]]:
    for index, link in enumerate(topo.links):
        if link.addresses6:
            yield link.addresses6[0].network, ("links", index, "addresses6", 0)


def _where(path: YamlPath, src: SourceMap) -> str:
    return dotted(path) if path in src.lines else f"{dotted(path)} (default)"


def _overlaps(ranges: list[tuple[IPv6Network, YamlPath]], src: SourceMap) -> Iterable[Diagnostic]:
    for i, (net, path) in enumerate(ranges):
        for other, other_path in ranges[:i]:
            if net.overlaps(other):
                first, second = (net, path), (other, other_path)
                if path not in src.lines and other_path in src.lines:
                    first, second = second, first
                yield src.diag(first[1], f"{first[0]} overlaps {second[0]} at {_where(second[1], src)}",
                               "pools and prefixes must be disjoint")


def _explicit_overlaps(topo: Topology, ranges: list[tuple[IPv6Network, YamlPath]],
                       src: SourceMap) -> Iterable[Diagnostic]:
    """A link's own subnet: off every other link's, off the loopback pool and the prefixes (the p2p and
    LAN allocators step around it)."""
    explicit = list(_explicit(topo))
    pools = {("addressing", "v6", "p2p"), ("addressing", "v6", "lan")}
    for i, (net, path) in enumerate(explicit):
        for other, other_path in explicit[:i]:
            if net.overlaps(other):
                yield src.diag(path, f"subnet {net} overlaps {other} of {dotted(other_path[:2])}",
                               "each link has a subnet of its own")
        for other, other_path in ranges:
            if other_path not in pools and net.overlaps(other):
                yield src.diag(path, f"subnet {net} overlaps {other} at {_where(other_path, src)}",
                               "link addresses must stay off pools and prefixes")


def _host_overlaps(nets: list[tuple[IPv6Network, YamlPath]], routes: list[IPv6Network],
                   src: SourceMap) -> Iterable[Diagnostic]:
    for route in routes:
        if route.prefixlen == 0 or any(route.subnet_of(h) for h in HOST_ONLY):
            continue
        for net, path in nets:
            if not net.overlaps(route):
                continue
            if path in src.lines:
                yield src.diag(path, f"{net} overlaps {route}, a route of this machine's root namespace",
                               "lab addressing must stay off the host's networks: pick another range")
            else:
                yield src.diag(path, f"{net}, the default {dotted(path)}, overlaps {route}, a route of this "
                               "machine's root namespace", f"set {dotted(path)} to a range this machine does not use")
