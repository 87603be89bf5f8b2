"""The HSRP virtual IP on this kernel: a macvlan with the virtual MAC, its address, gratuitous ARP.

Raw rtnetlink with `struct` (no pyroute2: a daemon importing it costs ~20 MB more per router).
The macvlan (mode private) sits on the segment interface with MAC 0000.0c07.acXX; it is up and
holds the VIP /32 only while the group is Active (a down link keeps its local route, so the address
itself is removed on leaving Active: a Standby router then reaches the VIP over the segment, e.g.
for CLB). With `arp_ignore=1` the ARP reply for the VIP carries the virtual MAC (platform notes).
"""

from __future__ import annotations

import contextlib
import os
import socket
import struct
from ipaddress import IPv4Address

RTM_NEWLINK, RTM_DELLINK, RTM_GETLINK = 16, 17, 18
RTM_NEWADDR, RTM_DELADDR = 20, 21
NLMSG_ERROR, NLMSG_DONE = 2, 3
NLM_F_REQUEST, NLM_F_ACK, NLM_F_EXCL, NLM_F_CREATE = 0x1, 0x4, 0x200, 0x400
IFLA_ADDRESS, IFLA_IFNAME, IFLA_LINK, IFLA_LINKINFO = 1, 3, 5, 18
IFLA_INFO_KIND, IFLA_INFO_DATA, IFLA_MACVLAN_MODE = 1, 2, 1
MACVLAN_MODE_PRIVATE = 1
IFA_ADDRESS, IFA_LOCAL = 1, 2
NLA_F_NESTED = 0x8000
RTMGRP_LINK = 0x1
IFF_UP, IFF_RUNNING, IFF_LOWER_UP = 0x1, 0x40, 0x10000
ETH_P_ARP = 0x0806
SIOCGIFFLAGS = 0x8913

_NLMSGHDR = struct.Struct("=IHHII")
_IFINFOMSG = struct.Struct("=BxHiII")
_IFADDRMSG = struct.Struct("=BBBBI")


class NetlinkError(OSError):
    pass


def _attr(kind: int, payload: bytes) -> bytes:
    length = 4 + len(payload)
    return struct.pack("=HH", length, kind) + payload + b"\0" * ((4 - length % 4) % 4)


def _mac(text: str) -> bytes:
    return bytes.fromhex(text.replace(":", "").replace(".", ""))


