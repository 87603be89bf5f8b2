"""A UDP echo server and a many-source probe: which subscriber addresses get through, both ways.

Not the traffic generator (that one sends at rate with pre-built frames); this answers a yes/no
per source address, which is what symmetry and CHASH tests need:

    python -m dataplane.traffic.udpprobe serve --bind 203.0.113.9 --port 7000 [--seconds 30]
    python -m dataplane.traffic.udpprobe probe --sources 100.64.1.0/22 --count 1000 --to 203.0.113.9:7000

`probe` binds one socket per source address (the client host's AnyIP route makes every address of
its prefix local), sends one datagram from each, waits for echoes and prints JSON:
{"sent": N, "answered": [addresses...], "missing": [addresses...]}.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import select
import socket
import sys
import time
from ipaddress import IPv4Network, IPv6Network, ip_address, ip_network


def serve(address: str, port: int, seconds: float) -> int:
    # Bound to the service address so echoes leave from it: an echo from another source would
    # not match the firewall session and would (rightly) be dropped by the SRX.
    sock = socket.socket(_family(address), socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)  # a probe arrives as one burst
    sock.bind((address, port))
    print(json.dumps({"serving": f"{address}:{port}"}), flush=True)
    deadline = time.monotonic() + seconds
    echoed = 0
    while time.monotonic() < deadline:
        ready, _, _ = select.select([sock], [], [], 0.2)
        if ready:
            data, peer = sock.recvfrom(2048)
            sock.sendto(data, peer)
            echoed += 1
    print(json.dumps({"echoed": echoed}))
    return 0


def push_serve(address: str, port: int, rate: float, seconds: float) -> int:
    """Server push: wait for one datagram, then stream numbered datagrams back to its sender at
    RATE per second for SECONDS (the client never sends again: a server-initiated direction)."""
    sock = socket.socket(_family(address), socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((address, port))
    print(json.dumps({"serving": f"{address}:{port}"}), flush=True)
    _, peer = sock.recvfrom(2048)
    interval, sent, start = 1.0 / rate, 0, time.monotonic()
    while (now := time.monotonic()) - start < seconds:
        due = int((now - start) / interval) + 1
        while sent < due:
            sock.sendto(sent.to_bytes(8, "big"), peer)
            sent += 1
        time.sleep(interval / 2)
    print(json.dumps({"pushed": sent, "to": f"{peer[0]}:{peer[1]}"}), flush=True)
    return 0


def pull(source: str, port: int, target: tuple[str, int], seconds: float) -> dict[str, object]:
    """Send one datagram to a push server, then only receive: count, gaps, last sequence."""
    sock = socket.socket(_family(source), socket.SOCK_DGRAM)
    sock.bind((source, port))
    sock.sendto(b"start", target)
    sock.settimeout(0.2)
    received, last, highest, gap, gap_at = 0, time.monotonic(), -1, 0.0, 0.0
    start = time.monotonic()
    while time.monotonic() - start < seconds:
        try:
            data = sock.recv(2048)
        except TimeoutError:
            continue
        now = time.monotonic()
        if now - last > gap and received:
            gap, gap_at = now - last, last - start
        last = now
        received += 1
        highest = max(highest, int.from_bytes(data[:8], "big"))
    return {"received": received, "highest_seq": highest, "lost": highest + 1 - received,
            "longest_gap_s": round(gap, 4), "gap_started_at_s": round(gap_at, 3)}


def probe(sources: IPv4Network | IPv6Network, count: int, target: tuple[str, int], port: int, timeout: float,
          rounds: int) -> dict[str, object]:
    addresses = [str(a) for _, a in zip(range(count), sources.hosts(), strict=False)]
    sockets = {}
    for address in addresses:
        sock = socket.socket(_family(address), socket.SOCK_DGRAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((address, port))
        sock.setblocking(False)
        sockets[sock.fileno()] = (address, sock)
    answered: set[str] = set()
    for _ in range(rounds):
        for index, (address, sock) in enumerate(sockets.values()):
            if address not in answered:
                with contextlib.suppress(BlockingIOError):  # the next round resends
                    sock.sendto(address.encode(), target)
                if index % 100 == 99:
                    time.sleep(0.002)  # let the forwarding path's backlogs (1000 packets) drain
        deadline = time.monotonic() + timeout
        while len(answered) < len(addresses) and time.monotonic() < deadline:
            poller = select.poll()
            for fd, (address, _) in sockets.items():
                if address not in answered:
                    poller.register(fd, select.POLLIN)
            for fd, _ev in poller.poll(50):
                address, sock = sockets[fd]
                try:
                    sock.recv(2048)
                    answered.add(address)
                except BlockingIOError:
                    pass
    for _, sock in sockets.values():
        sock.close()
    return {"sent": len(addresses), "answered": sorted(answered, key=_key),
            "missing": sorted(set(addresses) - answered, key=_key)}


def _key(address: str) -> int:
    return int(ip_address(address))


def _family(address: str) -> socket.AddressFamily:
    """AF_INET6 for an IPv6 address (a dual-stack lab's prefixes6), else AF_INET."""
    return socket.AF_INET6 if ip_address(address).version == 6 else socket.AF_INET


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python -m dataplane.traffic.udpprobe", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("serve", help="echo every datagram back to its sender")
    s.add_argument("--bind", required=True, help="address to serve on (and to answer from)")
    s.add_argument("--port", type=int, default=7000)
    s.add_argument("--seconds", type=float, default=30.0, help="stop after this long (bounded by design)")
    p = sub.add_parser("probe", help="one datagram from each source address; report who got an echo")
    p.add_argument("--sources", type=ip_network, required=True, help="IPv4 or IPv6 prefix")
    p.add_argument("--count", type=int, default=1000)
    p.add_argument("--to", required=True, help="HOST:PORT of the echo server")
    p.add_argument("--port", type=int, default=40000, help="source port (the same for every address)")
    p.add_argument("--timeout", type=float, default=1.0)
    p.add_argument("--rounds", type=int, default=3, help="resend to the silent ones this many times")
    ps = sub.add_parser("push", help="wait for one datagram, then stream to its sender (server push)")
    ps.add_argument("--bind", required=True)
    ps.add_argument("--port", type=int, default=7100)
    ps.add_argument("--rate", type=float, default=200.0, help="datagrams per second")
    ps.add_argument("--seconds", type=float, default=10.0)
    pl = sub.add_parser("pull", help="send one datagram to a push server, then count what comes back")
    pl.add_argument("--source", required=True, help="local address (e.g. a subscriber address)")
    pl.add_argument("--port", type=int, default=45100)
    pl.add_argument("--to", required=True, help="HOST:PORT of the push server")
    pl.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args(argv)
    if args.command == "push":
        return push_serve(args.bind, args.port, args.rate, args.seconds)
    if args.command == "pull":
        host, _, port = args.to.rpartition(":")
        host = host.strip("[]")  # [2001:db8::9]:7000 or 2001:db8::9:7000
        print(json.dumps(pull(args.source, args.port, (host, int(port)), args.seconds)))
        return 0
    if args.command == "serve":
        return serve(args.bind, args.port, args.seconds)
    host, _, port = args.to.rpartition(":")
    host = host.strip("[]")  # [2001:db8::9]:7000 or 2001:db8::9:7000
    result = probe(args.sources, args.count, (host, int(port)), args.port, args.timeout, args.rounds)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
