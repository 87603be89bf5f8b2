"""UDP traffic generator and receiver that measure per-flow loss and convergence like IxNetwork.

Frames are built once per flow and frame size before sending: scapy builds one Ether/IP/UDP frame
per size, and each flow's frame is that one with the flow's addresses, ports, flow id and IPv4
header checksum written in (byte-identical to a scapy build of that flow, unit-tested; ~100 times
faster, so thousands of flows start at once; memory: flows x the sum of the distinct sizes). Per
packet only the sequence number and the send timestamp are written into the pre-built bytearray
(one ``struct.pack_into``) and the frame goes out of an AF_PACKET socket with ``send``. No IP
field changes per packet, so no IP checksum work; the UDP checksum is 0 (allowed for IPv4).

Frame sizes
    A size is the Ethernet frame size as IxNetwork and RFC 2544 count it: destination MAC through
    the 4-byte FCS. A veth carries no FCS, so a size-S frame is S - 4 bytes in memory and on the
    veth: 64 -> 60 bytes (IP total length 46, 18 bytes of UDP payload), 1518 -> 1514 bytes (IP
    total length 1500, the MTU). Reported byte counts and averages are in these sizes (with FCS);
    the smallest size is 64.

IMIX
    ``IMIX`` holds the JVD seed's weights 64:8, 127:36, 255:11, 511:4, 1024:2, 1518:39 (sum 100,
    average 711.83 bytes with FCS, 707.83 without). ``size_cycle`` expands weights into a
    deterministic cycle (each size repeated by its weight, shuffled with a fixed seed). Every flow
    walks the same cycle from its own offset, so each flow alone and the aggregate both follow the
    weights exactly over any whole cycle.

Payload header (18 bytes, network byte order, right after the UDP header)
    ======  ====  ==========================================================================
    offset  type  field
    ======  ====  ==========================================================================
    0       u16   magic 0x5447 ("TG")
    2       u32   flow id
    6       u64   sequence number (per flow, from 0)
    14      u32   send timestamp: CLOCK_MONOTONIC in ns, low 32 bits
    ======  ====  ==========================================================================

    The rest of the payload is zero padding. A 64-byte frame leaves exactly 18 bytes of payload,
    so the timestamp carries only the low 32 bits; sender and receiver share the host's monotonic
    clock, so the receiver restores the full 64-bit send time from its receive time (exact while
    the one-way delay stays under 2**32 ns = 4.29 s).

Rate and flows
    The sender sends flows round-robin at a constant aggregate rate R (packets/s), so each of F
    flows gets R/F pps and a loss-derived convergence figure has a resolution of one per-flow
    interval, F/R seconds. Pacing uses absolute due times (no drift); when ahead it sleeps, so
    packets may leave in short bursts (well under a millisecond at the rates used here). A send
    that fails (interface down, no buffer) still consumes its sequence number: the receiver counts
    it as lost, as a tester would. A sender that falls behind (CPU contention) sends what it owes
    late, in a burst: packets due during an outage but sent after it are not lost, so a convergence
    figure is only as good as the schedule. The report's ``max_lag_ms`` / ``late_1ms`` say how late
    it was; ``realtime=True`` (SCHED_FIFO, paced rates only) keeps it on time on a busy machine.

Receiver accounting, per flow
    received (unique), lost (sequence numbers never seen, up to the highest one seen, plus the
    tail when the sender's count is known), duplicates, reordered (arrived after a higher
    sequence number), longest gap between consecutive in-order arrivals measured on their send
    timestamps and the send time of the packet before it (the gap's start), first/last receive
    time, one-way latency (min/avg/max), and the loss-derived convergence time
    ``lost / per-flow rate`` (RFC 6412's packet-loss duration, what IxNetwork reports from
    frame loss). All times are CLOCK_MONOTONIC ns, the clock ``time.monotonic_ns()`` reads in
    every namespace of the host, so an events runner can line up its own timestamps.

Reverse direction
    A stateful firewall drops server-initiated flows: ``reverse_flows`` gives the same 5-tuples
    swapped (server address:port -> client address:port), to be sent only after the forward
    packets opened the sessions.

Library::

    flows = make_flows(200, "100.64.0.0/16", "203.0.113.10")
    rx = Receiver(ns="tg1-server", port=7000, rate_per_flow=100).start()   # thread; rx.ready waited
    report = Sender(ns="tg1-client", iface="eth1", flows=flows, rate=20000, sizes="imix",
                    duration=3).run()
    result = rx.stop(sent=report)                       # JSON-ready dict, tail loss included

``Sender.spawn()`` / ``Receiver.spawn()`` run the same in a child process (``python -m
dataplane.traffic ... --config -``), which avoids sharing the GIL between sender and receiver
(and with the caller); a child stops when its parent closes its stdin or dies::

    rx = Receiver(ns="tg1-server", port=7000).spawn().wait_ready()
    tx = Sender(ns="tg1-client", iface="eth1", flows=flows, rate=20000, duration=3, realtime=True).spawn()
    result = rx.stop(sent=tx.wait())

The receiver binds a UDP socket (PORT; any local address, so the whole AnyIP prefix) or, with
IFACE and no port, reads an AF_PACKET socket and takes any UDP frame carrying the magic.

CLI (JSON on stdout)::

    python -m dataplane.traffic send --netns tg1-client --iface eth1 --flows 200 \\
        --sources 100.64.0.0/16 --dst 203.0.113.10 --rate 20000 --sizes imix --duration 3
    python -m dataplane.traffic receive --netns tg1-server --port 7000 --rate-per-flow 100 --idle 1
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import fcntl
import ipaddress
import json
import os
import random
import select
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

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
    """Pre-built frames: for flow position i, ``cycles[i][n % L]`` is its n-th packet's frame."""

    def __init__(self, flows: Sequence[Flow], sizes: Sequence[tuple[int, int]], src_mac: str, dst_mac: str,
                 seed: int = CYCLE_SEED):
        self.flows = list(flows)
        self.cycle = size_cycle(sizes, seed)
        distinct = sorted({s for s, _ in sizes})
        self.cycles: list[list[bytearray]] = []
        length = len(self.cycle)
        # scapy builds one frame per size; every other flow's frame is that one with its own
        # addresses, ports, flow id and IP checksum written in (identical bytes, see derive_frame)
        templates = {s: build_frame(self.flows[0], s, src_mac, dst_mac) for s in distinct}
        for i, flow in enumerate(self.flows):
            by_size = {s: derive_frame(t, flow) if i else t for s, t in templates.items()}
            self.cycles.append([by_size[self.cycle[(n + i) % length]] for n in range(length)])

    def frame(self, index: int, seq: int) -> bytearray:
        return self.cycles[index][seq % len(self.cycle)]


