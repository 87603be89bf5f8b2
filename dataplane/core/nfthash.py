"""The bucket nftables' ``jhash ip saddr mod N seed S`` gives an IPv4 address, computed in Python (pure).

The MX selector hashes each packet's subscriber address into a bucket with nftables' ``jhash``
expression (the kernel's ``jhash()``, Bob Jenkins' lookup3 as in ``include/linux/jhash.h``, over
the 4 address bytes, then ``reciprocal_scale`` into ``0..N-1``). Knowing a flow's bucket lets the
events runner read from the selector's own table which flows a table change must move, instead of
inferring it from the same observations as the losses.
"""

from __future__ import annotations

import socket

JHASH_INITVAL = 0xDEADBEEF
M32 = 0xFFFFFFFF


def _rol(value: int, shift: int) -> int:
    return ((value << shift) | (value >> (32 - shift))) & M32


def _final(a: int, b: int, c: int) -> int:
    c ^= b
    c = (c - _rol(b, 14)) & M32
    a ^= c
    a = (a - _rol(c, 11)) & M32
    b ^= a
    b = (b - _rol(a, 25)) & M32
    c ^= b
    c = (c - _rol(b, 16)) & M32
    a ^= c
    a = (a - _rol(c, 4)) & M32
    b ^= a
    b = (b - _rol(a, 14)) & M32
    c ^= b
    c = (c - _rol(b, 24)) & M32
    return c


def jhash(key: bytes, seed: int) -> int:
    """The kernel's ``jhash(key, len(key), seed)`` for keys of at most 12 bytes (an IPv4 address is 4)."""
    if not 0 < len(key) <= 12:
        raise ValueError("only keys of 1 to 12 bytes (one lookup3 block)")
    a = b = c = (JHASH_INITVAL + len(key) + seed) & M32
    words = [0, 0, 0]
    for i, byte in enumerate(key):  # the tail bytes, little-endian within each 32-bit word
        words[i // 4] |= byte << (8 * (i % 4))
    a = (a + words[0]) & M32
    b = (b + words[1]) & M32
    c = (c + words[2]) & M32
    return _final(a, b, c)


def reciprocal_scale(value: int, modulus: int) -> int:
    """``(value * modulus) >> 32``: the kernel's mapping of a 32-bit hash into ``0..modulus-1``."""
    return (value * modulus) >> 32


def bucket(address: str, buckets: int, seed: int) -> int:
    """The bucket of ADDRESS under ``jhash ip saddr|daddr mod BUCKETS seed SEED``."""
    if buckets < 1:
        raise ValueError("buckets must be >= 1")
    return reciprocal_scale(jhash(socket.inet_aton(address), seed), buckets)
