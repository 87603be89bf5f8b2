"""HSRP (RFC 2281) on the wire: version 1 (20 bytes, Hello/Coup/Resign) and version 2 (TLVs, for
completeness), the virtual MAC. Pure: bytes in, `HsrpPacket` out, and back. The state machine is
dataplane.core.hsrp."""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from enum import IntEnum
from ipaddress import IPv4Address

PORT = 1985
GROUP_V1 = "224.0.0.2"
GROUP_V2 = "224.0.0.102"
DEFAULT_AUTH = "cisco"
V1_LENGTH = 20


class HsrpError(ValueError):
    """A message that is not a well-formed HSRP message (the only exception the decoder raises)."""


class State(IntEnum):
    INIT = 0
    LEARN = 1
    LISTEN = 2
    SPEAK = 4
    STANDBY = 8
    ACTIVE = 16

    @property
    def label(self) -> str:
        return "Init" if self is State.INIT else self.name.capitalize()


class Op(IntEnum):
    HELLO = 0
    COUP = 1
    RESIGN = 2


# HSRPv2 group state TLV numbers states differently (RFC-less, Cisco): 0 disabled .. 6 active.
_V2_STATE = {State.INIT: 1, State.LEARN: 2, State.LISTEN: 3, State.SPEAK: 4, State.STANDBY: 5, State.ACTIVE: 6}
_V2_STATE_BACK = {v: k for k, v in _V2_STATE.items()}


def virtual_mac(group: int, version: int = 1) -> str:
    """0000.0c07.acXX (v1, XX = group) or 0000.0c9f.fXXX (v2), as `aa:bb:cc:dd:ee:ff`."""
    if version == 2:
        return f"00:00:0c:9f:f{group >> 8:01x}:{group & 0xFF:02x}"
    return f"00:00:0c:07:ac:{group:02x}"


def cisco_mac(mac: str) -> str:
    """`00:00:0c:07:ac:01` -> `0000.0c07.ac01` (IOS notation)."""
    digits = mac.replace(":", "").lower()
    return f"{digits[0:4]}.{digits[4:8]}.{digits[8:12]}"


def auth_bytes(text: str) -> bytes:
    return text.encode()[:8].ljust(8, b"\0")


@dataclass(frozen=True)
class HsrpPacket:
    """One HSRP message. Times are in seconds as on the v1 wire (v2 carries milliseconds)."""

    op: Op
    state: State
    hellotime: float
    holdtime: float
    priority: int
    group: int
    vip: str
    auth: bytes = auth_bytes(DEFAULT_AUTH)
    version: int = 1
    identifier: str = ""  # v2 only: the sender's MAC

    def encode(self) -> bytes:
        if self.version == 2:
            return self._encode_v2()
        return struct.pack(
            "!BBBBBBBB8s4s", 0, int(self.op), int(self.state), _seconds(self.hellotime), _seconds(self.holdtime),
            self.priority, self.group, 0, self.auth, IPv4Address(self.vip).packed)

    def _encode_v2(self) -> bytes:
        mac = bytes.fromhex(self.identifier.replace(":", "")) if self.identifier else bytes(6)
        body = struct.pack("!BBBBH6sIII16s", 2, int(self.op), _V2_STATE[self.state], 4, self.group, mac,
                           self.priority, int(self.hellotime * 1000), int(self.holdtime * 1000),
                           IPv4Address(self.vip).packed.ljust(16, b"\0"))
        auth = struct.pack("!BB8s", 3, 8, self.auth)
        return struct.pack("!BB", 1, len(body)) + body + auth


def _seconds(value: float) -> int:
    """v1 carries whole seconds: sub-second timers round up (at least 1, at most 255)."""
    return max(1, min(255, math.ceil(value - 1e-9)))


def decode(data: bytes) -> HsrpPacket:
    """Parse one HSRP message (v1 by its 20-byte layout, v2 by its TLVs); raise HsrpError if malformed."""
    if len(data) >= 2 and data[0] == 1 and data[1] == 40:
        return _decode_v2(data)
    if len(data) < V1_LENGTH:
        raise HsrpError(f"HSRP v1 message too short ({len(data)} bytes)")
    version, op, state, hello, hold, priority, group, _reserved, auth, vip = struct.unpack(
        "!BBBBBBBB8s4s", data[:V1_LENGTH])
    if version != 0:
        raise HsrpError(f"unknown HSRP version field {version}")
    try:
        op_ = Op(op)
        state_ = State(state)
    except ValueError:
        raise HsrpError(f"bad op code {op} or state {state}") from None
    return HsrpPacket(op_, state_, float(hello), float(hold), priority, group, str(IPv4Address(vip)), auth)


def _decode_v2(data: bytes) -> HsrpPacket:
    pos, found = 0, None
    auth = auth_bytes(DEFAULT_AUTH)
    while pos + 2 <= len(data):
        kind, length = data[pos], data[pos + 1]
        value = data[pos + 2:pos + 2 + length]
        if len(value) != length:
            raise HsrpError("HSRP v2 TLV runs past the end of the message")
        if kind == 1:
            if length != 40:
                raise HsrpError(f"HSRP v2 group state TLV of length {length}")
            found = struct.unpack("!BBBBH6sIII16s", value)
        elif kind == 3 and length == 8:
            auth = value
        pos += 2 + length
    if found is None:
        raise HsrpError("HSRP v2 message without a group state TLV")
    version, op, state, ipver, group, mac, priority, hello, hold, vip = found
    if version != 2 or ipver != 4 or state not in _V2_STATE_BACK or op not in (0, 1, 2) or priority > 255:
        raise HsrpError("HSRP v2 group state TLV with unsupported values")
    return HsrpPacket(Op(op), _V2_STATE_BACK[state], hello / 1000, hold / 1000, priority, group,
                      str(IPv4Address(vip[:4])), auth, 2, ":".join(f"{b:02x}" for b in mac))
