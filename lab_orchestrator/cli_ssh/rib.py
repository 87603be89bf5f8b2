"""A node's routing tables as a router shows them: the kernel's routes, explained by BIRD.

Pure. Each kernel route becomes an entry: connected (`Direct`), own address (`Local`), static
(planned routes) or, for routes BIRD installed, one entry per route BIRD holds for that prefix (the
primary one active, with every next hop the kernel forwards on; the others inactive with their own
next hop). BIRD routes the kernel does not have (another path to a prefix) are listed too.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network

from ..plan.sshconfig import Node
from .state import BirdRoute, Instance, KernelRoute, NextHop

MAIN, LOCAL = 254, 255
JUNOS_PREFERENCE = {"BGP": 170, "Direct": 0, "Local": 0, "Static": 5}


@dataclass
class Hop:
    gateway: str | None
    ifname: str | None  # Linux name; renderers show the alias
    selected: bool = True


@dataclass
class Entry:
    prefix: str
    protocol: str  # BGP | Direct | Local | Static
    active: bool
    age: float | None  # seconds, None when unknown
    hops: list[Hop] = field(default_factory=list)
    discard: bool = False  # blackhole
    reject: bool = False  # unreachable / prohibit
    as_path: tuple[int, ...] = ()
    origin: str = ""
    local_pref: int | None = None
    med: int | None = None
    peer_protocol: str = ""  # the BIRD protocol it came from (fw_srx1)
    bird_preference: int = 0

    @property
    def network(self) -> IPv4Network:
        return IPv4Network(self.prefix)


@dataclass
class Table:
    name: str
    instance: str  # "" master
    number: int  # kernel table
    entries: list[Entry] = field(default_factory=list)

    @property
    def destinations(self) -> int:
        return len({e.prefix for e in self.entries})

    @property
    def active(self) -> int:
        return sum(1 for e in self.entries if e.active)


def sort_key(prefix: str) -> tuple[int, int]:
    net = IPv4Network(prefix)
    return int(net.network_address), net.prefixlen


def parse_since(since: str, now: float) -> float | None:
    """Age in seconds of a BIRD timestamp ("09:44:30.264", "2026-11-29 09:44:30", "2026-11-29")."""
    text = since.strip()
    current = datetime.datetime.fromtimestamp(now)
    try:
        if len(text) >= 10 and text[4] == "-":
            stamp = datetime.datetime.fromisoformat(text.split(".")[0])
        else:
            clock = datetime.time.fromisoformat(text if "." not in text else text.split(".")[0])
            stamp = datetime.datetime.combine(current.date(), clock)
            if stamp > current + datetime.timedelta(seconds=60):
                stamp -= datetime.timedelta(days=1)
    except ValueError:
        return None
    return max(0.0, (current - stamp).total_seconds())


def _hops(hops: tuple[NextHop, ...], selected: bool = True) -> list[Hop]:
    return [Hop(h.gateway, h.ifname, selected) for h in hops]


def _bird_entry(route: BirdRoute, now: float, kernel: KernelRoute | None) -> Entry:
    source = "BGP" if route.source == "BGP" else "Static"
    hops = _hops(kernel.nexthops) if (kernel is not None and route.primary) else _hops(route.nexthops)
    return Entry(
        prefix=route.prefix, protocol=source, active=route.primary,
        age=parse_since(route.since, now), hops=hops, discard=route.blackhole,
        as_path=route.as_path, origin=route.origin, local_pref=route.local_pref, med=route.med,
        peer_protocol=route.protocol, bird_preference=route.preference,
    )


def build(node: Node, inst: Instance, now: float, ages: dict[str, float], lab_created: float) -> list[Table]:
    """Every table of one routing instance: its main table first, then the selector tables."""
    spec = node.instance(inst.name)
    extra = dict(spec.tables) if spec is not None else {}
    main = Table(inst.table, inst.name, MAIN)
    tables = {MAIN: main}
    for number, name in sorted(extra.items(), key=lambda kv: int(kv[0])):
        tables[int(number)] = Table(name, inst.name, int(number))
    static_age = max(0.0, now - lab_created) if lab_created else None
    bird: dict[str, list[BirdRoute]] = {}
    for learned in inst.bird_routes or []:
        if learned.source in ("BGP", "static"):
            bird.setdefault(learned.prefix, []).append(learned)
    kernel_prefixes = set()
    for route in inst.routes:
        if route.table == LOCAL:
            entry = _local(route, inst, ages)
            if entry is not None:
                main.entries.append(entry)
            continue
        table = tables.get(route.table)
        if table is None or route.type in ("broadcast", "local"):
            continue
        if route.proto == "bird" and route.table == MAIN and route.dst in bird:
            kernel_prefixes.add(route.dst)
            candidates = sorted(bird[route.dst], key=lambda r: not r.primary)
            for candidate in candidates:
                table.entries.append(_bird_entry(candidate, now, route))
            continue
        if route.proto == "kernel":
            source = next((a for a in inst.addresses if route.prefsrc and a.address == route.prefsrc), None)
            age = ages.get(f"{inst.name}/{source.address}") if source else None
            table.entries.append(Entry(route.dst, "Direct", True, age, _hops(route.nexthops)))
            continue
        protocol = "BGP" if route.proto == "bird" else "Static"
        table.entries.append(Entry(route.dst, protocol, True, static_age, _hops(route.nexthops),
                                   discard=route.type == "blackhole",
                                   reject=route.type in ("unreachable", "prohibit")))
    for prefix, routes in bird.items():  # in BIRD, not in the kernel (not exported, or the kernel refused)
        if prefix not in kernel_prefixes:
            for candidate in sorted(routes, key=lambda r: not r.primary):
                main.entries.append(_bird_entry(candidate, now, None))
    for table in tables.values():
        table.entries.sort(key=lambda e: (sort_key(e.prefix), not e.active))
    return list(tables.values())


def _local(route: KernelRoute, inst: Instance, ages: dict[str, float]) -> Entry | None:
    """The local table's own addresses: a loopback address is a Direct /32 on lo0, any other Local."""
    if route.type != "local":
        return None
    address = route.dst.split("/")[0]
    if IPv4Address(address).is_loopback:
        return None
    hop = route.nexthops[0] if route.nexthops else NextHop(None, None)
    age = ages.get(f"{inst.name}/{address}")
    if hop.ifname == "lo":
        return Entry(f"{address}/32", "Direct", True, age, [Hop(None, "lo")])
    return Entry(f"{address}/32", "Local", True, age, [Hop(None, hop.ifname, False)])


def lookup(entries: list[Entry], target: str, mode: str = "best") -> list[Entry]:
    """Entries for TARGET: `best` = the longest prefix containing it, `exact`, or `longer` (within)."""
    net = IPv4Network(target if "/" in target else f"{target}/32", strict=False)
    if mode == "exact":
        return [e for e in entries if e.network == net]
    if mode == "longer":
        return [e for e in entries if e.network.subnet_of(net)]
    covering = [e for e in entries if net.subnet_of(e.network)]
    if not covering:
        return []
    longest = max(e.network.prefixlen for e in covering)
    return [e for e in covering if e.network.prefixlen == longest]
