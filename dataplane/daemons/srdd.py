"""SRD daemon of one MX: mastership over the inter-MX link, signal route, conditional prepend.

    python -m dataplane.daemons.srdd /run/lab/LAB/nodes/MX/srd.json

Runs in the MX's master namespace (where the inter-MX link is). Heartbeats over that link; the MX is
healthy while every monitored link (toward the gateways and the SRXs, in its routing instances) has
carrier. The master installs the signal route in each routing instance and tells BIRD (role include
+ `configure`) to advertise normally; the standby removes it and BIRD prepends the AS path three
times toward the gateways and the SRXs, so everything prefers the master. A datagram "switchover" on
the control socket (what `request services redundancy-set id 1 switchover` sends) moves mastership.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from pathlib import Path

from labkit import unixsock
from labkit.configs import SrdConfig
from labkit.files import write_atomic
from labkit.status import SrdHeartbeat, SrdRole, SrdSignalRoute, SrdStatus, SrdTransition, write_status

from ..core.mnha import PeerView, Role, encode_heartbeat
from ..core.srd import Mastership
from .daemonkit import PeerLink, exit_now, heartbeat_loop, resumed
from .mnhad import bird_configure, has_carrier

PORT = 7791
HOLD_S = 0.5  # a change of health settles this long before it moves mastership (dataplane.core.srd)


def _socket_in(ns: str, family: int, kind: int) -> socket.socket:
    from labkit import netnsutil

    with netnsutil.entered(ns):
        return socket.socket(family, kind)


STATUS_ROLE: dict[Role, SrdRole] = {Role.INIT: "init", Role.ACTIVE: "master", Role.BACKUP: "standby",
                                    Role.INELIGIBLE: "ineligible"}


def role_in(text: str) -> bool | None:
    """SRD_MASTER as the role file TEXT defines it, None if it does not."""
    return ("SRD_MASTER = 1" in text) if "define SRD_MASTER" in text else None


def _read(path: str) -> str:
    try:
        return Path(path).read_text()
    except OSError:
        return ""


class Daemon:
    def __init__(self, config: SrdConfig):
        self.c = config
        self.interval = config.heartbeat_ms / 1000
        self.threshold = config.heartbeat_threshold
        self.state = Mastership(config.node, config.peer, config.priority, config.preempt, hold_s=HOLD_S)
        self.was_healthy: bool | None = None
        self.started = time.monotonic()
        self.sent = 0
        self.seq = 0
        self.probes = {ns: _socket_in(ns, socket.AF_INET, socket.SOCK_DGRAM) for ns in config.monitored}
        self.local = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((config.local_ip, PORT))
        self.sock.setblocking(False)
        self.link = PeerLink(self.sock, config.peer, config.peer_ip)
        self.control = unixsock.bind_datagram(config.control_socket)
        # What BIRD runs with. None: the file does not say (a power cut while an older release wrote it
        # left it empty, or it is gone): BIRD cannot start on it, so the first apply() writes it anew.
        self.bird_master = role_in(_read(config.role_file))
        self.signal_installed: bool | None = None
        self.resumed: str | None = None  # the role taken up from the previous instance, after a crash
        self.resume(resumed(config.status_file, SrdStatus))

    def resume(self, previous: SrdStatus | None) -> None:
        """Restarted after a crash: take up the mastership, priority (a CLI switchover changes it) and
        signal route state held before, instead of electing anew."""
        if previous is None:
            return
        roles = {word: role for role, word in STATUS_ROLE.items() if role is not Role.INIT}
        if previous.role not in roles:
            return  # it had not decided yet: elect anew
        self.state.role, self.state.priority = roles[previous.role], previous.priority
        self.state.transitions = [(t.at, Role(t.role), t.why) for t in previous.transitions]
        self.signal_installed = previous.signal_route.installed
        self.resumed = previous.role
        print(f"{time.strftime('%H:%M:%S')} resumed as {previous.role} (priority {previous.priority}) after a restart",
              flush=True)

    def healthy(self) -> bool:
        return all(has_carrier(self.probes[ns], dev) for ns, devs in self.c.monitored.items() for dev in devs)

    def tick(self, now: float, send: bool) -> None:
        self.link.expire(now, self.interval * self.threshold, has_carrier(self.local, self.c.icl_dev))
        healthy = self.healthy()
        if healthy != self.was_healthy:
            send = True  # the peer learns of a change of health at once (see dataplane.core.srd)
            self.was_healthy = healthy
        if not self.peer.alive and now - self.started < self.interval * self.threshold:
            role = self.state.role  # start-up: let the peer's heartbeats arrive first
        else:
            # No routed path to the peer MX outside the inter-MX link: a silent peer is taken as gone.
            role = self.state.decide(healthy, self.peer, False, now)
        if role is not Role.INIT:
            self.apply(role is Role.ACTIVE)
        if send:
            self.seq += 1
            with contextlib.suppress(OSError):
                self.sock.sendto(encode_heartbeat(self.c.node, role, self.state.priority, healthy, self.seq),
                                 (self.c.peer_ip, PORT))
                self.sent += 1
            self.write_status(now, healthy)

    def receive(self, now: float) -> None:
        self.link.drain(now)

    @property
    def peer(self) -> PeerView:
        return self.link.view

    def command(self, now: float) -> None:
        data = self.control.recv(256).decode(errors="replace").strip()
        if data == "switchover":
            role = self.state.switchover(self.peer, now)
            print(f"{time.strftime('%H:%M:%S')} CLI switchover: now {'master' if role is Role.ACTIVE else 'standby'}",
                  flush=True)
            self.apply(role is Role.ACTIVE)

    def apply(self, master: bool) -> None:
        if master != self.signal_installed:
            self.signal(master)
            self.signal_installed = master
        if master == self.bird_master:
            return
        # at once (a sibling file renamed over it): a BIRD starting now, or a power cut now, never
        # finds half a file (an empty include is a syntax error: that BIRD would not start)
        write_atomic(self.c.role_file, f"define SRD_MASTER = {1 if master else 0};\n")
        replies = []
        for sock in self.c.bird_sockets:
            try:
                replies.append(bird_configure(sock))
            except Exception as exc:  # noqa: BLE001 - a BIRD restarting reads the file when it starts
                replies.append(f"configure failed: {exc}")
        self.bird_master = master
        print(f"{time.strftime('%H:%M:%S')} {'master' if master else 'standby'}: {' | '.join(replies)}", flush=True)

    def signal(self, install: bool) -> None:
        """The signal route: present on the master only (what Junos policies test with if-route-exists)."""
        from pyroute2 import IPRoute

        from labkit import netnsutil

        for ns in self.c.signal_namespaces:
            with netnsutil.entered(ns):
                ipr = IPRoute()
            try:
                if install:  # replace: never a moment without it (BIRD's policies test it)
                    ipr.route("replace", dst=self.c.signal_route, dst_len=32, type="blackhole", proto=4)
                else:
                    with contextlib.suppress(Exception):
                        ipr.route("del", dst=self.c.signal_route, dst_len=32, type="blackhole")
            finally:
                ipr.close()

    def write_status(self, now: float, healthy: bool) -> None:
        write_status(self.c.status_file, SrdStatus(
            node=self.c.node, peer=self.c.peer, pid=os.getpid(), updated_at=time.time(),
            role=STATUS_ROLE[self.state.role],
            priority=self.state.priority, preempt=self.state.preempt, healthy=healthy,
            signal_route=SrdSignalRoute(prefix=f"{self.c.signal_route}/32", installed=bool(self.signal_installed)),
            peer_role=("master" if self.peer.role is Role.ACTIVE else "standby") if self.peer.alive else "unknown",
            heartbeat=SrdHeartbeat(sent=self.sent, received=self.link.received, errors=self.link.bad,
                                   peer_alive=self.peer.alive),
            resumed=self.resumed,
            transitions=[SrdTransition(at=at, role=r.value, why=why) for at, r, why in self.state.transitions]))

    def run(self) -> None:
        heartbeat_loop(self.interval, {self.sock: self.receive, self.control: self.command}, self.tick)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m dataplane.daemons.srdd CONFIG.json", file=sys.stderr)
        return 2
    config = SrdConfig.read(argv[1])
    print(f"srdd {config.node}: pair with {config.peer}, priority {config.priority}", flush=True)
    Daemon(config).run()
    return 0


if __name__ == "__main__":
    exit_now(main(sys.argv))
