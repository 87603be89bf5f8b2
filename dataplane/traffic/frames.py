"""Flows, frame sizes (IMIX) and pre-built frames: everything the sender writes before sending.

See the package docstring for the frame sizes, the IMIX cycle, the 18-byte payload header and the
IPv6 frames (a 40-byte IPv6 header, the same frame sizes with 20 fewer payload bytes)."""

from __future__ import annotations

import ipaddress
import random
import socket
import struct
from collections.abc import Sequence
from dataclasses import dataclass

MAGIC = 0x5447
HEADER = struct.Struct("!HIQI")  # magic, flow id, sequence, send time (low 32 bits of ns)
PATCH = struct.Struct("!QI")  # what changes per packet: sequence, send time
PATCH_OFFSET = 6  # of PATCH inside the header
HEADER_LEN = HEADER.size  # 18
FCS_LEN = 4
ETH_LEN, IP_LEN, UDP_LEN = 14, 20, 8
IP6_LEN = 40
PAYLOAD_OFFSET = ETH_LEN + IP_LEN + UDP_LEN  # 42: the header's offset in a pre-built frame
PAYLOAD_OFFSET6 = ETH_LEN + IP6_LEN + UDP_LEN  # 62: the same in an IPv6 frame
MIN_SIZE = PAYLOAD_OFFSET + HEADER_LEN + FCS_LEN  # 64
MIN_SIZE6 = PAYLOAD_OFFSET6 + HEADER_LEN + FCS_LEN  # 84: the smallest IPv6 frame that holds the header
UDP6_CHECKSUM = ETH_LEN + IP6_LEN + 6  # 60: the UDP checksum's offset in an IPv6 frame
UDP4_CHECKSUM = ETH_LEN + 20 + 6  # 40: the same in an IPv4 frame (no IP options)
MASK32 = 0xFFFFFFFF
IMIX: tuple[tuple[int, int], ...] = ((64, 8), (127, 36), (255, 11), (511, 4), (1024, 2), (1518, 39))
CYCLE_SEED = 0x1C5A

ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
ETH_P_IPV6 = 0x86DD
ETH_P_ARP = 0x0806
SOL_PACKET = 263
PACKET_QDISC_BYPASS = 20
PACKET_IGNORE_OUTGOING = 23
SO_RCVBUFFORCE = 33
SIOCGIFADDR = 0x8915
RCVBUF = 64 << 20



# --------------------------------------------------------------------------- flows and sizes
@dataclass(frozen=True)
class Flow:
    """One UDP 5-tuple (protocol UDP) and the id its packets carry."""

    flow_id: int
    src: str
    dst: str
    sport: int
    dport: int

    @property
    def family(self) -> int:
        """4 or 6: the IP version of the flow's addresses."""
        return 6 if ":" in self.src else 4


def flows_family(flows: Sequence[Flow]) -> int:
    """The one IP version of FLOWS (a sender sends one family; a mix is an error)."""
    families = {f.family for f in flows}
    if len(families) != 1:
        raise ValueError("flows of IPv4 and IPv6 in one sender: give each family its own")
    return families.pop()


def payload_offset(family: int) -> int:
    """Where the payload header starts in a pre-built frame of FAMILY."""
    return PAYLOAD_OFFSET6 if family == 6 else PAYLOAD_OFFSET


def family_sizes(sizes: Sequence[tuple[int, int]], family: int) -> list[tuple[int, int]]:
    """SIZES for FAMILY. IPv6 keeps every frame size and carries 20 fewer payload bytes in it (the
    IPv6 header is 20 bytes longer), as a tester does; a size too small for Ethernet + IPv6 + UDP +
    the 18-byte header (64: 66 bytes before any payload) becomes MIN_SIZE6 (84), same weight."""
    if family != 6:
        return list(sizes)
    return [(max(size, MIN_SIZE6), weight) for size, weight in sizes]


