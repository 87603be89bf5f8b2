"""User-space ESP between a TUN device and a UDP 4500 socket, driven by the owner's event loop.

The kernel routes inner traffic into the TUN device (the gateway's client pool, the client's remote
networks); each packet read there is sealed by its tunnel's outbound SA and sent as ESP-in-UDP. ESP
datagrams received on the owner's UDP 4500 socket are opened and written to the TUN device, where the
kernel forwards them on. This is the one place where Python carries data packets: the kernel here has
no ESP transform (XFRM states with proto esp fail), so the path exists only for that case.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable
from ipaddress import IPv4Network

from . import encap
from .tunnel import Tunnel, TunnelTable

Send = Callable[[tuple[str, int], bytes], None]
BATCH = 256  # packets handled per wake-up before yielding to the loop


class EspEngine:
    def __init__(self, device: str, send: Send, routes: tuple[IPv4Network, ...] = (), by_source: bool = False):
        self.device = device
        self.send = send
        self.routes = routes
        self.table = TunnelTable(by_source=by_source)
        self.fd: int | None = None
        self.index: int | None = None
        self.counters = {"tun_in": 0, "tun_out": 0, "tun_errors": 0}

    def open(self, addresses: tuple[str, ...] = ()) -> int:
        """Create the device, give it ADDRESSES (/32), bring it up, route `routes` into it; the
        descriptor to watch."""
        from ..kernel.vip import Rtnl, link_index
        from .tun import open_tun, set_route

        self.fd = open_tun(self.device)
        self.index = link_index(self.device)
        rtnl = Rtnl()
        try:
            assert self.index is not None
            for address in addresses:
                rtnl.add_address(self.index, address, 32)
            rtnl.set_up(self.index, True)
            for net in self.routes:
                set_route(rtnl, self.index, net)
        finally:
            rtnl.close()
        return self.fd

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # the device and its routes go with the last descriptor
            self.fd = None

    def add(self, tunnel: Tunnel) -> None:
        self.table.add(tunnel)

    def remove(self, spi_in: bytes) -> None:
        self.table.remove(spi_in)

    def tun_readable(self) -> None:
        assert self.fd is not None
        for _ in range(BATCH):
            try:
                packet = os.read(self.fd, 65535)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                self.counters["tun_errors"] += 1
                return
            self.counters["tun_in"] += 1
            sealed = self.table.encapsulate(packet)
            if sealed is not None:
                self.send(*sealed)

    def from_network(self, datagram: bytes, source: tuple[str, int]) -> None:
        inner = self.table.decapsulate(datagram, source)
        if inner is None or self.fd is None:
            return
        try:
            os.write(self.fd, inner)
            self.counters["tun_out"] += 1
        except OSError:
            self.counters["tun_errors"] += 1

    def status(self) -> dict[str, object]:
        return {"device": self.device, "counters": {**self.counters, **self.table.counters.as_dict()},
                "tunnels": [t.status() for t in self.table.by_spi.values()]}


def drain_udp(sock: socket.socket, engine: EspEngine, on_ike: Callable[[bytes], None] | None = None,
              stop: Callable[[], bool] = lambda: False, batch: int = 256) -> None:
    """Read what the UDP 4500 socket has queued (at most BATCH datagrams): ESP to the engine, IKE
    (non-ESP marker stripped) to ON_IKE. STOP is asked after each datagram (the engine may be replaced)."""
    for _ in range(batch):
        try:
            data, source = sock.recvfrom(65535)
        except (BlockingIOError, InterruptedError):
            return
        kind = encap.classify(data)
        if kind == "esp":
            engine.from_network(data, source)
        elif kind == "ike" and on_ike is not None:
            on_ike(data[4:])
        if stop():
            return
