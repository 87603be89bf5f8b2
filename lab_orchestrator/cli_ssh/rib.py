"""A node's routing tables as a router shows them: the kernel's routes, explained by BIRD.

Pure. Each kernel route becomes an entry: connected (`Direct`), own address (`Local`), static
(planned routes) or, for routes BIRD installed, one entry per route BIRD holds for that prefix (the
primary one active, with every next hop the kernel forwards on; the others inactive with their own
next hop). BIRD routes the kernel does not have (another path to a prefix) are listed too.

IPv6 (a dual-stack lab) is built the same way from the IPv6 routes (`build(..., family=6)`), into
tables named as Junos names them (`inet6.0`, `TRUST-VR.inet6.0`); link-local and multicast routes,
which every IPv6 interface has, are left out.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from ipaddress import IPv4Network, IPv6Network, ip_address, ip_network

from ..plan.sshconfig import Node
from .state import Address, BirdRoute, Instance, KernelRoute, NextHop

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
    def network(self) -> IPv4Network | IPv6Network:
        return ip_network(self.prefix)


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


def sort_key(prefix: str) -> tuple[int, int, int]:
    """IPv4 before IPv6, then by address and length."""
    net = ip_network(prefix, strict=False)
    return net.version, int(net.network_address), net.prefixlen


def address_key(address: str) -> tuple[int, int]:
    """A peer's address as a sort key (IPv4 before IPv6)."""
    value = ip_address(address)
    return value.version, int(value)


def family_table(name: str, family: int) -> str:
    """The name of table NAME ("inet.0", "TRUST-VR.inet.0") for FAMILY: Junos's "inet6.0" for IPv6."""
    return name[:-len("inet.0")] + "inet6.0" if family == 6 and name.endswith("inet.0") else name


def hidden6(prefix: str) -> bool:
    """An IPv6 route no router lists among its routes: link-local and multicast ones."""
    net = ip_network(prefix, strict=False)
    return net.version == 6 and (net.is_link_local or net.is_multicast or net.network_address.is_loopback)


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


def build(node: Node, inst: Instance, now: float, ages: dict[str, float], lab_created: float,
          family: int = 4) -> list[Table]:
    """Every table of one routing instance: its main table first, then the selector tables; FAMILY 6:
    the IPv6 ones (only those with a route: an IPv4-only lab has none)."""
    spec = node.instance(inst.name)
    extra = dict(spec.tables) if spec is not None else {}
    main = Table(family_table(inst.table, family), inst.name, MAIN)
    tables = {MAIN: main}
    for number, name in sorted(extra.items(), key=lambda kv: int(kv[0])):
        tables[int(number)] = Table(family_table(name, family), inst.name, int(number))
    kernel = inst.routes if family == 4 else [r for r in inst.routes6 if not hidden6(r.dst)]
    addresses = inst.addresses if family == 4 else inst.addresses6
    static_age = max(0.0, now - lab_created) if lab_created else None
    bird: dict[str, list[BirdRoute]] = {}
    for learned in (inst.bird_routes if family == 4 else inst.bird_routes6) or []:
        if learned.source in ("BGP", "static"):
            bird.setdefault(learned.prefix, []).append(learned)
    kernel_prefixes = set()
    for route in kernel:
        if route.table == LOCAL:
            entry = _local(route, inst, ages, addresses)
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
            source = _source(route, addresses)
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
    if family == 6:  # IPv6 lists a loopback's /128 in both the local and the main table: one Direct entry
        seen: set[str] = set()
        kept = []
        for entry in main.entries:
            if entry.protocol == "Direct":
                if entry.prefix in seen:
                    continue
                seen.add(entry.prefix)
            kept.append(entry)
        main.entries = kept
    for table in tables.values():
        table.entries.sort(key=lambda e: (sort_key(e.prefix), not e.active))
    return list(tables.values()) if family == 4 else [t for t in tables.values() if t.entries]


def _source(route: KernelRoute, addresses: list[Address]) -> Address | None:
    """The address a connected route comes from: its preferred source (IPv4), else the address of the
    route's interface within its prefix (IPv6 connected routes carry no source)."""
    if route.prefsrc:
        return next((a for a in addresses if a.address == route.prefsrc), None)
    dev = route.nexthops[0].ifname if route.nexthops else None
    net = ip_network(route.dst, strict=False)
    return next((a for a in addresses if a.ifname == dev and ip_address(a.address) in net), None)


def _local(route: KernelRoute, inst: Instance, ages: dict[str, float], addresses: list[Address]) -> Entry | None:
    """The local table's own addresses: a loopback address is a Direct /32 (/128) on lo0, any other Local."""
    if route.type != "local":
        return None
    address = route.dst.split("/")[0]
    if ip_address(address).is_loopback:
        return None
    hop = route.nexthops[0] if route.nexthops else NextHop(None, None)
    # the address's own interface: an IPv6 local route may name lo for an address of another interface
    ifname = next((a.ifname for a in addresses if a.address == address), hop.ifname)
    age = ages.get(f"{inst.name}/{address}")
    host = f"{address}/{ip_address(address).max_prefixlen}"
    if ifname == "lo":
        return Entry(host, "Direct", True, age, [Hop(None, "lo")])
    return Entry(host, "Local", True, age, [Hop(None, ifname, False)])


def lookup(entries: list[Entry], target: str, mode: str = "best") -> list[Entry]:
    """Entries for TARGET: `best` = the longest prefix containing it, `exact`, or `longer` (within)."""
    net = ip_network(target, strict=False)
    entries = [e for e in entries if e.network.version == net.version]  # an IPv6 target in an IPv4 table
    if mode == "exact":
        return [e for e in entries if e.network == net]
    if mode == "longer":
        return [e for e in entries if e.network.subnet_of(net)]  # type: ignore[arg-type]
    covering = [e for e in entries if net.subnet_of(e.network)]  # type: ignore[arg-type]
    if not covering:
        return []
    longest = max(e.network.prefixlen for e in covering)
    return [e for e in covering if e.network.prefixlen == longest]
