"""The IKEv2 responder of a FlexVPN gateway, with RFC 5685 redirect. No sockets: `Gateway.handle`
takes a datagram (without the port-4500 non-ESP marker) and returns the datagrams to send.

Exchanges served:

* IKE_SA_INIT: SA (IKE proposal), KE (groups 14, 19, 20, 31), nonces, NAT detection, CERTREQ (when
  the lab CA is loaded), SIGNATURE_HASH_ALGORITHMS. With redirect `init`, an initiator that sent
  REDIRECT_SUPPORTED or REDIRECTED_FROM and reached the cluster VIP is answered with only
  N(REDIRECT) carrying the least-loaded gateway and the initiator's nonce: no DH, no state.
* IKE_AUTH: PSK or RSA certificate (method 1, or 14 with SHA2) from the initiator, answered with
  the same kind; CP (an address from the local pool); one CHILD_SA (ESP, tunnel mode) with traffic
  selectors narrowed to the assigned address. With redirect `auth`, the answer after mutual
  authentication is IDr, AUTH and N(REDIRECT) without nonce; that IKE SA is then deleted.
* INFORMATIONAL (Delete of the IKE SA or a CHILD_SA, liveness); CREATE_CHILD_SA rekeying the
  CHILD_SA or making a new one when there is none (no PFS), anything else refused (NO_ADDITIONAL_SAS).

Hostile initiators (RFC 7296 sections 2.1, 2.6 and 2.12):

* an IKE SA is only replaced or deleted by an exchange protected with its own keys (an
  unauthenticated IKE_SA_INIT never touches it). An IKE_SA_INIT identical to one already answered
  (same bytes from the same address and port) is a retransmission: the stored answer goes back;
  any other one, even with the SPIi of an existing SA, starts a new half-open SA beside it;
* half-open SAs are bounded (globally and per source address) and do not keep the request: only
  a digest to recognise retransmissions and the running hashes its AUTH will be checked with;
* past a threshold of half-open SAs, or of IKE_SA_INITs per second, the responder answers with a
  stateless N(COOKIE) (HMAC of Ni, IPi and SPIi under a secret renewed every minute) and only an
  IKE_SA_INIT that returns a valid cookie gets further (redirects included);
* the DH key pair is reused for a few seconds (section 2.12), so a flood costs no key generation;
* half-open SAs are not sessions: `counts()["ike"]` counts established ones only (CLB load).

CHILD_SA keys are derived and kept; this kernel has no ESP transform (XFRM states with proto esp
fail), so they cannot be installed here (docs/flexvpn.md).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass
from ipaddress import IPv4Address
from typing import Any

from . import codec, crypto, iana, redirect_notify, rekey, showsa
from .codec import IkeError
from .cookies import Cookies
from .sa import AddressPool, ChildSa, IkeSa, SaTable

HALF_OPEN_TIMEOUT = 30.0
REDIRECTED_SA_TIMEOUT = 5.0
MAX_HALF_OPEN = 1000  # half-open SAs held at most (new IKE_SA_INITs past it are dropped)
MAX_HALF_OPEN_PER_SOURCE = 100  # from one address (with or without a cookie)
COOKIE_THRESHOLD = 50  # half-open SAs from which a cookie is demanded
COOKIE_RATE = 1000  # IKE_SA_INITs per second from which a cookie is demanded (redirects included)
DH_REUSE = 10.0  # seconds one DH key pair serves new SAs (RFC 7296 section 2.12)
NONCE_MIN, NONCE_MAX = 16, 256  # RFC 7296 section 3.9


@dataclass(frozen=True)
class Reply:
    data: bytes
    peer: tuple[str, int]
    local: tuple[str, int]


@dataclass
class GatewayConfig:
    identities: list[str]
    psk: bytes
    redirect: str = "init"  # init | auth | none
    pool_first: str | None = None
    pool_last: str | None = None
    dh_groups: tuple[int, ...] = crypto.DH_GROUPS
    cert: Any = None  # x509.Certificate of this gateway
    key: Any = None  # its RSA private key
    ca: Any = None  # the lab CA (x509.Certificate)
    max_half_open: int = MAX_HALF_OPEN
    max_half_open_per_source: int = MAX_HALF_OPEN_PER_SOURCE
    cookie_threshold: int = COOKIE_THRESHOLD
    cookie_rate: int = COOKIE_RATE


RedirectHook = Callable[[str, str, str], "str | None"]  # (local address, peer address, exchange) -> target


class Gateway:
    def __init__(self, config: GatewayConfig, redirect: RedirectHook | None = None,
                 clock: Callable[[], float] = time.monotonic, on_change: Callable[[], None] | None = None,
                 log: Callable[[str], None] | None = None, admit: Callable[[], bool] | None = None):
        self.config = config
        self.redirect_hook = redirect
        self.admit_hook = admit  # False: a new IKE SA is refused (strict overload); redirects still go out
        self.clock = clock
        self.on_change = on_change or (lambda: None)
        self.log = log or (lambda _m: None)
        self.table = SaTable()
        self.sas = self.table.sas  # the same dict: IKE SAs by our SPI
        self.cookies = Cookies(clock)
        self.window: list[float | int] = [clock(), 0, 0]  # 1 s window: start, IKE_SA_INITs in it, in the one before
        self._dh: dict[int, tuple[crypto.Dh, float]] = {}
        self.pool = AddressPool(config.pool_first, config.pool_last)
        self.counters = {"requests": 0, "malformed": 0, "redirects_init": 0, "redirects_auth": 0,
                         "established": 0, "auth_failed": 0, "arrivals": 0, "deleted": 0, "no_proposal": 0,
                         "invalid_ke": 0, "retransmits": 0, "integrity_failed": 0, "no_redirect_support": 0,
                         "cookies_sent": 0, "cookies_accepted": 0, "cookies_invalid": 0, "half_open_full": 0,
                         "half_open_source_full": 0, "settled": 0,
                         "inner_malformed": 0, "overload_refused": 0, "child_rekeys": 0,
                         "children_created": 0, "create_child_refused": 0}
        self.certreq = b""
        if config.ca is not None:
            from . import pki

            self.certreq = pki.certreq_hash(config.ca)
        self.cert_der = b""
        if config.cert is not None:
            from . import pki

            self.cert_der = pki.der(config.cert)

    # ---------------------------------------------------------------- counts and status
    def counts(self) -> dict[str, int]:
        """Established IKE SAs, IPsec SAs (2 per CHILD_SA: in and out), half-open SAs (reported, not
        load), arrivals (REDIRECTED_FROM clients whose IKE_AUTH is over) and settled (every IKE_AUTH
        that is over). Kept as running tallies: asked for on every change."""
        return {"ike": self.table.tally["established"], "ipsec": 2 * self.table.tally["child"],
                "half_open": self.table.tally["half-open"], "arrivals": self.counters["arrivals"],
                "settled": self.counters["settled"]}

    def status(self, wall: float, limit: int = 200) -> list[dict[str, object]]:
        return showsa.status(self.sas.values(), self.clock(), wall, limit)

    # ---------------------------------------------------------------- entry point
    def handle(self, data: bytes, peer: tuple[str, int], local: tuple[str, int]) -> list[Reply]:
        self.counters["requests"] += 1
        try:
            message = codec.decode(data)
        except IkeError:
            self.counters["malformed"] += 1
            return []
        header = message.header
        if header.is_response:
            return []  # we never initiate; stray responses are dropped
        try:
            if header.exchange == iana.IKE_SA_INIT:
                return self._sa_init(data, message, peer, local)
            sa = self.sas.get(header.spi_r)
            if sa is None or sa.spi_i != header.spi_i:
                return []
            return self._protected(sa, data, message, peer, local)
        except IkeError:
            self.counters["malformed"] += 1
            return []

    # ---------------------------------------------------------------- IKE_SA_INIT
    def _sa_init(self, data: bytes, message: codec.Message, peer: tuple[str, int],
                 local: tuple[str, int]) -> list[Reply]:
        header = message.header
        if header.spi_r != bytes(8) or header.message_id != 0 or not header.from_initiator:
            return []
        digest = hashlib.sha256(f"{peer[0]}|{peer[1]}|".encode() + data).digest()
        known = self.sas.get(self.table.by_request.get(digest, b""))
        if known is not None and known.state == "half-open":
            self.counters["retransmits"] += 1
            return [Reply(known.msg2, peer, local)]
        self._count_request()
        sa_payload = message.first(codec.SaPayload)
        ke = message.first(codec.KePayload)
        nonce = message.first(codec.NoncePayload)
        if not isinstance(sa_payload, codec.SaPayload) or not isinstance(ke, codec.KePayload) \
                or not isinstance(nonce, codec.NoncePayload) or not NONCE_MIN <= len(nonce.data) <= NONCE_MAX:
            return [self._init_error(header, iana.INVALID_SYNTAX, b"", peer, local)]
        if self.cookies_wanted():
            cookie = message.notify(iana.COOKIE)
            if cookie is None or not self.cookies.check(cookie.data, nonce.data, peer[0], header.spi_i):
                self.counters["cookies_invalid" if cookie is not None else "cookies_sent"] += 1
                return [self._init_error(header, iana.COOKIE, self.cookies.make(nonce.data, peer[0], header.spi_i),
                                         peer, local)]
            self.counters["cookies_accepted"] += 1
        redirected_from = message.notify(iana.REDIRECTED_FROM)
        supports_redirect = message.notify(iana.REDIRECT_SUPPORTED) is not None or redirected_from is not None
        origin = None
        if redirected_from is not None:
            origin, _ = redirect_notify.decode_gateway(redirected_from.data)
        if self.config.redirect == "init" and self.redirect_hook is not None:
            if supports_redirect:
                target = self.redirect_hook(local[0], peer[0], "IKE_SA_INIT")
                if target is not None:
                    self.counters["redirects_init"] += 1
                    self.log(f"IKE_SA_INIT from {peer[0]}:{peer[1]} (SPI {header.spi_i.hex()}): "
                             f"redirected to {target}")
                    notify = codec.NotifyPayload(iana.REDIRECT, redirect_notify.encode_redirect(target, nonce.data))
                    reply = codec.Header(header.spi_i, bytes(8), iana.NOTIFY, iana.IKE_SA_INIT,
                                         iana.FLAG_RESPONSE, 0)
                    return [Reply(codec.encode(reply, [notify]), peer, local)]
            else:
                self.counters["no_redirect_support"] += 1
        if self.admit_hook is not None and not self.admit_hook():
            self.counters["overload_refused"] += 1  # dropped, as strongSwan drops past its IKE SA limit
            return []
        if self.table.tally["half-open"] >= self.config.max_half_open:
            self.counters["half_open_full"] += 1
            return []
        if self.table.half_open_by_source[peer[0]] >= self.config.max_half_open_per_source:
            self.counters["half_open_source_full"] += 1
            return []
        proposal, chosen = crypto.select_ike(sa_payload.proposals, ke.group, self.config.dh_groups)
        if proposal is None:
            if chosen is not None:
                self.counters["invalid_ke"] += 1
                return [self._init_error(header, iana.INVALID_KE_PAYLOAD, struct.pack("!H", chosen), peer, local)]
            self.counters["no_proposal"] += 1
            return [self._init_error(header, iana.NO_PROPOSAL_CHOSEN, b"", peer, local)]
        assert isinstance(chosen, crypto.Suite)
        dh = self._dh_pair(ke.group)
        shared = dh.shared(ke.data)
        spi_r = os.urandom(8)
        while spi_r in self.sas:
            spi_r = os.urandom(8)
        nonce_r = os.urandom(32)
        keys = crypto.derive_ike_keys(chosen, shared, nonce.data, nonce_r, header.spi_i, spi_r)
        payloads: list[codec.Payload] = [
            codec.SaPayload((proposal,)), codec.KePayload(ke.group, dh.public), codec.NoncePayload(nonce_r),
            codec.NotifyPayload(iana.NAT_DETECTION_SOURCE_IP, crypto.nat_hash(header.spi_i, spi_r, *local)),
            codec.NotifyPayload(iana.NAT_DETECTION_DESTINATION_IP, crypto.nat_hash(header.spi_i, spi_r, *peer)),
        ]
        hash_algorithms: set[int] = set()
        hash_notify = message.notify(iana.SIGNATURE_HASH_ALGORITHMS)
        if hash_notify is not None:
            hash_algorithms = crypto.parse_hash_algorithms(hash_notify.data)
        if self.certreq:
            payloads.append(codec.CertReqPayload(iana.CERT_X509_SIGNATURE, self.certreq))
        if hash_notify is not None and self.cert_der:
            payloads.append(crypto.hash_algorithms_notify())
        reply = codec.Header(header.spi_i, spi_r, iana.SA, iana.IKE_SA_INIT, iana.FLAG_RESPONSE, 0)
        msg2 = codec.encode(reply, payloads)
        signed = crypto.SignedPrefix(chosen, self.config.psk, data, self.config.ca is not None)
        sa = IkeSa(header.spi_i, spi_r, peer, local, self.clock(), chosen, keys, nonce.data, nonce_r, signed, msg2,
                   request_digest=digest, source=peer[0], hash_algorithms=hash_algorithms,
                   redirect_supported=supports_redirect, redirected_from=origin)
        self.table.insert(sa)
        self.on_change()
        return [Reply(msg2, peer, local)]

    def _count_request(self) -> None:
        now = self.clock()
        start, current, _before = self.window
        if now - start >= 1.0:
            self.window = [now, 1, current if now - start < 2.0 else 0]
        else:
            self.window[1] = int(current) + 1

    def cookies_wanted(self) -> bool:
        """Under pressure: many half-open SAs, or many IKE_SA_INITs in the last second or the one before."""
        return self.table.tally["half-open"] >= self.config.cookie_threshold or \
            max(int(self.window[1]), int(self.window[2])) > self.config.cookie_rate

    def _dh_pair(self, group: int) -> crypto.Dh:
        now = self.clock()
        held = self._dh.get(group)
        if held is None or now - held[1] >= DH_REUSE:
            held = (crypto.Dh(group), now)
            self._dh[group] = held
        return held[0]

    def _init_error(self, header: codec.Header, kind: int, data: bytes, peer: tuple[str, int],
                    local: tuple[str, int]) -> Reply:
        reply = codec.Header(header.spi_i, bytes(8), iana.NOTIFY, iana.IKE_SA_INIT, iana.FLAG_RESPONSE, 0)
        return Reply(codec.encode(reply, [codec.NotifyPayload(kind, data)]), peer, local)

    # ---------------------------------------------------------------- protected exchanges
    def _protected(self, sa: IkeSa, data: bytes, message: codec.Message, peer: tuple[str, int],
                   local: tuple[str, int]) -> list[Reply]:
        header = message.header
        if not header.from_initiator:
            return []
        if sa.last_response is not None and header.message_id == sa.last_response[0]:
            self.counters["retransmits"] += 1
            return [Reply(d, peer, local) for d in sa.last_response[1]]
        if header.message_id != sa.next_id:
            return []
        try:
            inner = crypto.open_sk(data, message, sa.suite, sa.keys, from_initiator=True)
        except crypto.MalformedInner:
            self.counters["inner_malformed"] += 1
            return []
        except IkeError:
            self.counters["integrity_failed"] += 1
            return []
        sa.peer = peer  # NAT-T or MOBIKE may move the peer; answer where it is now
        if header.exchange == iana.IKE_AUTH and sa.state == "half-open":
            out = self._auth(sa, inner, local)
        elif header.exchange == iana.INFORMATIONAL:
            out = self._informational(sa, inner)
        elif header.exchange == iana.CREATE_CHILD_SA:
            out = self._create_child(sa, inner)
        else:
            return []
        reply = codec.Header(sa.spi_i, sa.spi_r, iana.SK, header.exchange, iana.FLAG_RESPONSE, header.message_id)
        packet = crypto.seal(reply, out, sa.suite, sa.keys, from_initiator=False)
        sa.last_response = (header.message_id, [packet])
        sa.next_id += 1
        if sa.state == "deleted":
            self.table.remove(sa)
        self.on_change()
        return [Reply(packet, peer, local)]

    def _auth(self, sa: IkeSa, inner: list[codec.Payload], local: tuple[str, int]) -> list[codec.Payload]:
        id_i = next((p for p in inner if isinstance(p, codec.IdPayload) and p.initiator), None)
        auth = next((p for p in inner if isinstance(p, codec.AuthPayload)), None)
        if id_i is None or auth is None:
            return self._auth_failed(sa, "no IDi/AUTH (EAP is not offered here)")
        assert sa.signed is not None
        tail = crypto.signed_tail(sa.nonce_r, sa.suite, sa.keys.sk_pi, id_i.body())
        if auth.method == iana.AUTH_PSK:
            expected = sa.signed.psk_auth(tail)
            if not hmac.compare_digest(expected, auth.data):
                return self._auth_failed(sa, f"pre-shared key of {id_i.text()} does not match")
        elif auth.method in (iana.AUTH_RSA_SIG, iana.AUTH_DIGITAL_SIGNATURE):
            if self.config.ca is None:
                return self._auth_failed(sa, "no CA to check a certificate with")
            from . import pki

            cert = next((p for p in inner if isinstance(p, codec.CertPayload)
                         and p.encoding == iana.CERT_X509_SIGNATURE), None)
            if cert is None:
                return self._auth_failed(sa, "RSA signature without a certificate")
            try:
                peer_cert = pki.verify(cert.data, self.config.ca)
            except pki.PkiError as exc:
                return self._auth_failed(sa, str(exc))
            if not pki.identity_matches(id_i, peer_cert):
                return self._auth_failed(sa, f"identity {id_i.text()} is not in its certificate")
            if not sa.signed.rsa_verify(peer_cert.public_key(), auth.method, auth.data, tail):
                return self._auth_failed(sa, "RSA signature does not verify")
        else:
            return self._auth_failed(sa, f"authentication method {auth.method} not supported")
        sa.peer_id, sa.auth_method = id_i.text(), auth.method
        self._settle(sa)
        id_r = self._our_id(inner, local)
        out: list[codec.Payload] = [id_r]
        if auth.method == iana.AUTH_PSK or self.config.key is None:
            sa.local_auth = iana.AUTH_PSK
            octets_r = crypto.signed_octets(sa.msg2, sa.nonce_i, sa.suite, sa.keys.sk_pr, id_r.body())
            out.append(codec.AuthPayload(iana.AUTH_PSK, crypto.psk_auth(sa.suite, self.config.psk, octets_r)))
        else:
            method = iana.AUTH_DIGITAL_SIGNATURE if crypto.HASH_IDS["sha256"] in sa.hash_algorithms \
                else iana.AUTH_RSA_SIG
            sa.local_auth = method
            octets_r = crypto.signed_octets(sa.msg2, sa.nonce_i, sa.suite, sa.keys.sk_pr, id_r.body())
            out = [id_r, codec.CertPayload(iana.CERT_X509_SIGNATURE, self.cert_der),
                   codec.AuthPayload(method, crypto.rsa_sign(self.config.key, octets_r, method))]
        sa.msg2 = b""
        if self.config.redirect == "auth" and sa.redirect_supported and self.redirect_hook is not None:
            target = self.redirect_hook(local[0], sa.peer[0], "IKE_AUTH")
            if target is not None:
                self.counters["redirects_auth"] += 1
                self.table.set_state(sa, "redirected")
                sa.redirected_to = target
                sa.established_at = self.clock()
                self.log(f"IKE_AUTH from {sa.peer[0]} ({sa.peer_id}): authenticated, redirected to {target}")
                return [*out, codec.NotifyPayload(iana.REDIRECT, redirect_notify.encode_redirect(target, None))]
        cp = next((p for p in inner if isinstance(p, codec.CpPayload)), None)
        if cp is not None and cp.cfg_type == iana.CFG_REQUEST \
                and any(kind == iana.INTERNAL_IP4_ADDRESS for kind, _ in cp.attributes):
            sa.address = self.pool.take()
            if sa.address is None:
                out.append(codec.NotifyPayload(iana.INTERNAL_ADDRESS_FAILURE))
            else:
                attrs: list[tuple[int, bytes]] = [(iana.INTERNAL_IP4_ADDRESS, IPv4Address(sa.address).packed)]
                if any(kind == iana.INTERNAL_IP4_NETMASK for kind, _ in cp.attributes):
                    attrs.append((iana.INTERNAL_IP4_NETMASK, IPv4Address("255.255.255.255").packed))
                out.append(codec.CpPayload(iana.CFG_REPLY, tuple(attrs)))
        self.table.set_state(sa, "established")
        sa.established_at = self.clock()
        self.counters["established"] += 1
        sa_child = next((p for p in inner if isinstance(p, codec.SaPayload)), None)
        ts_i = next((p for p in inner if isinstance(p, codec.TsPayload) and p.initiator), None)
        ts_r = next((p for p in inner if isinstance(p, codec.TsPayload) and not p.initiator), None)
        if sa_child is not None and ts_i is not None and ts_r is not None and \
                not (cp is not None and sa.address is None):
            out += self._child(sa, sa_child, ts_i, ts_r)
        self.log(f"IKE SA {sa.spi_i.hex()}/{sa.spi_r.hex()} with {sa.peer[0]}:{sa.peer[1]} ({sa.peer_id}) "
                 f"established{f', address {sa.address}' if sa.address else ''}"
                 f"{f' (redirected from {sa.redirected_from})' if sa.redirected_from else ''}")
        return out

    def _child(self, sa: IkeSa, proposals: codec.SaPayload, ts_i: codec.TsPayload,
               ts_r: codec.TsPayload) -> list[codec.Payload]:
        spi = os.urandom(4)
        chosen = crypto.select_esp(proposals.proposals, spi)
        if chosen is None:
            return [codec.NotifyPayload(iana.NO_PROPOSAL_CHOSEN)]
        proposal, suite, peer_spi = chosen
        if not ts_i.selectors or not ts_r.selectors:
            return [codec.NotifyPayload(iana.TS_UNACCEPTABLE)]
        if sa.address is not None:
            first = ts_i.selectors[0]
            narrowed_i: tuple[codec.TrafficSelector, ...] = (
                codec.TrafficSelector(sa.address, sa.address, first.protocol, first.start_port, first.end_port),)
        else:
            narrowed_i = ts_i.selectors
        assert sa.suite.prf is not None
        keys = crypto.derive_child_keys(sa.suite.prf, sa.keys.sk_d, suite, sa.nonce_i, sa.nonce_r)
        self.table.set_child(sa, ChildSa(spi, peer_spi, suite, keys, narrowed_i, ts_r.selectors))
        return [codec.SaPayload((proposal,)), codec.TsPayload(narrowed_i, True), codec.TsPayload(ts_r.selectors, False)]

    def _create_child(self, sa: IkeSa, inner: list[codec.Payload]) -> list[codec.Payload]:
        """CREATE_CHILD_SA: a rekey of our CHILD_SA, or a new one when it has none (dataplane.ikev2.rekey)."""
        old = sa.child
        assert sa.suite.prf is not None
        got = rekey.respond(inner, (old.spi_out, old.ts_i, old.ts_r) if old is not None else None, sa.address,
                            sa.suite.prf, sa.keys.sk_d)
        if isinstance(got, int):
            self.counters["create_child_refused"] += 1
            return [codec.NotifyPayload(got)]
        sa.retiring += [old] if old is not None else []
        self.table.set_child(sa, ChildSa(got.spi, got.peer_spi, got.suite, got.keys, got.ts_i, got.ts_r))
        self.counters["child_rekeys" if got.rekey else "children_created"] += 1
        return [codec.SaPayload((got.proposal,)), codec.NoncePayload(got.nonce_r), codec.TsPayload(got.ts_i, True),
                codec.TsPayload(got.ts_r, False)]

    def _our_id(self, inner: list[codec.Payload], local: tuple[str, int]) -> codec.IdPayload:
        """The identity the initiator asked for (IDr) when it is one of ours, else the local address."""
        wanted = next((p for p in inner if isinstance(p, codec.IdPayload) and not p.initiator), None)
        if wanted is not None and wanted.id_type == iana.ID_IPV4_ADDR and wanted.text() in self.config.identities:
            return codec.IdPayload(iana.ID_IPV4_ADDR, wanted.data, initiator=False)
        return codec.IdPayload(iana.ID_IPV4_ADDR, IPv4Address(local[0]).packed, initiator=False)

    def _auth_failed(self, sa: IkeSa, why: str) -> list[codec.Payload]:
        self.counters["auth_failed"] += 1
        self._settle(sa)
        self.log(f"IKE_AUTH from {sa.peer[0]}: authentication failed ({why})")
        self._release(sa)
        self.table.set_state(sa, "deleted")
        return [codec.NotifyPayload(iana.AUTHENTICATION_FAILED)]

    def _informational(self, sa: IkeSa, inner: list[codec.Payload]) -> list[codec.Payload]:
        out: list[codec.Payload] = []
        for p in inner:
            if isinstance(p, codec.DeletePayload):
                if p.protocol == iana.PROTO_IKE:
                    self._release(sa)
                    self.table.set_state(sa, "deleted")
                    self.counters["deleted"] += 1
                    return []
                if p.protocol != iana.PROTO_ESP:
                    continue
                gone = [c for c in sa.retiring if c.spi_out in p.spis]
                sa.retiring = [c for c in sa.retiring if c not in gone]
                if sa.child is not None and sa.child.spi_out in p.spis:
                    gone.append(sa.child)
                    self.table.set_child(sa, None)
                if gone:
                    out.append(codec.DeletePayload(iana.PROTO_ESP, tuple(c.spi_in for c in gone)))
        return out

    def _settle(self, sa: IkeSa) -> None:
        """IKE_AUTH is over for SA (whatever its outcome): what was kept for it goes."""
        self.counters["settled"] += 1
        if sa.redirected_from is not None:
            self.counters["arrivals"] += 1
        sa.signed = None

    # ---------------------------------------------------------------- housekeeping
    def _release(self, sa: IkeSa) -> None:
        if sa.address is not None:
            self.pool.give(sa.address)
            sa.address = None
        self.table.set_child(sa, None)

    def _delete(self, sa: IkeSa, why: str) -> None:
        self._release(sa)
        self.table.remove(sa)
        self.on_change()

    def expire(self) -> int:
        """Half-open SAs older than 30 s and auth-redirected SAs older than 5 s go."""
        now = self.clock()
        stale = [sa for sa in self.sas.values()
                 if (sa.state == "half-open" and now - sa.created > HALF_OPEN_TIMEOUT)
                 or (sa.state == "redirected" and now - (sa.established_at or sa.created) > REDIRECTED_SA_TIMEOUT)]
        for sa in stale:
            self._delete(sa, "timeout")
        return len(stale)

