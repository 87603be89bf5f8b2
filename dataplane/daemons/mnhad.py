"""MNHA daemon of one SRX: heartbeats over the ICL, SRG1 role, route steering, status.

    python -m dataplane.daemons.mnhad /run/lab/LAB/nodes/SRX/mnha.json

Every heartbeat interval it sends its state to the peer over the ICL (UDP) and reads the peer's.
The peer is alive while a heartbeat arrived within threshold x interval. The node is healthy while
its monitored interfaces (its links to the MXs) have carrier. The role (dataplane.core.mnha) is
applied to BGP: on an SRG1 change the daemon rewrites the role include of its BIRD configuration
and asks BIRD to reconfigure (sessions stay up; BIRD re-exports with or without the prepend).
Light on purpose (no pyroute2): interface flags come from an ioctl, routes from /proc/net/route,
both of the namespace the daemon runs in.
"""

from __future__ import annotations

import fcntl
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path

from labkit.configs import MnhaConfig, MonitorConfig
from labkit.contracts import CONNTRACKD_SYNC_PORT, MNHA_PORT
from labkit.status import (
    MnhaDestination,
    MnhaHeartbeat,
    MnhaIcl,
    MnhaMonitor,
    MnhaMonitorEvent,
    MnhaMonitorObject,
    MnhaSignalRoute,
    MnhaSrg0,
    MnhaSrg1,
    MnhaSrg2,
    MnhaStatus,
    RoleTransition,
    write_status,
)

from ..core.mnha import Destination, MonitorObject, PeerView, Role, SessionSync, Srg1, SrgMonitor, encode_heartbeat
from .daemonkit import PeerLink, heartbeat_loop, resumed

PORT = MNHA_PORT
# Cold sync: seconds after the peer came back (its session daemon starts just before its MNHA daemon;
# the later pushes cover a slow start); BGP brings it return traffic about a second later.
COLD_SYNC_DELAYS = (0.2, 0.5, 0.9, 2.0)
# Then, while the peer is heard (dataplane.core.mnha.SessionSync): the whole table again every
# SESSION_REFRESH_S (the peer's copies age with the sessions here: under the 120 s of a replied UDP
# flow), and the session daemon's cache emptied every SESSION_FLUSH_S (under the 30 s of a UDP flow
# seen one way only, the shortest session that matters).
SESSION_REFRESH_S = 60.0
SESSION_FLUSH_S = 10.0
# A push's conntrackd commands, in order. conntrackd sends a cached session as "new" the first time
# it reads it and as "update" once it has read it again; a peer's conntrackd deletes and re-creates a
# session it receives as "new" and already holds (its packet counters reset, and a packet arriving
# in between finds no session), but updates one it receives as "update" in place (creating it where
# missing). The table is therefore read twice before it is sent: the peer keeps the sessions it
# carries untouched and gets those it lacks. Then the cache is emptied (cold_sync).
# A session the peer sends while the table is read would still go out as "new": received between
# the two reads, it is read only once, and the peer, which carries it (it opened it), would re-create
# it. So the peer's sync messages are held off (dropped before they reach conntrackd; FTFW sends them
# again on the gap it then sees) from just before the first read until the second one is done: a
# session injected before the first read is read twice, one injected after the second is not cached.
PUSH = (["-R"], ["-R"], ["-B"], ["-f", "internal"])
HELD_STEPS = 2  # the first HELD_STEPS commands of a push run with the peer's sync messages held off
SYNC_STEPS = {"cold": PUSH, "refresh": PUSH, "flush": (["-f", "internal"],)}
HOLD_TABLE = "mnha_push_hold"  # the nftables table (ip family) that holds the peer's sync messages off
SIOCGIFFLAGS = 0x8913
IFF_UP, IFF_RUNNING = 0x1, 0x40


def has_carrier(sock: socket.socket, ifname: str) -> bool:
    try:
        raw = fcntl.ioctl(sock.fileno(), SIOCGIFFLAGS, struct.pack("16sH14x", ifname.encode(), 0))
    except OSError:
        return False
    flags = struct.unpack("16sH14x", raw)[1]
    return bool(flags & IFF_UP) and bool(flags & IFF_RUNNING)