# --------------------------------------------------------------------------- namespaces and addresses
@contextlib.contextmanager
def in_netns(ns: str | None) -> Iterator[None]:
    """Run the body in namespace NS (this thread only); None: stay where we are."""
    if not ns:
        yield
        return
    from lab_orchestrator import netnsutil

    with netnsutil.entered(ns):
        yield


def _proc_net(name: str) -> str:
    # thread-self: the namespace of this thread (setns is per thread), not of the main thread
    with open(f"/proc/thread-self/net/{name}") as handle:
        return handle.read()


def _hex_ip(value: str) -> int:
    return int.from_bytes(int(value, 16).to_bytes(4, "little"), "big")


def next_hop(dst: str, iface: str | None = None) -> tuple[str, str]:
    """(interface, next-hop address) the main table of this thread's namespace uses for DST."""
    target = int(ipaddress.IPv4Address(dst))
    best: tuple[int, int, str, str] | None = None  # (-prefix length, metric, iface, hop)
    for line in _proc_net("route").splitlines()[1:]:
        cols = line.split()
        if len(cols) < 8 or not int(cols[3], 16) & 0x1:  # RTF_UP
            continue
        dev, dest, gateway, metric, mask = cols[0], _hex_ip(cols[1]), _hex_ip(cols[2]), int(cols[6]), _hex_ip(cols[7])
        if target & mask != dest or (iface and dev != iface):
            continue
        hop = str(ipaddress.IPv4Address(gateway)) if gateway else dst
        key = (-bin(mask).count("1"), metric, dev, hop)
        if best is None or key < best:
            best = key
    if best is None:
        raise LookupError(f"no route to {dst}" + (f" via {iface}" if iface else ""))
    return best[2], best[3]


def neighbour_mac(address: str, iface: str) -> str | None:
    """MAC of ADDRESS in this namespace's ARP table (complete entries only)."""
    for line in _proc_net("arp").splitlines()[1:]:
        cols = line.split()
        if len(cols) >= 6 and cols[0] == address and cols[5] == iface and int(cols[2], 16) & 0x2:
            return cols[3]
    return None


def interface_address(iface: str) -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            data = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, struct.pack("256s", iface.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(data[20:24])


def _mac_text(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw[:6])


def arp_resolve(iface: str, address: str, timeout: float = 1.0, tries: int = 3) -> str:
    """Ask for ADDRESS's MAC with an ARP request on IFACE (this thread's namespace)."""
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ARP)) as sock:
        sock.bind((iface, ETH_P_ARP))
        own_mac: bytes = sock.getsockname()[4]
        own_ip = socket.inet_aton(interface_address(iface) or "0.0.0.0")
        target = socket.inet_aton(address)
        request = (b"\xff" * 6 + own_mac + struct.pack("!H", ETH_P_ARP)
                   + struct.pack("!HHBBH", 1, ETH_P_IP, 6, 4, 1) + own_mac + own_ip + b"\0" * 6 + target)
        for _ in range(tries):
            sock.send(request)
            deadline = time.monotonic() + timeout
            while (left := deadline - time.monotonic()) > 0:
                ready, _, _ = select.select([sock], [], [], left)
                if not ready:
                    break
                data = sock.recv(128)
                # ARP reply (op 2) whose sender protocol address is the target
                if len(data) >= 42 and data[20:22] == b"\x00\x02" and data[28:32] == target:
                    return _mac_text(data[22:28])
    raise LookupError(f"no ARP reply from {address} on {iface}")


def resolve_dst_mac(iface: str, dst: str) -> tuple[str, str]:
    """(next hop, its MAC) for DST out of IFACE: the neighbour table, else an ARP request."""
    _, hop = next_hop(dst, iface)
    mac = neighbour_mac(hop, iface)
    return hop, mac or arp_resolve(iface, hop)


# --------------------------------------------------------------------------- sender
def _flows_json(flows: Sequence[Flow]) -> list[list[Any]]:
    return [[f.flow_id, f.src, f.dst, f.sport, f.dport] for f in flows]


def _flows_from_json(items: Sequence[Sequence[Any]]) -> list[Flow]:
    return [Flow(int(i), str(s), str(d), int(sp), int(dp)) for i, s, d, sp, dp in items]


