"""NAT64 (`services.nat64`, the JVD's srx-nat64.conf): the pure facts of the translation every SRX of a
lab runs the same way, and the checks of the topology that asks for it (located diagnostics)."""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Address, IPv4Network

from .. import kinds
from .diagnostics import Diagnostic
from .schema import Nat64, Topology
from .usecase import one_translator
from .yamlsrc import SourceMap

# The translator's own IPv4 address (the source of the ICMPv4 errors it sends): the first address of
# 192.0.0.0/29, which RFC 7335 reserves for IPv4 service continuity (translators' own addresses).
TRANSLATOR_V4 = IPv4Address("192.0.0.1")
TRANSLATORS = IPv4Network("192.0.0.0/29")
MGMT_DEFAULTS = IPv4Network("198.19.0.0/16")  # where a lab's management /24 comes from without addressing.mgmt
DEVICE = "nat64"  # the translator's TUN device on each SRX
MIN_SOURCE_PREFIXLEN = 112  # one mapped IPv4 address per client: at most 65,536 clients


def mapped_clients(nat64: Nat64) -> IPv4Network:
    """The IPv4 range the clients of `source` map to, one for one in order: as large as `source`,
    at the start of `mapped`."""
    host_bits = 128 - nat64.source.prefixlen
    return IPv4Network((nat64.mapped.network_address, 32 - host_bits))


def check_nat64(topo: Topology, src: SourceMap) -> Iterable[Diagnostic]:
    nat64 = topo.services.nat64
    if nat64 is None:
        return
    base = ("services", "nat64")
    if topo.addressing.v6 is None:
        yield src.diag(base, "NAT64 translates IPv6 clients: this lab is IPv4 only",
                       "add `addressing: {v6: {}}` to make the lab dual-stack")
    if not any(kinds.get(n.kind).firewall for n in topo.nodes.values()):
        yield src.diag(base, "NAT64 runs on the SRXs: this lab has none", "add an srx node, or remove services.nat64")
    if nat64.source.prefixlen < MIN_SOURCE_PREFIXLEN:
        yield src.diag(base + ("source",), f"{nat64.source} has more clients than the translator maps (each "
                       f"gets its own IPv4 address of `mapped`)",
                       f"give a /{MIN_SOURCE_PREFIXLEN} or longer part of the client prefix")
        return
    host_bits = 128 - nat64.source.prefixlen
    if 32 - nat64.mapped.prefixlen < host_bits:
        yield src.diag(base + ("mapped",), f"{nat64.mapped} is smaller than {nat64.source}: one IPv4 address "
                       "is needed per client", f"give a /{32 - host_bits} or shorter range")
    if TRANSLATOR_V4 in nat64.mapped or nat64.server in nat64.mapped:
        yield src.diag(base + ("mapped",), f"{nat64.mapped} holds the translator's own {TRANSLATOR_V4} or the "
                       "server", "choose another private range")
    if nat64.server in TRANSLATORS:
        yield src.diag(base + ("server",), f"{nat64.server} is in {TRANSLATORS}, the translator's own range",
                       "give the IPv4 server's address")
    if nat64.address in nat64.source:
        yield src.diag(base + ("address",), f"{nat64.address} is one of the clients ({nat64.source})",
                       "choose an address outside the source prefix")
    clients6 = [p for n in topo.nodes.values() for p in n.prefixes6]
    if not any(nat64.source.subnet_of(p) for p in clients6):
        yield src.diag(base + ("source",), f"{nat64.source} is inside no host's prefixes6: no client would be "
                       "translated", "give a part of the client host's IPv6 prefix")
    taken = [(topo.addressing.p2p, "addressing.p2p"), (topo.addressing.loopback, "addressing.loopback"),
             (topo.addressing.lan, "addressing.lan"), (topo.addressing.nat, "addressing.nat"),
             (topo.addressing.mgmt or MGMT_DEFAULTS, "addressing.mgmt")]
    taken += [(p, f"nodes.{name}.prefixes") for name, n in topo.nodes.items() for p in n.prefixes]
    taken += [(n.nat_pool, f"nodes.{name}.nat_pool") for name, n in topo.nodes.items() if n.nat_pool]
    taken += [(IPv4Network(n.loopback), f"nodes.{name}.loopback") for name, n in topo.nodes.items() if n.loopback]
    taken += [(p, f"nodes.{name}.bgp.announce") for name, n in topo.nodes.items() if n.bgp for p in n.bgp.announce]
    for net, where in taken:
        if net.overlaps(nat64.mapped):
            yield src.diag(base + ("mapped",), f"{nat64.mapped} overlaps {where} ({net}): the translated "
                           "clients would be routed into the lab", "choose a range the lab does not use")
    v6 = topo.addressing.v6
    taken6 = [(v6.p2p, "addressing.v6.p2p"), (v6.loopback, "addressing.v6.loopback"),
              (v6.lan, "addressing.v6.lan")] if v6 is not None else []
    taken6 += [(p, f"nodes.{name}.prefixes6") for name, n in topo.nodes.items() for p in n.prefixes6]
    for net6, where in taken6:
        if nat64.address in net6:
            yield src.diag(base + ("address",), f"{nat64.address} is inside {where} ({net6}): it must be an "
                           "address only the translator answers for", "choose an address the lab does not use")
    for index, pair in enumerate(topo.mnha):
        if not one_translator(topo.services, pair):
            yield src.diag(base, f"mnha[{index}] ({' and '.join(pair.nodes)}) would translate on both nodes at "
                           "once into its one NAT64 pool (two clients could get the same address and port)",
                           "NAT64 needs pairs whose A node translates while B waits: load_balancing tlb, "
                           "tlb_real_service pair, mode srg0, prepend a-b")
