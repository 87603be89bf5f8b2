"""The IKEv2 initiator without I/O (one IKE SA setup attempt with one gateway, RFC 7296 with the
RFC 5685 client side of redirect): its configuration, its result and the exchanges it answers.
`dataplane.ikev2.client` drives it over UDP (Runner) and is the command line.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field
from ipaddress import IPv4Address
from typing import Any

from . import codec, crypto, iana, redirect_notify
from .codec import IkeError

DEFAULT_IKE = crypto.Suite(iana.ENCR_AES_CBC, 256, iana.PRF_HMAC_SHA2_256, iana.AUTH_HMAC_SHA2_256_128, 19)
DEFAULT_ESP = crypto.Suite(iana.ENCR_AES_CBC, 256, None, iana.AUTH_HMAC_SHA2_256_128, None)


@dataclass
class ClientConfig:
    gateway: str
    identity: str = "client"
    psk: bytes | None = field(kw_only=True)  # the pre-shared key (None: certificate authentication)
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
            return codec.IdPayload(iana.ID_IPV4_ADDR, IPv4Address(self.config.identity).packed)
        except ValueError:
            return codec.IdPayload(iana.ID_FQDN, self.config.identity.encode())

    # ---------------------------------------------------------------- IKE_SA_INIT
    def start(self) -> bytes:
        suite = self.config.ike
        proposal_suite = crypto.Suite(suite.encr, suite.key_bits, suite.prf, suite.integ, self.group)
        offered = [self.group] + [g for g in (suite.dh, *self.config.extra_groups) if g is not None and g != self.group]
        transforms = tuple(t for t in proposal_suite.transforms() if t.type != iana.T_DH)
        transforms += tuple(codec.Transform(iana.T_DH, g) for g in dict.fromkeys(offered))
        payloads: list[codec.Payload] = [codec.NotifyPayload(iana.COOKIE, self.cookie)] if self.cookie else []
        payloads += [
            codec.SaPayload((codec.Proposal(1, iana.PROTO_IKE, b"", transforms),)),
            codec.KePayload(self.group, self.dh.public),
            codec.NoncePayload(self.nonce_i),
            codec.NotifyPayload(iana.NAT_DETECTION_SOURCE_IP, crypto.nat_hash(self.spi_i, bytes(8), *self.local)),
            codec.NotifyPayload(iana.NAT_DETECTION_DESTINATION_IP,
                                crypto.nat_hash(self.spi_i, bytes(8), self.target, self.config.port)),
        ]
        if self.redirected_from is not None:
            payloads.append(codec.NotifyPayload(iana.REDIRECTED_FROM,
                                                redirect_notify.encode_redirected_from(self.redirected_from)))
        elif self.config.redirect_supported:
            payloads.append(codec.NotifyPayload(iana.REDIRECT_SUPPORTED))
        if self.config.key is not None:
            payloads.append(crypto.hash_algorithms_notify())
        header = codec.Header(self.spi_i, bytes(8), iana.SA, iana.IKE_SA_INIT, iana.FLAG_INITIATOR, 0)
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
        if self.state == "init" and header.exchange == iana.IKE_SA_INIT and header.message_id == 0:
            return self._init_response(data, message)
        if self.state == "auth" and header.exchange == iana.IKE_AUTH and header.message_id == 1 \
                and header.spi_r == self.spi_r:
            return self._auth_response(data, message)
        if self.state == "delete" and header.exchange == iana.INFORMATIONAL and header.spi_r == self.spi_r:
            return "deleted", None
        return "ignore", "unexpected message"

    def _init_response(self, data: bytes, message: codec.Message) -> tuple[str, Any]:
        redirect = message.notify(iana.REDIRECT)
        if redirect is not None:
            try:
                gateway, nonce = redirect_notify.decode_gateway(redirect.data)
            except IkeError as exc:
                self.ignored += 1
                return "ignore", f"malformed REDIRECT: {exc}"
            if nonce != self.nonce_i:
                self.ignored += 1
                return "ignore", f"REDIRECT to {gateway} with a wrong nonce"
            return "redirect", gateway
        cookie = message.notify(iana.COOKIE)
        if cookie is not None:
            # RFC 7296 section 2.6: the same request again, the cookie as first payload.
            if not 1 <= len(cookie.data) <= 64 or self.cookies >= 3:
                return "failed", "the gateway keeps asking for a cookie"
            self.cookies += 1
            self.cookie = cookie.data
            return "send", self.start()
        invalid_ke = message.notify(iana.INVALID_KE_PAYLOAD)
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

            inner.append(codec.CertPayload(iana.CERT_X509_SIGNATURE, pki.der(self.config.cert)))
            if self.config.ca is not None:
                inner.append(codec.CertReqPayload(iana.CERT_X509_SIGNATURE, pki.certreq_hash(self.config.ca)))
            inner.append(codec.AuthPayload(iana.AUTH_DIGITAL_SIGNATURE,
                                           crypto.rsa_sign(self.config.key, octets, iana.AUTH_DIGITAL_SIGNATURE)))
        else:
            assert self.config.psk is not None
            inner.append(codec.AuthPayload(iana.AUTH_PSK, crypto.psk_auth(self.suite, self.config.psk, octets)))
        if self.config.request_address:
            inner.append(codec.CpPayload(iana.CFG_REQUEST, ((iana.INTERNAL_IP4_ADDRESS, b""),)))
        if self.config.child:
            inner.append(codec.SaPayload((crypto.esp_proposal(self.config.esp, self.child_spi),)))
            everything = (codec.TrafficSelector("0.0.0.0", "255.255.255.255"),)
            inner.append(codec.TsPayload(everything, True))
            inner.append(codec.TsPayload(everything, False))
        header = codec.Header(self.spi_i, self.spi_r, iana.SK, iana.IKE_AUTH, iana.FLAG_INITIATOR, 1)
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
            if isinstance(p, codec.NotifyPayload) and p.type in (iana.AUTHENTICATION_FAILED, iana.INVALID_SYNTAX):
                return "failed", f"IKE_AUTH refused: {p.name}"
        id_r = next((p for p in inner if isinstance(p, codec.IdPayload) and not p.initiator), None)
        auth = next((p for p in inner if isinstance(p, codec.AuthPayload)), None)
        if id_r is None or auth is None:
            return "failed", "IKE_AUTH response without IDr/AUTH"
        octets = crypto.signed_octets(self.msg2, self.nonce_i, self.suite, self.keys.sk_pr, id_r.body())
        if auth.method == iana.AUTH_PSK:
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
        redirect = next((p for p in inner if isinstance(p, codec.NotifyPayload) and p.type == iana.REDIRECT), None)
        if redirect is not None:
            try:
                gateway, _ = redirect_notify.decode_gateway(redirect.data)
            except IkeError as exc:
                return "failed", f"malformed REDIRECT in IKE_AUTH: {exc}"
            return "redirect", gateway
        cp = next((p for p in inner if isinstance(p, codec.CpPayload)), None)
        if cp is not None:
            for kind, value in cp.attributes:
                if kind == iana.INTERNAL_IP4_ADDRESS and len(value) == 4:
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
        header = codec.Header(self.spi_i, self.spi_r, iana.SK, iana.INFORMATIONAL, iana.FLAG_INITIATOR,
                              self.message_id)
        self.request = crypto.seal(header, [codec.DeletePayload(iana.PROTO_IKE)], self.suite, self.keys, True)
        self.state = "delete"
        return self.request
