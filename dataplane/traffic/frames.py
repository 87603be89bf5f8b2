"""Flows, frame sizes (IMIX) and pre-built frames: everything the sender writes before sending.

See the package docstring for the frame sizes, the IMIX cycle and the 18-byte payload header."""

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
PAYLOAD_OFFSET = ETH_LEN + IP_LEN + UDP_LEN  # 42: the header's offset in a pre-built frame
MIN_SIZE = PAYLOAD_OFFSET + HEADER_LEN + FCS_LEN  # 64
MASK32 = 0xFFFFFFFF
IMIX: tuple[tuple[int, int], ...] = ((64, 8), (127, 36), (255, 11), (511, 4), (1024, 2), (1518, 39))
CYCLE_SEED = 0x1C5A

ETH_P_ALL = 0x0003
ETH_P_IP = 0x0800
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


def make_flows(count: int, sources: str = "100.64.0.0/16", dst: str | Sequence[str] = "203.0.113.10",
               sport: int = 40000, dport: int = 7000, vary_ports: bool = False, first_id: int = 0) -> list[Flow]:
    """COUNT flows from distinct addresses of SOURCES (its host addresses in order) to DST.

    DST may be several addresses (used round-robin). With VARY_PORTS the source port is
    SPORT + i as well (wrapping inside 1024..65535)."""
    net = ipaddress.IPv4Network(sources, strict=False)
    hosts = net.hosts() if net.num_addresses > 2 else iter(net)
    dsts = [dst] if isinstance(dst, str) else list(dst)
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
def build_frame(flow: Flow, size: int, src_mac: str, dst_mac: str) -> bytearray:
    """The Ether/IP/UDP frame of FLOW, SIZE bytes with FCS (SIZE - 4 built), sequence 0."""
    from scapy.layers.inet import IP, UDP
    from scapy.layers.l2 import Ether
    from scapy.packet import Raw

    if size < MIN_SIZE:
        raise ValueError(f"frame size {size} is below {MIN_SIZE}")
    payload = HEADER.pack(MAGIC, flow.flow_id, 0, 0).ljust(size - FCS_LEN - PAYLOAD_OFFSET, b"\0")
    packet = (Ether(src=src_mac, dst=dst_mac, type=ETH_P_IP)
              / IP(src=flow.src, dst=flow.dst, ttl=64, id=0, proto=17)
              / UDP(sport=flow.sport, dport=flow.dport, chksum=0)
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


def derive_frame(template: bytearray, flow: Flow) -> bytearray:
    """TEMPLATE (a `build_frame` of any flow, same size and MACs) rewritten for FLOW: addresses,
    ports, flow id and the IP header checksum. Byte-identical to `build_frame(flow, ...)` and
    ~100 times faster than scapy, so large flow counts start at once."""
    frame = bytearray(template)
    frame[26:30] = socket.inet_aton(flow.src)
    frame[30:34] = socket.inet_aton(flow.dst)
    frame[24:26] = b"\0\0"
    struct.pack_into("!H", frame, 24, ipv4_checksum(frame[ETH_LEN:ETH_LEN + IP_LEN]))
    struct.pack_into("!HH", frame, 34, flow.sport, flow.dport)
    struct.pack_into("!I", frame, PAYLOAD_OFFSET + 2, flow.flow_id)
    return frame


def patch(frame: bytearray, seq: int, timestamp_ns: int) -> None:
    """Write SEQ and the send time into a pre-built frame (what the sender does per packet)."""
    PATCH.pack_into(frame, PAYLOAD_OFFSET + PATCH_OFFSET, seq, timestamp_ns & MASK32)


class FrameSet:
    """Pre-built frames: for flow position i, ``cycles[i][n % L]`` is its n-th packet's frame.

    ``cycles[i]`` is None while flow i is withheld (its destination not known yet, see `rebind`)."""

    def __init__(self, flows: Sequence[Flow], sizes: Sequence[tuple[int, int]], src_mac: str, dst_mac: str,
                 seed: int = CYCLE_SEED):
        self.flows = list(flows)
        self.cycle = size_cycle(sizes, seed)
        distinct = sorted({s for s, _ in sizes})
        self.cycles: list[list[bytearray] | None] = []
        # scapy builds one frame per size; every other flow's frame is that one with its own
        # addresses, ports, flow id and IP checksum written in (identical bytes, see derive_frame)
        self.templates = {s: build_frame(self.flows[0], s, src_mac, dst_mac) for s in distinct}
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