@dataclass
class Sender:
    """Send FLOWS round-robin out of IFACE at RATE packets/s aggregate (0: as fast as possible).

    Stops after COUNT packets, or after DURATION seconds (with a rate, DURATION becomes the count
    rate * duration, so per-flow counts are known exactly). NS: the namespace to run in (None:
    where the calling thread is). DST_MAC: the next hop's MAC (None: route lookup + neighbour
    table / ARP for the first flow's destination). CPU: pin the sending thread. REALTIME: run it
    SCHED_FIFO so CPU contention does not make it late; veth forwarding runs in softirq on the
    sending CPU and, when deferred to ksoftirqd, waits behind a realtime sender, so keep the rate
    well below what the path forwards (at 20 kpps it costs a fraction of a CPU)."""

    iface: str
    flows: list[Flow]
    rate: float = 0.0
    sizes: str | int | list[tuple[int, int]] = "imix"
    duration: float | None = None
    count: int | None = None
    ns: str | None = None
    dst_mac: str | None = None
    qdisc_bypass: bool = True
    seed: int = CYCLE_SEED
    cpu: int | None = None  # pin the sending thread to this CPU
    realtime: bool = False  # SCHED_FIFO for the sending thread (paced rates: keeps the schedule under load)
    _stop: bool = field(default=False, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)
    _result: dict[str, Any] | None = field(default=None, init=False, repr=False)
    _error: BaseException | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.flows:
            raise ValueError("no flows to send")
        if self.count is None and self.duration is None:
            raise ValueError("give a duration or a packet count")
        if self.rate < 0:
            raise ValueError("rate must be >= 0")
        if self.count is None and self.rate > 0:
            assert self.duration is not None
            self.count = max(1, round(self.rate * self.duration))

    # ---- configuration as JSON (for spawn and the CLI)
    def config(self) -> dict[str, Any]:
        return {"iface": self.iface, "flows": _flows_json(self.flows), "rate": self.rate,
                "sizes": parse_sizes(self.sizes), "duration": self.duration, "count": self.count,
                "ns": self.ns, "dst_mac": self.dst_mac, "qdisc_bypass": self.qdisc_bypass, "seed": self.seed,
                "cpu": self.cpu, "realtime": self.realtime}

    @classmethod
    def from_config(cls, data: dict[str, Any]) -> Sender:
        data = dict(data)
        data["flows"] = _flows_from_json(data["flows"])
        data["sizes"] = [(int(s), int(w)) for s, w in data["sizes"]]
        return cls(**data)

    def per_flow_rate(self) -> float:
        return self.rate / len(self.flows)

    def stop(self) -> None:
        """Ask a running sender to stop after the packet in flight."""
        self._stop = True

    def run(self) -> dict[str, Any]:
        """Send in the calling thread (entering NS for the duration); return the report."""
        _pin(self.cpu)
        if self.realtime and self.rate <= 0:
            raise ValueError("realtime needs a paced rate (at full speed it would monopolise a CPU)")
        with _realtime(self.realtime), in_netns(self.ns):
            return self._run()

    def start(self) -> Sender:
        """Run in a background thread; `join()` returns the report."""
        def body() -> None:
            try:
                self._result = self.run()
            except BaseException as exc:  # handed to join()
                self._error = exc
        self._thread = threading.Thread(target=body, name=f"traffic-send-{self.iface}", daemon=True)
        self._thread.start()
        return self

    def join(self, timeout: float | None = None) -> dict[str, Any]:
        if self._thread is None:
            raise RuntimeError("sender not started")
        self._thread.join(timeout)
        if self._thread.is_alive():
            raise TimeoutError("sender still running")
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def spawn(self) -> Spawned:
        """Run in a child process (`python -m dataplane.traffic send --config -`)."""
        return Spawned("send", self.config())

    def _run(self) -> dict[str, Any]:
        sizes = parse_sizes(self.sizes)
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0)  # protocol 0: receives nothing
        try:
            _bind(sock, (self.iface, 0), self.ns)
            src_mac = _mac_text(sock.getsockname()[4])
            hop = None
            dst_mac = self.dst_mac
            if dst_mac is None:
                hop, dst_mac = resolve_dst_mac(self.iface, self.flows[0].dst)
            if self.qdisc_bypass:
                with contextlib.suppress(OSError):
                    sock.setsockopt(SOL_PACKET, PACKET_QDISC_BYPASS, 1)
            built = time.monotonic()
            frames = FrameSet(self.flows, sizes, src_mac, dst_mac, self.seed)
            build_s = time.monotonic() - built
            cpu_before = time.thread_time()
            seqs, errors, stats = self._loop(sock, frames)
            cpu_s = time.thread_time() - cpu_before
        finally:
            sock.close()
        cycle = frames.cycle
        sent = sum(seqs)
        total_bytes = sum(flow_packet_sizes(cycle, i, n) for i, n in enumerate(seqs))
        elapsed = (stats["end_ns"] - stats["start_ns"]) / 1e9
        per_flow = self.per_flow_rate()
        return {
            "role": "send", "ns": self.ns, "iface": self.iface, "src_mac": src_mac, "dst_mac": dst_mac,
            "next_hop": hop, "flows": len(self.flows), "rate_pps": self.rate,
            "per_flow_pps": per_flow, "resolution_ms": 1000.0 / per_flow if per_flow else None,
            "sizes": [list(p) for p in sizes], "avg_size": average_size(sizes),
            "sent": sent, "errors": errors, "error_kinds": stats["error_kinds"],
            "bytes": total_bytes, "start_ns": stats["start_ns"], "end_ns": stats["end_ns"],
            "elapsed_s": elapsed, "pps": sent / elapsed if elapsed > 0 else 0.0,
            "l2_mbps": total_bytes * 8 / elapsed / 1e6 if elapsed > 0 else 0.0,
            "max_lag_ms": stats["max_lag_ns"] / 1e6, "late_1ms": stats["late"], "build_s": build_s,
            "cpu_s": cpu_s,  # this thread's CPU time while sending (softirq work done in its context included)
            "stopped": self._stop,
            "per_flow_sent": {str(f.flow_id): n for f, n in zip(self.flows, seqs, strict=True)},
        }

    def _loop(self, sock: socket.socket, frames: FrameSet) -> tuple[list[int], int, dict[str, Any]]:
        """The hot loop: one pack_into, one clock read and one send per packet."""
        flows = len(self.flows)
        cycles = frames.cycles
        length = len(frames.cycle)
        seqs = [0] * flows
        total = self.count if self.count is not None else 1 << 62
        send = sock.send
        pack = PATCH.pack_into
        offset = PAYLOAD_OFFSET + PATCH_OFFSET
        mono = time.monotonic_ns
        sleep = time.sleep
        errors = 0
        error_kinds: dict[str, int] = {}
        max_lag = 0
        late = 0  # packets sent more than 1 ms after their due time
        start = mono()
        end = start + int(self.duration * 1e9) if self.duration is not None else 1 << 62
        if self.rate > 0:
            # hard bound: a sender that cannot keep the rate stops at twice its planned time + 1 s
            end = start + int((total / self.rate) * 2e9) + 1_000_000_000
        step = 1e9 / self.rate if self.rate > 0 else 0.0
        k = 0
        i = 0
        now = start
        while k < total and not self._stop:
            now = mono()
            if step:
                due = start + int(k * step)
                if now < due:
                    sleep((due - now) / 1e9)
                    now = mono()
                elif now - due > 1_000_000:
                    late += 1
                    if now - due > max_lag:
                        max_lag = now - due
            if now >= end:
                break
            seq = seqs[i]
            buf = cycles[i][seq % length]
            pack(buf, offset, seq, now & MASK32)
            try:
                send(buf)
            except OSError as exc:
                errors += 1
                name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
                error_kinds[name] = error_kinds.get(name, 0) + 1
            seqs[i] = seq + 1
            k += 1
            i += 1
            if i == flows:
                i = 0
        return seqs, errors, {"start_ns": start, "end_ns": mono(), "max_lag_ns": max_lag, "late": late,
                              "error_kinds": error_kinds}