class Rtnl:
    """A request/ACK rtnetlink socket in the current network namespace."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        self.sock.bind((0, 0))
        self.seq = 0

    def close(self) -> None:
        self.sock.close()

    def request(self, kind: int, flags: int, body: bytes) -> None:
        self.seq += 1
        header = _NLMSGHDR.pack(_NLMSGHDR.size + len(body), kind, NLM_F_REQUEST | NLM_F_ACK | flags, self.seq, 0)
        self.sock.send(header + body)
        while True:
            data = self.sock.recv(65536)
            pos = 0
            while pos + _NLMSGHDR.size <= len(data):
                length, mtype, _, seq, _ = _NLMSGHDR.unpack_from(data, pos)
                if mtype == NLMSG_ERROR and seq == self.seq:
                    error = -struct.unpack_from("=i", data, pos + _NLMSGHDR.size)[0]
                    if error:
                        raise NetlinkError(error, os.strerror(error))
                    return
                pos += (length + 3) & ~3 if length else len(data)

    # ---------------------------------------------------------------- links
    def create_macvlan(self, name: str, parent: int, mac: str) -> None:
        data = _attr(IFLA_MACVLAN_MODE, struct.pack("=I", MACVLAN_MODE_PRIVATE))
        info = _attr(IFLA_INFO_KIND, b"macvlan\0") + _attr(IFLA_INFO_DATA | NLA_F_NESTED, data)
        body = _IFINFOMSG.pack(socket.AF_UNSPEC, 0, 0, 0, 0)
        body += _attr(IFLA_IFNAME, name.encode() + b"\0") + _attr(IFLA_LINK, struct.pack("=I", parent))
        body += _attr(IFLA_ADDRESS, _mac(mac)) + _attr(IFLA_LINKINFO | NLA_F_NESTED, info)
        self.request(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, body)

    def delete_link(self, index: int) -> None:
        self.request(RTM_DELLINK, 0, _IFINFOMSG.pack(socket.AF_UNSPEC, 0, index, 0, 0))

    def set_up(self, index: int, up: bool) -> None:
        self.request(RTM_NEWLINK, 0, _IFINFOMSG.pack(socket.AF_UNSPEC, 0, index, IFF_UP if up else 0, IFF_UP))

    # ---------------------------------------------------------------- addresses
    def _addr(self, kind: int, flags: int, index: int, address: str, prefixlen: int) -> None:
        packed = IPv4Address(address).packed
        body = _IFADDRMSG.pack(socket.AF_INET, prefixlen, 0, 0, index)
        body += _attr(IFA_LOCAL, packed) + _attr(IFA_ADDRESS, packed)
        self.request(kind, flags, body)

    def add_address(self, index: int, address: str, prefixlen: int = 32) -> None:
        try:
            self._addr(RTM_NEWADDR, NLM_F_CREATE | NLM_F_EXCL, index, address, prefixlen)
        except NetlinkError as exc:
            if exc.errno != 17:  # EEXIST: already there
                raise

    def delete_address(self, index: int, address: str, prefixlen: int = 32) -> None:
        try:
            self._addr(RTM_DELADDR, 0, index, address, prefixlen)
        except NetlinkError as exc:
            if exc.errno not in (99, 19):  # EADDRNOTAVAIL, ENODEV: already gone
                raise


def link_index(name: str) -> int | None:
    try:
        return socket.if_nametoindex(name)
    except OSError:
        return None


def link_flags(name: str) -> int:
    """IFF_* flags of a link in this process's namespace (0 if it does not exist), by ioctl: sysfs
    would show the namespace that mounted /sys, not ours. IFF_RUNNING means carrier."""
    import fcntl

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            reply = fcntl.ioctl(sock.fileno(), SIOCGIFFLAGS, struct.pack("16sh", name.encode()[:15], 0) + b"\0" * 22)
        except OSError:
            return 0
    return int(struct.unpack_from("16sh", reply)[1]) & 0xFFFF


class LinkMonitor:
    """Link events (RTMGRP_LINK): yields (ifindex, flags) for every RTM_NEWLINK/DELLINK received."""

    def __init__(self) -> None:
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE)
        self.sock.bind((0, RTMGRP_LINK))
        self.sock.setblocking(False)

    def fileno(self) -> int:
        return self.sock.fileno()

    def close(self) -> None:
        self.sock.close()

    def read(self) -> list[tuple[int, int]]:
        events: list[tuple[int, int]] = []
        while True:
            try:
                data = self.sock.recv(65536)
            except (BlockingIOError, InterruptedError):
                return events
            except OSError:  # ENOBUFS: we missed some; the caller re-reads the state
                events.append((-1, 0))
                return events
            pos = 0
            while pos + _NLMSGHDR.size + _IFINFOMSG.size <= len(data):
                length, mtype, _, _, _ = _NLMSGHDR.unpack_from(data, pos)
                if length < _NLMSGHDR.size:
                    break
                if mtype in (RTM_NEWLINK, RTM_DELLINK):
                    _, _, index, flags, _ = _IFINFOMSG.unpack_from(data, pos + _NLMSGHDR.size)
                    events.append((index, 0 if mtype == RTM_DELLINK else flags))
                pos += (length + 3) & ~3


def garp_frame(mac: str, address: str) -> bytes:
    """A gratuitous ARP request: sender and target are the VIP, from the virtual MAC, broadcast."""
    hw, ip = _mac(mac), IPv4Address(address).packed
    ether = b"\xff" * 6 + hw + struct.pack("!H", ETH_P_ARP)
    arp = struct.pack("!HHBBH", 1, 0x0800, 6, 4, 1) + hw + ip + b"\0" * 6 + ip
    return ether + arp


def send_garp(ifname: str, mac: str, address: str) -> None:
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ARP)) as sock:
        sock.bind((ifname, 0))
        sock.send(garp_frame(mac, address))


class Vip:
    """One group's virtual IP: macvlan NAME on PARENT with the virtual MAC."""

    def __init__(self, rtnl: Rtnl, name: str, parent: str, mac: str, address: str):
        self.rtnl, self.name, self.parent, self.mac, self.address = rtnl, name, parent, mac, address
        self.owned = False

    def prepare(self) -> None:
        """Start from a clean macvlan (a previous run may have left one holding the VIP)."""
        index = link_index(self.name)
        if index is not None:
            with contextlib.suppress(NetlinkError):
                self.rtnl.delete_link(index)
        parent = link_index(self.parent)
        if parent is None:
            raise NetlinkError(19, f"no interface {self.parent}")
        self.rtnl.create_macvlan(self.name, parent, self.mac)
        self.owned = False

    def take(self) -> None:
        index = link_index(self.name)
        if index is None:
            self.prepare()
            index = link_index(self.name)
        assert index is not None
        self.rtnl.add_address(index, self.address)
        self.rtnl.set_up(index, True)
        self.owned = True
        self.announce()

    def announce(self) -> None:
        with contextlib.suppress(OSError):
            send_garp(self.name, self.mac, self.address)

    def release(self) -> None:
        index = link_index(self.name)
        self.owned = False
        if index is None:
            return
        with contextlib.suppress(NetlinkError):
            self.rtnl.delete_address(index, self.address)
            self.rtnl.set_up(index, False)

    def remove(self) -> None:
        index = link_index(self.name)
        if index is not None:
            with contextlib.suppress(NetlinkError):
                self.rtnl.delete_link(index)