def route_to(address: str, avoid_dev: str | set[str] | frozenset[str] = frozenset(),
             over: set[str] | None = None) -> bool:
    """Is there a route to ADDRESS/32 in this namespace's main table, not over AVOID_DEV (a device or
    a set of them), and over one of OVER when given?"""
    avoid = {avoid_dev} if isinstance(avoid_dev, str) else avoid_dev
    wanted = socket.inet_aton(address)
    for line in Path("/proc/net/route").read_text().splitlines()[1:]:
        fields = line.split()
        dev, dst, mask = fields[0], bytes.fromhex(fields[1])[::-1], bytes.fromhex(fields[7])[::-1]
        if dev in avoid or (over is not None and dev not in over):
            continue
        if mask == b"\xff\xff\xff\xff" and dst == wanted:
            return True
    return False


def bird_configure(control_socket: str) -> str:
    from labkit import birdctl

    return " ".join(birdctl.command(control_socket, "configure"))


def set_signal_route(address: str, table: int, present: bool) -> None:
    """install-on-failure-route: the signal route in the MNHA-VR table (shown by `ip route show table
    N`; BIRD reads the same fact from the role include)."""
    import subprocess

    verb = "replace" if present else "del"
    subprocess.run(["ip", "route", verb, "blackhole", f"{address}/32", "table", str(table)],
                   capture_output=True, check=False)


