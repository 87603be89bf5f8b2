"""nftables' `jhash ip6 saddr|daddr` in Python: the kernel's lookup3 over 16 bytes (one mixed 12-byte
block and a 4-byte tail). The pinned values were read from this kernel's nft rule on the same addresses
(tests/integration/test_nfthash6_kernel.py compares hundreds more, root only)."""

from __future__ import annotations

from ipaddress import ip_address

import pytest

from dataplane.core import nfthash

# (address, jhash with seed 0x5eed, bucket of 6400) as `meta mark set jhash ip6 saddr mod 6400 seed 0x5eed` gives
KERNEL = [
    ("2001:db8:172:80::1", 130849368, 194),
    ("2001:db8:172:80::2", 3478528978, 5183),
    ("::1", 1054428470, 1571),
    ("2001:db8:203::9", 710983609, 1059),
]


@pytest.mark.parametrize(("address", "value", "bucket"), KERNEL)
def test_ipv6_hash_and_bucket_are_the_kernel_s(address: str, value: int, bucket: int) -> None:
    assert nfthash.jhash(ip_address(address).packed, 0x5EED) == value
    assert nfthash.bucket(address, 6400, 0x5EED) == bucket


def test_ipv4_keys_keep_their_single_tail_hash() -> None:
    # a 4-byte key never reaches the block loop: the IPv4 buckets of every shipped lab are unchanged
    assert nfthash.bucket("100.64.0.1", 64, 0x5EED) == 51


def test_every_byte_of_an_ipv6_address_counts() -> None:
    base = ip_address("2001:db8:172:80::1").packed
    seen = {nfthash.jhash(base, 0x5EED)}
    for i in range(16):
        changed = bytearray(base)
        changed[i] ^= 0x01
        seen.add(nfthash.jhash(bytes(changed), 0x5EED))
    assert len(seen) == 17  # the mixed block (bytes 0-11) and the tail (12-15) both reach the hash


def test_an_empty_key_is_refused() -> None:
    with pytest.raises(ValueError):
        nfthash.jhash(b"", 0)
