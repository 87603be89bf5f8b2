"""IKEv2 message codec (RFC 7296 section 3) and the RFC 5685 redirect notify data. Pure.

`decode(data)` parses a whole message (header and the chain of payloads; an SK payload is kept
opaque, decrypted by dataplane.ikev2.crypto, and its inner chain parsed with `decode_payloads`).
Every malformed input raises `IkeError` and nothing else.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv6Address

# Exchange types
IKE_SA_INIT, IKE_AUTH, CREATE_CHILD_SA, INFORMATIONAL = 34, 35, 36, 37
EXCHANGES = {IKE_SA_INIT: "IKE_SA_INIT", IKE_AUTH: "IKE_AUTH", CREATE_CHILD_SA: "CREATE_CHILD_SA",
             INFORMATIONAL: "INFORMATIONAL"}
# Header flags
FLAG_INITIATOR, FLAG_VERSION, FLAG_RESPONSE = 0x08, 0x10, 0x20
VERSION = 0x20  # major 2, minor 0

# Payload types
NONE, SA, KE, IDI, IDR, CERT, CERTREQ, AUTH, NONCE, NOTIFY, DELETE, VENDOR = 0, 33, 34, 35, 36, 37, 38, 39, 40, 41, \
    42, 43
TSI, TSR, SK, CP, EAP, SKF = 44, 45, 46, 47, 48, 53
PAYLOAD_NAMES = {SA: "SA", KE: "KE", IDI: "IDi", IDR: "IDr", CERT: "CERT", CERTREQ: "CERTREQ", AUTH: "AUTH",
                 NONCE: "N", NOTIFY: "NOTIFY", DELETE: "DELETE", VENDOR: "VID", TSI: "TSi", TSR: "TSr", SK: "SK",
                 CP: "CP", EAP: "EAP", SKF: "SKF"}

# Protocol IDs
PROTO_IKE, PROTO_AH, PROTO_ESP = 1, 2, 3
# Transform types and the IDs this implementation knows
T_ENCR, T_PRF, T_INTEG, T_DH, T_ESN = 1, 2, 3, 4, 5
ENCR_AES_CBC, ENCR_AES_GCM_16 = 12, 20
PRF_HMAC_SHA1, PRF_HMAC_SHA2_256, PRF_HMAC_SHA2_384, PRF_HMAC_SHA2_512 = 2, 5, 6, 7
AUTH_HMAC_SHA1_96, AUTH_HMAC_SHA2_256_128, AUTH_HMAC_SHA2_384_192, AUTH_HMAC_SHA2_512_256 = 2, 12, 13, 14
ATTR_KEY_LENGTH = 14
# Identification types
ID_IPV4_ADDR, ID_FQDN, ID_RFC822_ADDR, ID_IPV6_ADDR, ID_DER_ASN1_DN, ID_KEY_ID = 1, 2, 3, 5, 9, 11
# Authentication methods
AUTH_RSA_SIG, AUTH_PSK, AUTH_DIGITAL_SIGNATURE = 1, 2, 14
# Certificate encodings
CERT_X509_SIGNATURE = 4
# Traffic selector types
TS_IPV4_ADDR_RANGE = 7
# Configuration payload
CFG_REQUEST, CFG_REPLY = 1, 2
INTERNAL_IP4_ADDRESS, INTERNAL_IP4_NETMASK, INTERNAL_IP4_DNS = 1, 2, 3

# Notify message types (errors < 16384)
UNSUPPORTED_CRITICAL_PAYLOAD, INVALID_IKE_SPI, INVALID_MAJOR_VERSION, INVALID_SYNTAX = 1, 4, 5, 7
INVALID_MESSAGE_ID, INVALID_SPI, NO_PROPOSAL_CHOSEN, INVALID_KE_PAYLOAD = 9, 11, 14, 17
AUTHENTICATION_FAILED, SINGLE_PAIR_REQUIRED, NO_ADDITIONAL_SAS, INTERNAL_ADDRESS_FAILURE = 24, 34, 35, 36
FAILED_CP_REQUIRED, TS_UNACCEPTABLE, INVALID_SELECTORS, TEMPORARY_FAILURE = 37, 38, 39, 43
INITIAL_CONTACT, SET_WINDOW_SIZE, ADDITIONAL_TS_POSSIBLE, IPCOMP_SUPPORTED = 16384, 16385, 16386, 16387
NAT_DETECTION_SOURCE_IP, NAT_DETECTION_DESTINATION_IP, COOKIE, USE_TRANSPORT_MODE = 16388, 16389, 16390, 16391
REKEY_SA, ESP_TFC_PADDING_NOT_SUPPORTED, NON_FIRST_FRAGMENTS_ALSO, MOBIKE_SUPPORTED = 16393, 16394, 16395, 16396
MULTIPLE_AUTH_SUPPORTED = 16404
REDIRECT_SUPPORTED, REDIRECT, REDIRECTED_FROM = 16406, 16407, 16408
IKEV2_FRAGMENTATION_SUPPORTED, SIGNATURE_HASH_ALGORITHMS = 16430, 16431
NOTIFY_NAMES = {
    NO_PROPOSAL_CHOSEN: "NO_PROPOSAL_CHOSEN", INVALID_KE_PAYLOAD: "INVALID_KE_PAYLOAD",
    AUTHENTICATION_FAILED: "AUTHENTICATION_FAILED", NO_ADDITIONAL_SAS: "NO_ADDITIONAL_SAS",
    INTERNAL_ADDRESS_FAILURE: "INTERNAL_ADDRESS_FAILURE", TS_UNACCEPTABLE: "TS_UNACCEPTABLE",
    INVALID_SYNTAX: "INVALID_SYNTAX", INITIAL_CONTACT: "INITIAL_CONTACT",
    NAT_DETECTION_SOURCE_IP: "NAT_DETECTION_SOURCE_IP", NAT_DETECTION_DESTINATION_IP: "NAT_DETECTION_DESTINATION_IP",
    COOKIE: "COOKIE", REDIRECT_SUPPORTED: "REDIRECT_SUPPORTED", REDIRECT: "REDIRECT",
    REDIRECTED_FROM: "REDIRECTED_FROM", SIGNATURE_HASH_ALGORITHMS: "SIGNATURE_HASH_ALGORITHMS",
    IKEV2_FRAGMENTATION_SUPPORTED: "IKEV2_FRAGMENTATION_SUPPORTED", MOBIKE_SUPPORTED: "MOBIKE_SUPPORTED",
    MULTIPLE_AUTH_SUPPORTED: "MULTIPLE_AUTH_SUPPORTED", ESP_TFC_PADDING_NOT_SUPPORTED: "ESP_TFC_PADDING_NOT_SUPPORTED",
    NON_FIRST_FRAGMENTS_ALSO: "NON_FIRST_FRAGMENTS_ALSO", USE_TRANSPORT_MODE: "USE_TRANSPORT_MODE",
}
# RFC 5685 gateway identity types
GW_IPV4, GW_IPV6, GW_FQDN = 1, 2, 3

HEADER = struct.Struct("!8s8sBBBBII")
GENERIC = struct.Struct("!BBH")
MAX_MESSAGE = 65535


class IkeError(ValueError):
    """Malformed IKEv2 input (the only exception the decoders raise)."""


# ------------------------------------------------------------------------------------------ payloads
@dataclass(frozen=True)
class Transform:
    type: int
    id: int
    key_length: int | None = None


@dataclass(frozen=True)
class Proposal:
    number: int
    protocol: int
    spi: bytes
    transforms: tuple[Transform, ...]

    def of_type(self, kind: int) -> list[Transform]:
        return [t for t in self.transforms if t.type == kind]


@dataclass(frozen=True)
class SaPayload:
    proposals: tuple[Proposal, ...]
    TYPE = SA


@dataclass(frozen=True)
class KePayload:
    group: int
    data: bytes
    TYPE = KE


@dataclass(frozen=True)
class IdPayload:
    id_type: int
    data: bytes
    initiator: bool = True

    @property
    def TYPE(self) -> int:  # noqa: N802 - like the other payloads' class constant
        return IDI if self.initiator else IDR

    def body(self) -> bytes:
        """RestOfIDPayload (RFC 7296 2.15): what the AUTH computation MACs."""
        return struct.pack("!B3x", self.id_type) + self.data

    def text(self) -> str:
        if self.id_type == ID_IPV4_ADDR and len(self.data) == 4:
            return str(IPv4Address(self.data))
        if self.id_type == ID_IPV6_ADDR and len(self.data) == 16:
            return str(IPv6Address(self.data))
        if self.id_type in (ID_FQDN, ID_RFC822_ADDR):
            return self.data.decode(errors="replace")
        return self.data.hex()


@dataclass(frozen=True)
class CertPayload:
    encoding: int
    data: bytes
    TYPE = CERT


@dataclass(frozen=True)
class CertReqPayload:
    encoding: int
    data: bytes
    TYPE = CERTREQ


@dataclass(frozen=True)
class AuthPayload:
    method: int
    data: bytes
    TYPE = AUTH


@dataclass(frozen=True)
class NoncePayload:
    data: bytes
    TYPE = NONCE


@dataclass(frozen=True)
class NotifyPayload:
    type: int
    data: bytes = b""
    protocol: int = 0
    spi: bytes = b""
    TYPE = NOTIFY

    @property
    def name(self) -> str:
        return NOTIFY_NAMES.get(self.type, str(self.type))


@dataclass(frozen=True)
class DeletePayload:
    protocol: int
    spis: tuple[bytes, ...] = ()
    TYPE = DELETE


@dataclass(frozen=True)
class VendorPayload:
    data: bytes
    TYPE = VENDOR


@dataclass(frozen=True)
class TrafficSelector:
    start: str
    end: str
    protocol: int = 0
    start_port: int = 0
    end_port: int = 65535


@dataclass(frozen=True)
class TsPayload:
    selectors: tuple[TrafficSelector, ...]
    initiator: bool = True

    @property
    def TYPE(self) -> int:  # noqa: N802
        return TSI if self.initiator else TSR


@dataclass(frozen=True)
class CpPayload:
    cfg_type: int
    attributes: tuple[tuple[int, bytes], ...]
    TYPE = CP


@dataclass(frozen=True)
class SkPayload:
    """The encrypted payload, still protected: IV, ciphertext and ICV as received."""

    first: int  # type of the first inner payload
    data: bytes
    TYPE = SK


@dataclass(frozen=True)
class UnknownPayload:
    kind: int
    data: bytes
    critical: bool = False

    @property
    def TYPE(self) -> int:  # noqa: N802
        return self.kind


Payload = (SaPayload | KePayload | IdPayload | CertPayload | CertReqPayload | AuthPayload | NoncePayload
           | NotifyPayload | DeletePayload | VendorPayload | TsPayload | CpPayload | SkPayload | UnknownPayload)


@dataclass(frozen=True)
class Header:
    spi_i: bytes
    spi_r: bytes
    first: int
    exchange: int
    flags: int
    message_id: int
    length: int = 0
    version: int = VERSION

    @property
    def is_response(self) -> bool:
        return bool(self.flags & FLAG_RESPONSE)

    @property
    def from_initiator(self) -> bool:
        return bool(self.flags & FLAG_INITIATOR)


@dataclass
class Message:
    header: Header
    payloads: list[Payload] = field(default_factory=list)

    def notify(self, kind: int) -> NotifyPayload | None:
        return next((p for p in self.payloads if isinstance(p, NotifyPayload) and p.type == kind), None)

    def first(self, cls: type) -> object | None:
        return next((p for p in self.payloads if isinstance(p, cls)), None)

    def summary(self) -> str:
        """`SA KE N NOTIFY(REDIRECT_SUPPORTED)` like IOS debug output."""
        return summary(self.payloads)


def summary(payloads: list[Payload]) -> str:
    words = []
    for p in payloads:
        if isinstance(p, NotifyPayload):
            words.append(f"NOTIFY({p.name})")
        elif isinstance(p, SkPayload):
            words.append("ENCR")
        else:
            words.append(PAYLOAD_NAMES.get(p.TYPE, str(p.TYPE)))
    return " ".join(words)


# ------------------------------------------------------------------------------------------ encoding
def _encode_body(p: Payload) -> bytes:
    if isinstance(p, SaPayload):
        return _encode_proposals(p.proposals)
    if isinstance(p, KePayload):
        return struct.pack("!HH", p.group, 0) + p.data
    if isinstance(p, IdPayload):
        return p.body()
    if isinstance(p, (CertPayload, CertReqPayload)):
        return struct.pack("!B", p.encoding) + p.data
    if isinstance(p, AuthPayload):
        return struct.pack("!B3x", p.method) + p.data
    if isinstance(p, (NoncePayload, VendorPayload)):
        return p.data
    if isinstance(p, NotifyPayload):
        return struct.pack("!BBH", p.protocol, len(p.spi), p.type) + p.spi + p.data
    if isinstance(p, DeletePayload):
        size = len(p.spis[0]) if p.spis else (0 if p.protocol == PROTO_IKE else 4)
        return struct.pack("!BBH", p.protocol, size, len(p.spis)) + b"".join(p.spis)
    if isinstance(p, TsPayload):
        body = struct.pack("!B3x", len(p.selectors))
        for ts in p.selectors:
            body += struct.pack("!BBHHH4s4s", TS_IPV4_ADDR_RANGE, ts.protocol, 16, ts.start_port, ts.end_port,
                                IPv4Address(ts.start).packed, IPv4Address(ts.end).packed)
        return body
    if isinstance(p, CpPayload):
        body = struct.pack("!B3x", p.cfg_type)
        for kind, value in p.attributes:
            body += struct.pack("!HH", kind & 0x7FFF, len(value)) + value
        return body
    if isinstance(p, SkPayload):
        return p.data
    return p.data


def _encode_proposals(proposals: tuple[Proposal, ...]) -> bytes:
    out = b""
    for index, prop in enumerate(proposals):
        transforms = b""
        for t_index, t in enumerate(prop.transforms):
            attrs = struct.pack("!HH", 0x8000 | ATTR_KEY_LENGTH, t.key_length) if t.key_length else b""
            last = t_index == len(prop.transforms) - 1
            transforms += struct.pack("!BBHBBH", 0 if last else 3, 0, 8 + len(attrs), t.type, 0, t.id) + attrs
        last_prop = index == len(proposals) - 1
        body = struct.pack("!BBBB", prop.number, prop.protocol, len(prop.spi), len(prop.transforms)) + prop.spi
        body += transforms
        out += struct.pack("!BBH", 0 if last_prop else 2, 0, 4 + len(body)) + body
    return out


def encode_payloads(payloads: list[Payload]) -> tuple[int, bytes]:
    """The chain of PAYLOADS and the type of its first payload."""
    out = b""
    for index, p in enumerate(payloads):
        body = _encode_body(p)
        nxt = p.first if isinstance(p, SkPayload) else payloads[index + 1].TYPE if index + 1 < len(payloads) else NONE
        critical = 0x80 if isinstance(p, UnknownPayload) and p.critical else 0
        out += GENERIC.pack(nxt, critical, GENERIC.size + len(body)) + body
    return (payloads[0].TYPE if payloads else NONE), out


def encode(header: Header, payloads: list[Payload]) -> bytes:
    first, body = encode_payloads(payloads)
    return HEADER.pack(header.spi_i, header.spi_r, first, header.version, header.exchange, header.flags,
                       header.message_id, HEADER.size + len(body)) + body


# ------------------------------------------------------------------------------------------ decoding
def decode_header(data: bytes) -> Header:
    if len(data) < HEADER.size:
        raise IkeError(f"IKE message too short ({len(data)} bytes)")
    spi_i, spi_r, first, version, exchange, flags, message_id, length = HEADER.unpack_from(data)
    if version >> 4 != 2:
        raise IkeError(f"IKE major version {version >> 4} (only 2 is spoken here)")
    if length != len(data):
        raise IkeError(f"IKE header length {length} but {len(data)} bytes received")
    return Header(spi_i, spi_r, first, exchange, flags, message_id, length, version)


def decode(data: bytes) -> Message:
    """A whole IKE message (without the non-ESP marker of port 4500)."""
    header = decode_header(data)
    return Message(header, decode_payloads(header.first, data[HEADER.size:]))


def decode_payloads(first: int, data: bytes) -> list[Payload]:
    payloads: list[Payload] = []
    kind, pos = first, 0
    while kind != NONE:
        if pos + GENERIC.size > len(data):
            raise IkeError(f"payload chain cut short before {PAYLOAD_NAMES.get(kind, kind)}")
        nxt, flags, length = GENERIC.unpack_from(data, pos)
        if length < GENERIC.size or pos + length > len(data):
            raise IkeError(f"payload {PAYLOAD_NAMES.get(kind, kind)} with bad length {length}")
        body = data[pos + GENERIC.size:pos + length]
        if kind in (SK, SKF):
            payloads.append(SkPayload(nxt, body))
            if pos + length != len(data):
                raise IkeError("the encrypted payload must be the last one")
            return payloads
        payloads.append(_decode_body(kind, body, bool(flags & 0x80)))
        kind, pos = nxt, pos + length
    if pos != len(data):
        raise IkeError(f"{len(data) - pos} bytes after the last payload")
    return payloads


def _need(body: bytes, size: int, what: str) -> None:
    if len(body) < size:
        raise IkeError(f"{what} payload too short ({len(body)} bytes)")


def _decode_body(kind: int, body: bytes, critical: bool) -> Payload:
    if kind == SA:
        return SaPayload(_decode_proposals(body))
    if kind == KE:
        _need(body, 4, "KE")
        return KePayload(struct.unpack_from("!H", body)[0], body[4:])
    if kind in (IDI, IDR):
        _need(body, 4, "ID")
        return IdPayload(body[0], body[4:], kind == IDI)
    if kind in (CERT, CERTREQ):
        _need(body, 1, "CERT")
        return (CertPayload if kind == CERT else CertReqPayload)(body[0], body[1:])
    if kind == AUTH:
        _need(body, 4, "AUTH")
        return AuthPayload(body[0], body[4:])
    if kind == NONCE:
        if not 16 <= len(body) <= 256:
            raise IkeError(f"nonce of {len(body)} bytes (16..256 allowed)")
        return NoncePayload(body)
    if kind == NOTIFY:
        _need(body, 4, "NOTIFY")
        protocol, spi_size, ntype = struct.unpack_from("!BBH", body)
        if 4 + spi_size > len(body):
            raise IkeError("notify SPI runs past the payload")
        return NotifyPayload(ntype, body[4 + spi_size:], protocol, body[4:4 + spi_size])
    if kind == DELETE:
        _need(body, 4, "DELETE")
        protocol, spi_size, count = struct.unpack_from("!BBH", body)
        if len(body) != 4 + spi_size * count:
            raise IkeError("delete payload SPI count does not match its length")
        return DeletePayload(protocol, tuple(body[4 + i * spi_size:4 + (i + 1) * spi_size] for i in range(count)))
    if kind == VENDOR:
        return VendorPayload(body)
    if kind in (TSI, TSR):
        return TsPayload(_decode_selectors(body), kind == TSI)
    if kind == CP:
        _need(body, 4, "CP")
        attrs = []
        pos = 4
        while pos < len(body):
            if pos + 4 > len(body):
                raise IkeError("configuration attribute cut short")
            akind, alen = struct.unpack_from("!HH", body, pos)
            if pos + 4 + alen > len(body):
                raise IkeError("configuration attribute runs past the payload")
            attrs.append((akind & 0x7FFF, body[pos + 4:pos + 4 + alen]))
            pos += 4 + alen
        return CpPayload(body[0], tuple(attrs))
    if critical:
        raise IkeError(f"unsupported critical payload {kind}")
    return UnknownPayload(kind, body, critical)


def _decode_proposals(body: bytes) -> tuple[Proposal, ...]:
    proposals = []
    pos, more = 0, True
    while more:
        if pos + 8 > len(body):
            raise IkeError("proposal cut short")
        last, _, length, number, protocol, spi_size, count = struct.unpack_from("!BBHBBBB", body, pos)
        if last not in (0, 2) or length < 8 + spi_size or pos + length > len(body):
            raise IkeError("bad proposal substructure")
        spi = body[pos + 8:pos + 8 + spi_size]
        transforms = []
        tpos, end = pos + 8 + spi_size, pos + length
        for index in range(count):
            if tpos + 8 > end:
                raise IkeError("transform cut short")
            tlast, _, tlen, ttype, _, tid = struct.unpack_from("!BBHBBH", body, tpos)
            if tlast not in (0, 3) or tlen < 8 or tpos + tlen > end or (tlast == 0) != (index == count - 1):
                raise IkeError("bad transform substructure")
            key_length = None
            apos = tpos + 8
            while apos < tpos + tlen:
                if apos + 4 > tpos + tlen:
                    raise IkeError("transform attribute cut short")
                akind, avalue = struct.unpack_from("!HH", body, apos)
                if akind & 0x8000:
                    if akind & 0x7FFF == ATTR_KEY_LENGTH:
                        key_length = avalue
                    apos += 4
                else:
                    apos += 4 + avalue
                    if apos > tpos + tlen:
                        raise IkeError("transform attribute runs past the transform")
            transforms.append(Transform(ttype, tid, key_length))
            tpos += tlen
        if tpos != end:
            raise IkeError("proposal length does not match its transforms")
        proposals.append(Proposal(number, protocol, spi, tuple(transforms)))
        pos, more = end, last == 2
    if pos != len(body):
        raise IkeError("bytes after the last proposal")
    return tuple(proposals)


def _decode_selectors(body: bytes) -> tuple[TrafficSelector, ...]:
    _need(body, 4, "TS")
    count = body[0]
    out = []
    pos = 4
    for _ in range(count):
        if pos + 8 > len(body):
            raise IkeError("traffic selector cut short")
        ts_type, protocol, length, start_port, end_port = struct.unpack_from("!BBHHH", body, pos)
        if length < 8 or pos + length > len(body):
            raise IkeError("traffic selector with bad length")
        if ts_type == TS_IPV4_ADDR_RANGE and length == 16:
            start, end = body[pos + 8:pos + 12], body[pos + 12:pos + 16]
            out.append(TrafficSelector(str(IPv4Address(start)), str(IPv4Address(end)), protocol, start_port,
                                       end_port))
        pos += length
    if pos != len(body):
        raise IkeError("bytes after the last traffic selector")
    return tuple(out)


# ------------------------------------------------------------------------------------------ RFC 5685
def _gateway_identity(gateway: str) -> tuple[int, bytes]:
    try:
        return GW_IPV4, IPv4Address(gateway).packed
    except ValueError:
        pass
    try:
        return GW_IPV6, IPv6Address(gateway).packed
    except ValueError:
        pass
    data = gateway.encode()
    if not 0 < len(data) < 256:
        raise IkeError("gateway FQDN length out of range")
    return GW_FQDN, data


def encode_redirect(gateway: str, nonce: bytes | None) -> bytes:
    """REDIRECT notify data: GW Ident Type, GW Ident Len, New Responder GW Identity, [Nonce Data].
    The nonce (the initiator's, from IKE_SA_INIT) is present only in an IKE_SA_INIT response."""
    kind, ident = _gateway_identity(gateway)
    return struct.pack("!BB", kind, len(ident)) + ident + (nonce or b"")


def encode_redirected_from(gateway: str) -> bytes:
    """REDIRECTED_FROM notify data: the gateway that redirected us (e.g. `01 04 0A 0A 0A 64`)."""
    kind, ident = _gateway_identity(gateway)
    return struct.pack("!BB", kind, len(ident)) + ident


def decode_gateway(data: bytes) -> tuple[str, bytes]:
    """(gateway, rest) from REDIRECT / REDIRECTED_FROM data; rest is the nonce data (if any)."""
    if len(data) < 2:
        raise IkeError("redirect data too short")
    kind, length = data[0], data[1]
    ident = data[2:2 + length]
    if len(ident) != length:
        raise IkeError("redirect gateway identity runs past the data")
    if kind == GW_IPV4 and length == 4:
        gateway = str(IPv4Address(ident))
    elif kind == GW_IPV6 and length == 16:
        gateway = str(IPv6Address(ident))
    elif kind == GW_FQDN and length > 0:
        try:
            gateway = ident.decode("ascii")
        except UnicodeDecodeError:
            raise IkeError("redirect FQDN is not ASCII") from None
    else:
        raise IkeError(f"redirect gateway identity type {kind} with length {length}")
    return gateway, data[2 + length:]
