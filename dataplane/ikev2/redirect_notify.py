"""The data of the RFC 5685 redirect notifies (REDIRECT, REDIRECTED_FROM): which gateway a client is
sent to, or was sent from, and (in an IKE_SA_INIT answer) the initiator's nonce. Pure."""

from __future__ import annotations

import struct
from ipaddress import IPv4Address, IPv6Address

from .codec import IkeError
from .iana import GW_FQDN, GW_IPV4, GW_IPV6


def gateway_identity(gateway: str) -> tuple[int, bytes]:
    """(GW Ident Type, identity) of a gateway given as an IPv4 or IPv6 address or an FQDN."""
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
    kind, ident = gateway_identity(gateway)
    return struct.pack("!BB", kind, len(ident)) + ident + (nonce or b"")


def encode_redirected_from(gateway: str) -> bytes:
    """REDIRECTED_FROM notify data: the gateway that redirected us (e.g. `01 04 0A 0A 0A 64`)."""
    kind, ident = gateway_identity(gateway)
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
