"""Namespaces, routes, neighbours and socket helpers shared by the sender and the receiver."""

from __future__ import annotations

import contextlib
import fcntl
import ipaddress
import os
import select
import socket
import struct
import time
from collections.abc import Iterator

from .frames import ETH_P_ARP, ETH_P_IP, RCVBUF, SIOCGIFADDR, SO_RCVBUFFORCE, SOL_PACKET


# --------------------------------------------------------------------------- namespaces and addresses
@contextlib.contextmanager
def in_netns(ns: str | None) -> Iterator[None]:
    """Run the body in namespace NS (this thread only); None: stay where we are."""
    if not ns:
        yield
        return
    from labkit import netnsutil

    with netnsutil.entered(ns):
        yield


def _proc_net(name: str) -> str:
    # thread-self: the namespace of this thread (setns is per thread), not of the main thread
    with open(f"/proc/thread-self/net/{name}") as handle:
        return handle.read()


def _hex_ip(value: str) -> int:
    return int.from_bytes(int(value, 16).to_bytes(4, "little"), "big")


def next_hop(dst: str, iface: str | None = None) -> tuple[str, str]:
    """(interface, next-hop address) the main table of this thread's namespace uses for DST."""
    if ":" in dst:
        return next_hop6(dst, iface)
    target = int(ipaddress.IPv4Address(dst))
    best: tuple[int, int, str, str] | None = None  # (-prefix length, metric, iface, hop)
    for line in _proc_net("route").splitlines()[1:]:
        cols = line.split()
        if len(cols) < 8 or not int(cols[3], 16) & 0x1:  # RTF_UP
            continue
        dev, dest, gateway, metric, mask = cols[0], _hex_ip(cols[1]), _hex_ip(cols[2]), int(cols[6]), _hex_ip(cols[7])
        if target & mask != dest or (iface and dev != iface):
            continue
        hop = str(ipaddress.IPv4Address(gateway)) if gateway else dst
        key = (-bin(mask).count("1"), metric, dev, hop)
        if best is None or key < best:
            best = key
    if best is None:
        raise LookupError(f"no route to {dst}" + (f" via {iface}" if iface else ""))
    return best[2], best[3]


def next_hop6(dst: str, iface: str | None = None) -> tuple[str, str]:
    """The IPv6 twin of `next_hop`, from this thread's namespace's IPv6 routes (longest prefix)."""
    target = int(ipaddress.IPv6Address(dst))
    best: tuple[int, int, str, str] | None = None  # (-prefix length, metric, iface, hop)
    for line in _proc_net("ipv6_route").splitlines():
        cols = line.split()
        if len(cols) < 10 or not int(cols[8], 16) & 0x1:  # RTF_UP
            continue
        dest, plen, gateway = int(cols[0], 16), int(cols[1], 16), int(cols[4], 16)
        metric, dev = int(cols[5], 16), cols[9]
        if dev == "lo" or (iface and dev != iface) or target >> (128 - plen) != dest >> (128 - plen):
            continue
        hop = str(ipaddress.IPv6Address(gateway)) if int(cols[8], 16) & 0x2 else dst  # RTF_GATEWAY
        key = (-plen, metric, dev, hop)
        if best is None or key < best:
            best = key
    if best is None:
        raise LookupError(f"no IPv6 route to {dst}" + (f" via {iface}" if iface else ""))
    return best[2], best[3]


def neighbour_mac6(address: str, iface: str) -> str | None:
    """MAC of IPv6 neighbour ADDRESS on IFACE in this thread's namespace (netlink; resolved entries only)."""
    from pyroute2 import IPRoute

    with IPRoute() as ipr:
        index = ipr.link_lookup(ifname=iface)
        if not index:
            return None
        for entry in ipr.get_neighbours(family=socket.AF_INET6, ifindex=index[0]):
            mac = entry.get_attr("NDA_LLADDR")
            # NUD_INCOMPLETE 0x01 / NUD_FAILED 0x20: no usable address
            if entry.get_attr("NDA_DST") == address and mac and not entry["state"] & 0x21:
                return str(mac)
    return None


def nd_resolve(iface: str, address: str, timeout: float = 1.0, tries: int = 3) -> str:
    """ADDRESS's MAC on IFACE (IPv6): the kernel's neighbour discovery, started by one UDP datagram to
    ADDRESS's discard port (9) out of IFACE, then read from the neighbour table."""
    for _ in range(tries):
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_BINDTODEVICE, iface.encode())
            with contextlib.suppress(OSError):
                sock.sendto(b"", (address, 9))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            mac = neighbour_mac6(address, iface)
            if mac:
                return mac
            time.sleep(0.02)
    raise LookupError(f"no neighbour advertisement from {address} on {iface}")


