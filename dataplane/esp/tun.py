"""A TUN device for user-space ESP, and the route that sends inner traffic into it (edge code).

The device is opened with IFF_TUN | IFF_NO_PI: each read is one IPv4 packet, each write delivers one.
It exists as long as the owning process holds the descriptor, so a daemon that dies leaves no device.
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct
from ipaddress import IPv4Network

TUNSETIFF = 0x400454CA
IFF_TUN, IFF_NO_PI = 0x0001, 0x1000
RTM_NEWROUTE, RTM_DELROUTE = 24, 25
NLM_F_REQUEST, NLM_F_ACK, NLM_F_CREATE, NLM_F_REPLACE = 0x1, 0x4, 0x400, 0x100
RTA_DST, RTA_OIF = 1, 4
RT_TABLE_MAIN, RTPROT_STATIC, RT_SCOPE_LINK, RTN_UNICAST = 254, 4, 253, 1


def tun_available() -> bool:
    return os.path.exists("/dev/net/tun")


def open_tun(name: str) -> int:
    """A non-blocking descriptor of the TUN device NAME (created if needed)."""
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    try:
        fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", name.encode(), IFF_TUN | IFF_NO_PI))
    except OSError:
        os.close(fd)
        raise
    return fd


def _route(oif: int, net: IPv4Network) -> bytes:
    body = struct.pack("=BBBBBBBBI", socket.AF_INET, net.prefixlen, 0, 0, RT_TABLE_MAIN, RTPROT_STATIC,
                       RT_SCOPE_LINK, RTN_UNICAST, 0)
    body += struct.pack("=HH4s", 8, RTA_DST, net.network_address.packed)
    body += struct.pack("=HHI", 8, RTA_OIF, oif)
    return body


def set_route(rtnl: object, oif: int, net: IPv4Network, present: bool = True) -> None:
    """Route NET into the device with index OIF (or remove that route); `rtnl` is a vip.Rtnl."""
    request = rtnl.request  # type: ignore[attr-defined]
    if present:
        request(RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE, _route(oif, net))
    else:
        request(RTM_DELROUTE, 0, _route(oif, net))
