"""A misbehaving IKEv2 "gateway" for the redirect security tests (RFC 5685 section 7, 9).

    --mode bad-nonce   answer every IKE_SA_INIT with a REDIRECT to --redirect-to carrying a WRONG
                       nonce (a forged answer); with --then, DELAY seconds later a genuine REDIRECT
                       (the initiator's nonce) to that address
    --mode loop        answer every IKE_SA_INIT with a genuine REDIRECT to --redirect-to (itself by
                       default): a redirect loop the initiator must break at max-redirects

Prints one JSON line per answer sent, then a summary when --seconds run out (or on SIGTERM).
"""

from __future__ import annotations

import argparse
import json
import os
import select
import signal
import socket
import sys
import time

from . import codec, iana, redirect_notify


def redirect(message: codec.Message, gateway: str, nonce: bytes) -> bytes:
    header = codec.Header(message.header.spi_i, bytes(8), iana.NOTIFY, iana.IKE_SA_INIT, iana.FLAG_RESPONSE, 0)
    return codec.encode(header, [codec.NotifyPayload(iana.REDIRECT, redirect_notify.encode_redirect(gateway, nonce))])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dataplane.ikev2.forge")
    parser.add_argument("--bind", required=True)
    parser.add_argument("--port", type=int, default=500)
    parser.add_argument("--mode", choices=("bad-nonce", "loop"), required=True)
    parser.add_argument("--redirect-to", help="where the forged / looping REDIRECT points (default: --bind)")
    parser.add_argument("--then", help="bad-nonce: where the genuine REDIRECT that follows points")
    parser.add_argument("--delay", type=float, default=0.2)
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args(argv)
    target = args.redirect_to or args.bind
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((args.bind, args.port))
    print(json.dumps({"listening": f"{args.bind}:{args.port}", "mode": args.mode}), flush=True)
    stop = [False]
    signal.signal(signal.SIGTERM, lambda *_: stop.__setitem__(0, True))
    later: list[tuple[float, bytes, tuple[str, int]]] = []
    counts = {"requests": 0, "forged": 0, "genuine": 0}
    end = time.monotonic() + args.seconds
    while not stop[0] and time.monotonic() < end:
        now = time.monotonic()
        for item in [x for x in later if x[0] <= now]:
            sock.sendto(item[1], item[2])
            later.remove(item)
            counts["genuine"] += 1
            print(json.dumps({"sent": "genuine REDIRECT", "to": item[2][0], "gateway": args.then}), flush=True)
        wait = min([x[0] for x in later], default=now + 0.2) - now
        ready, _, _ = select.select([sock], [], [], max(0.0, min(0.2, wait)))
        if not ready:
            continue
        data, peer = sock.recvfrom(65535)
        try:
            message = codec.decode(data)
        except codec.IkeError:
            continue
        nonce = message.first(codec.NoncePayload)
        if message.header.exchange != iana.IKE_SA_INIT or message.header.is_response \
                or not isinstance(nonce, codec.NoncePayload):
            continue
        counts["requests"] += 1
        if args.mode == "loop":
            sock.sendto(redirect(message, target, nonce.data), peer)
            counts["genuine"] += 1
            print(json.dumps({"sent": "genuine REDIRECT (loop)", "to": peer[0], "gateway": target}), flush=True)
            continue
        wrong = bytes(b ^ 0x5A for b in nonce.data) if nonce.data else os.urandom(32)
        sock.sendto(redirect(message, target, wrong), peer)
        counts["forged"] += 1
        print(json.dumps({"sent": "forged REDIRECT (wrong nonce)", "to": peer[0], "gateway": target}), flush=True)
        if args.then:
            later.append((time.monotonic() + args.delay, redirect(message, args.then, nonce.data), peer))
    print(json.dumps({"summary": counts}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
