"""Which client prefix gets which SRX use case: SFW (sessions, no NAT) or NAPT44 (source NAT into the
SRX's pool). `services.use_case` sfw and cgnat give every client prefix one of them; mixed gives the
prefixes of `services.nat_sources` NAPT44 and the others SFW, as the JVD's SRXs run both at once
(security nat source rule-set, rule srx_nat_rule1: match source-address 172.80.0.0/12; the policy
SFW44_POLICY: source-address 172.160.0.0/12, untranslated).
"""

from __future__ import annotations

from collections.abc import Iterable
from ipaddress import IPv4Network

from .. import kinds as K
from .diagnostics import Diagnostic, YamlPath, dotted
from .schema import NAT_USE_CASES, MnhaPair, Services, Topology
from .yamlsrc import SourceMap


def translates(use_case: str) -> bool:
    """The SRXs of a lab of USE_CASE have a source NAT pool (some or all client flows are translated)."""
    return use_case in NAT_USE_CASES


def client_hosts(topo: Topology) -> list[str]:
    """Hosts behind the trust side: the neighbour on the host's first link has a trust-zone link."""
    out = []
    for name, node in topo.nodes.items():
        if not K.get(node.kind).end_host:
            continue
        first = next((link for link in topo.links if any(e.partition(":")[0] == name for e in link.endpoints)), None)
        if first is None:
            continue
        neighbours = {e.partition(":")[0] for e in first.endpoints} - {name}
        if any(link.zone == "trust" and neighbours & {e.partition(":")[0] for e in link.endpoints}
               for link in topo.links):
            out.append(name)
    return out


def client_prefixes(topo: Topology) -> list[tuple[str, int, IPv4Network]]:
    """(host, index in its prefixes, prefix) of every client host's IPv4 prefix, in file order."""
    return [(host, i, prefix) for host in client_hosts(topo) for i, prefix in enumerate(topo.nodes[host].prefixes)]


def nat_sources(topo: Topology) -> list[IPv4Network]:
    """The client prefixes the SRXs translate: every one (cgnat), those of services.nat_sources (mixed),
    none (sfw)."""
    if topo.services.use_case == "cgnat":
        return [prefix for _, _, prefix in client_prefixes(topo)]
    if topo.services.use_case == "mixed":
        return list(topo.services.nat_sources)
    return []


def sfw_prefixes(topo: Topology) -> list[IPv4Network]:
    """The client prefixes the SRXs pass untranslated (SFW)."""
    translated = set(nat_sources(topo))
    return [prefix for _, _, prefix in client_prefixes(topo) if prefix not in translated]


def check_use_case(topo: Topology, src: SourceMap) -> Iterable[Diagnostic]:
    """use_case mixed: services.nat_sources names whole client prefixes (a prefix has one use case, so the
    SFW routes the SRXs announce never cover a translated client), each once, and leaves one SFW."""
    services = topo.services
    path: YamlPath = ("services", "nat_sources")
    if services.use_case != "mixed":
        if services.nat_sources:
            yield src.diag(path, f"nat_sources is for use_case mixed; this lab's use_case is {services.use_case}",
                           "set services.use_case: mixed (SFW and NAPT44 by source prefix), or remove nat_sources")
        return
    clients = client_prefixes(topo)
    if not services.nat_sources:
        named = ", ".join(str(p) for _, _, p in clients) or "none"
        yield src.diag(("services", "use_case"), "use_case mixed needs services.nat_sources: the client prefixes "
                       "to translate (NAPT44); the others are SFW", f"client prefixes: {named}")
        return
    by_prefix = {prefix: ("nodes", host, "prefixes", i) for host, i, prefix in clients}
    seen: dict[IPv4Network, int] = {}
    for index, net in enumerate(services.nat_sources):
        here = path + (index,)
        if net in seen:
            yield src.diag(here, f"{net} is also services.nat_sources[{seen[net]}]", "name each prefix once")
            continue
        seen[net] = index
        if net in by_prefix:
            continue
        covering = [(prefix, where) for prefix, where in by_prefix.items() if prefix.overlaps(net)]
        if covering:
            prefix, where = covering[0]
            yield src.diag(here, f"{net} overlaps client prefix {prefix} at {dotted(where)} without being it: "
                           "a client prefix is either translated or not",
                           f"split {dotted(where[:3])} so that {net} is one of its prefixes, or name {prefix}")
        else:
            named = ", ".join(str(p) for p in by_prefix) or "none"
            yield src.diag(here, f"{net} is not a client prefix (a prefix of a host behind the trust side)",
                           f"client prefixes: {named}")
    if clients and all(prefix in seen for prefix in by_prefix):
        yield src.diag(path, "every client prefix is translated: no SFW prefix is left",
                       "use use_case: cgnat, or leave a client prefix out of nat_sources")