# --------------------------------------------------------------------------- receiver accounting
class FlowStats:
    """Per-flow accounting of received (sequence, send time, receive time) triples; pure."""

    __slots__ = ("flow_id", "received", "next_seq", "holes", "duplicates", "reordered", "first_ts", "last_ts",
                 "max_gap", "max_gap_start", "first_rx", "last_rx", "lat_sum", "lat_min", "lat_max")

    def __init__(self, flow_id: int):
        self.flow_id = flow_id
        self.received = 0  # unique packets
        self.next_seq = 0  # highest sequence seen + 1
        self.holes: list[list[int]] = []  # missing [start, end) ranges, ascending
        self.duplicates = 0
        self.reordered = 0
        self.first_ts = -1  # send time of the first packet received
        self.last_ts = 0  # send time of the highest sequence received
        self.max_gap = 0  # ns, between consecutive in-order arrivals, on send times
        self.max_gap_start = 0  # send time of the packet before the longest gap
        self.first_rx = 0
        self.last_rx = 0
        self.lat_sum = 0
        self.lat_min = 1 << 62
        self.lat_max = 0

    def add(self, seq: int, ts: int, rx: int) -> None:
        self.last_rx = rx
        latency = rx - ts
        next_seq = self.next_seq
        if seq >= next_seq:
            if seq > next_seq:
                self.holes.append([next_seq, seq])
            if self.received:
                gap = ts - self.last_ts
                if gap > self.max_gap:
                    self.max_gap = gap
                    self.max_gap_start = self.last_ts
            else:
                self.first_ts = ts
                self.first_rx = rx
            self.next_seq = seq + 1
            self.last_ts = ts
        elif not self._fill(seq):
            self.duplicates += 1
            return
        else:
            self.reordered += 1
        self.received += 1
        self.lat_sum += latency
        if latency < self.lat_min:
            self.lat_min = latency
        if latency > self.lat_max:
            self.lat_max = latency

    def _fill(self, seq: int) -> bool:
        """Take SEQ out of the missing ranges; False if it was not missing (a duplicate)."""
        holes = self.holes
        for index in range(len(holes) - 1, -1, -1):  # late packets are usually recent
            start, end = holes[index]
            if seq >= end:
                return False
            if seq >= start:
                if start == seq and end == seq + 1:
                    del holes[index]
                elif seq == start:
                    holes[index][0] = seq + 1
                elif seq == end - 1:
                    holes[index][1] = seq
                else:
                    holes[index:index + 1] = [[start, seq], [seq + 1, end]]
                return True
        return False

    def state(self) -> list[Any]:
        """Everything this object knows, JSON-ready (to carry it out of a child process)."""
        return [getattr(self, name) for name in self.__slots__]

    @classmethod
    def from_state(cls, state: Sequence[Any]) -> FlowStats:
        stats = cls(int(state[0]))
        for name, value in zip(cls.__slots__, state, strict=True):
            setattr(stats, name, value)
        return stats

    def lost(self, sent: int | None = None) -> int:
        missing = sum(end - start for start, end in self.holes)
        if sent is not None and sent > self.next_seq:
            missing += sent - self.next_seq
        return missing

    def estimated_rate(self) -> float | None:
        """Packets/s from the send times of the first and highest sequence received."""
        if self.received < 2 or self.last_ts <= self.first_ts:
            return None
        first_seq = self.holes[0][1] if self.holes and self.holes[0][0] == 0 else 0
        span = self.next_seq - 1 - first_seq
        return span * 1e9 / (self.last_ts - self.first_ts) if span > 0 else None

    def report(self, rate: float | None = None, sent: int | None = None, end_ts: int | None = None
               ) -> dict[str, Any]:
        """JSON-ready figures; RATE (pps of this flow) turns loss into convergence time, SENT adds
        the tail loss, END_TS (the sender's end) extends the longest gap to a silent tail."""
        lost = self.lost(sent)
        max_gap, gap_start = self.max_gap, self.max_gap_start
        if (end_ts is not None and sent is not None and sent > self.next_seq and self.received
                and end_ts - self.last_ts > max_gap):
            max_gap, gap_start = end_ts - self.last_ts, self.last_ts
        used_rate = rate if rate else self.estimated_rate()
        return {
            "flow": self.flow_id, "received": self.received, "lost": lost, "duplicates": self.duplicates,
            "reordered": self.reordered,
            "convergence_ms": round(lost / used_rate * 1000, 3) if used_rate else None,
            "max_gap_ms": round(max_gap / 1e6, 3), "max_gap_start_ns": gap_start if max_gap else None,
            "first_seen_ns": self.first_rx if self.received else None,
            "last_seen_ns": self.last_rx if self.received else None,
            "latency_us": ({"min": round(self.lat_min / 1e3, 1), "avg": round(self.lat_sum / self.received / 1e3, 1),
                            "max": round(self.lat_max / 1e3, 1)} if self.received else None),
        }