def make_flows(count: int, sources: str = "100.64.0.0/16", dst: str | Sequence[str] = "203.0.113.10",
               sport: int = 40000, dport: int = 7000, vary_ports: bool = False, first_id: int = 0) -> list[Flow]:
    """COUNT flows from distinct addresses of SOURCES (its host addresses in order) to DST.

    SOURCES and DST are IPv4 or IPv6, one family. DST may be several addresses (used
    round-robin). With VARY_PORTS the source port is SPORT + i as well (wrapping inside
    1024..65535)."""
    net = ipaddress.ip_network(sources, strict=False)
    hosts = net.hosts() if net.num_addresses > 2 else iter(net)
    dsts = [dst] if isinstance(dst, str) else list(dst)
    if any(ipaddress.ip_address(d).version != net.version for d in dsts):
        raise ValueError(f"sources {sources} and destination {', '.join(dsts)} are not of one IP version")
    if count > net.num_addresses:
        raise ValueError(f"{count} flows need {count} source addresses; {sources} has {net.num_addresses}")
    flows = []
    for i in range(count):
        port = sport + i if vary_ports else sport
        if port > 65535:
            port = 1024 + (port - 1024) % (65536 - 1024)
        flows.append(Flow(first_id + i, str(next(hosts)), dsts[i % len(dsts)], port, dport))
    return flows


def reverse_flows(flows: Sequence[Flow], id_offset: int = 0) -> list[Flow]:
    """The same 5-tuples the other way (server -> client), flow ids shifted by ID_OFFSET."""
    return [Flow(f.flow_id + id_offset, f.dst, f.src, f.dport, f.sport) for f in flows]


