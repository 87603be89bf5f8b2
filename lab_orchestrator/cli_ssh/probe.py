"""`ping` and `traceroute` from a node's namespace (or one of its routing instances), in the vendor layouts.

The probes are sent from sockets opened inside the node's namespace (the calling thread enters it,
opens them and leaves: they stay bound there), so they take the node's own routes — the same path
a packet of that router would take. ICMP echo for ping; UDP to ports 33434+ with a rising TTL for
traceroute, the answers (echo reply, time exceeded, port unreachable) read on a raw ICMP socket.
Every probe is bounded: at most `count` echoes (default 5) and `ttl` hops (default 30), each
waiting at most `wait` seconds; traceroute stops after 5 silent hops in a row.

The formatters (`junos_ping`, `ios_ping`, `junos_traceroute`, `ios_traceroute`) are pure: they take
the measured replies, so their layouts are unit-tested without a network.
"""

from __future__ import annotations

import os
import select
import socket
import statistics
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from labkit import netnsutil

ECHO_REQUEST, ECHO_REPLY, DEST_UNREACH, TIME_EXCEEDED = 8, 0, 3, 11
TRACE_PORT = 33434
SILENT_HOPS = 5  # traceroute gives up after this many hops in a row without any answer (a blackhole)


@dataclass
class Echo:
    seq: int
    rtt_ms: float | None  # None: no answer in time
    ttl: int = 0
    size: int = 0  # ICMP bytes received


@dataclass
class PingResult:
    target: str
    size: int  # data bytes
    echoes: list[Echo] = field(default_factory=list)
    error: str | None = None

    @property
    def received(self) -> list[float]:
        return [e.rtt_ms for e in self.echoes if e.rtt_ms is not None]


@dataclass
class Hop:
    ttl: int
    probes: list[tuple[str | None, float | None]]  # (who answered, rtt ms) per probe
    reached: bool = False  # port unreachable from the target itself


@dataclass
class TraceResult:
    target: str
    max_ttl: int
    hops: list[Hop] = field(default_factory=list)
    error: str | None = None


def checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return int(~total & 0xFFFF)


def echo_request(ident: int, seq: int, size: int) -> bytes:
    payload = bytes(i & 0xFF for i in range(size))
    head = struct.pack("!BBHHH", ECHO_REQUEST, 0, 0, ident, seq)
    return struct.pack("!BBHHH", ECHO_REQUEST, 0, checksum(head + payload), ident, seq) + payload


def parse_ip(packet: bytes) -> tuple[str, int, bytes] | None:
    """(source address, TTL, ICMP message) of an IPv4 packet from a raw ICMP socket."""
    if len(packet) < 28 or packet[0] >> 4 != 4:
        return None
    header = (packet[0] & 0x0F) * 4
    return socket.inet_ntoa(packet[12:16]), packet[8], packet[header:]


def _in_namespace(ns: str, opener: Callable[[], list[socket.socket]]) -> list[socket.socket]:
    with netnsutil.entered(ns):
        return opener()


def ping(ns: str, target: str, count: int = 5, size: int = 56, wait: float = 1.0, interval: float = 0.2,
         source: str | None = None, ttl: int = 64) -> PingResult:
    result = PingResult(target, size)
    try:
        address = socket.inet_ntoa(socket.inet_aton(target))
    except OSError:
        result.error = f"cannot resolve {target}: Unknown host"
        return result
    try:
        (sock,) = _in_namespace(ns, lambda: [socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)])
    except OSError as exc:
        result.error = f"cannot open a socket in {ns}: {exc}"
        return result
    ident = (os.getpid() ^ id(result)) & 0xFFFF
    try:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, ttl)
        if source:
            sock.bind((source, 0))
        for seq in range(count):
            sent = time.monotonic()
            try:
                sock.sendto(echo_request(ident, seq, size), (address, 0))
            except OSError as exc:
                result.error = f"sendto: {exc.strerror or exc}"
                result.echoes.append(Echo(seq, None))
                break
            echo = Echo(seq, None)
            deadline = sent + wait
            while (left := deadline - time.monotonic()) > 0:
                ready, _, _ = select.select([sock], [], [], left)
                if not ready:
                    break
                parsed = parse_ip(sock.recv(65535))
                if parsed is None:
                    continue
                who, hops, icmp = parsed
                kind, _, _, rid, rseq = struct.unpack("!BBHHH", icmp[:8])
                if kind == ECHO_REPLY and rid == ident and rseq == seq and who == address:
                    echo = Echo(seq, (time.monotonic() - sent) * 1000.0, hops, len(icmp))
                    break
            result.echoes.append(echo)
            if seq + 1 < count:
                time.sleep(max(0.0, interval - (time.monotonic() - sent)))
    finally:
        sock.close()
    return result


