"""IOS-like FlexVPN client daemon: `crypto ikev2 client flexvpn` with `tunnel destination dynamic`.

One per `ios-router` with a `flexvpn_client`, in the router's namespace:

    python -m dataplane.daemons.flexclientd /run/lab/LAB/nodes/NODE/flexclient.json

IKEv2 from UDP 4500 of the tunnel source address to the first peer (the cluster VIP), redirects
followed (`dataplane.ikev2.client`); the CHILD_SA becomes an ESP tunnel (`dataplane.esp`) on a TUN
device named like the IOS tunnel interface (`Tunnel1` -> `Tu1`) that carries the negotiated address
(`ip address negotiated`) and the configured routes. Dead peer detection, reconnection and the peer
list are `dataplane.core.flexclient`. Status: `ikev2-status.json` in the node's folder (the same file and
layout as a gateway's, plus `client`), so `show crypto ikev2 sa`, `show crypto ipsec sa` and
`show crypto session` read it the same way.
"""

from __future__ import annotations

import contextlib
import selectors
import signal
import sys
import time
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

from labkit.configs import FlexclientConfig
from labkit.files import read_secret
from labkit.flexstatus import FlexclientStatus
from labkit.status import write_status

from ..core.flexclient import ClientStatus, Liveness, PeerList
from ..esp.engine import EspEngine, drain_udp
from ..ikev2 import codec, crypto, iana
from ..ikev2.client import ClientConfig, Initiator, Runner, parse_suite
from ..ikev2.codec import IkeError
from ..ikev2.service import transform_name
from ..ikev2.tunnelclient import tunnels_of

STATUS_EVERY = 1.0


def log(message: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)


class Stop(Exception):
    """SIGTERM/SIGINT while a connection attempt blocks."""


