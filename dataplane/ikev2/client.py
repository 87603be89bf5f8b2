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

`Initiator` is one attempt against one gateway, without I/O; `Runner` drives any number of clients
over one UDP socket (demultiplexed by SPI) with retransmissions; `python -m dataplane.ikev2.client`
is the command line (JSON results).
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import socket
import struct
import sys
import time
from dataclasses import asdict, dataclass, field
from ipaddress import IPv4Address
from typing import Any

from . import codec, crypto
from .codec import IkeError

DEFAULT_IKE = crypto.Suite(codec.ENCR_AES_CBC, 256, codec.PRF_HMAC_SHA2_256, codec.AUTH_HMAC_SHA2_256_128, 19)
DEFAULT_ESP = crypto.Suite(codec.ENCR_AES_CBC, 256, None, codec.AUTH_HMAC_SHA2_256_128, None)


@dataclass
class ClientConfig:
    gateway: str
    identity: str = "client"
    psk: bytes | None = b"cisco123"
    port: int = 500
    redirect_supported: bool = True
    max_redirects: int = 5
    ike: crypto.Suite = DEFAULT_IKE
    esp: crypto.Suite = DEFAULT_ESP
    request_address: bool = True
    child: bool = True
    cert: Any = None
    key: Any = None
    ca: Any = None
    timeout: float = 1.0  # first retransmission; doubled each time
    retries: int = 4
    extra_groups: tuple[int, ...] = ()  # more DH groups offered (a gateway may ask for one: INVALID_KE)


@dataclass
class Result:
    client: str
    ok: bool = False
    gateway: str = ""  # where the IKE SA was finally established
    path: list[str] = field(default_factory=list)  # gateways contacted, in order
    redirects: int = 0
    ignored_redirects: int = 0
    address: str | None = None
    spi_i: str = ""
    spi_r: str = ""
    child_spi_in: str | None = None
    child_spi_out: str | None = None
    error: str | None = None
    elapsed_ms: float = 0.0
    rtts: int = 0


