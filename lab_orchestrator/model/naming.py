"""Names: vendor interface names -> Linux interface names, lab/node -> namespace names.

Linux limits interface names to 15 bytes (IFNAMSIZ - 1) and forbids '/', ':' and whitespace.
The vendor name is kept as the link's alias (`ip link set ... alias ge-0/0/0`), so every output
can show what the engineer typed.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Sequence
from ipaddress import IPv4Network, IPv6Network

IFNAMSIZ_MAX = 15

# IOS long names have well-known short forms (the ones `show ip interface brief` accepts).
_IOS_ABBREVIATIONS = (
    ("HundredGigE", "Hu"),
    ("FortyGigabitEthernet", "Fo"),
    ("TwentyFiveGigE", "Twe"),
    ("TenGigabitEthernet", "Te"),
    ("GigabitEthernet", "Gi"),
    ("FastEthernet", "Fa"),
    ("Ethernet", "Et"),
    ("Loopback", "Lo"),
    ("Tunnel", "Tu"),
    ("Port-channel", "Po"),
    ("Serial", "Se"),
    ("Vlan", "Vl"),
)

_JUNOS_IFD = re.compile(r"^(ge|xe|et|ae|lo|fxp|em|irb|reth|lt|st)[-0-9/.:]*[0-9]$")
_IOS_IFD = re.compile(r"^[A-Z][A-Za-z-]*[0-9][0-9/.:]*$")
_LINUX_IFD = re.compile(r"^[a-z][a-z0-9]*[0-9]$")
_EMPTY_PART = re.compile(r"[-/.:]{2}")


class NameError_(ValueError):
    """A vendor interface name that cannot be turned into a Linux name; `hint` says what to do."""

    def __init__(self, message: str, hint: str = ""):
        super().__init__(message)
        self.hint = hint


def linux_ifname(vendor_name: str) -> str:
    """Map `ge-0/0/0` -> `ge-0-0-0`, `GigabitEthernet0/1` -> `Gi0-1`, `eth1` -> `eth1`."""
    name = vendor_name
    # fullmatch: with match, '$' would also accept a trailing newline ("eth1\n")
    known = _JUNOS_IFD.fullmatch(name) or _IOS_IFD.fullmatch(name) or _LINUX_IFD.fullmatch(name)
    if not known or _EMPTY_PART.search(name):  # `ge-0//0`, `ge-/0`: a typo, not a port
        raise NameError_(
            f"'{vendor_name}' is not an interface name this lab understands",
            "e.g. ge-0/0/0, ae0.100, GigabitEthernet0/1 or eth1",
        )
    for long, short in _IOS_ABBREVIATIONS:
        if name.startswith(long):
            name = short + name[len(long):]
            break
    name = name.replace("/", "-").replace(":", "_")
    if len(name) > IFNAMSIZ_MAX:
        raise NameError_(
            f"'{vendor_name}' becomes '{name}' ({len(name)} characters); Linux allows {IFNAMSIZ_MAX}",
            "shorten it or use another interface",
        )
    return name


def namespace(lab: str, node: str, instance: str | None = None) -> str:
    """`t3-mx1` for a node's master instance, `t3-mx1-trust-vr` for a routing instance."""
    base = f"{lab}-{node}"
    return f"{base}-{instance.lower()}" if instance else base


def mgmt_bridge(lab: str) -> str:
    return f"{lab}-mg"[:IFNAMSIZ_MAX]


def mgmt_host_port(lab: str, index: int) -> str:
    """Root-namespace end of a node's management veth (enslaved to the lab's bridge)."""
    return f"{lab}-m{index}"[:IFNAMSIZ_MAX]


def root_nft_table(lab: str) -> str:
    return f"lab_{lab.replace('-', '_')}"


# The management subnet of a lab whose file does not set addressing.mgmt
def default_mgmt_subnet(lab: str) -> IPv4Network:
    """A /24 in 198.19.0.0/16 picked from the lab's name, so two labs rarely collide."""
    return IPv4Network(f"198.19.{zlib.crc32(lab.encode()) % 256}.0/24")


def free_mgmt_subnet(lab: str, taken: Sequence[IPv4Network | IPv6Network]) -> IPv4Network:
    """The default subnet, or the next /24 of 198.19.0.0/16 (from the same start) that no route
    of this host overlaps: what `lab up` uses when the file does not fix addressing.mgmt."""
    start = zlib.crc32(lab.encode()) % 256
    for step in range(256):
        candidate = IPv4Network(f"198.19.{(start + step) % 256}.0/24")
        if not any(candidate.overlaps(t) for t in taken if isinstance(t, IPv4Network) and t.prefixlen):
            return candidate
    raise ValueError("every /24 of 198.19.0.0/16 is in use on this host: set addressing.mgmt")
