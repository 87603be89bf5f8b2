"""IKEv2 initiator for tests and load generation, with the RFC 5685 client side of redirect.

* Sends REDIRECT_SUPPORTED in its first IKE_SA_INIT (unless told not to).
* Follows a REDIRECT only when its Nonce Data equals the nonce it sent (IKE_SA_INIT), or, in
  IKE_AUTH, once the gateway has authenticated itself; a REDIRECT with a wrong nonce is ignored
  (counted) and the client keeps waiting for the genuine answer.
* To the new gateway it sends REDIRECTED_FROM with the address of the gateway that redirected it
  (e.g. `01 04 0A 0A 0A 64` for 10.10.10.100), and gives up after `max_redirects` (1..255, default 5).
* A redirected IKE SA that was already authenticated (IKE_AUTH redirect) is deleted.
* Answers a gateway's N(COOKIE) (RFC 7296 section 2.6) by sending the same IKE_SA_INIT again with
  the cookie as first payload (three times at most).

`Initiator` (dataplane.ikev2.initiator) is one attempt against one gateway, without I/O; `Runner`
drives any number of clients over one UDP socket (demultiplexed by SPI) with retransmissions;
`python -m dataplane.ikev2.client` is the command line (JSON results).
"""

from __future__ import annotations

import argparse
import json
import selectors
import socket
import sys
import time
from dataclasses import asdict, dataclass
from ipaddress import IPv4Address

from . import crypto, iana
from .initiator import DEFAULT_ESP, DEFAULT_IKE, ClientConfig, Initiator, Result

__all__ = ["DEFAULT_ESP", "DEFAULT_IKE", "ClientConfig", "Initiator", "Result", "Runner", "main", "parse_suite"]


# ------------------------------------------------------------------------------------------ runner
@dataclass
class _Session:
    name: str
    config: ClientConfig
    result: Result
    started: float
    attempt: Initiator | None = None
    target: str = ""
    sent_at: float = 0.0
    tries: int = 0
    done: bool = False
    hold_until: float | None = None


