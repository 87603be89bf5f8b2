"""The IKEv2 gateway on UDP 500 and 4500 inside the FlexVPN daemon (dataplane.flexvpnd).

Both sockets are bound to 0.0.0.0 with IP_PKTINFO: the destination address of each request (the
VIP or the router's own address) is what the redirect decision looks at, and the answer leaves from
that same address. On 4500 IKE messages carry the 4-byte non-ESP marker; ESP packets are counted
and dropped (no data plane here: docs/flexvpn.md).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import time
from typing import Any

from . import gateway

IP_PKTINFO = 8
_PKTINFO = struct.Struct("=I4s4s")
NON_ESP_MARKER = bytes(4)


class IkeService:
    def __init__(self, daemon: Any, spec: dict[str, Any]):
        self.daemon = daemon
        self.spec = spec
        self.sockets: dict[int, socket.socket] = {}
        self.gateway: gateway.Gateway | None = None
        self.counters = {"esp_dropped": 0, "send_errors": 0, "internal_errors": 0}
        self.debug = bool(spec.get("debug"))

    def log(self, message: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} IKEv2: {message}", flush=True)

    def open(self) -> None:
        cert = key = ca = None
        if self.spec.get("pki_dir"):
            try:
                from . import pki

                node = self.daemon.config["node"]
                ca = pki.ensure_ca(self.spec["pki_dir"])[0]
                cert, key = pki.issue(self.spec["pki_dir"], node, list(self.spec.get("identities") or []))
            except (OSError, ValueError) as exc:
                self.log(f"no certificates ({exc}); pre-shared key only")
        config = gateway.GatewayConfig(
            identities=list(self.spec.get("identities") or []), psk=str(self.spec.get("psk", "")).encode(),
            redirect=self.spec.get("redirect", "init"), pool_first=self.spec.get("pool_first"),
            pool_last=self.spec.get("pool_last"), cert=cert, key=key, ca=ca)
        self.gateway = gateway.Gateway(config, redirect=self.redirect, on_change=self.daemon.crypto_changed,
                                       log=self.log)
        for port in (500, 4500):
            sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            sock.setsockopt(socket.IPPROTO_IP, IP_PKTINFO, 1)
            sock.bind(("0.0.0.0", port))
            sock.setblocking(False)
            self.sockets[port] = sock
            self.daemon.loop.watch(sock, selectors.EVENT_READ, lambda _m, p=port: self.readable(p))
        self.daemon.loop.call_later(1.0, self.housekeeping)

    def redirect(self, local: str, peer: str, exchange: str) -> str | None:
        target: str | None = self.daemon.redirect_target(local)
        return target

    def housekeeping(self) -> None:
        if self.gateway is not None and self.gateway.expire():
            self.daemon.crypto_changed()
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
                if data[:4] != NON_ESP_MARKER:
                    if len(data) > 1:
                        self.counters["esp_dropped"] += 1
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
                "redirect": self.spec.get("redirect"), "pool": self.spec.get("pool"),
                "pool_free": len(self.gateway.pool.free), "sas": self.gateway.status(wall),
                "certificates": self.gateway.config.cert is not None}

    def close(self) -> None:
        for sock in self.sockets.values():
            self.daemon.loop.unwatch(sock)
            with contextlib.suppress(OSError):
                sock.close()