class SyncHold:
    """The peer's session sync messages dropped on input (before conntrack, at -310, and before conntrackd), while
    held. An nftables table of its own in this namespace, removed on release and when the daemon
    starts (a daemon killed during a push must not leave the sync cut)."""

    def __init__(self, peer_ip: str, port: int = CONNTRACKD_SYNC_PORT):
        self.peer_ip, self.port = peer_ip, port

    def hold(self) -> bool:
        rules = (f"table ip {HOLD_TABLE} {{\n  chain input {{\n"
                 f"    type filter hook input priority -310; policy accept;\n"
                 f"    ip saddr {self.peer_ip} udp dport {self.port} drop\n  }}\n}}\n")
        done = subprocess.run(["nft", "-f", "-"], input=rules, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(f"{time.strftime('%H:%M:%S')} table push: cannot hold the peer's sync off: "
                  f"{done.stderr.strip()[-200:]}", flush=True)
        return done.returncode == 0

    def release(self) -> None:
        subprocess.run(["nft", "delete", "table", "ip", HOLD_TABLE], capture_output=True, check=False)


def cold_sync(config: str, kind: str = "cold", hold: SyncHold | None = None) -> None:
    """Send this node's whole session table to the peer: conntrackd reads the kernel table into its
    cache (-R, twice: see PUSH), sends the cache (-B), then empties it (-f internal). One at a time
    (the daemon starts none while one runs): another push's flush between the reads and the send
    would make every session "new" again. The cache must not keep the
    copies it read back: a copy never sees a packet here, expires, and conntrackd would then tell the
    peer to delete that session, which the peer may be carrying (new sessions enter the cache again
    as they open, until the next flush). KIND (SYNC_STEPS): "cold" and "refresh" do all three,
    "flush" only empties the cache; only a cold sync is logged. HOLD: the peer's sync messages are
    held off during the reads (HELD_STEPS); a push that cannot hold them off is not sent."""
    steps = SYNC_STEPS[kind]
    held = hold if steps is PUSH else None
    if held is not None and not held.hold():
        return
    try:
        for number, command in enumerate(steps):
            if held is not None and number == HELD_STEPS:
                held.release()
                held = None
            if not _conntrackd(config, command):
                return
    finally:
        if held is not None:
            held.release()
    if kind == "cold":
        print(f"{time.strftime('%H:%M:%S')} cold sync: session table sent to the peer", flush=True)


def _conntrackd(config: str, command: list[str]) -> bool:
    try:
        done = subprocess.run(["conntrackd", "-C", config, *command], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        print(f"{time.strftime('%H:%M:%S')} cold sync: conntrackd {' '.join(command)} failed: {exc}", flush=True)
        return False
    if done.returncode != 0:
        print(f"{time.strftime('%H:%M:%S')} cold sync: conntrackd {' '.join(command)} exited {done.returncode}: "
              f"{(done.stderr or done.stdout).strip()[-300:]}", flush=True)
        return False
    return True


def _monitor(config: MonitorConfig | None) -> SrgMonitor:
    if not config:
        return SrgMonitor((), 1)
    dests = tuple(Destination(d.ip, d.weight, d.interface, d.src_ip) for d in config.destinations)
    obj = MonitorObject(config.object, dests, config.threshold, config.object_threshold)
    return SrgMonitor((obj,), config.srg_threshold, config.multiplier)


class Daemon:
    def __init__(self, config: MnhaConfig):
        self.c = config
        self.interval = config.heartbeat_ms / 1000
        self.threshold = config.heartbeat_threshold
        self.srg1 = Srg1(config.node, config.peer, config.priority, config.preempt)
        self.srg2 = Srg1(config.node, config.peer, config.srg2_priority, config.preempt)
        self.monitor = _monitor(config.monitor)
        self.monitor_devs = {d.ip: d.dev for d in config.monitor.destinations} if config.monitor else {}
        self.monitor_interval = (config.monitor.interval_ms if config.monitor else 300) / 1000
        self.next_check = 0.0
        self.srg0_failed = False
        self.started = time.monotonic()
        self.resumed: str | None = None  # the role taken up from the previous instance, after a crash
        self.sent = 0
        self.seq = 0
        # What BIRD runs with: the role file as it is now (rendered at plan time, rewritten since).
        text = Path(config.role_file).read_text()
        self.bird_state = ("SRG1_ACTIVE = 1" in text, "SRG2_ACTIVE = 1" in text, "SRG0_SIGNAL = 1" in text)
        self.probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((config.local_ip, PORT))
        self.sock.setblocking(False)
        self.link = PeerLink(self.sock, config.peer, config.peer_ip)
        self.sync = SessionSync(COLD_SYNC_DELAYS, SESSION_REFRESH_S, SESSION_FLUSH_S)
        self.sync_thread: threading.Thread | None = None
        self.sync_hold = SyncHold(config.peer_ip)
        if config.sync_config:
            self.sync_hold.release()  # left by a daemon killed during a push
        self.cold_waiting = False  # a cold push due while another push ran
        self.cold_syncs = 0
        self.session_refreshes = 0
        self.cache_flushes = 0
        self.resume(resumed(config.status_file, MnhaStatus))

    def resume(self, previous: MnhaStatus | None) -> None:
        """Restarted after a crash: take up the SRG1 (and SRG2) roles held before, their history and
        SRG0's monitored state, instead of electing anew: the pair keeps its roles, BIRD its
        advertisements and the signal route stays as it is."""
        if previous is None or self.c.mode == "srg0":
            return
        groups: list[tuple[Srg1, MnhaSrg1 | MnhaSrg2]] = [(self.srg1, previous.srg1)]
        if self.c.mode == "srg1+srg2" and previous.srg2 is not None:
            groups.append((self.srg2, previous.srg2))
        taken = []
        for group, data in groups:
            role = Role(data.role)
            if role is not Role.INIT:
                group.role, group.transitions = role, [(t.at, Role(t.role), t.why) for t in data.transitions]
                taken.append(role.value)
        self.srg0_failed = previous.srg0.role == "ineligible"
        if taken:
            self.resumed = "/".join(taken)
            print(f"{time.strftime('%H:%M:%S')} resumed as {self.resumed} after a restart", flush=True)

    def healthy(self) -> bool:
        return all(has_carrier(self.probe, dev) for dev in self.c.monitored)

    def icl_up(self) -> bool:
        if self.c.icl_routed:  # through the MXs: up while one of their MNHA-VRs routes to the peer
            return route_to(self.c.peer_loopback, over=set(self.c.icl_routed))
        return has_carrier(self.probe, self.c.icl_dev)

    def tick(self, now: float, send: bool) -> None:
        # Silence for threshold x interval, or the ICL lost (a direct ICL's carrier; a routed one: no
        # route to the peer's loopback over the MXs' MNHA-VR; the peer powered off, or the path cut:
        # the split-brain rule below tells them apart), means no peer over the ICL.
        self.link.expire(now, self.interval * self.threshold, self.icl_up())
        self.schedule_cold_sync(now)
        seen = route_to(self.c.peer_loopback, {self.c.icl_dev, *self.c.icl_routed})
        if now >= self.next_check:  # SRG0 monitoring, every minimum-interval
            self.next_check = now + self.monitor_interval
            results = {ip: has_carrier(self.probe, dev) for ip, dev in self.monitor_devs.items()}
            failed = self.monitor.update(results, time.time())
            if failed != self.srg0_failed:
                self.srg0_failed = failed
                print(f"{time.strftime('%H:%M:%S')} SRG0 {'lost activeness' if failed else 'active again'}: "
                      f"{self.monitor.events[-2][1] if failed and len(self.monitor.events) > 1 else ''}", flush=True)
        # A monitored failure also makes the node unhealthy for the SRG1/SRG2 elections.
        healthy = self.healthy() and not self.srg0_failed
        starting = not self.peer.alive and now - self.started < self.interval * self.threshold
        if self.c.mode == "srg0":
            role = role2 = Role.ACTIVE
        elif starting:
            role, role2 = self.srg1.role, self.srg2.role  # start-up: let the peer's heartbeats arrive
        else:
            role = self.srg1.decide(healthy, self.peer, seen, now)
            role2 = self.srg2.decide(healthy, self.peer.srg2(), seen, now) \
                if self.c.mode == "srg1+srg2" else Role.BACKUP
        if role is not Role.INIT:
            self.apply(role, role2)
        if not send:
            return
        self.seq += 1
        srg2 = (role2, self.srg2.priority) if self.c.mode == "srg1+srg2" else None
        try:
            self.sock.sendto(encode_heartbeat(self.c.node, role, self.srg1.priority, healthy, self.seq, srg2),
                             (self.c.peer_ip, PORT))
            self.sent += 1
        except OSError:
            pass  # ICL down: the peer will notice the silence
        self.write_status(now, healthy, seen)

    def schedule_cold_sync(self, now: float) -> None:
        """MNHA cold sync and refresh (dataplane.core.mnha.SessionSync): a node that comes back (power on,
        reboot, ICL restored) gets the whole session table of its peer, not only the sessions opened
        from then on, then again every SESSION_REFRESH_S so that the copies age with the sessions
        here, and the session daemon's cache is emptied every SESSION_FLUSH_S. Its session daemon
        asks for a resync when it starts, but the one here only holds the sessions this node opened
        (those it received from the peer went straight into the kernel): so the table is first read
        back from the kernel (-R), then sent whole (-B). Without it a CGNAT flow that failed over
        here and stays here loses its return traffic once the peer announces its NAT pool again."""
        kind = self.sync.tick(now, self.peer.alive and bool(self.c.sync_config), cold=not self.just_started(now))
        busy = self.sync_thread is not None and self.sync_thread.is_alive()
        if not self.peer.alive:
            self.cold_waiting = False
        elif kind is None and self.cold_waiting and not busy:
            kind, self.cold_waiting = "cold", False  # the cold push that waited for the last one
        if kind is None or not self.c.sync_config:
            return
        if busy:  # one push at a time (PUSH): a refresh or flush waits for the next beat, a cold
            # push is not dropped but runs as soon as this one ends (the returning peer needs the
            # table before BGP brings it return traffic, about a second after it is heard)
            self.cold_waiting = self.cold_waiting or kind == "cold"
            return
        if kind == "cold":
            self.cold_syncs += 1
        elif kind == "refresh":
            self.session_refreshes += 1
        else:
            self.cache_flushes += 1
        self.sync_thread = threading.Thread(target=cold_sync, args=(self.c.sync_config, kind, self.sync_hold),
                                            daemon=True)
        self.sync_thread.start()

    def just_started(self, now: float) -> bool:
        """A peer first heard while this daemon is starting (within the time it takes to declare a
        silent peer gone) did not come back: this node did (power on, reboot: its peer, up all along,
        pushes the table to it), or both did (lab start: nothing to push), or this daemon was
        restarted (the kernel kept the sessions). A cold push then would only send the peer what it
        holds already, while it may be carrying those sessions."""
        return now - self.started < self.interval * self.threshold

    def receive(self, now: float) -> None:
        self.link.drain(now)

    @property
    def peer(self) -> PeerView:
        return self.link.view

    def apply(self, role: Role, role2: Role = Role.BACKUP) -> None:
        """On BGP (the JVD's export policies): a group's routes are prepended 3x while it is backup
        here, every route 3x while the SRG0 signal route exists, else once."""
        state = (role is Role.ACTIVE, role2 is Role.ACTIVE, self.srg0_failed)
        if state == self.bird_state:
            return
        if state[2] != self.bird_state[2]:
            set_signal_route(self.c.signal_route, self.c.signal_table, state[2])
        Path(self.c.role_file).write_text(
            f"define SRG1_ACTIVE = {int(state[0])};  # {role.value}\n"
            f"define SRG2_ACTIVE = {int(state[1])};  # {role2.value}\n"
            f"define SRG0_SIGNAL = {int(state[2])};  # signal route {self.c.signal_route}\n")
        try:
            reply = bird_configure(self.c.bird_socket)
            self.bird_state = state
        except Exception as exc:  # noqa: BLE001 - BIRD restarting: it reads the file when it starts
            reply = f"configure failed: {exc}"
        print(f"{time.strftime('%H:%M:%S')} SRG1 {role.value}, SRG2 {role2.value}, signal route "
              f"{'present' if state[2] else 'absent'}: BIRD {reply}", flush=True)

    def write_status(self, now: float, healthy: bool, seen: bool) -> None:
        monitor = self.monitor
        srg1, srg2 = self.srg1, self.srg2
        status = MnhaStatus(
            node=self.c.node, peer=self.c.peer, mode=self.c.mode, pid=os.getpid(), updated_at=time.time(),
            icl=MnhaIcl(device=self.c.icl_dev, up=self.icl_up(), peer_ip=self.c.peer_ip),
            heartbeat=MnhaHeartbeat(
                interval_ms=self.c.heartbeat_ms, threshold=self.threshold, sent=self.sent,
                received=self.link.received, errors=self.link.bad, peer_alive=self.peer.alive,
                last_heard_s_ago=round(now - self.link.heard, 3) if self.link.heard else None),
            healthy=healthy, peer_seen_in_network=seen, resumed=self.resumed, cold_syncs=self.cold_syncs,
            session_refreshes=self.session_refreshes, cache_flushes=self.cache_flushes,
            srg0=MnhaSrg0(
                role="ineligible" if self.srg0_failed else "active",
                signal_route=MnhaSignalRoute(prefix=f"{self.c.signal_route}/32", table=self.c.signal_table,
                                             installed=self.srg0_failed),
                monitor=None if not monitor.objects else MnhaMonitor(
                    srg_threshold=monitor.srg_threshold, srg_weight=monitor.srg_weight(),
                    interval_ms=int(self.monitor_interval * 1000), multiplier=monitor.multiplier,
                    objects=[MnhaMonitorObject(
                        name=o.name, threshold=o.threshold, object_threshold=o.object_threshold,
                        weight=monitor.object_weight(o), state="DOWN" if monitor.object_failed(o) else "UP",
                        destinations=[MnhaDestination(ip=d.ip, src_ip=d.src_ip, interface=d.interface,
                                                      weight=d.weight,
                                                      state="DOWN" if d.ip in monitor.down else "UP")
                                      for d in o.destinations])
                        for o in monitor.objects]),
                events=[MnhaMonitorEvent(at=at, what=what) for at, what in monitor.events]),
            srg2=MnhaSrg2(role=srg2.role.value, priority=srg2.priority,
                          peer_role=self.peer.srg2_role.value if self.peer.alive else "unknown",
                          transitions=[RoleTransition(at=at, role=r.value, why=why)
                                       for at, r, why in srg2.transitions])
            if self.c.mode == "srg1+srg2" else None,
            srg1=MnhaSrg1(role=srg1.role.value if self.c.mode != "srg0" else "active",
                          priority=srg1.priority, preempt=srg1.preempt,
                          peer_role=self.peer.role.value if self.peer.alive else "unknown",
                          transitions=[RoleTransition(at=at, role=r.value, why=why)
                                       for at, r, why in srg1.transitions]),
        )
        write_status(self.c.status_file, status)

    def run(self) -> None:
        heartbeat_loop(self.interval, {self.sock: self.receive}, self.tick)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m dataplane.daemons.mnhad CONFIG.json", file=sys.stderr)
        return 2
    config = MnhaConfig.read(argv[1])
    print(f"mnhad {config.node}: pair with {config.peer}, {config.mode}, priority {config.priority}",
          flush=True)
    Daemon(config).run()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
