"""Background UDP sessions: many distinct 5-tuples opened once, then asked whether a reverse packet passes.

A firewall pair holds sessions; what matters after a failover is whether the node that took over
lets a session's reverse packet through (an SRX drops a packet from the untrust side that matches no
session). This tool opens COUNT such sessions and answers that question per session:

    python -m dataplane.traffic.sessionload serve --bind 203.0.113.10 --port 7100 --seconds 600
    python -m dataplane.traffic.sessionload hold --sources 100.64.64.0/18 --count 10000 \\
        --to 203.0.113.10:7100 --port-base 20000 --seconds 600

Session I comes from address I mod A of SOURCES (A: its usable addresses; the client host's AnyIP
route makes them local) and port PORT_BASE + I div A, and carries its number in every datagram.
`hold` binds one socket per source port on every address of the host, so the reverse packets reach a
socket (no ICMP port-unreachable) and it knows each session by the number in the datagram.

Both read commands on stdin, one per line, and answer each with one JSON line on stdout:

- `serve`, once listening, prints {"serving": ADDR:PORT}. It echoes every datagram and remembers the
  address and port it came from (behind a NAT: the session's public binding). `probe RATE`: one
  datagram to every remembered session at RATE per second, the reverse direction alone;
  {"probed": N, "seconds": S}. `sample STEP`: set aside the sessions whose number is a multiple of
  STEP, {"sampled": N}; `probe RATE sample` then sends to those alone (the list is made beforehand,
  so that a probe right after an event starts at once). `report`: {"sessions": N, "echoed": M}.
- `hold`, once bound, prints {"holding": COUNT, "ports": K}. `open RATE WAIT [QUIET]`: one datagram
  from every session at RATE per second, then up to WAIT seconds for their echoes (with QUIET: less
  when none arrived for that long); then the same once more for the sessions not answered (a datagram
  lost on a loaded path); {"sent", "sent_again", "answered", "missing" (up to 20
  "ADDR:PORT"), "seconds"}. `expect`: forget what arrived. `count WAIT QUIET [STEP]`:
  wait until every session (with STEP: every one whose number is a multiple of STEP) got a datagram
  since `expect`, or WAIT seconds, or QUIET seconds without a new one; {"received",
  "missing_count", "missing", "missing_indexes" (every one)}.

Both end at end of input, on `quit`, or after --seconds.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import select
import socket
import struct
import sys
import threading
import time
from collections.abc import Sequence
from ipaddress import IPv4Address, IPv4Network

from .netio import grow_rcvbuf

MAGIC = b"LBS1"
MISSING_SHOWN = 20
IP_PKTINFO = getattr(socket, "IP_PKTINFO", 8)  # Linux's value; Python 3.11 does not name it
# Receive queues (bytes, the kernel doubles them): a datagram queued here costs ~1 KiB of the budget
# whatever its size. While a million sessions open at 20,000 a second the server falls behind by
# seconds at times (its CPU shared with the forwarding and the session sync); a queue of rmem_max
# (4 MiB) overflowed and lost a whole block of sessions (UdpRcvbufErrors). Memory is used only while
# datagrams wait.
SERVER_RCVBUF = 256 << 20
CLIENT_RCVBUF = 64 << 20


def payload(index: int) -> bytes:
    return MAGIC + index.to_bytes(4, "big")


def index_of(data: bytes) -> int | None:
    """The session number a datagram carries, None for anything else."""
    if len(data) < 8 or data[:4] != MAGIC:
        return None
    return int.from_bytes(data[4:8], "big")


def usable(sources: IPv4Network) -> tuple[int, int]:
    """(first address as an int, how many) of SOURCES usable as session sources: a prefix longer
    than /31 without its network and broadcast addresses."""
    first, size = int(sources.network_address), sources.num_addresses
    return (first + 1, size - 2) if size > 2 else (first, size)


def session_of(index: int, sources: IPv4Network, port_base: int) -> tuple[str, int]:
    """Session INDEX's source address and port."""
    first, size = usable(sources)
    return str(IPv4Address(first + index % size)), port_base + index // size


