"""The IKEv2 gateway on UDP 500 and 4500 inside the FlexVPN daemon (dataplane.daemons.flexvpnd).

Both sockets are bound to 0.0.0.0 with IP_PKTINFO: the destination address of each request (the
VIP or the router's own address) is what the redirect decision looks at, and the answer leaves from
that same address. On 4500 IKE messages carry the 4-byte non-ESP marker; ESP-in-UDP packets (RFC 3948)
go to the user-space ESP engine (dataplane.esp) when the router has a client pool and the kernel a TUN
device: every CHILD_SA the gateway negotiates becomes a tunnel there, the pool is routed into the TUN
device, and a tunnel goes when its IKE SA goes.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import time
from ipaddress import IPv4Address, IPv4Network
from typing import Any

from labkit.configs import Ikev2GatewayConfig
from labkit.files import read_secret

from ..esp import encap
from ..esp.engine import EspEngine
from ..esp.sa import EspSa
from ..esp.tunnel import Tunnel
from . import gateway
from .sa import ChildSa, IkeSa

IP_PKTINFO = 8
_PKTINFO = struct.Struct("=I4s4s")
NON_ESP_MARKER = bytes(4)
ESP_DEVICE = "esp0"  # the TUN device the client pool is routed into


class IkeService:
    def __init__(self, daemon: Any, spec: Ikev2GatewayConfig):
        self.daemon = daemon
        self.spec = spec
        self.sockets: dict[int, socket.socket] = {}
        self.gateway: gateway.Gateway | None = None
        self.counters = {"esp_dropped": 0, "send_errors": 0, "internal_errors": 0, "keepalives": 0}
        self.esp: EspEngine | None = None
        self.esp_sources: dict[tuple[str, int], bytes] = {}  # client -> IP_PKTINFO with its SA's local address

    def log(self, message: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} IKEv2: {message}", flush=True)

    def open(self) -> None:
        cert = key = ca = None
        if self.spec.pki_dir:
            try:
                from . import pki

                node = self.daemon.config.node
                ca = pki.ensure_ca(self.spec.pki_dir)[0]
                cert, key = pki.issue(self.spec.pki_dir, node, list(self.spec.identities))
            except (OSError, ValueError) as exc:
                self.log(f"no certificates ({exc}); pre-shared key only")
        config = gateway.GatewayConfig(
            identities=list(self.spec.identities), psk=read_secret(self.spec.psk_file, "psk").encode(),
            redirect=self.spec.redirect, pool_first=self.spec.pool_first,
            pool_last=self.spec.pool_last, cert=cert, key=key, ca=ca)
        self.gateway = gateway.Gateway(config, redirect=self.redirect, on_change=self.daemon.crypto_changed,
                                       log=self.log, admit=self.daemon.admits)
        for port in (500, 4500):
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            sock.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
            sock.bind(("0.0.0.0", port))
            sock.setblocking(False)
            self.sockets[port] = sock
            self.daemon.loop.watch(sock, selectors.EVENT_READ, lambda _m, p=port: self.readable(p))
        self.open_esp()
        self.daemon.loop.call_later(1.0, self.housekeeping)

    def open_esp(self) -> None:
        """The ESP data plane for the client pool: a TUN device the pool is routed into."""
        pool = self.spec.pool
        if not pool:
            return
        from ..esp.tun import tun_available

        if not tun_available():
            self.log("no /dev/net/tun: CHILD_SAs are negotiated but carry no traffic")
            return
        engine = EspEngine(ESP_DEVICE, self.send_esp, (IPv4Network(pool),))
        try:
            fd = engine.open()
        except OSError as exc:
            self.log(f"ESP data plane unavailable ({exc}); CHILD_SAs carry no traffic")
            return
        self.esp = engine
        self.daemon.loop.watch(fd, selectors.EVENT_READ, lambda _m: engine.tun_readable())

    def send_esp(self, peer: tuple[str, int], datagram: bytes) -> None:
        """ESP leaves from the address the client's IKE SA is with: the VIP for a client the master
        kept, not the master's own address (which the kernel would choose)."""
        source = self.esp_sources.get(peer)
        try:
            if source is None:
                self.sockets[4500].sendto(datagram, peer)
            else:
                self.sockets[4500].sendmsg([datagram], [(socket.IPPROTO_IP, IP_PKTINFO, source)], 0, peer)
        except OSError:
            self.counters["send_errors"] += 1

    def sync_tunnels(self) -> None:
        """Make the ESP tunnels those of the established IKE SAs' CHILD_SAs (after every change): the
        current one, and one rekeyed away until the initiator deletes it (it may still send with it).
        A rekeyed SA is added after the one it replaces, so outbound traffic takes the new one."""
        if self.esp is None or self.gateway is None:
            return
        wanted: dict[bytes, tuple[IkeSa, ChildSa]] = {}
        for sa in self.gateway.sas.values():
            if sa.state == "established":
                for child in (*sa.retiring, *((sa.child,) if sa.child is not None else ())):
                    wanted[child.spi_in] = (sa, child)
        for spi in [spi for spi in self.esp.table.by_spi if spi not in wanted]:
            self.esp.remove(spi)
        self.esp_sources = {tunnel_peer(sa): _PKTINFO.pack(0, socket.inet_aton(sa.local[0]), bytes(4))
                            for sa, _ in wanted.values() if sa.local[0] != "0.0.0.0"}
        for spi, (sa, child) in wanted.items():
            if spi not in self.esp.table.by_spi:
                self.esp.add(tunnel_of(sa, child))
                child.installed = True

    def redirect(self, local: str, peer: str, exchange: str) -> str | None:
        target: str | None = self.daemon.redirect_target(local)
        return target

    def housekeeping(self) -> None:
        if self.gateway is not None and self.gateway.expire():
            self.daemon.crypto_changed()
            self.sync_tunnels()
        self.daemon.loop.call_later(1.0, self.housekeeping)

    def readable(self, port: int) -> None:
        sock = self.sockets[port]
        assert self.gateway is not None
        for _ in range(256):
            try:
                data, ancillary, _flags, (peer_ip, peer_port) = sock.recvmsg(65535, 64)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                return
            local_ip = "0.0.0.0"
            for level, kind, value in ancillary:
                if level == socket.IPPROTO_IP and kind == IP_PKTINFO and len(value) >= _PKTINFO.size:
                    local_ip = socket.inet_ntoa(_PKTINFO.unpack_from(value)[2])
            if port == 4500:
                framing = encap.classify(data)
                if framing == "esp" and self.esp is not None:
                    self.esp.from_network(data, (peer_ip, peer_port))
                    continue
                if framing != "ike":
                    self.counters["keepalives" if framing == "keepalive" else "esp_dropped"] += 1
                    continue
                data = data[4:]
            try:
                replies = self.gateway.handle(data, (peer_ip, peer_port), (local_ip, port))
            except Exception as exc:  # noqa: BLE001 - one datagram never stops the gateway
                self.counters["internal_errors"] += 1
                self.log(f"internal error on a datagram from {peer_ip}:{peer_port}: {exc!r}")
                continue
            for reply in replies:
                self.send(reply)
            self.sync_tunnels()

    def send(self, reply: gateway.Reply) -> None:
        port = reply.local[1]
        payload = (NON_ESP_MARKER + reply.data) if port == 4500 else reply.data
        info = _PKTINFO.pack(0, socket.inet_aton(reply.local[0]), bytes(4))
        try:
            self.sockets[port].sendmsg([payload], [(socket.IPPROTO_IP, IP_PKTINFO, info)], 0, reply.peer)
        except OSError:
            self.counters["send_errors"] += 1

    def counts(self) -> dict[str, int]:
        if self.gateway is None:
            return {"ike": 0, "ipsec": 0, "half_open": 0, "arrivals": 0}
        return self.gateway.counts()

    def status(self, wall: float) -> dict[str, object]:
        if self.gateway is None:
            return {}
        return {"ike": self.counts(), "gateway_counters": {**self.gateway.counters, **self.counters},
                "redirect": self.spec.redirect, "pool": self.spec.pool,
                "pool_free": len(self.gateway.pool.free), "sas": self.gateway.status(wall),
                "certificates": self.gateway.config.cert is not None,
                "esp": self.esp.status() if self.esp is not None else None,
                "ipsec_sas": self.ipsec_sas()}

    def close(self) -> None:
        for sock in self.sockets.values():
            self.daemon.loop.unwatch(sock)
            with contextlib.suppress(OSError):
                sock.close()
        if self.esp is not None and self.esp.fd is not None:
            self.daemon.loop.unwatch(self.esp.fd)
            self.esp.close()  # the TUN device and the pool's route go with it
            self.esp = None

    def ipsec_sas(self) -> list[dict[str, object]]:
        """One entry per installed CHILD_SA, with live ESP counters (IOS `show crypto ipsec sa`)."""
        if self.esp is None or self.gateway is None:
            return []
        out: list[dict[str, object]] = []
        for index, sa in enumerate(sorted((sa for sa in self.gateway.sas.values() if sa.child is not None
                                           and sa.child.spi_in in self.esp.table.by_spi), key=lambda s: s.created), 1):
            assert sa.child is not None
            tunnel = self.esp.table.by_spi[sa.child.spi_in]
            inbound, outbound = tunnel.inbound.counters, tunnel.outbound.counters
            out.append({
                "interface": f"Virtual-Access{index}", "local": sa.local[0], "remote": tunnel.peer[0],
                "port": tunnel.peer[1], "remote_ident": [str(n) for n in tunnel.remote],
                "local_ident": [str(n) for n in tunnel.local], "spi_in": tunnel.inbound.spi.hex(),
                "spi_out": tunnel.outbound.spi.hex(), "transform": transform_name(sa.child.suite),
                "encaps": outbound.packets, "decaps": inbound.packets, "bytes_out": outbound.bytes,
                "bytes_in": inbound.bytes, "verify_failed": inbound.auth_failures,
                "replay_failed": inbound.replay_drops, "malformed": inbound.malformed})
        return out


