"""The ESP tunnels of one gateway or client: which SA protects which inner addresses.

Pure: `encapsulate` takes an inner IPv4 packet (read from the TUN device) and gives the UDP datagram
and its destination; `decapsulate` takes a datagram received on UDP 4500 and gives the inner packet
to write to the TUN device. Inbound packets are matched by SPI, then their inner source address must
lie in the tunnel's remote traffic selectors (RFC 4301 5.2: the inbound policy check) — a peer
cannot inject packets for addresses it was not given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Network

from .sa import NEXT_IPV4, EspDrop, EspSa


@dataclass
class Tunnel:
    name: str
    peer: tuple[str, int]  # where ESP-in-UDP goes (the peer's IKE address and port)
    outbound: EspSa
    inbound: EspSa
    remote: tuple[IPv4Network, ...]  # inner addresses behind the peer: routed to it, accepted from it
    local: tuple[IPv4Network, ...] = (IPv4Network("0.0.0.0/0"),)  # inner addresses on our side

    def status(self) -> dict[str, object]:
        return {"name": self.name, "peer": f"{self.peer[0]}:{self.peer[1]}",
                "spi_in": self.inbound.spi.hex(), "spi_out": self.outbound.spi.hex(),
                "remote": [str(n) for n in self.remote], "local": [str(n) for n in self.local],
                "inbound": self.inbound.counters.as_dict(), "outbound": self.outbound.counters.as_dict()}


@dataclass
class TableCounters:
    no_tunnel: int = 0  # from the TUN device, no tunnel routes the destination
    unknown_spi: int = 0
    policy_drops: int = 0  # decrypted, but the inner source is not the peer's
    not_ipv4: int = 0
    auth_failures: int = 0
    replay_drops: int = 0
    malformed: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


@dataclass
class TunnelTable:
    """by_source=False (a gateway): an outbound packet goes to the tunnel whose remote selectors hold
    its destination. by_source=True (a host with several clients' virtual addresses): to the tunnel
    whose local selectors hold its source address."""

    by_source: bool = False
    by_spi: dict[bytes, Tunnel] = field(default_factory=dict)
    counters: TableCounters = field(default_factory=TableCounters)

    def add(self, tunnel: Tunnel) -> None:
        self.by_spi[tunnel.inbound.spi] = tunnel

    def remove(self, spi_in: bytes) -> Tunnel | None:
        return self.by_spi.pop(spi_in, None)

    def __len__(self) -> int:
        return len(self.by_spi)

    def route(self, address: IPv4Address) -> Tunnel | None:
        """The tunnel whose selectors hold the address (see by_source), most specific first; between
        equally specific ones the one added last (a rekeyed CHILD_SA takes over from its predecessor)."""
        best, best_len = None, -1
        for tunnel in self.by_spi.values():
            for net in tunnel.local if self.by_source else tunnel.remote:
                if net.prefixlen >= best_len and address in net:
                    best, best_len = tunnel, net.prefixlen
        return best

    def encapsulate(self, packet: bytes) -> tuple[tuple[str, int], bytes] | None:
        if len(packet) < 20 or packet[0] >> 4 != 4:
            self.counters.not_ipv4 += 1
            return None
        tunnel = self.route(IPv4Address(packet[12:16] if self.by_source else packet[16:20]))
        if tunnel is None:
            self.counters.no_tunnel += 1
            return None
        try:
            return tunnel.peer, tunnel.outbound.seal(packet, NEXT_IPV4)
        except EspDrop:
            return None

    def decapsulate(self, datagram: bytes, source: tuple[str, int] | None = None) -> bytes | None:
        tunnel = self.by_spi.get(datagram[:4])
        if tunnel is None:
            self.counters.unknown_spi += 1
            return None
        try:
            next_header, inner = tunnel.inbound.open(datagram)
        except EspDrop as drop:
            name = {"auth": "auth_failures", "replay": "replay_drops"}.get(drop.cause, "malformed")
            setattr(self.counters, name, getattr(self.counters, name) + 1)
            return None
        if next_header != NEXT_IPV4 or len(inner) < 20 or inner[0] >> 4 != 4:
            self.counters.not_ipv4 += 1
            return None
        src = IPv4Address(inner[12:16])
        if not any(src in net for net in tunnel.remote):
            self.counters.policy_drops += 1
            return None
        if source is not None and source != tunnel.peer:
            tunnel.peer = source  # RFC 3948: follow the peer's NAT mapping once a packet verified
        return inner