def one_translator(services: Services, pair: MnhaPair) -> bool:
    """PAIR's client flows are translated by one node at a time: TLB toward the pair's real-service
    (lo0.1, routed to the A node while it is healthy, to the B node once it has failed), SRG0, the JVD's
    A/B prepends. Elsewhere (ECMP or CHASH, a real-service per SRX, SRG1+SRG2 or equal prepends) both
    nodes translate at once."""
    return services.load_balancing == "tlb" and services.tlb_real_service == "pair" \
        and pair.mode == "srg0" and pair.prepend == "a-b"


def shares_pool(topo: Topology, pair: MnhaPair) -> bool:
    """The two nodes of PAIR translate into one source NAT pool, the pair's (the JVD's srx_nat_pool1,
    the same on srx1a and srx1b): services.nat_pool_scope pair, or by default where one node translates
    at a time and the nodes do not set two different pools. Two nodes translating at once into one pool
    could give two clients the same address and port, and their synchronised sessions would clash."""
    if not translates(topo.services.use_case):
        return False
    scope = topo.services.nat_pool_scope
    if scope is not None:
        return scope == "pair"
    pools = {topo.nodes[n].nat_pool for n in pair.nodes if n in topo.nodes} - {None}
    return one_translator(topo.services, pair) and len(pools) <= 1


def check_nat_pool_scope(topo: Topology, src: SourceMap) -> Iterable[Diagnostic]:
    """services.nat_pool_scope: a use case with NAT pools; pair: only pairs whose nodes translate one at
    a time, each with one pool."""
    scope = topo.services.nat_pool_scope
    if scope is not None and not translates(topo.services.use_case):
        yield src.diag(("services", "nat_pool_scope"), f"nat_pool_scope is for use_case cgnat or mixed; this "
                       f"lab's use_case is {topo.services.use_case} (no NAT pools)", "remove nat_pool_scope")
    if scope != "pair" or not translates(topo.services.use_case):
        return
    for index, pair in enumerate(topo.mnha):
        if not one_translator(topo.services, pair):
            yield src.diag(("services", "nat_pool_scope"),
                           f"mnha[{index}] ({' and '.join(pair.nodes)}) cannot share a NAT pool: it is not a pair "
                           "whose A node translates while B waits (both nodes may translate at once, and two clients "
                           "could get the same address and port)",
                           "a shared pool needs load_balancing tlb, tlb_real_service pair, mode srg0 and "
                           "prepend a-b; else set nat_pool_scope: srx")
        pools = [(n, topo.nodes[n].nat_pool) for n in pair.nodes if n in topo.nodes and topo.nodes[n].nat_pool]
        if len(pools) == 2 and pools[0][1] != pools[1][1]:
            yield src.diag(("nodes", pools[1][0], "nat_pool"),
                           f"{pools[1][0]} and {pools[0][0]} share the pool of mnha[{index}] "
                           f"(nat_pool_scope pair) but set {pools[1][1]} and {pools[0][1]}",
                           "set the same pool on both nodes, or on one of them")


def pair_pools(topo: Topology) -> list[MnhaPair]:
    """The MNHA pairs whose nodes share one source NAT pool (`shares_pool`)."""
    return [pair for pair in topo.mnha if shares_pool(topo, pair)]