class Runner:
    """Many clients over one UDP socket bound to BIND (port 500 by default); each goes through its
    redirects and ends established (kept, or deleted with DELETE_AFTER) or failed."""

    def __init__(self, bind: str, port: int = 500, keep: bool = False, concurrency: int = 1):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        try:
            self.sock.bind((bind, port))
        except OSError:
            self.sock.bind((bind, 0))
        self.local = self.sock.getsockname()
        self.keep = keep
        self.concurrency = max(1, concurrency)
        self.by_spi: dict[bytes, _Session] = {}
        self.sessions: list[_Session] = []
        self.log: list[str] = []

    def close(self) -> None:
        self.sock.close()

    def _send(self, session: _Session, data: bytes, now: float) -> None:
        session.sent_at = now
        session.result.rtts += 1
        self.send_ike(data, session.target, session.config.port)

    def send_ike(self, data: bytes, target: str, port: int) -> None:
        """On UDP 4500 an IKE message follows the non-ESP marker (RFC 3948)."""
        self.sock.sendto(bytes(4) + data if port == 4500 else data, (target, port))

    def _begin(self, session: _Session, target: str, redirected_from: str | None, now: float) -> None:
        if session.attempt is not None:
            self.by_spi.pop(session.attempt.spi_i, None)
        session.target = target
        session.result.path.append(target)
        session.attempt = Initiator(session.config, target, self.local, redirected_from)
        self.by_spi[session.attempt.spi_i] = session
        session.tries = 0
        self._send(session, session.attempt.start(), now)

    def _finish(self, session: _Session, ok: bool, error: str | None, now: float) -> None:
        session.done = True
        session.result.ok = ok
        session.result.error = error
        session.result.elapsed_ms = round((now - session.started) * 1000, 2)
        attempt = session.attempt
        if attempt is not None:
            session.result.ignored_redirects += attempt.ignored
            session.result.spi_i, session.result.spi_r = attempt.spi_i.hex(), attempt.spi_r.hex()
            if ok:
                session.result.gateway = session.target
                session.result.address = attempt.address
                session.result.child_spi_in = attempt.child_spi.hex()
                session.result.child_spi_out = attempt.peer_child_spi.hex() if attempt.peer_child_spi else None
            if not ok or not self.keep:
                self.by_spi.pop(attempt.spi_i, None)

    def _event(self, session: _Session, data: bytes, now: float) -> None:
        attempt = session.attempt
        assert attempt is not None
        if attempt.state == "delete":
            attempt.state = "closed"
            self.by_spi.pop(attempt.spi_i, None)
            return
        kind, value = attempt.receive(data)
        if kind == "ignore":
            if "nonce" in str(value) or "REDIRECT" in str(value):
                self.log.append(f"{session.name}: ignored {value}")
            return
        if kind == "send":
            session.tries = 0
            self._send(session, value, now)
        elif kind == "redirect":
            session.result.redirects += 1
            session.result.ignored_redirects += attempt.ignored
            if session.result.redirects > session.config.max_redirects:
                self._finish(session, False, f"redirect loop: more than {session.config.max_redirects} redirects "
                             f"({' -> '.join(session.result.path + [value])})", now)
                return
            if attempt.state == "auth" and attempt.keys is not None:  # IKE_AUTH redirect: delete the old SA
                self.send_ike(attempt.delete(), session.target, session.config.port)
            attempt.ignored = 0
            self._begin(session, value, session.target, now)
        elif kind == "established":
            self._finish(session, True, None, now)
        elif kind == "failed":
            self._finish(session, False, str(value), now)

    def run(self, configs: list[tuple[str, ClientConfig]], deadline_s: float = 60.0,
            delete_after: float | None = None) -> list[Result]:
        selector = selectors.DefaultSelector()
        selector.register(self.sock, selectors.EVENT_READ)
        self.sock.setblocking(False)
        waiting = list(configs)
        start = time.monotonic()
        active: list[_Session] = []
        while True:
            now = time.monotonic()
            while waiting and len([s for s in active if not s.done]) < self.concurrency:
                name, config = waiting.pop(0)
                session = _Session(name, config, Result(name), now)
                self.sessions.append(session)
                active.append(session)
                self._begin(session, config.gateway, None, now)
            pending = [s for s in active if not s.done]
            if not pending and not waiting:
                break
            if now - start > deadline_s:
                for s in pending:
                    self._finish(s, False, "deadline", now)
                break
            next_due = min((s.sent_at + s.config.timeout * (2 ** s.tries) for s in pending), default=now + 0.1)
            for _key, _ in selector.select(max(0.0, min(0.2, next_due - now))):
                while True:
                    try:
                        data, _ = self.sock.recvfrom(65535)
                    except (BlockingIOError, InterruptedError):
                        break
                    if len(data) >= 4 and data[:4] == bytes(4):
                        data = data[4:]
                    if len(data) < 8:
                        continue
                    owner = self.by_spi.get(data[:8])
                    if owner is not None and (not owner.done or (owner.attempt is not None
                                                                 and owner.attempt.state == "delete")):
                        self._event(owner, data, time.monotonic())
            now = time.monotonic()
            for s in pending:
                if s.done or s.attempt is None:
                    continue
                if now >= s.sent_at + s.config.timeout * (2 ** s.tries):
                    s.tries += 1
                    if s.tries > s.config.retries:
                        self._finish(s, False, f"no answer from {s.target}", now)
                    else:
                        self._send(s, s.attempt.request, now)
        if delete_after is not None:
            time.sleep(delete_after)
            self.delete_all()
        selector.close()
        return [s.result for s in self.sessions]

    def delete_all(self, wait: float = 2.0) -> None:
        """Delete every established IKE SA (and wait a little for the answers)."""
        self.sock.setblocking(False)
        for s in self.sessions:
            if s.result.ok and s.attempt is not None and s.attempt.state == "established":
                self.send_ike(s.attempt.delete(), s.target, s.config.port)
                self.by_spi[s.attempt.spi_i] = s
        end = time.monotonic() + wait
        while time.monotonic() < end and any(s.attempt is not None and s.attempt.state == "delete"
                                             for s in self.sessions):
            try:
                data, _ = self.sock.recvfrom(65535)
            except (BlockingIOError, InterruptedError):
                time.sleep(0.005)
                continue
            session = self.by_spi.get(data[:8])
            if session is not None and session.attempt is not None and session.attempt.state == "delete":
                session.attempt.state = "closed"