def restore_timestamp(ts32: int, rx_ns: int) -> int:
    """The full send time whose low 32 bits are TS32, latest not after RX_NS (same clock)."""
    return rx_ns - ((rx_ns - ts32) & MASK32)


class Accounting:
    """All flows of one receiver: feed it payloads (header at OFFSET) or decoded fields."""

    def __init__(self) -> None:
        self.flows: dict[int, FlowStats] = {}
        self.foreign = 0  # datagrams without our magic
        self.first_rx: int | None = None
        self.last_rx: int | None = None

    def state(self) -> dict[str, Any]:
        return {"foreign": self.foreign, "first_rx": self.first_rx, "last_rx": self.last_rx,
                "flows": [f.state() for f in self.flows.values()]}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Accounting:
        acc = cls()
        acc.foreign, acc.first_rx, acc.last_rx = state["foreign"], state["first_rx"], state["last_rx"]
        for item in state["flows"]:
            stats = FlowStats.from_state(item)
            acc.flows[stats.flow_id] = stats
        return acc

    def add(self, flow_id: int, seq: int, ts: int, rx: int) -> None:
        stats = self.flows.get(flow_id)
        if stats is None:
            stats = self.flows[flow_id] = FlowStats(flow_id)
        stats.add(seq, ts, rx)

    def add_payload(self, data: bytes | bytearray | memoryview, rx: int, offset: int = 0) -> bool:
        if len(data) < offset + HEADER_LEN:
            self.foreign += 1
            return False
        magic, flow_id, seq, ts32 = HEADER.unpack_from(data, offset)
        if magic != MAGIC:
            self.foreign += 1
            return False
        self.add(flow_id, seq, restore_timestamp(ts32, rx), rx)
        return True

    def report(self, rate_per_flow: float | None = None, sent: dict[str, Any] | None = None,
               expected_flows: Sequence[int] | None = None) -> dict[str, Any]:
        """Per-flow figures and a summary. SENT: a sender's report (its per-flow counts add tail
        loss, its per-flow rate is used when RATE_PER_FLOW is not given); EXPECTED_FLOWS: flow
        ids that count as fully lost when never seen (default: those in SENT)."""
        counts: dict[int, int] = {}
        end_ts = None
        if sent is not None:
            counts = {int(k): int(v) for k, v in sent.get("per_flow_sent", {}).items()}
            end_ts = sent.get("end_ns")
            if not rate_per_flow:
                rate_per_flow = sent.get("per_flow_pps") or None
        ids = set(self.flows) | set(expected_flows if expected_flows is not None else counts)
        flows = []
        for flow_id in sorted(ids):
            stats = self.flows.get(flow_id) or FlowStats(flow_id)
            flows.append(stats.report(rate_per_flow, counts.get(flow_id), end_ts))
        received = sum(f["received"] for f in flows)
        convergence = [f["convergence_ms"] for f in flows if f["convergence_ms"] is not None]
        gaps = [f["max_gap_ms"] for f in flows if f["received"]]
        span = (self.last_rx - self.first_rx) / 1e9 if self.first_rx and self.last_rx else 0.0
        return {
            "role": "receive", "flows": len(flows), "received": received,
            "lost": sum(f["lost"] for f in flows), "duplicates": sum(f["duplicates"] for f in flows),
            "reordered": sum(f["reordered"] for f in flows), "foreign": self.foreign,
            "flows_with_loss": sum(1 for f in flows if f["lost"]),
            "flows_never_seen": sum(1 for f in flows if not f["received"]),
            "rate_per_flow_pps": rate_per_flow,
            "resolution_ms": round(1000 / rate_per_flow, 3) if rate_per_flow else None,
            "convergence_ms": ({"min": min(convergence), "avg": round(sum(convergence) / len(convergence), 3),
                                "max": max(convergence)} if convergence else None),
            "max_gap_ms": max(gaps) if gaps else None,
            "first_seen_ns": self.first_rx, "last_seen_ns": self.last_rx,
            "pps": received / span if span > 0 else 0.0,
            "per_flow": flows,
        }