def parse_sizes(spec: str | int | Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """'imix' | '700' | '64,1518' (equal weights) | '64:8,1518:39' -> [(size, weight), ...]."""
    if isinstance(spec, int):
        pairs = [(spec, 1)]
    elif not isinstance(spec, str):
        pairs = [(int(s), int(w)) for s, w in spec]
    elif spec.strip().lower() == "imix":
        pairs = list(IMIX)
    else:
        pairs = []
        for item in spec.split(","):
            size_text, _, weight_text = item.strip().partition(":")
            pairs.append((int(size_text), int(weight_text or 1)))
    for size, weight in pairs:
        if size < MIN_SIZE:
            raise ValueError(f"frame size {size} is below {MIN_SIZE} (the header needs 18 bytes of UDP payload)")
        if weight < 1:
            raise ValueError(f"weight of size {size} must be >= 1, not {weight}")
    if not pairs:
        raise ValueError("no frame size given")
    return pairs


def size_cycle(sizes: Sequence[tuple[int, int]], seed: int = CYCLE_SEED) -> list[int]:
    """Each size repeated by its weight, shuffled deterministically (fixed seed)."""
    cycle = [size for size, weight in sizes for _ in range(weight)]
    random.Random(seed).shuffle(cycle)
    return cycle


def average_size(sizes: Sequence[tuple[int, int]]) -> float:
    return sum(s * w for s, w in sizes) / sum(w for _, w in sizes)


def flow_packet_sizes(cycle: Sequence[int], index: int, packets: int) -> int:
    """Bytes (sizes with FCS) of the first PACKETS packets of the flow at position INDEX."""
    length = len(cycle)
    whole, rest = divmod(packets, length)
    total = whole * sum(cycle)
    return total + sum(cycle[(index + n) % length] for n in range(rest))


# --------------------------------------------------------------------------- frames
def build_frame(flow: Flow, size: int, src_mac: str, dst_mac: str, seq: int = 0, timestamp: int = 0,
                host_stack: bool = False) -> bytearray:
    """The Ether/IP/UDP (or Ether/IPv6/UDP) frame of FLOW, SIZE bytes with FCS (SIZE - 4 built),
    sequence SEQ and send time TIMESTAMP (low 32 bits) in its header. IPv4: UDP checksum 0 (none)
    and DF clear, unless HOST_STACK: then both as a Linux host's UDP socket sends them (a NAT64
    translator drops IPv4 UDP without a checksum, RFC 7915 4.5, and splits a packet without DF
    into IPv6 fragments of 1280 bytes). IPv6 must carry a checksum (RFC 8200). A checksum is
    computed over this sequence and time."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.inet6 import IPv6
    from scapy.layers.l2 import Ether
    from scapy.packet import Packet, Raw

    v6 = flow.family == 6
    offset = payload_offset(flow.family)
    if size < offset + HEADER_LEN + FCS_LEN:
        raise ValueError(f"frame size {size} is below {offset + HEADER_LEN + FCS_LEN}" + (" for IPv6" if v6 else ""))
    payload = HEADER.pack(MAGIC, flow.flow_id, seq, timestamp & MASK32).ljust(size - FCS_LEN - offset, b"\0")
    network: Packet = (IPv6(src=flow.src, dst=flow.dst, hlim=64, nh=17, fl=0) if v6
                       else IP(src=flow.src, dst=flow.dst, ttl=64, id=0, proto=17, flags="DF" if host_stack else 0))
    packet = (Ether(src=src_mac, dst=dst_mac, type=ETH_P_IPV6 if v6 else ETH_P_IP)
              / network
              / UDP(sport=flow.sport, dport=flow.dport, chksum=None if v6 or host_stack else 0)
              / Raw(payload))
    frame = bytearray(bytes(packet))
    if len(frame) != size - FCS_LEN:
        raise AssertionError(f"built {len(frame)} bytes for size {size}")
    return frame


def ipv4_checksum(header: bytes | bytearray) -> int:
    """The Internet checksum of an IPv4 header whose checksum field is zero."""
    total: int = sum(struct.unpack(f"!{len(header) // 2}H", header))
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return ~total & 0xFFFF


def fold(total: int) -> int:
    """A one's complement sum folded into 16 bits."""
    while total > 0xFFFF:
        total = (total & 0xFFFF) + (total >> 16)
    return total


def udp6_checksum(frame: bytes | bytearray) -> int:
    """The UDP checksum of an Ether/IPv6/UDP FRAME (no extension headers), its checksum field taken
    as zero; a result of 0 is sent as 0xFFFF."""
    length = len(frame) - ETH_LEN - IP6_LEN
    body = bytes(frame[ETH_LEN + IP6_LEN:])
    body = body[:6] + b"\0\0" + body[8:] + b"\0" * (length & 1)
    pseudo = bytes(frame[ETH_LEN + 8:ETH_LEN + IP6_LEN]) + struct.pack("!IxxxB", length, 17)
    data = pseudo + body
    value = ~fold(sum(struct.unpack(f"!{len(data) // 2}H", data))) & 0xFFFF
    return value or 0xFFFF


def udp4_checksum(frame: bytes | bytearray) -> int:
    """The UDP checksum of an Ether/IPv4/UDP FRAME (no IP options), its checksum field taken as
    zero; a result of 0 is sent as 0xFFFF."""
    length = len(frame) - ETH_LEN - IP_LEN
    body = bytes(frame[ETH_LEN + IP_LEN:])
    body = body[:6] + b"\0\0" + body[8:] + b"\0" * (length & 1)
    pseudo = bytes(frame[ETH_LEN + 12:ETH_LEN + 20]) + struct.pack("!xBH", 17, length)
    data = pseudo + body
    value = ~fold(sum(struct.unpack(f"!{len(data) // 2}H", data))) & 0xFFFF
    return value or 0xFFFF


def patch_udp_checksum(frame: bytearray, at: int, seq: int, timestamp32: int, where: int = UDP6_CHECKSUM) -> None:
    """Bring the UDP checksum (at WHERE: UDP6_CHECKSUM, UDP4_CHECKSUM) of the frame at AT in FRAME,
    pre-built with sequence 0 and time 0 (`build_frame`), up to date with SEQ and TIMESTAMP32
    written in: the words added to the sum are those of the two fields (RFC 1624's incremental
    update; what the sender does per packet)."""
    base = ~(frame[at + where] << 8 | frame[at + where + 1]) & 0xFFFF
    total = (base + (seq >> 48) + (seq >> 32 & 0xFFFF) + (seq >> 16 & 0xFFFF) + (seq & 0xFFFF)
             + (timestamp32 >> 16) + (timestamp32 & 0xFFFF))
    total = (total & 0xFFFF) + (total >> 16)
    total = (total & 0xFFFF) + (total >> 16)
    value = ~total & 0xFFFF
    frame[at + where] = (value or 0xFFFF) >> 8
    frame[at + where + 1] = (value or 0xFFFF) & 0xFF


def derive_frame(template: bytearray, flow: Flow) -> bytearray:
    """TEMPLATE (a `build_frame` of any flow of the same family, same size and MACs) rewritten for
    FLOW: addresses, ports, flow id and the IP header checksum (and the UDP checksum where the
    template has one: IPv6, or IPv4 built with one).
    Byte-identical to `build_frame(flow, ...)` and ~100 times faster than scapy, so large flow
    counts start at once."""
    frame = bytearray(template)
    if flow.family == 6:
        frame[22:38] = socket.inet_pton(socket.AF_INET6, flow.src)
        frame[38:54] = socket.inet_pton(socket.AF_INET6, flow.dst)
        struct.pack_into("!HH", frame, ETH_LEN + IP6_LEN, flow.sport, flow.dport)
        struct.pack_into("!I", frame, PAYLOAD_OFFSET6 + 2, flow.flow_id)
        struct.pack_into("!H", frame, UDP6_CHECKSUM, udp6_checksum(frame))
        return frame
    frame[26:30] = socket.inet_aton(flow.src)
    frame[30:34] = socket.inet_aton(flow.dst)
    frame[24:26] = b"\0\0"
    struct.pack_into("!H", frame, 24, ipv4_checksum(frame[ETH_LEN:ETH_LEN + IP_LEN]))
    struct.pack_into("!HH", frame, 34, flow.sport, flow.dport)
    struct.pack_into("!I", frame, PAYLOAD_OFFSET + 2, flow.flow_id)
    if frame[UDP4_CHECKSUM:UDP4_CHECKSUM + 2] != b"\0\0":  # a checksum is never 0 (0xFFFF instead)
        struct.pack_into("!H", frame, UDP4_CHECKSUM, udp4_checksum(frame))
    return frame


def patch(frame: bytearray, seq: int, timestamp_ns: int) -> None:
    """Write SEQ and the send time into a pre-built frame (what the sender does per packet; an
    IPv6 frame's UDP checksum follows them)."""
    if frame[12:14] == b"\x86\xdd":
        PATCH.pack_into(frame, PAYLOAD_OFFSET6 + PATCH_OFFSET, seq, timestamp_ns & MASK32)
        frame[UDP6_CHECKSUM:UDP6_CHECKSUM + 2] = b"\0\0"
        struct.pack_into("!H", frame, UDP6_CHECKSUM, udp6_checksum(frame))
        return
    PATCH.pack_into(frame, PAYLOAD_OFFSET + PATCH_OFFSET, seq, timestamp_ns & MASK32)
    if frame[UDP4_CHECKSUM:UDP4_CHECKSUM + 2] != b"\0\0":
        struct.pack_into("!H", frame, UDP4_CHECKSUM, udp4_checksum(frame))


class FrameSet:
    """Pre-built frames: for flow position i, ``cycles[i][n % L]`` is its n-th packet's frame.

    ``cycles[i]`` is None while flow i is withheld (its destination not known yet, see `rebind`)."""

    def __init__(self, flows: Sequence[Flow], sizes: Sequence[tuple[int, int]], src_mac: str, dst_mac: str,
                 seed: int = CYCLE_SEED, host_stack: bool = False):
        self.flows = list(flows)
        self.family = flows_family(self.flows)
        self.payload_offset = payload_offset(self.family)
        # where the sender brings the UDP checksum up to date per packet (None: IPv4 without one)
        self.checksum_at: int | None = UDP6_CHECKSUM if self.family == 6 else UDP4_CHECKSUM if host_stack else None
        sizes = family_sizes(sizes, self.family)
        self.sizes = sizes
        self.cycle = size_cycle(sizes, seed)
        distinct = sorted({s for s, _ in sizes})
        self.cycles: list[list[bytearray] | None] = []
        # scapy builds one frame per size; every other flow's frame is that one with its own
        # addresses, ports, flow id and IP checksum written in (identical bytes, see derive_frame)
        self.templates = {s: build_frame(self.flows[0], s, src_mac, dst_mac, host_stack=host_stack)
                          for s in distinct}
        for i, flow in enumerate(self.flows):
            self.cycles.append(self._cycle(i, flow, derive=bool(i)))

    def _cycle(self, index: int, flow: Flow, derive: bool = True) -> list[bytearray]:
        length = len(self.cycle)
        by_size = {s: derive_frame(t, flow) if derive else t for s, t in self.templates.items()}
        return [by_size[self.cycle[(n + index) % length]] for n in range(length)]

    def frame(self, index: int, seq: int) -> bytearray:
        cycle = self.cycles[index]
        if cycle is None:
            raise LookupError(f"flow {self.flows[index].flow_id} is withheld")
        return cycle[seq % len(self.cycle)]

    def withhold(self, index: int) -> None:
        """Flow INDEX sends nothing (its slots pass, its sequence does not advance) until `rebind`."""
        self.cycles[index] = None

    def rebind(self, index: int, dst: str, dport: int) -> bool:
        """Flow INDEX's packets go to DST:DPORT from now on; False if that is where they went already.

        The new frames are built aside and swapped in with one list assignment, so a sender
        thread never sends a half-rewritten frame."""
        flow = self.flows[index]
        if self.cycles[index] is not None and (flow.dst, flow.dport) == (dst, dport):
            return False
        flow = Flow(flow.flow_id, flow.src, dst, flow.sport, dport)
        self.flows[index] = flow
        self.cycles[index] = self._cycle(index, flow)
        return True