def parse_suite(text: str, esp: bool) -> crypto.Suite:
    """`aes256-sha256-ecp256`, `aes128gcm16-modp2048`, ... (strongSwan-like proposal names)."""
    parts = text.lower().split("-")
    encr = parts[0]
    gcm = "gcm" in encr
    bits = int("".join(c for c in encr.split("gcm")[0] if c.isdigit()) or 128)
    integ = {"sha1": iana.AUTH_HMAC_SHA1_96, "sha256": iana.AUTH_HMAC_SHA2_256_128,
             "sha384": iana.AUTH_HMAC_SHA2_384_192, "sha512": iana.AUTH_HMAC_SHA2_512_256}
    prfs = {"sha1": iana.PRF_HMAC_SHA1, "sha256": iana.PRF_HMAC_SHA2_256, "sha384": iana.PRF_HMAC_SHA2_384,
            "sha512": iana.PRF_HMAC_SHA2_512}
    groups = {"modp2048": 14, "ecp256": 19, "ecp384": 20, "curve25519": 31, "x25519": 31}
    hash_name = next((p for p in parts[1:] if p in integ), "sha256")
    group = next((groups[p] for p in parts[1:] if p in groups), 19)
    return crypto.Suite(iana.ENCR_AES_GCM_16 if gcm else iana.ENCR_AES_CBC, bits,
                        None if esp else prfs[hash_name], None if gcm else integ[hash_name], None if esp else group)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m dataplane.ikev2.client",
                                     description="IKEv2 clients (REDIRECT_SUPPORTED, max-redirects); JSON results")
    parser.add_argument("--gateway", required=True, help="address to connect to (the cluster VIP)")
    parser.add_argument("--bind", default="0.0.0.0", help="local address")
    parser.add_argument("--port", type=int, default=500, help="local UDP port (0: any)")
    parser.add_argument("--count", type=int, default=1)
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--identity", default="client")
    parser.add_argument("--psk", help="the pre-shared key")
    parser.add_argument("--psk-file", help="a lab's pre-shared key file (STATE_DIR/nodes/ROUTER/psk.secret.json)")
    parser.add_argument("--cert", help="NAME: authenticate with STATE_DIR/pki/NAME.crt (needs --pki)")
    parser.add_argument("--pki", help="the lab's pki folder (CA), for certificates")
    parser.add_argument("--ike", default="aes256-sha256-ecp256")
    parser.add_argument("--esp", default="aes256-sha256")
    parser.add_argument("--no-redirect", action="store_true", help="do not send REDIRECT_SUPPORTED")
    parser.add_argument("--max-redirects", type=int, default=5)
    parser.add_argument("--no-child", action="store_true")
    parser.add_argument("--no-address", action="store_true", help="no configuration request")
    parser.add_argument("--keep", type=float, default=0.0, help="seconds to keep the SAs before deleting them")
    parser.add_argument("--no-delete", action="store_true", help="leave the SAs established")
    parser.add_argument("--timeout", type=float, default=1.0)
    parser.add_argument("--retries", type=int, default=4)
    parser.add_argument("--deadline", type=float, default=120.0)
    parser.add_argument("--summary", action="store_true", help="one JSON summary instead of every result")
    args = parser.parse_args(argv)
    if not 1 <= args.max_redirects <= 255:
        parser.error("--max-redirects is 1..255")
    if args.psk_file:
        from labkit.files import read_secret

        try:
            args.psk = read_secret(args.psk_file, "psk")
        except ValueError as exc:
            parser.error(str(exc))
    if not args.psk:
        parser.error("give the pre-shared key: --psk KEY or --psk-file STATE_DIR/nodes/ROUTER/psk.secret.json")
    cert = key = ca = None
    if args.cert:
        from . import pki

        if not args.pki:
            parser.error("--cert needs --pki")
        ca = pki.load_ca(args.pki)
        cert, key = pki.issue(args.pki, args.cert, [args.identity] if _is_ip(args.identity) else [],
                              [] if _is_ip(args.identity) else [args.identity])
    configs = []
    for index in range(args.count):
        configs.append((f"c{index + 1}", ClientConfig(
            gateway=args.gateway, identity=args.identity, psk=args.psk.encode(),
            redirect_supported=not args.no_redirect, max_redirects=args.max_redirects,
            ike=parse_suite(args.ike, False), esp=parse_suite(args.esp, True), request_address=not args.no_address,
            child=not args.no_child, cert=cert, key=key, ca=ca, timeout=args.timeout, retries=args.retries)))
    runner = Runner(args.bind, args.port, keep=True, concurrency=args.concurrency)
    started = time.monotonic()
    results = runner.run(configs, args.deadline)
    elapsed = time.monotonic() - started
    if args.keep:
        time.sleep(args.keep)
    if not args.no_delete:
        runner.delete_all()
    runner.close()
    ok = [r for r in results if r.ok]
    if args.summary:
        by_gateway: dict[str, int] = {}
        for r in ok:
            by_gateway[r.gateway] = by_gateway.get(r.gateway, 0) + 1
        print(json.dumps({"count": len(results), "ok": len(ok), "seconds": round(elapsed, 4),
                          "per_second": round(len(ok) / elapsed, 1) if elapsed else 0,
                          "by_gateway": by_gateway, "redirects": sum(r.redirects for r in results),
                          "errors": sorted({r.error for r in results if r.error})[:5]}))
    else:
        print(json.dumps({"results": [asdict(r) for r in results], "log": runner.log}, indent=1))
    return 0 if len(ok) == len(results) else 1


def _is_ip(text: str) -> bool:
    try:
        IPv4Address(text)
    except ValueError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