def traceroute(ns: str, target: str, max_ttl: int = 30, probes: int = 3, wait: float = 1.0,
               source: str | None = None) -> TraceResult:
    result = TraceResult(target, max_ttl)
    try:
        address = socket.inet_ntoa(socket.inet_aton(target))
    except OSError:
        result.error = f"cannot resolve {target}: Unknown host"
        return result
    try:
        raw, udp = _in_namespace(ns, lambda: [socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP),
                                              socket.socket(socket.AF_INET, socket.SOCK_DGRAM)])
    except OSError as exc:
        result.error = f"cannot open a socket in {ns}: {exc}"
        return result
    try:
        udp.bind((source or "0.0.0.0", 0))
        local_port = udp.getsockname()[1]
        port = TRACE_PORT
        for ttl in range(1, max_ttl + 1):
            hop = Hop(ttl, [])
            for _ in range(probes):
                udp.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, ttl)
                sent = time.monotonic()
                try:
                    udp.sendto(b"\0" * 24, (address, port))
                except OSError as exc:
                    result.error = f"sendto: {exc.strerror or exc}"
                    result.hops.append(hop)
                    return result
                answer: tuple[str | None, float | None] = (None, None)
                deadline = sent + wait
                while (left := deadline - time.monotonic()) > 0:
                    ready, _, _ = select.select([raw], [], [], left)
                    if not ready:
                        break
                    parsed = parse_ip(raw.recv(65535))
                    if parsed is None:
                        continue
                    who, _, icmp = parsed
                    if icmp[0] not in (TIME_EXCEEDED, DEST_UNREACH) or len(icmp) < 36:
                        continue
                    inner = parse_ip(icmp[8:])
                    if inner is None or len(inner[2]) < 4:
                        continue
                    sport, dport = struct.unpack("!HH", inner[2][:4])
                    if sport != local_port or dport != port:
                        continue
                    answer = (who, (time.monotonic() - sent) * 1000.0)
                    if icmp[0] == DEST_UNREACH and who == address:
                        hop.reached = True
                    break
                hop.probes.append(answer)
                port += 1
            result.hops.append(hop)
            if hop.reached:
                break
            tail = result.hops[-SILENT_HOPS:]
            if len(tail) == SILENT_HOPS and all(who is None for h in tail for who, _ in h.probes):
                result.error = f"no answer from {SILENT_HOPS} hops in a row: stopped"
                break
    finally:
        raw.close()
        udp.close()
    return result


# ---------------------------------------------------------------------- layouts
def junos_ping(result: PingResult) -> tuple[str, int]:
    if result.error and not result.echoes:
        return f"ping: {result.error}\n", 1
    lines = [f"PING {result.target} ({result.target}): {result.size} data bytes"]
    for echo in result.echoes:
        if echo.rtt_ms is not None:
            lines.append(f"{echo.size} bytes from {result.target}: icmp_seq={echo.seq} ttl={echo.ttl} "
                         f"time={echo.rtt_ms:.3f} ms")
    if result.error:
        lines.append(f"ping: {result.error}")
    got = result.received
    sent = len(result.echoes)
    loss = 100 - (100 * len(got) // sent if sent else 0)
    lines += ["", f"--- {result.target} ping statistics ---",
              f"{sent} packets transmitted, {len(got)} packets received, {loss}% packet loss"]
    if got:
        spread = statistics.pstdev(got) if len(got) > 1 else 0.0
        lines.append(f"round-trip min/avg/max/stddev = {min(got):.3f}/{statistics.mean(got):.3f}/"
                     f"{max(got):.3f}/{spread:.3f} ms")
    return "".join(line + "\n" for line in lines), 0 if got else 1


def ios_ping(result: PingResult, timeout: float) -> tuple[str, int]:
    if result.error and not result.echoes:
        return f"% {result.error}\n", 1
    lines = ["Type escape sequence to abort.",
             f"Sending {len(result.echoes)}, {result.size + 8 + 20}-byte ICMP Echos to {result.target}, "
             f"timeout is {timeout:g} seconds:",
             "".join("!" if e.rtt_ms is not None else "." for e in result.echoes)]
    got = result.received
    sent = len(result.echoes)
    rate = 100 * len(got) // sent if sent else 0
    summary = f"Success rate is {rate} percent ({len(got)}/{sent})"
    if got:
        summary += (f", round-trip min/avg/max = {round(min(got))}/{round(statistics.mean(got))}/"
                    f"{round(max(got))} ms")
    lines.append(summary)
    return "".join(line + "\n" for line in lines), 0 if got else 1


def _hop_text(hop: Hop, ios: bool) -> str:
    parts: list[str] = []
    last: str | None = None
    for who, rtt in hop.probes:
        if who is None:
            parts.append("*")
            continue
        if who != last:
            parts.append(who if ios else f"{who} ({who})")
            last = who
        parts.append(f"{rtt:.3f} ms" if not ios else f"{max(1, round(rtt or 0))} msec")
    return ("  " if not ios else " ").join(parts)


def junos_traceroute(result: TraceResult) -> tuple[str, int]:
    if result.error and not result.hops:
        return f"traceroute: {result.error}\n", 1
    lines = [f"traceroute to {result.target} ({result.target}), {result.max_ttl} hops max, 52 byte packets"]
    lines += [f"{hop.ttl:>2}  {_hop_text(hop, ios=False)}" for hop in result.hops]
    if result.error:
        lines.append(f"traceroute: {result.error}")
    reached = bool(result.hops) and result.hops[-1].reached
    return "".join(line + "\n" for line in lines), 0 if reached else 1


def ios_traceroute(result: TraceResult) -> tuple[str, int]:
    if result.error and not result.hops:
        return f"% {result.error}\n", 1
    lines = ["Type escape sequence to abort.", f"Tracing the route to {result.target}",
             "VRF info: (vrf in name/id, vrf out name/id)"]
    lines += [f"{hop.ttl:>2} {_hop_text(hop, ios=True)}" for hop in result.hops]
    if result.error:
        lines.append(f"% {result.error}")
    reached = bool(result.hops) and result.hops[-1].reached
    return "".join(line + "\n" for line in lines), 0 if reached else 1
