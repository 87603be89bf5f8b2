"""IKEv2 message codec (RFC 7296 section 3) and the RFC 5685 redirect notify data. Pure.

`decode(data)` parses a whole message (header and the chain of payloads; an SK payload is kept
opaque, decrypted by dataplane.ikev2.crypto, and its inner chain parsed with `decode_payloads`).
Every malformed input raises `IkeError` and nothing else.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv6Address

from .iana import (
    ATTR_KEY_LENGTH,
    AUTH,
    CERT,
    CERTREQ,
    CP,
    DELETE,
    FLAG_INITIATOR,
    FLAG_RESPONSE,
    ID_FQDN,
    ID_IPV4_ADDR,
    ID_IPV6_ADDR,
    ID_RFC822_ADDR,
    IDI,
    IDR,
    KE,
    NONCE,
    NONE,
    NOTIFY,
    NOTIFY_NAMES,
    PAYLOAD_NAMES,
    PROTO_IKE,
    SA,
    SK,
    SKF,
    TS_IPV4_ADDR_RANGE,
    TSI,
    TSR,
    VENDOR,
    VERSION,
)

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