# --------------------------------------------------------------------------- receiver
@dataclass
class Receiver:
    """Count our packets arriving in namespace NS.

    UDP mode (PORT given): a UDP socket bound to BIND:PORT (default any local address, which with
    the hosts' AnyIP routes means the whole prefix). Packet mode (IFACE given, no PORT): an
    AF_PACKET socket on IFACE sees every IPv4/UDP frame carrying our magic, whatever its port
    (outgoing frames ignored); the kernel then answers with ICMP port unreachable (rate-limited).
    Stops after DURATION seconds, after IDLE seconds without a packet (once one arrived), or on
    stop().

    POLL_INTERVAL > 0 (default 1 ms): drain the socket without blocking, sleep that long when it is
    empty. The sender's core then never wakes this thread per packet (which would cost it more than
    the packet: ~140 vs ~400 kpps measured), but receive times are those of the drain, up to one
    interval late: latency and first/last-seen figures carry that error; loss, duplicates,
    reordering, gaps and convergence (send times and sequence numbers) do not. 0: block in recv."""

    port: int | None = None
    bind: str = "0.0.0.0"
    iface: str | None = None
    ns: str | None = None
    duration: float | None = None
    idle: float | None = None
    rate_per_flow: float | None = None
    poll_interval: float = 0.001
    cpu: int | None = None  # pin the receiving thread to this CPU
    realtime: bool = False  # SCHED_FIFO: keep draining on a busy machine (its socket then does not overflow)
    accounting: Accounting = field(default_factory=Accounting, repr=False)
    ready: threading.Event = field(default_factory=threading.Event, repr=False)
    bound_port: int | None = field(default=None, init=False)  # UDP mode: the port bound (PORT 0: any)
    _stop: bool = field(default=False, init=False, repr=False)
    _thread: threading.Thread | None = field(default=None, init=False, repr=False)
    _error: BaseException | None = field(default=None, init=False, repr=False)
    _counters: dict[str, int] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.port is None and self.iface is None:
            raise ValueError("give a UDP port, or an interface for packet mode")

    def config(self) -> dict[str, Any]:
        return {"port": self.port, "bind": self.bind, "iface": self.iface, "ns": self.ns,
                "duration": self.duration, "idle": self.idle, "rate_per_flow": self.rate_per_flow,
                "poll_interval": self.poll_interval, "cpu": self.cpu, "realtime": self.realtime}

    @classmethod
    def from_config(cls, data: dict[str, Any]) -> Receiver:
        return cls(**data)

    def _open(self) -> tuple[socket.socket, int]:
        if self.port is not None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            _grow_rcvbuf(sock)
            _bind(sock, (self.bind, self.port), self.ns)
            self.bound_port = sock.getsockname()[1]
            return sock, 0
        assert self.iface is not None
        sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_IP))
        with contextlib.suppress(OSError):
            sock.setsockopt(SOL_PACKET, PACKET_IGNORE_OUTGOING, 1)
        _grow_rcvbuf(sock)
        _bind(sock, (self.iface, ETH_P_IP), self.ns)
        return sock, -1

    def run(self) -> dict[str, Any]:
        """Receive in the calling thread until a stop condition; return the report."""
        _pin(self.cpu)
        with in_netns(self.ns):
            sock, mode = self._open()
        try:
            self.ready.set()
            with _realtime(self.realtime):
                self._loop(sock, mode)
        finally:
            sock.close()
            self.ready.set()
        return self.report()

    def report(self, sent: dict[str, Any] | None = None) -> dict[str, Any]:
        result = self.accounting.report(self.rate_per_flow, sent)
        result.update({"ns": self.ns, "port": self.port, "iface": self.iface, **self._counters})
        return result

    def start(self, timeout: float = 5.0) -> Receiver:
        """Run in a background thread; returns once the socket is open (packets are counted)."""
        def body() -> None:
            try:
                self.run()
            except BaseException as exc:  # handed to stop()
                self._error = exc
                self.ready.set()
        self._thread = threading.Thread(target=body, name="traffic-receive", daemon=True)
        self._thread.start()
        if not self.ready.wait(timeout):
            raise TimeoutError("receiver did not open its socket")
        if self._error is not None:
            raise self._error
        return self

    def stop(self, sent: dict[str, Any] | None = None, timeout: float = 5.0) -> dict[str, Any]:
        """Stop a started receiver; the report (with SENT, a sender's report, for tail loss)."""
        self._stop = True
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive():
                raise TimeoutError("receiver did not stop")
        if self._error is not None:
            raise self._error
        return self.report(sent)

    def spawn(self) -> Spawned:
        """Run in a child process; `Spawned.wait_ready()` then `Spawned.stop()` returns the report."""
        return Spawned("receive", self.config())

    def _loop(self, sock: socket.socket, mode: int) -> None:
        """The hot loop: recv_into, a clock read, one unpack, one FlowStats.add."""
        acc = self.accounting
        flows = acc.flows
        buf = bytearray(65536)
        recv_into = sock.recv_into
        unpack = HEADER.unpack_from
        mono = time.monotonic_ns
        poll = self.poll_interval
        if poll > 0:
            # Drain, then sleep: the sender's kernel path never has to wake this thread up (a
            # wakeup per packet costs the sending core more than the packet itself).
            sock.setblocking(False)
        else:
            # A kernel receive timeout (no poll() per packet as a Python socket timeout would add)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, struct.pack("ll", 0, 50_000))
        sleep = time.sleep
        started = mono()
        deadline = started + int(self.duration * 1e9) if self.duration else 1 << 62
        idle_ns = int(self.idle * 1e9) if self.idle else 0
        first_rx = 0
        last_rx = 0
        foreign = 0
        packets = 0
        fixed_offset = mode >= 0
        offset = mode
        min_len = (offset if fixed_offset else PAYLOAD_OFFSET) + HEADER_LEN
        stop_at = 0  # once asked to stop: keep draining what is queued, for at most a second
        while True:
            try:
                n = recv_into(buf)
            except (BlockingIOError, TimeoutError, InterruptedError):
                now = mono()
                if self._stop or now >= deadline or (idle_ns and last_rx and now - last_rx >= idle_ns):
                    break
                if poll > 0:
                    sleep(poll)
                continue
            rx = mono()
            if n < min_len:
                foreign += 1
                continue
            if not fixed_offset:
                # IPv4 (the socket's protocol), UDP, header after the IP options
                if buf[23] != 17:
                    foreign += 1
                    continue
                offset = ETH_LEN + (buf[14] & 0x0F) * 4 + UDP_LEN
                if n < offset + HEADER_LEN:
                    foreign += 1
                    continue
            magic, flow_id, seq, ts32 = unpack(buf, offset)
            if magic != MAGIC:
                foreign += 1
                continue
            stats = flows.get(flow_id)
            if stats is None:
                stats = flows[flow_id] = FlowStats(flow_id)
            stats.add(seq, rx - ((rx - ts32) & MASK32), rx)
            if not first_rx:
                first_rx = rx
            last_rx = rx
            packets += 1
            if not packets & 0x3FF:
                if rx >= deadline:
                    break
                if self._stop:
                    if not stop_at:
                        stop_at = rx + 1_000_000_000
                    elif rx >= stop_at:
                        break
        acc.foreign += foreign
        acc.first_rx = first_rx or None
        acc.last_rx = last_rx or None
        self._counters = {"started_ns": started, "stopped_ns": mono()}
        with in_netns(self.ns):
            self._counters.update(_socket_drops(sock))


