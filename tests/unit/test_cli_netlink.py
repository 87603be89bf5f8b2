"""The SSH server's small rtnetlink reader, on crafted messages (the live comparison with `ip -j` is in
tests/integration/test_ssh.py)."""

from __future__ import annotations

import socket
import struct

import pytest

from lab_orchestrator.cli_ssh import netlink
from lab_orchestrator.cli_ssh.state import NextHop


def attr(kind: int, value: bytes) -> bytes:
    data = struct.pack("=HH", 4 + len(value), kind) + value
    return data + b"\0" * ((4 - len(data) % 4) % 4)


def message(kind: int, seq: int, body: bytes) -> bytes:
    return struct.pack("=IHHII", 16 + len(body), kind, 2, seq, 0) + body


class FakeSocket:
    def __init__(self, *datagrams: bytes):
        self.datagrams = list(datagrams)
        self.sent: list[bytes] = []

    def send(self, data: bytes) -> int:
        self.sent.append(data)
        return len(data)

    def recv(self, size: int) -> bytes:
        return self.datagrams.pop(0)


def ip(text: str) -> bytes:
    return socket.inet_aton(text)


def test_attributes_are_aligned() -> None:
    data = attr(3, b"ge-0-0-0\0") + attr(4, struct.pack("=I", 1500))
    assert list(netlink.attributes(data)) == [(3, b"ge-0-0-0\0"), (4, struct.pack("=I", 1500))]


def test_links() -> None:
    body = struct.pack("=BxHiII", 0, 1, 20, 0x10043, 0) + attr(3, b"ge-0-0-0\0") + attr(20, b"ge-0/0/0\0") + \
        attr(4, struct.pack("=I", 9000)) + attr(16, b"\x06") + attr(1, bytes.fromhex("020000000001")) + \
        attr(18, attr(1, b"veth\0")) + attr(23, struct.pack("=QQQQ", 5, 6, 700, 800))
    sock = FakeSocket(message(16, 1, body), message(netlink.NLMSG_DONE, 1, b"\0\0\0\0"))
    (link,) = netlink._links(sock)  # type: ignore[arg-type]
    assert (link.index, link.name, link.alias, link.mtu, link.mac, link.kind) == \
        (20, "ge-0-0-0", "ge-0/0/0", 9000, "02:00:00:00:00:01", "veth")
    assert link.admin_up and link.oper_up and (link.rx_packets, link.tx_bytes) == (5, 800)
    assert struct.unpack_from("=IHH", sock.sent[0])[1:] == (netlink.RTM_GETLINK, 0x301)


def test_routes_with_multipath_and_tables() -> None:
    hops = b""
    for gateway, ifindex in (("10.0.0.3", 21), ("10.0.0.5", 22)):
        nested = attr(5, ip(gateway))
        hops += struct.pack("=HBBi", 8 + len(nested), 0, 0, ifindex) + nested
    multipath = struct.pack("=BBBBBBBBI", 2, 0, 0, 0, 254, 12, 0, 1, 0) + attr(15, struct.pack("=I", 254)) + \
        attr(6, struct.pack("=I", 32)) + attr(9, hops)
    blackhole = struct.pack("=BBBBBBBBI", 2, 0, 0, 0, 199, 4, 0, 6, 0) + attr(15, struct.pack("=I", 199))
    connected = struct.pack("=BBBBBBBBI", 2, 31, 0, 0, 254, 2, 253, 1, 0) + attr(1, ip("10.0.0.2")) + \
        attr(4, struct.pack("=i", 21)) + attr(7, ip("10.0.0.2"))
    sock = FakeSocket(message(24, 3, multipath) + message(24, 3, blackhole), message(24, 3, connected),
                      message(netlink.NLMSG_DONE, 3, b"\0\0\0\0"))
    names = {21: "ge-0-1-1", 22: "ge-0-1-2"}
    default, hole, direct = netlink._routes(sock, names)  # type: ignore[arg-type]
    assert (default.dst, default.table, default.proto, default.metric) == ("0.0.0.0/0", 254, "bird", 32)
    assert default.nexthops == (NextHop("10.0.0.3", "ge-0-1-1"), NextHop("10.0.0.5", "ge-0-1-2"))
    assert (hole.table, hole.type, hole.proto, hole.nexthops) == (199, "blackhole", "static", ())
    assert (direct.dst, direct.scope, direct.prefsrc) == ("10.0.0.2/31", 253, "10.0.0.2")
    assert direct.nexthops == (NextHop(None, "ge-0-1-1"),)


def test_addresses_with_creation_time() -> None:
    body = struct.pack("=BBBBI", 2, 31, 0, 0, 21) + attr(1, ip("10.0.0.2")) + attr(2, ip("10.0.0.2")) + \
        attr(6, struct.pack("=IIII", 0, 0, 12345, 12345))
    sock = FakeSocket(message(20, 2, body), message(netlink.NLMSG_DONE, 2, b"\0\0\0\0"))
    addresses, created = netlink._addresses(sock, {21: "ge-0-1-1"})  # type: ignore[arg-type]
    assert [(a.ifname, a.address, a.prefixlen) for a in addresses] == [("ge-0-1-1", "10.0.0.2", 31)]
    assert created == {"10.0.0.2": 123.45}


def test_an_error_reply_raises() -> None:
    sock = FakeSocket(message(netlink.NLMSG_ERROR, 1, struct.pack("=i", -1) + b"\0" * 16))
    with pytest.raises(netlink.NetlinkError):
        netlink._links(sock)  # type: ignore[arg-type]