def ports_needed(count: int, sources: IPv4Network) -> int:
    size = usable(sources)[1]
    return max(1, -(-count // size))


def _say(obj: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def _commands(deadline: float):  # type: ignore[no-untyped-def]
    """Lines of stdin until its end, `quit` or DEADLINE (monotonic)."""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([sys.stdin], [], [], 0.2)
        if not ready:
            continue
        line = sys.stdin.readline()
        if not line or line.strip() == "quit":
            return
        if line.strip():
            yield line.split()


def _paced(total: int, rate: float):  # type: ignore[no-untyped-def]
    """Indexes 0..TOTAL-1 at RATE per second (in batches of a hundredth of a second)."""
    start, batch, done = time.monotonic(), max(1, int(rate / 100)), 0
    while done < total:
        end = min(total, done + batch)
        yield from range(done, end)
        done = end
        ahead = start + done / rate - time.monotonic()
        if ahead > 0:
            time.sleep(ahead)


def serve(address: str, port: int, seconds: float) -> int:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    grow_rcvbuf(sock, SERVER_RCVBUF)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    sock.bind((address, port))
    sock.setblocking(False)
    peers: dict[tuple[str, int], bytes] = {}
    sample: list[tuple[tuple[str, int], bytes]] = []  # `sample STEP`'s sessions
    echoed = [0]
    lock = threading.Lock()
    stop = threading.Event()

    def echo() -> None:
        while not stop.is_set():
            ready, _, _ = select.select([sock], [], [], 0.2)
            if not ready:
                continue
            with lock:
                for _ in range(256):
                    try:
                        data, peer = sock.recvfrom(64)
                    except BlockingIOError:
                        break
                    if index_of(data) is None:
                        continue
                    peers[peer] = data[:8]
                    with contextlib.suppress(BlockingIOError):
                        sock.sendto(data, peer)
                    echoed[0] += 1

    thread = threading.Thread(target=echo, daemon=True)
    thread.start()
    _say({"serving": f"{address}:{sock.getsockname()[1]}"})  # --port 0: the port the kernel chose
    try:
        for words in _commands(time.monotonic() + seconds):
            if words[0] == "sample":
                step = int(words[1])
                with lock:
                    sample = [(peer, data) for peer, data in peers.items() if (index_of(data) or 0) % step == 0]
                _say({"sampled": len(sample)})
            elif words[0] == "probe":
                if words[2:3] == ["sample"]:
                    targets = sample
                else:
                    with lock:
                        targets = list(peers.items())
                started = time.monotonic()
                for i in _paced(len(targets), float(words[1])):
                    peer, data = targets[i]
                    while True:
                        try:
                            sock.sendto(data, peer)
                            break
                        except BlockingIOError:
                            time.sleep(0.001)
                _say({"probed": len(targets), "seconds": round(time.monotonic() - started, 3)})
            elif words[0] == "report":
                with lock:
                    _say({"sessions": len(peers), "echoed": echoed[0]})
            else:
                _say({"error": f"unknown command {words[0]!r}"})
    finally:
        stop.set()
        thread.join(1)
    return 0


class Holder:
    """The client side: a socket per source port, a receiver thread marking the sessions heard from."""

    def __init__(self, sources: IPv4Network, count: int, to: tuple[str, int], port_base: int):
        self.sources, self.count, self.to, self.port_base = sources, count, to, port_base
        self.first, self.size = usable(sources)
        self.socks = []
        for k in range(ports_needed(count, sources)):
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            grow_rcvbuf(sock, CLIENT_RCVBUF)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            sock.bind(("0.0.0.0", port_base + k))  # every local address: the AnyIP prefix's too
            sock.setblocking(False)
            self.socks.append(sock)
        self.heard = bytearray(count)
        self.received = 0
        self.last_arrival = 0.0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._receive, daemon=True)
        self.thread.start()

    def _receive(self) -> None:
        while not self.stop.is_set():
            ready, _, _ = select.select(self.socks, [], [], 0.2)
            for sock in ready:
                for _ in range(256):
                    try:
                        data = sock.recv(64)
                    except BlockingIOError:
                        break
                    index = index_of(data)
                    if index is not None and index < self.count and not self.heard[index]:
                        self.heard[index] = 1
                        self.received += 1
                        self.last_arrival = time.monotonic()

    def expect(self) -> None:
        self.heard[:] = bytes(self.count)
        self.received, self.last_arrival = 0, 0.0

    def send_all(self, rate: float, which: Sequence[int]) -> int:
        """One datagram from each session of WHICH, at RATE per second."""
        for n in _paced(len(which), rate):
            i = which[n]
            source = struct.pack("!I", self.first + i % self.size)
            info = struct.pack("@i4s4s", 0, source, b"\0\0\0\0")  # in_pktinfo: the source address
            sock = self.socks[i // self.size]
            while True:
                try:
                    sock.sendmsg([payload(i)], [(socket.IPPROTO_IP, IP_PKTINFO, info)], 0, self.to)
                    break
                except BlockingIOError:
                    time.sleep(0.001)
        return len(which)

    def heard_of(self, step: int) -> int:
        """How many of the sessions whose number is a multiple of STEP were heard from."""
        return self.received if step == 1 else sum(self.heard[::step])

    def wait(self, seconds: float, quiet: float | None = None, step: int = 1) -> None:
        """Until every session (with STEP: whose number is a multiple of it) was heard, SECONDS passed,
        or (QUIET) that long without a new one. A datagram of a session left out (a late echo) does
        not count."""
        start = time.monotonic()
        want = len(range(0, self.count, step))
        while self.heard_of(step) < want and time.monotonic() - start < seconds:
            if quiet is not None and time.monotonic() - max(start, self.last_arrival) > quiet:
                break
            time.sleep(0.05)

    def missing_indexes(self, step: int = 1) -> list[int]:
        """The sessions not heard from (with STEP: of those whose number is a multiple of STEP)."""
        return [i for i in range(0, self.count, step) if not self.heard[i]]

    def missing(self, step: int = 1) -> list[str]:
        out = []
        for i in range(0, self.count, step):
            if not self.heard[i]:
                address, port = session_of(i, self.sources, self.port_base)
                out.append(f"{address}:{port}")
                if len(out) == MISSING_SHOWN:
                    break
        return out

    def close(self) -> None:
        self.stop.set()
        self.thread.join(1)
        for sock in self.socks:
            sock.close()


def hold(sources: IPv4Network, count: int, to: tuple[str, int], port_base: int, seconds: float) -> int:
    holder = Holder(sources, count, to, port_base)
    _say({"holding": count, "ports": len(holder.socks)})
    try:
        for words in _commands(time.monotonic() + seconds):
            if words[0] == "open":
                holder.expect()
                started = time.monotonic()
                rate, wait = float(words[1]), float(words[2])
                quiet = float(words[3]) if len(words) > 3 else None
                sent = holder.send_all(rate, range(count))
                holder.wait(wait, quiet)
                # once more for the sessions whose first datagram or echo was lost on a loaded path
                again = holder.missing_indexes()
                if again:
                    holder.send_all(rate, again)
                    holder.wait(wait, quiet)
                _say({"sent": sent, "sent_again": len(again), "answered": holder.received,
                      "missing": holder.missing(), "seconds": round(time.monotonic() - started, 3)})
            elif words[0] == "expect":
                holder.expect()
                _say({"ok": True})
            elif words[0] == "count":
                step = int(words[3]) if len(words) > 3 else 1
                holder.wait(float(words[1]), float(words[2]), step)
                missing = holder.missing_indexes(step)
                _say({"received": holder.heard_of(step), "missing_count": len(missing),
                      "missing": holder.missing(step), "missing_indexes": missing})
            else:
                _say({"error": f"unknown command {words[0]!r}"})
    finally:
        holder.close()
    return 0


def _target(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host, int(port)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m dataplane.traffic.sessionload", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="echo every session once, send the reverse probes")
    s.add_argument("--bind", required=True)
    s.add_argument("--port", type=int, default=7100)
    h = sub.add_parser("hold", help="open the sessions, count the reverse probes per session")
    h.add_argument("--sources", type=IPv4Network, required=True, help="client addresses (AnyIP prefix)")
    h.add_argument("--count", type=int, required=True)
    h.add_argument("--to", type=_target, required=True, help="HOST:PORT of the server")
    h.add_argument("--port-base", type=int, default=20000, help="the first source port")
    for p in (s, h):
        p.add_argument("--seconds", type=float, default=600.0, help="stop after this long (bounded by design)")
    args = parser.parse_args(argv)
    if args.command == "serve":
        return serve(args.bind, args.port, args.seconds)
    if args.count < 1 or args.port_base + ports_needed(args.count, args.sources) > 65536:
        parser.error(f"--count {args.count}: needs 1 or more sessions, and source ports up to 65535")
    return hold(args.sources, args.count, args.to, args.port_base, args.seconds)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