def neighbour_mac(address: str, iface: str) -> str | None:
    """MAC of ADDRESS in this namespace's ARP table (complete entries only)."""
    for line in _proc_net("arp").splitlines()[1:]:
        cols = line.split()
        if len(cols) >= 6 and cols[0] == address and cols[5] == iface and int(cols[2], 16) & 0x2:
            return cols[3]
    return None


def interface_address(iface: str) -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        try:
            data = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, struct.pack("256s", iface.encode()[:15]))
        except OSError:
            return None
    return socket.inet_ntoa(data[20:24])


def mac_text(raw: bytes) -> str:
    return ":".join(f"{b:02x}" for b in raw[:6])


def arp_resolve(iface: str, address: str, timeout: float = 1.0, tries: int = 3) -> str:
    """Ask for ADDRESS's MAC with an ARP request on IFACE (this thread's namespace)."""
    with socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ARP)) as sock:
        sock.bind((iface, ETH_P_ARP))
        own_mac: bytes = sock.getsockname()[4]
        own_ip = socket.inet_aton(interface_address(iface) or "0.0.0.0")
        target = socket.inet_aton(address)
        request = (b"\xff" * 6 + own_mac + struct.pack("!H", ETH_P_ARP)
                   + struct.pack("!HHBBH", 1, ETH_P_IP, 6, 4, 1) + own_mac + own_ip + b"\0" * 6 + target)
        for _ in range(tries):
            sock.send(request)
            deadline = time.monotonic() + timeout
            while (left := deadline - time.monotonic()) > 0:
                ready, _, _ = select.select([sock], [], [], left)
                if not ready:
                    break
                data = sock.recv(128)
                # ARP reply (op 2) whose sender protocol address is the target
                if len(data) >= 42 and data[20:22] == b"\x00\x02" and data[28:32] == target:
                    return mac_text(data[22:28])
    raise LookupError(f"no ARP reply from {address} on {iface}")


def resolve_dst_mac(iface: str, dst: str) -> tuple[str, str]:
    """(next hop, its MAC) for DST out of IFACE: the neighbour table, else an ARP request (IPv6:
    neighbour discovery)."""
    _, hop = next_hop(dst, iface)
    if ":" in hop:
        return hop, neighbour_mac6(hop, iface) or nd_resolve(iface, hop)
    mac = neighbour_mac(hop, iface)
    return hop, mac or arp_resolve(iface, hop)


def bind_socket(sock: socket.socket, address: tuple[str, int], ns: str | None) -> None:
    try:
        sock.bind(address)
    except OSError as exc:
        sock.close()
        where = f" in namespace {ns}" if ns else ""
        raise OSError(exc.errno, f"cannot bind to {address[0]}:{address[1]}{where}: {exc.strerror}") from None


REALTIME_PRIORITY = 10  # SCHED_FIFO of the generator's threads (a NAT64 translator runs above it)


@contextlib.contextmanager
def set_realtime(enabled: bool) -> Iterator[bool]:
    """SCHED_FIFO (REALTIME_PRIORITY) for the calling thread for the body; yields whether it was granted
    (without the privilege the body runs at normal priority)."""
    if not enabled:
        yield False
        return
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(REALTIME_PRIORITY))  # 0: the calling thread
    except PermissionError:
        yield False
        return
    try:
        yield True
    finally:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))


def pin_cpu(cpu: int | None) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})  # 0: the calling thread


def grow_rcvbuf(sock: socket.socket, size: int = RCVBUF) -> None:
    """A receive queue of SIZE bytes: beyond net.core.rmem_max as root, capped by it otherwise."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, size)
    except OSError:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, size)


def read_socket_drops(sock: socket.socket) -> dict[str, int]:
    """Packets the kernel dropped at this socket (full buffer), where the kernel tells."""
    if sock.family == socket.AF_PACKET:
        with contextlib.suppress(OSError):
            packets, drops = struct.unpack("II", sock.getsockopt(SOL_PACKET, 6, 8))  # PACKET_STATISTICS
            return {"socket_drops": drops}
        return {}
    with contextlib.suppress(OSError, ValueError):
        inode = os.fstat(sock.fileno()).st_ino
        table = "udp6" if sock.family == socket.AF_INET6 else "udp"  # the kernel lists each family apart
        for line in _proc_net(table).splitlines()[1:]:
            cols = line.split()
            if len(cols) >= 13 and cols[9] == str(inode):
                return {"socket_drops": int(cols[-1])}
    return {}
