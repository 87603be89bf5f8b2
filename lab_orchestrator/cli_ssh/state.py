"""The state a CLI command shows, as plain data: what `gather` reads and the renderers take.

Interface names here are Linux names (`ge-0-0-0`); `alias` carries the vendor name every output
shows. A next hop's `ifname` is a Linux name too; renderers map it through `Instance.aliases`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Link:
    index: int
    name: str
    alias: str
    admin_up: bool
    oper_up: bool
    mtu: int
    mac: str
    kind: str  # veth, loopback, bridge...
    rx_packets: int = 0
    tx_packets: int = 0
    rx_bytes: int = 0
    tx_bytes: int = 0


@dataclass(frozen=True)
class Address:
    ifname: str
    address: str
    prefixlen: int


@dataclass(frozen=True)
class NextHop:
    gateway: str | None
    ifname: str | None
    weight: int = 1


@dataclass(frozen=True)
class KernelRoute:
    table: int
    dst: str  # "198.18.0.0/31"; the default route is "0.0.0.0/0" ("::/0" in IPv6)
    type: str  # unicast | local | blackhole | unreachable | prohibit | broadcast
    proto: str  # kernel | boot | static | bird | ...
    scope: int
    metric: int
    nexthops: tuple[NextHop, ...] = ()
    prefsrc: str | None = None


@dataclass(frozen=True)
class BirdRoute:
    prefix: str
    protocol: str  # BIRD protocol name: fw_srx1, originated, loopback
    source: str  # BGP | static | device | ...
    primary: bool
    since: str  # as BIRD prints it: "09:44:30.264" or "2026-11-29 09:44:30"
    preference: int
    nexthops: tuple[NextHop, ...] = ()
    blackhole: bool = False
    as_path: tuple[int, ...] = ()
    origin: str = ""  # IGP | EGP | Incomplete
    local_pref: int | None = None
    med: int | None = None
    bgp_next_hop: str | None = None


@dataclass(frozen=True)
class BgpProtocol:
    """`show protocols all NAME` of one BIRD BGP protocol."""

    name: str
    state: str  # up | start | down
    since: str
    info: str  # Established | Active | Connect | OpenSent...
    fields: dict[str, str] = field(default_factory=dict)  # "Neighbor address" -> "198.18.0.9"
    imported: int = 0
    filtered: int = 0
    exported: int = 0
    preferred: int = 0
    import_received: int = 0
    import_accepted: int = 0
    export_accepted: int = 0


@dataclass(frozen=True)
class Neighbor:
    """An ARP entry (`show arp`)."""

    address: str
    ifname: str  # Linux name
    mac: str
    state: tuple[str, ...] = ()  # REACHABLE, STALE, PERMANENT...


@dataclass
class Instance:
    """One routing instance (a namespace) of a node as read at one moment."""

    name: str  # "" master
    table: str  # inet.0, TRUST-VR.inet.0
    links: list[Link] = field(default_factory=list)
    addresses: list[Address] = field(default_factory=list)
    routes: list[KernelRoute] = field(default_factory=list)
    bird_routes: list[BirdRoute] | None = None  # None: no BIRD here, or it did not answer
    bgp: list[BgpProtocol] | None = None
    bird_status: list[str] | None = None  # BIRD's `show status` lines
    bird_error: str | None = None  # BIRD runs here but did not answer
    bird_exports: dict[str, list[BirdRoute]] | None = None  # BGP protocol -> what BIRD exports to it
    neighbors: list[Neighbor] | None = None  # ARP entries
    # IPv6 (a dual-stack lab): read beside the IPv4 state, kept apart so that every IPv4 view stays as it is
    addresses6: list[Address] = field(default_factory=list)
    routes6: list[KernelRoute] = field(default_factory=list)
    bird_routes6: list[BirdRoute] | None = None

    @property
    def aliases(self) -> dict[str, str]:
        return {link.name: link.alias for link in self.links}


@dataclass(frozen=True)
class FlowSession:
    """One conntrack entry, per direction (`show security flow session`)."""

    id: int
    protocol: str
    state: str
    timeout: int
    source: str
    destination: str
    source_port: int
    destination_port: int
    reply_source: str
    reply_destination: str
    reply_source_port: int
    reply_destination_port: int
    packets_in: int
    bytes_in: int
    packets_out: int
    bytes_out: int
    assured: bool
