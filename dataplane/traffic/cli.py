"""`python -m dataplane.traffic send|receive`: the command line (JSON on stdout)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from typing import IO, Any

from .frames import make_flows, reverse_flows
from .receive import Receiver
from .send import Sender


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
                        cpu=args.cpu, realtime=args.realtime, quantum_ms=args.quantum_ms)
    signal.signal(signal.SIGINT, lambda *_: sender.stop())
    signal.signal(signal.SIGTERM, lambda *_: sender.stop())
    if args.config == "-":
        _stop_on_eof(sender.stop)
    if config is not None:  # after its frames are built, as its first packets leave
        sender.on_ready = lambda: _emit(out, {"ready": True})
    _emit(out, sender.run())
    return 0


def _cli_receive(args: argparse.Namespace, config: dict[str, Any] | None, out: IO[str]) -> int:
    if config is not None:
        receiver = Receiver.from_config(config)
    else:
        if args.duration is None and args.idle is None:
            args.duration = 60.0  # bounded by design
        receiver = Receiver(port=args.port, bind=args.bind, iface=args.iface, ns=args.netns, family=args.family,
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
    from . import __doc__ as package_doc

    parser = argparse.ArgumentParser(prog="python -m dataplane.traffic", description=package_doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("send", help="send flows at a constant rate from pre-built frames")
    s.add_argument("--netns", help="namespace to send from (default: the current one)")
    s.add_argument("--iface", help="interface to send on (AF_PACKET)")
    s.add_argument("--flows", type=int, default=100, help="number of flows (distinct source addresses)")
    s.add_argument("--sources", default="100.64.0.0/16",
                   help="prefix the source addresses come from (IPv4 or IPv6)")
    s.add_argument("--dst", default="203.0.113.10",
                   help="destination address(es), comma-separated, of the sources' family")
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
    s.add_argument("--quantum-ms", type=float, default=0.25,
                   help="paced: send what is due in one call about this often (0: a call per packet)")
    r = sub.add_parser("receive", help="count flows, report loss/reordering/gaps/convergence")
    r.add_argument("--netns", help="namespace to receive in (default: the current one)")
    r.add_argument("--port", type=int, help="UDP port (UDP socket mode)")
    r.add_argument("--bind", help="address to bind in UDP mode (default: any address of --family)")
    r.add_argument("--family", type=int, choices=(4, 6), default=4, help="IP version to receive")
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
