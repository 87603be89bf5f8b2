"""The bucket nftables' ``jhash ip saddr mod N seed S`` (``jhash ip6 saddr`` for IPv6) gives an address,
computed in Python (pure).

The MX selector hashes each packet's subscriber address into a bucket with nftables' ``jhash``
expression (the kernel's ``jhash()``, Bob Jenkins' lookup3 as in ``include/linux/jhash.h``, over
the 4 address bytes of IPv4 or the 16 of IPv6, then ``reciprocal_scale`` into ``0..N-1``). Knowing a
flow's bucket lets the events runner read from the selector's own table which flows a table change must
move, instead of
inferring it from the same observations as the losses.
"""

from __future__ import annotations

from ipaddress import ip_address

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


def _mix(a: int, b: int, c: int) -> tuple[int, int, int]:
    """``__jhash_mix``: what each full 12-byte block goes through before the next."""
    a = ((a - c) & M32) ^ _rol(c, 4)
    c = (c + b) & M32
    b = ((b - a) & M32) ^ _rol(a, 6)
    a = (a + c) & M32
    c = ((c - b) & M32) ^ _rol(b, 8)
    b = (b + a) & M32
    a = ((a - c) & M32) ^ _rol(c, 16)
    c = (c + b) & M32
    b = ((b - a) & M32) ^ _rol(a, 19)
    a = (a + c) & M32
    c = ((c - b) & M32) ^ _rol(b, 4)
    b = (b + a) & M32
    return a, b, c


def _words(block: bytes) -> list[int]:
    """Up to 12 bytes as three 32-bit words, little-endian (the CPU order of this x86/arm64 kernel)."""
    words = [0, 0, 0]
    for i, byte in enumerate(block):
        words[i // 4] |= byte << (8 * (i % 4))
    return words


def jhash(key: bytes, seed: int) -> int:
    """The kernel's ``jhash(key, len(key), seed)``: full 12-byte blocks mixed, the tail (1 to 12 bytes)
    added and finalised (an IPv4 address is one 4-byte tail; an IPv6 address a block and a 4-byte tail)."""
    if not key:
        raise ValueError("an empty key has no hash here")
    a = b = c = (JHASH_INITVAL + len(key) + seed) & M32
    rest = key
    while len(rest) > 12:
        w = _words(rest[:12])
        a, b, c = _mix((a + w[0]) & M32, (b + w[1]) & M32, (c + w[2]) & M32)
        rest = rest[12:]
    w = _words(rest)
    a = (a + w[0]) & M32
    b = (b + w[1]) & M32
    c = (c + w[2]) & M32
    return _final(a, b, c)


def reciprocal_scale(value: int, modulus: int) -> int:
    """``(value * modulus) >> 32``: the kernel's mapping of a 32-bit hash into ``0..modulus-1``."""
    return (value * modulus) >> 32


def bucket(address: str, buckets: int, seed: int) -> int:
    """The bucket of ADDRESS (IPv4 or IPv6) under ``jhash ip saddr|daddr mod BUCKETS seed SEED`` (``ip6``
    for an IPv6 address): the same buckets, so the same selector table, for both families."""
    if buckets < 1:
        raise ValueError("buckets must be >= 1")
    return reciprocal_scale(jhash(ip_address(address).packed, seed), buckets)