def _bind(sock: socket.socket, address: tuple[str, int], ns: str | None) -> None:
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        where = f" in namespace {ns}" if ns else ""
        raise OSError(exc.errno, f"cannot bind to {address[0]}:{address[1]}{where}: {exc.strerror}") from None


@contextlib.contextmanager
def _realtime(enabled: bool) -> Iterator[None]:
    """SCHED_FIFO (priority 10) for the calling thread for the body."""
    if not enabled:
        yield
        return
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(10))  # 0: the calling thread
    try:
        yield
    finally:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def _pin(cpu: int | None) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})  # 0: the calling thread


def _grow_rcvbuf(sock: socket.socket) -> None:
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, RCVBUF)  # root: beyond rmem_max
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, RCVBUF)


def _socket_drops(sock: socket.socket) -> dict[str, int]:
    """Packets the kernel dropped at this socket (full buffer), where the kernel tells."""
    if sock.family == socket.AF_PACKET:
        with contextlib.suppress(OSError):
            packets, drops = struct.unpack("II", sock.getsockopt(SOL_PACKET, 6, 8))  # PACKET_STATISTICS
            return {"socket_drops": drops}
        return {}
    with contextlib.suppress(OSError, ValueError):
        inode = os.fstat(sock.fileno()).st_ino
        for line in _proc_net("udp").splitlines()[1:]:
            cols = line.split()
            if len(cols) >= 13 and cols[9] == str(inode):
                return {"socket_drops": int(cols[-1])}
    return {}


