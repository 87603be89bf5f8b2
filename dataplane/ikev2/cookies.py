"""Stateless IKEv2 cookies (RFC 7296 section 2.6): what a responder under pressure hands out
instead of keeping state, and checks when the initiator comes back with it."""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from collections.abc import Callable
from ipaddress import IPv4Address

COOKIE_SECRET_LIFETIME = 60.0  # a cookie secret is used this long, and accepted one period more


class Cookies:
    """Stateless cookies (RFC 7296 section 2.6): Cookie = VersionIDofSecret | HMAC-SHA256(secret,
    Ni | IPi | SPIi) truncated to 16 bytes. The secret is renewed every COOKIE_SECRET_LIFETIME and
    the previous one still accepted, so a cookie handed out just before a change stays good."""

    def __init__(self, clock: Callable[[], float]):
        self.clock = clock
        self.version = 0
        self.secrets: dict[int, bytes] = {0: os.urandom(32)}
        self.born = clock()

    def _rotate(self) -> None:
        now = self.clock()
        if now - self.born < COOKIE_SECRET_LIFETIME:
            return
        previous = self.secrets[self.version]
        self.version = (self.version + 1) & 0xFFFFFFFF
        self.secrets = {(self.version - 1) & 0xFFFFFFFF: previous, self.version: os.urandom(32)}
        self.born = now

    @staticmethod
    def _mac(secret: bytes, version: bytes, nonce_i: bytes, address: str, spi_i: bytes) -> bytes:
        return hmac.new(secret, version + nonce_i + IPv4Address(address).packed + spi_i, hashlib.sha256).digest()[:16]

    def make(self, nonce_i: bytes, address: str, spi_i: bytes) -> bytes:
        self._rotate()
        version = struct.pack("!I", self.version)
        return version + self._mac(self.secrets[self.version], version, nonce_i, address, spi_i)

    def check(self, cookie: bytes, nonce_i: bytes, address: str, spi_i: bytes) -> bool:
        self._rotate()
        if len(cookie) != 20:
            return False
        secret = self.secrets.get(struct.unpack("!I", cookie[:4])[0])
        return secret is not None and hmac.compare_digest(
            cookie[4:], self._mac(secret, cookie[:4], nonce_i, address, spi_i))
