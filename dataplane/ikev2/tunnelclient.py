"""FlexVPN remote-access clients whose tunnels carry traffic: IKEv2 through the cluster VIP (redirects
followed), then ESP-in-UDP on a TUN device until stopped.

`python -m dataplane.ikev2.tunnelclient --gateway VIP --route 10.10.10.254/32 --count 30` runs inside a
client host's namespace: every client gets its virtual address from the member it ends on; the
addresses go on the TUN device (default `ike0`) and ROUTE is routed into it, so `ping -I ADDRESS TARGET`
crosses the tunnel of that client. IKE runs on UDP 4500 from the start (RFC 7296 2.23), so ESP is
encapsulated (RFC 3948) as strongSwan's kernel-libipsec does. One JSON line is printed once every
client is up (or failed); on SIGTERM/SIGINT the IKE SAs are deleted and the device goes.
"""

from __future__ import annotations

import argparse
import json
import selectors
import signal
import sys
import time
from dataclasses import asdict
from ipaddress import IPv4Network

from ..esp.engine import EspEngine, drain_udp
from ..esp.sa import EspSa
from ..esp.tunnel import Tunnel
from .client import ClientConfig, Runner, parse_suite


def tunnels_of(runner: Runner) -> list[Tunnel]:
    """One ESP tunnel per established client that got an address and a CHILD_SA."""
    out = []
    for session in runner.sessions:
        attempt = session.attempt
        if not session.result.ok or attempt is None or attempt.address is None or attempt.peer_child_spi is None:
            continue
        keys, suite = attempt.child_keys(), session.config.esp
        outbound = EspSa(attempt.peer_child_spi, suite.encr, keys.encr_i, suite.integ, keys.integ_i)
        inbound = EspSa(attempt.child_spi, suite.encr, keys.encr_r, suite.integ, keys.integ_r)
        out.append(Tunnel(session.name, (session.target, 4500), outbound, inbound,
                          remote=(IPv4Network("0.0.0.0/0"),), local=(IPv4Network(f"{attempt.address}/32"),)))
    return out


def carry(runner: Runner, engine: EspEngine, seconds: float | None) -> None:
    """Move packets between the TUN device and the socket until SECONDS pass or a signal arrives."""
    stop = {"now": False}

    def on_signal(_signum: int, _frame: object) -> None:
        stop["now"] = True

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    selector = selectors.DefaultSelector()
    runner.sock.setblocking(False)
    selector.register(runner.sock, selectors.EVENT_READ, "udp")
    assert engine.fd is not None
    selector.register(engine.fd, selectors.EVENT_READ, "tun")
    end = None if seconds is None else time.monotonic() + seconds
    while not stop["now"] and (end is None or time.monotonic() < end):
        for key, _ in selector.select(0.2):
            if key.data == "tun":
                engine.tun_readable()
                continue
            drain_udp(runner.sock, engine)
    selector.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dataplane.ikev2.tunnelclient",
                                     description="FlexVPN clients whose tunnels carry traffic (ESP on a TUN device)")
    parser.add_argument("--gateway", required=True, help="the cluster VIP")
    parser.add_argument("--route", action="append", default=[], help="a prefix routed into the tunnels (repeat)")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--identity", default="client")
    parser.add_argument("--psk", help="the pre-shared key")
    parser.add_argument("--psk-file", help="a lab's pre-shared key file (STATE_DIR/nodes/ROUTER/psk.secret.json)")
    parser.add_argument("--ike", default="aes256-sha256-ecp256")
    parser.add_argument("--esp", default="aes256gcm16", help="aes256gcm16, aes128gcm16, aes256-sha256, ...")
    parser.add_argument("--device", default="ike0")
    parser.add_argument("--seconds", type=float, help="stop after this long (default: until a signal)")
    parser.add_argument("--deadline", type=float, default=60.0)
    args = parser.parse_args(argv)
    if args.psk_file:
        from labkit.files import read_secret

        try:
            args.psk = read_secret(args.psk_file, "psk")
        except ValueError as exc:
            parser.error(str(exc))
    if not args.psk:
        parser.error("give the pre-shared key: --psk KEY or --psk-file STATE_DIR/nodes/ROUTER/psk.secret.json")
    configs = [(f"c{i + 1}", ClientConfig(gateway=args.gateway, identity=args.identity, psk=args.psk.encode(),
                                          port=4500, ike=parse_suite(args.ike, False), esp=parse_suite(args.esp, True)))
               for i in range(args.count)]
    runner = Runner("0.0.0.0", 4500, keep=True, concurrency=min(args.count, 8))
    results = runner.run(configs, args.deadline)
    tunnels = tunnels_of(runner)
    def send(peer: tuple[str, int], data: bytes) -> None:
        runner.sock.sendto(data, peer)

    engine = EspEngine(args.device, send,
                       tuple(IPv4Network(r) for r in args.route), by_source=True)
    status = 0 if len(tunnels) == len(results) else 1
    try:
        engine.open(tuple(str(t.local[0].network_address) for t in tunnels))
    except OSError as exc:
        print(json.dumps({"error": f"no TUN device: {exc}", "results": [asdict(r) for r in results]}), flush=True)
        runner.delete_all()
        return 1
    for tunnel in tunnels:
        engine.add(tunnel)
    print(json.dumps({"ok": len(tunnels), "count": len(results), "device": args.device,
                      "results": [asdict(r) for r in results]}), flush=True)
    try:
        carry(runner, engine, args.seconds)
    finally:
        print(json.dumps({"esp": engine.status()}), flush=True)
        engine.close()
        runner.delete_all()
        runner.close()
    return status


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