def tunnel_of(sa: IkeSa, child: ChildSa | None = None) -> Tunnel:
    """The ESP tunnel of an established IKE SA's CHILD_SA, as the responder sees it: inbound keys are
    the initiator's (KEYMAT starts with them, RFC 7296 2.17), ESP-in-UDP to the peer's IKE port when
    it floated to 4500, else to its port 4500. CHILD: one of its CHILD_SAs (default: the current one)."""
    child = child or sa.child
    assert child is not None
    suite, keys = child.suite, child.keys
    inbound = EspSa(child.spi_in, suite.encr, keys.encr_i, suite.integ, keys.integ_i)
    outbound = EspSa(child.spi_out, suite.encr, keys.encr_r, suite.integ, keys.integ_r)
    peer = tunnel_peer(sa)
    remote = tuple(IPv4Network(f"{ts.start}/32") if ts.start == ts.end else _range_net(ts.start, ts.end)
                   for ts in child.ts_i)
    local = tuple(_range_net(ts.start, ts.end) for ts in child.ts_r)
    return Tunnel(sa.peer_id or sa.peer[0], peer, outbound, inbound, remote, local)


def tunnel_peer(sa: IkeSa) -> tuple[str, int]:
    """Where a CHILD_SA's ESP-in-UDP goes: the peer's IKE port when it floated to 4500, else its 4500."""
    return sa.peer if sa.peer[1] != 500 else (sa.peer[0], 4500)


def transform_name(suite: object) -> str:
    """IOS's name of an ESP transform set: `esp-gcm 256`, `esp-aes 256 esp-sha256-hmac`."""
    from ..esp.sa import ENCR_AES_GCM_16

    encr, bits, integ = getattr(suite, "encr", 0), getattr(suite, "key_bits", 0), getattr(suite, "integ", None)
    if encr == ENCR_AES_GCM_16:
        return f"esp-gcm {bits}"
    hmac = {2: "esp-sha-hmac", 12: "esp-sha256-hmac", 13: "esp-sha384-hmac", 14: "esp-sha512-hmac"}
    return f"esp-aes {bits} {hmac.get(integ or 0, '')}".strip()


def _range_net(first: str, last: str) -> IPv4Network:
    """The smallest network covering an address range (traffic selectors are ranges)."""
    a, b = int(IPv4Address(first)), int(IPv4Address(last))
    bits = (a ^ b).bit_length()
    return IPv4Network((a >> bits << bits, 32 - bits))