class Initiator:
    """One IKE SA setup attempt with one gateway. `receive` answers with an event tuple:
    ("send", bytes) | ("redirect", gateway) | ("established", None) | ("failed", why) | ("ignore", why)."""

    def __init__(self, config: ClientConfig, target: str, local: tuple[str, int], redirected_from: str | None):
        self.config, self.target, self.local = config, target, local
        self.redirected_from = redirected_from
        self.spi_i = os.urandom(8)
        self.spi_r = bytes(8)
        self.nonce_i = os.urandom(32)
        self.group = config.ike.dh if config.ike.dh is not None else 19
        self.dh = crypto.Dh(self.group)
        self.state = "init"
        self.msg1 = b""
        self.request = b""
        self.message_id = 0
        self.suite: crypto.Suite | None = None
        self.keys: crypto.IkeKeys | None = None
        self.nonce_r = b""
        self.msg2 = b""
        self.child_spi = os.urandom(4)
        self.address: str | None = None
        self.peer_child_spi: bytes | None = None
        self.ignored = 0
        self.id_i = self._identity()
        self.certreq_received = False
        self.cookie: bytes | None = None  # the gateway's N(COOKIE) data, returned first in IKE_SA_INIT
        self.cookies = 0

    def _identity(self) -> codec.IdPayload:
        try:
            return codec.IdPayload(codec.ID_IPV4_ADDR, IPv4Address(self.config.identity).packed)
        except ValueError:
            return codec.IdPayload(codec.ID_FQDN, self.config.identity.encode())

    # ---------------------------------------------------------------- IKE_SA_INIT
    def start(self) -> bytes:
        suite = self.config.ike
        proposal_suite = crypto.Suite(suite.encr, suite.key_bits, suite.prf, suite.integ, self.group)
        offered = [self.group] + [g for g in (suite.dh, *self.config.extra_groups) if g is not None and g != self.group]
        transforms = tuple(t for t in proposal_suite.transforms() if t.type != codec.T_DH)
        transforms += tuple(codec.Transform(codec.T_DH, g) for g in dict.fromkeys(offered))
        payloads: list[codec.Payload] = [codec.NotifyPayload(codec.COOKIE, self.cookie)] if self.cookie else []
        payloads += [
            codec.SaPayload((codec.Proposal(1, codec.PROTO_IKE, b"", transforms),)),
            codec.KePayload(self.group, self.dh.public),
            codec.NoncePayload(self.nonce_i),
            codec.NotifyPayload(codec.NAT_DETECTION_SOURCE_IP, crypto.nat_hash(self.spi_i, bytes(8), *self.local)),
            codec.NotifyPayload(codec.NAT_DETECTION_DESTINATION_IP,
                                crypto.nat_hash(self.spi_i, bytes(8), self.target, self.config.port)),
        ]
        if self.redirected_from is not None:
            payloads.append(codec.NotifyPayload(codec.REDIRECTED_FROM,
                                                codec.encode_redirected_from(self.redirected_from)))
        elif self.config.redirect_supported:
            payloads.append(codec.NotifyPayload(codec.REDIRECT_SUPPORTED))
        if self.config.key is not None:
            payloads.append(crypto.hash_algorithms_notify())
        header = codec.Header(self.spi_i, bytes(8), codec.SA, codec.IKE_SA_INIT, codec.FLAG_INITIATOR, 0)
        self.msg1 = codec.encode(header, payloads)
        self.request = self.msg1
        self.state = "init"
        return self.msg1

    def receive(self, data: bytes) -> tuple[str, Any]:
        try:
            message = codec.decode(data)
        except IkeError as exc:
            return "ignore", f"malformed: {exc}"
        header = message.header
        if header.spi_i != self.spi_i or not header.is_response or header.from_initiator:
            return "ignore", "not for us"
        if self.state == "init" and header.exchange == codec.IKE_SA_INIT and header.message_id == 0:
            return self._init_response(data, message)
        if self.state == "auth" and header.exchange == codec.IKE_AUTH and header.message_id == 1 \
                and header.spi_r == self.spi_r:
            return self._auth_response(data, message)
        if self.state == "delete" and header.exchange == codec.INFORMATIONAL and header.spi_r == self.spi_r:
            return "deleted", None
        return "ignore", "unexpected message"

    def _init_response(self, data: bytes, message: codec.Message) -> tuple[str, Any]:
        redirect = message.notify(codec.REDIRECT)
        if redirect is not None:
            try:
                gateway, nonce = codec.decode_gateway(redirect.data)
            except IkeError as exc:
                self.ignored += 1
                return "ignore", f"malformed REDIRECT: {exc}"
            if nonce != self.nonce_i:
                self.ignored += 1
                return "ignore", f"REDIRECT to {gateway} with a wrong nonce"
            return "redirect", gateway
        cookie = message.notify(codec.COOKIE)
        if cookie is not None:
            # RFC 7296 section 2.6: the same request again, the cookie as first payload.
            if not 1 <= len(cookie.data) <= 64 or self.cookies >= 3:
                return "failed", "the gateway keeps asking for a cookie"
            self.cookies += 1
            self.cookie = cookie.data
            return "send", self.start()
        invalid_ke = message.notify(codec.INVALID_KE_PAYLOAD)
        if invalid_ke is not None and len(invalid_ke.data) == 2:
            group = struct.unpack("!H", invalid_ke.data)[0]
            if group == self.group or group not in crypto.DH_GROUPS:
                return "failed", f"gateway wants DH group {group}"
            self.group = group
            self.dh = crypto.Dh(group)
            return "send", self.start()
        for p in message.payloads:
            if isinstance(p, codec.NotifyPayload) and p.type < 16384:
                return "failed", f"IKE_SA_INIT refused: {p.name}"
        sa = message.first(codec.SaPayload)
        ke = message.first(codec.KePayload)
        nonce_payload = message.first(codec.NoncePayload)
        if not isinstance(sa, codec.SaPayload) or not isinstance(ke, codec.KePayload) \
                or not isinstance(nonce_payload, codec.NoncePayload) or len(sa.proposals) != 1:
            return "failed", "IKE_SA_INIT response without SA/KE/Nonce"
        proposal, suite = crypto.select_ike(sa.proposals, ke.group)
        if proposal is None or not isinstance(suite, crypto.Suite) or ke.group != self.group:
            return "failed", "gateway chose an unacceptable proposal"
        try:
            shared = self.dh.shared(ke.data)
        except IkeError as exc:
            return "failed", str(exc)
        self.spi_r = message.header.spi_r
        self.suite, self.nonce_r, self.msg2 = suite, nonce_payload.data, data
        self.keys = crypto.derive_ike_keys(suite, shared, self.nonce_i, self.nonce_r, self.spi_i, self.spi_r)
        self.certreq_received = message.first(codec.CertReqPayload) is not None
        return "send", self._auth_request()

    # ---------------------------------------------------------------- IKE_AUTH
    def _auth_request(self) -> bytes:
        assert self.suite is not None and self.keys is not None
        octets = crypto.signed_octets(self.msg1, self.nonce_r, self.suite, self.keys.sk_pi, self.id_i.body())
        inner: list[codec.Payload] = [self.id_i]
        if self.config.key is not None and self.config.cert is not None:
            from . import pki

            inner.append(codec.CertPayload(codec.CERT_X509_SIGNATURE, pki.der(self.config.cert)))
            if self.config.ca is not None:
                inner.append(codec.CertReqPayload(codec.CERT_X509_SIGNATURE, pki.certreq_hash(self.config.ca)))
            inner.append(codec.AuthPayload(codec.AUTH_DIGITAL_SIGNATURE,
                                           crypto.rsa_sign(self.config.key, octets, codec.AUTH_DIGITAL_SIGNATURE)))
        else:
            assert self.config.psk is not None
            inner.append(codec.AuthPayload(codec.AUTH_PSK, crypto.psk_auth(self.suite, self.config.psk, octets)))
        if self.config.request_address:
            inner.append(codec.CpPayload(codec.CFG_REQUEST, ((codec.INTERNAL_IP4_ADDRESS, b""),)))
        if self.config.child:
            inner.append(codec.SaPayload((crypto.esp_proposal(self.config.esp, self.child_spi),)))
            everything = (codec.TrafficSelector("0.0.0.0", "255.255.255.255"),)
            inner.append(codec.TsPayload(everything, True))
            inner.append(codec.TsPayload(everything, False))
        header = codec.Header(self.spi_i, self.spi_r, codec.SK, codec.IKE_AUTH, codec.FLAG_INITIATOR, 1)
        self.request = crypto.seal(header, inner, self.suite, self.keys, from_initiator=True)
        self.state = "auth"
        self.message_id = 1
        return self.request

    def _auth_response(self, data: bytes, message: codec.Message) -> tuple[str, Any]:
        assert self.suite is not None and self.keys is not None
        try:
            inner = crypto.open_sk(data, message, self.suite, self.keys, from_initiator=False)
        except IkeError as exc:
            return "ignore", f"IKE_AUTH response does not decrypt: {exc}"
        for p in inner:
            if isinstance(p, codec.NotifyPayload) and p.type in (codec.AUTHENTICATION_FAILED, codec.INVALID_SYNTAX):
                return "failed", f"IKE_AUTH refused: {p.name}"
        id_r = next((p for p in inner if isinstance(p, codec.IdPayload) and not p.initiator), None)
        auth = next((p for p in inner if isinstance(p, codec.AuthPayload)), None)
        if id_r is None or auth is None:
            return "failed", "IKE_AUTH response without IDr/AUTH"
        octets = crypto.signed_octets(self.msg2, self.nonce_i, self.suite, self.keys.sk_pr, id_r.body())
        if auth.method == codec.AUTH_PSK:
            if self.config.psk is None or crypto.psk_auth(self.suite, self.config.psk, octets) != auth.data:
                return "failed", "gateway's pre-shared key AUTH does not verify"
        else:
            from . import pki

            cert = next((p for p in inner if isinstance(p, codec.CertPayload)), None)
            if cert is None or self.config.ca is None:
                return "failed", "gateway signed without a certificate we can check"
            try:
                gw_cert = pki.verify(cert.data, self.config.ca)
            except pki.PkiError as exc:
                return "failed", str(exc)
            if not crypto.rsa_verify(gw_cert.public_key(), octets, auth.method, auth.data):
                return "failed", "gateway's signature does not verify"
        redirect = next((p for p in inner if isinstance(p, codec.NotifyPayload) and p.type == codec.REDIRECT), None)
        if redirect is not None:
            try:
                gateway, _ = codec.decode_gateway(redirect.data)
            except IkeError as exc:
                return "failed", f"malformed REDIRECT in IKE_AUTH: {exc}"
            return "redirect", gateway
        cp = next((p for p in inner if isinstance(p, codec.CpPayload)), None)
        if cp is not None:
            for kind, value in cp.attributes:
                if kind == codec.INTERNAL_IP4_ADDRESS and len(value) == 4:
                    self.address = str(IPv4Address(value))
        sa = next((p for p in inner if isinstance(p, codec.SaPayload)), None)
        if sa is not None and sa.proposals:
            self.peer_child_spi = sa.proposals[0].spi
        self.state = "established"
        return "established", None

    def child_keys(self) -> crypto.ChildKeys:
        """The CHILD_SA's KEYMAT (RFC 7296 2.17) once established: initiator-to-responder keys first."""
        assert self.suite is not None and self.suite.prf is not None and self.keys is not None
        return crypto.derive_child_keys(self.suite.prf, self.keys.sk_d, self.config.esp, self.nonce_i, self.nonce_r)

    def delete(self) -> bytes:
        """INFORMATIONAL with Delete(IKE): close this SA."""
        assert self.suite is not None and self.keys is not None
        self.message_id += 1
        header = codec.Header(self.spi_i, self.spi_r, codec.SK, codec.INFORMATIONAL, codec.FLAG_INITIATOR,
                              self.message_id)
        self.request = crypto.seal(header, [codec.DeletePayload(codec.PROTO_IKE)], self.suite, self.keys, True)
        self.state = "delete"
        return self.request


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
    integ = {"sha1": codec.AUTH_HMAC_SHA1_96, "sha256": codec.AUTH_HMAC_SHA2_256_128,
             "sha384": codec.AUTH_HMAC_SHA2_384_192, "sha512": codec.AUTH_HMAC_SHA2_512_256}
    prfs = {"sha1": codec.PRF_HMAC_SHA1, "sha256": codec.PRF_HMAC_SHA2_256, "sha384": codec.PRF_HMAC_SHA2_384,
            "sha512": codec.PRF_HMAC_SHA2_512}
    groups = {"modp2048": 14, "ecp256": 19, "ecp384": 20, "curve25519": 31, "x25519": 31}
    hash_name = next((p for p in parts[1:] if p in integ), "sha256")
    group = next((groups[p] for p in parts[1:] if p in groups), 19)
    return crypto.Suite(codec.ENCR_AES_GCM_16 if gcm else codec.ENCR_AES_CBC, bits,
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
    parser.add_argument("--psk", default="cisco123")
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