class Client:
    def __init__(self, config: FlexclientConfig):
        self.config = config
        self.status_path = Path(config.status)
        self.peers = PeerList(list(config.peers))
        self.status = ClientStatus(config.name, config.interface, list(config.peers))
        self.routes = tuple(IPv4Network(r) for r in config.routes)
        self.ike_suite = parse_suite(config.ike, False)
        self.esp_suite = parse_suite(config.esp, True)
        self.runner: Runner | None = None
        self.attempt: Initiator | None = None
        self.engine: EspEngine | None = None
        self.liveness: Liveness | None = None
        self.dpd_message_id: int | None = None
        self.inbound_seen = 0
        self.stopping = False
        self.blocking = False
        self.last_status = 0.0

    # ---------------------------------------------------------------- signals, status
    def on_signal(self, _signum: int, _frame: object) -> None:
        self.stopping = True
        if self.blocking:
            raise Stop

    def publish(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self.last_status < STATUS_EVERY:
            return
        self.last_status = now
        write_status(self.status_path, FlexclientStatus.model_validate(self.snapshot()))

    def snapshot(self) -> dict[str, Any]:
        data: dict[str, Any] = {"node": self.config.node, "role": "flexvpn-client", "updated": time.time(),
                                "client": self.status.as_dict(), "sas": [], "ipsec_sas": []}
        attempt, engine = self.attempt, self.engine
        if self.status.state != "up" or attempt is None or engine is None or attempt.suite is None:
            return data
        suite = attempt.suite
        data["sas"] = [{
            "id": 1, "local": f"{self.status.local}/4500", "remote": f"{self.status.gateway}/4500", "state": "READY",
            "spi_i": attempt.spi_i.hex(), "spi_r": attempt.spi_r.hex(), "suite": suite.name(),
            "encr": f"AES-{'GCM' if suite.aead else 'CBC'}", "keysize": suite.key_bits, "dh": suite.dh,
            "auth_sign": "PSK", "auth_verify": "PSK", "address": self.status.address,
            "redirected_from": self.status.redirected_from, "redirected_to": None,
            "active_s": round(time.time() - (self.status.up_since or time.time()), 1),
            "dpd": {"probes": self.liveness.probes if self.liveness else 0},
        }]
        for tunnel in engine.table.by_spi.values():
            inbound, outbound = tunnel.inbound.counters, tunnel.outbound.counters
            data["ipsec_sas"].append({
                "interface": self.status.interface, "local": self.status.local, "remote": tunnel.peer[0],
                "port": tunnel.peer[1], "local_ident": [f"{self.status.address}/32"],
                "remote_ident": [str(n) for n in tunnel.remote], "spi_in": tunnel.inbound.spi.hex(),
                "spi_out": tunnel.outbound.spi.hex(), "transform": transform_name(self.esp_suite),
                "encaps": outbound.packets, "decaps": inbound.packets, "bytes_out": outbound.bytes,
                "bytes_in": inbound.bytes, "verify_failed": inbound.auth_failures,
                "replay_failed": inbound.replay_drops, "malformed": inbound.malformed})
        data["esp"] = engine.status()["counters"]
        return data

    # ---------------------------------------------------------------- connection
    def connect(self) -> bool:
        """One attempt with the current peer (redirects followed); True once the tunnel is up."""
        target = self.peers.current()
        self.status.state = "connecting"
        self.publish(force=True)
        runner = Runner(self.config.source, 4500, keep=True)
        client = ClientConfig(gateway=target, identity=self.config.identity,
                              psk=read_secret(self.config.psk_file, "psk").encode(), port=4500,
                              max_redirects=self.config.max_redirects, ike=self.ike_suite,
                              esp=self.esp_suite, timeout=0.5, retries=3)
        self.blocking = True
        try:
            result = runner.run([(self.config.interface, client)], deadline_s=12.0)[0]
        except Stop:
            runner.close()
            return False
        finally:
            self.blocking = False
        tunnels = tunnels_of(runner)
        session = runner.sessions[0] if runner.sessions else None
        if not result.ok or not tunnels or session is None or session.attempt is None:
            runner.close()
            self.status.last_error = result.error or "no CHILD_SA or no address"
            self.status.event("failed", peer=target, error=self.status.last_error, path=result.path)
            wait = self.peers.failed()
            log(f"{target}: {self.status.last_error}; next {self.peers.current()} in {wait:.0f} s")
            self.status.state = "down"
            self.publish(force=True)
            self.sleep(wait)
            return False
        tunnel = tunnels[0]
        tunnel.remote = (IPv4Network("0.0.0.0/0"),)  # what IOS routes into Tunnel1 goes to this gateway
        engine = EspEngine(self.config.device, lambda peer, data: self._send(runner, peer, data), self.routes)
        try:
            engine.open((str(tunnel.local[0].network_address),))
        except OSError as exc:
            runner.delete_all(wait=0.5)
            runner.close()
            self.status.last_error = f"no TUN device {self.config.device}: {exc}"
            log(self.status.last_error)
            self.status.state = "down"
            self.publish(force=True)
            self.sleep(5.0)
            return False
        engine.add(tunnel)
        self.runner, self.attempt, self.engine = runner, session.attempt, engine
        now = time.monotonic()
        self.liveness = Liveness(float(self.config.dpd_interval), float(self.config.dpd_retry), now)
        self.dpd_message_id = None
        self.inbound_seen = 0
        self.peers.connected()
        self.status.state, self.status.gateway = "up", result.gateway
        self.status.path = list(result.path)
        self.status.redirected_from = result.path[-2] if len(result.path) > 1 else None
        self.status.address, self.status.local = result.address, str(runner.local[0])
        self.status.up_since, self.status.last_error = time.time(), None
        self.status.connects += 1
        self.status.event("up", gateway=result.gateway, redirected_from=self.status.redirected_from,
                          address=result.address, ms=result.elapsed_ms)
        log(f"{self.config.interface} up: {' -> '.join(result.path)}, address {result.address}")
        self.publish(force=True)
        return True

    @staticmethod
    def _send(runner: Runner, peer: tuple[str, int], data: bytes) -> None:
        with contextlib.suppress(BlockingIOError, OSError):
            runner.sock.sendto(data, peer)

    def teardown(self, reason: str, delete: bool) -> None:
        if self.runner is not None and delete:
            with contextlib.suppress(OSError):
                self.runner.delete_all(wait=1.0)
        if self.engine is not None:
            self.engine.close()  # the TUN device, its address and routes go with it
        if self.runner is not None:
            self.runner.close()
        self.runner = self.attempt = self.engine = None
        self.liveness = None
        self.status.state = "down"
        self.status.gateway = self.status.address = self.status.redirected_from = None
        self.status.up_since = None
        self.status.last_error = reason
        self.status.event("down", reason=reason)
        log(f"{self.config.interface} down: {reason}")
        self.publish(force=True)

    def sleep(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while not self.stopping and time.monotonic() < end:
            time.sleep(min(0.1, end - time.monotonic()))

    # ---------------------------------------------------------------- dead peer detection
    def liveness_request(self) -> None:
        attempt, runner = self.attempt, self.runner
        assert attempt is not None and runner is not None and attempt.suite is not None and attempt.keys is not None
        if self.dpd_message_id is None:
            attempt.message_id += 1
            self.dpd_message_id = attempt.message_id
            header = codec.Header(attempt.spi_i, attempt.spi_r, iana.SK, iana.INFORMATIONAL, iana.FLAG_INITIATOR,
                                  self.dpd_message_id)
            attempt.request = crypto.seal(header, [], attempt.suite, attempt.keys, True)
        with contextlib.suppress(OSError):
            runner.send_ike(attempt.request, attempt.target, 4500)

    def ike_message(self, data: bytes, now: float) -> None:
        """An IKE message on the tunnel's socket: the answer to our liveness check, or a request."""
        attempt = self.attempt
        if attempt is None or attempt.suite is None or attempt.keys is None:
            return
        try:
            message = codec.decode(data)
        except IkeError:
            return
        header = message.header
        if header.spi_i != attempt.spi_i or header.spi_r != attempt.spi_r:
            return
        try:
            inner = crypto.open_sk(data, message, attempt.suite, attempt.keys, from_initiator=header.from_initiator)
        except IkeError:
            return
        if header.is_response and header.message_id == self.dpd_message_id:
            self.dpd_message_id = None
            assert self.liveness is not None
            self.liveness.heard(now)
            return
        if not header.is_response and header.exchange == iana.INFORMATIONAL:
            reply = codec.Header(attempt.spi_i, attempt.spi_r, iana.SK, iana.INFORMATIONAL, iana.FLAG_RESPONSE,
                                 header.message_id)
            deleted = any(isinstance(p, codec.DeletePayload) and p.protocol == iana.PROTO_IKE for p in inner)
            assert self.runner is not None
            with contextlib.suppress(OSError):
                self.runner.send_ike(crypto.seal(reply, [], attempt.suite, attempt.keys, True), attempt.target, 4500)
            if deleted:
                self.teardown(f"{attempt.target} deleted the IKE SA", delete=False)
                self.peers.restart()
            elif self.liveness is not None:
                self.liveness.heard(now)

    def check_peer(self, now: float) -> None:
        engine, liveness = self.engine, self.liveness
        if engine is None or liveness is None:
            return
        inbound = sum(t.inbound.counters.packets for t in engine.table.by_spi.values())
        if inbound != self.inbound_seen:  # IPsec traffic from the peer proves it alive (IOS periodic DPD)
            self.inbound_seen = inbound
            liveness.heard(now)
        verdict = liveness.poll(now)
        if verdict in ("probe", "retransmit"):
            self.liveness_request()
        elif verdict == "dead":
            gateway = self.status.gateway
            self.status.dead_peers += 1
            self.teardown(f"peer {gateway} dead (no answer to {liveness.retries + 1} liveness checks)",
                          delete=False)
            self.peers.restart()

    # ---------------------------------------------------------------- loop
    def run(self) -> None:
        signal.signal(signal.SIGTERM, self.on_signal)
        signal.signal(signal.SIGINT, self.on_signal)
        log(f"flexclientd {self.config.node}: client {self.config.name} -> peers "
            f"{', '.join(self.config.peers)} ({self.config.interface}, source {self.config.source})")
        try:
            while not self.stopping:
                if self.engine is None:
                    self.connect()
                    continue
                self.carry()
        finally:
            if self.engine is not None:
                self.teardown("shutdown", delete=True)

    def carry(self) -> None:
        """Packets between the TUN device and the socket until the tunnel goes down or a signal comes."""
        engine, runner = self.engine, self.runner
        assert engine is not None and runner is not None and engine.fd is not None
        selector = selectors.DefaultSelector()
        runner.sock.setblocking(False)
        selector.register(runner.sock, selectors.EVENT_READ, "udp")
        selector.register(engine.fd, selectors.EVENT_READ, "tun")
        try:
            while not self.stopping and self.engine is engine:
                for key, _ in selector.select(0.2):
                    if key.data == "tun":
                        engine.tun_readable()
                        continue
                    drain_udp(runner.sock, engine, lambda m: self.ike_message(m, time.monotonic()),
                              stop=lambda: self.engine is not engine)
                    if self.engine is not engine:
                        break
                if self.engine is engine:
                    self.check_peer(time.monotonic())
                self.publish()
        finally:
            selector.close()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m dataplane.daemons.flexclientd CONFIG.json", file=sys.stderr)
        return 2
    Client(FlexclientConfig.read(argv[1])).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