# --------------------------------------------------------------------------- child processes
class Spawned:
    """A sender or receiver in a child process fed its configuration as one JSON line on stdin.

    The child prints one JSON line when it is ready ({"ready": true}) and one with its report when
    done. Its stdin stays open: when it closes (`stop()`, or this process dies) the child stops and
    reports, so a child never outlives its parent."""

    def __init__(self, role: str, config: dict[str, Any]):
        repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))}
        self.role = role
        self.proc = subprocess.Popen([sys.executable, "-m", "dataplane.traffic", role, "--config", "-"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env)
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(config) + "\n")
        self.proc.stdin.flush()
        self._ready = False

    def _line(self, timeout: float) -> dict[str, Any] | None:
        stdout = self.proc.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], timeout)
        if not ready:
            raise TimeoutError(f"traffic {self.role} child gave no answer in {timeout} s")
        line = stdout.readline()
        if not line:
            return None
        data: dict[str, Any] = json.loads(line)
        return data

    def wait_ready(self, timeout: float = 10.0) -> Spawned:
        if not self._ready:
            line = self._line(timeout)
            if not line or not line.get("ready"):
                raise RuntimeError(f"traffic {self.role} child failed: {self._stderr()}")
            self._ready = True
        return self

    def wait(self, timeout: float = 60.0, sent: dict[str, Any] | None = None) -> dict[str, Any]:
        """The child's report once it finished by itself (a receiver's with SENT, a sender's
        report, for tail loss and the per-flow rate, as `Receiver.stop` does)."""
        self.wait_ready(timeout)
        line = self._line(timeout)
        self._close_stdin()
        self.proc.wait(timeout)
        if line is None or self.proc.returncode != 0:
            raise RuntimeError(f"traffic {self.role} child exited {self.proc.returncode}: {self._stderr()}")
        state = line.pop("state", None)
        if state is not None:
            report = Accounting.from_state(state).report(line.get("rate_per_flow_pps"), sent)
            line.update(report)
        return line

    def stop(self, timeout: float = 10.0, sent: dict[str, Any] | None = None) -> dict[str, Any]:
        """Stop the child (a receiver stops counting, a sender stops sending); its report."""
        self.wait_ready(timeout)
        self._close_stdin()
        return self.wait(timeout, sent)

    def _close_stdin(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def kill(self) -> None:
        self._close_stdin()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def _stderr(self) -> str:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        assert self.proc.stderr is not None
        return self.proc.stderr.read().strip()[-2000:]


# --------------------------------------------------------------------------- CLI
def _stop_on_eof(stop: Callable[[], None]) -> None:
    """Call STOP when stdin reaches end of file (the parent closed it or died)."""
    def watch() -> None:
        while sys.stdin.readline():
            pass
        stop()
    threading.Thread(target=watch, name="stdin-watch", daemon=True).start()


def _emit(out: IO[str], data: dict[str, Any]) -> None:
    out.write(json.dumps(data) + "\n")
    out.flush()


def _cli_send(args: argparse.Namespace, config: dict[str, Any] | None, out: IO[str]) -> int:
    if config is not None:
        sender = Sender.from_config(config)
    else:
        flows = make_flows(args.flows, args.sources, args.dst.split(","), args.sport, args.dport,
                           args.vary_ports, args.first_id)
        if args.reverse:
            flows = reverse_flows(flows)
        sender = Sender(iface=args.iface, flows=flows, rate=args.rate, sizes=args.sizes,
                        duration=args.duration, count=args.count, ns=args.netns, dst_mac=args.dst_mac,
                        cpu=args.cpu, realtime=args.realtime)
    signal.signal(signal.SIGINT, lambda *_: sender.stop())
    signal.signal(signal.SIGTERM, lambda *_: sender.stop())
    if args.config == "-":
        _stop_on_eof(sender.stop)
    if config is not None:
        _emit(out, {"ready": True})
    _emit(out, sender.run())
    return 0


def _cli_receive(args: argparse.Namespace, config: dict[str, Any] | None, out: IO[str]) -> int:
    if config is not None:
        receiver = Receiver.from_config(config)
    else:
        if args.duration is None and args.idle is None:
            args.duration = 60.0  # bounded by design
        receiver = Receiver(port=args.port, bind=args.bind, iface=args.iface, ns=args.netns,
                            duration=args.duration, idle=args.idle, rate_per_flow=args.rate_per_flow,
                            poll_interval=args.poll_interval, cpu=args.cpu, realtime=args.realtime)

    def stop(*_: object) -> None:
        receiver._stop = True

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    if args.config == "-":
        _stop_on_eof(stop)
    if config is not None:
        def announce() -> None:
            receiver.ready.wait()
            _emit(out, {"ready": True})
        threading.Thread(target=announce, daemon=True).start()
    result = receiver.run()
    if config is not None:
        result["state"] = receiver.accounting.state()  # the parent reports again with the sender's counts
    if not args.per_flow:
        result.pop("per_flow")
    _emit(out, result)
    return 0


def main(argv: Sequence[str] | None = None, out: IO[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dataplane.traffic", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("send", help="send flows at a constant rate from pre-built frames")
    s.add_argument("--netns", help="namespace to send from (default: the current one)")
    s.add_argument("--iface", help="interface to send on (AF_PACKET)")
    s.add_argument("--flows", type=int, default=100, help="number of flows (distinct source addresses)")
    s.add_argument("--sources", default="100.64.0.0/16", help="prefix the source addresses come from")
    s.add_argument("--dst", default="203.0.113.10", help="destination address(es), comma-separated")
    s.add_argument("--sport", type=int, default=40000)
    s.add_argument("--dport", type=int, default=7000)
    s.add_argument("--vary-ports", action="store_true", help="source port = SPORT + flow index")
    s.add_argument("--first-id", type=int, default=0, help="flow id of the first flow")
    s.add_argument("--reverse", action="store_true",
                   help="send the same 5-tuples server -> client (after forward traffic opened the sessions)")
    s.add_argument("--rate", type=float, default=10000.0, help="aggregate packets/s (0: as fast as possible)")
    s.add_argument("--sizes", default="imix", help="imix | SIZE | SIZE,SIZE | SIZE:WEIGHT,... (with FCS)")
    s.add_argument("--duration", type=float, help="seconds (with a rate: rate*duration packets)")
    s.add_argument("--count", type=int, help="packets in total")
    s.add_argument("--dst-mac", help="next hop MAC (default: route + neighbour table / ARP)")
    s.add_argument("--cpu", type=int, help="pin the sender to this CPU")
    s.add_argument("--realtime", action="store_true", help="SCHED_FIFO while sending (paced rates only)")
    r = sub.add_parser("receive", help="count flows, report loss/reordering/gaps/convergence")
    r.add_argument("--netns", help="namespace to receive in (default: the current one)")
    r.add_argument("--port", type=int, help="UDP port (UDP socket mode)")
    r.add_argument("--bind", default="0.0.0.0", help="address to bind in UDP mode")
    r.add_argument("--iface", help="interface (AF_PACKET mode, any port)")
    r.add_argument("--duration", type=float, help="stop after this many seconds (default 60 without --idle)")
    r.add_argument("--idle", type=float, help="stop this many seconds after the last packet")
    r.add_argument("--rate-per-flow", type=float, help="pps of each flow (loss -> convergence time)")
    r.add_argument("--per-flow", action="store_true", help="include every flow's figures")
    r.add_argument("--poll-interval", type=float, default=0.001,
                   help="seconds to sleep when the socket is empty (0: block in recv, exact receive times)")
    r.add_argument("--cpu", type=int, help="pin the receiver to this CPU")
    r.add_argument("--realtime", action="store_true", help="SCHED_FIFO while receiving")
    for p in (s, r):
        p.add_argument("--config", help="JSON configuration ('-': stdin) instead of the options (used by spawn)")
    args = parser.parse_args(argv)
    out = out or sys.stdout
    config = None
    if args.config == "-":
        config = json.loads(sys.stdin.readline())
        args.per_flow = True
    elif args.config:
        with open(args.config) as handle:
            config = json.load(handle)
        args.per_flow = True
    try:
        if args.command == "send":
            if config is None and (not args.iface or (args.duration is None and args.count is None)):
                parser.error("send needs --iface and --duration or --count")
            return _cli_send(args, config, out)
        return _cli_receive(args, config, out)
    except (OSError, LookupError, ValueError) as exc:
        print(f"traffic {args.command}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

