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

import contextlib
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
from labkit.contracts import MNHA_PORT
from labkit.files import write_atomic
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
    MnhaSync,
    RoleTransition,
    write_status,
)

from ..core.mnha import (
    COLD_SYNC_WAIT_NOTE,
    ROUTES_WAIT_NOTE,
    SYNC_AWAITING,
    Destination,
    MonitorObject,
    PathReturn,
    PeerView,
    Role,
    SessionSync,
    Srg1,
    SrgMonitor,
    encode_heartbeat,
    holds_routes,
)
from .daemonkit import PeerLink, exit_now, heartbeat_loop, resumed
from .syncclient import cold_sync, conntrackd, kernel_sessions, parse_stats

PORT = MNHA_PORT
# Session sync (dataplane.core.mnha.SessionSync): conntrackd sends sessions as they open, change and
# end; the daemon flips a mark bit of the sessions here once per refresh window (the kernel reports
# the change on each live session's next packet, conntrackd sends it: the peer's copy is refreshed),
# and answers a returning peer's request for the whole table (cold sync, acknowledged).
REFRESH_TABLE = "mnha_refresh"  # the nftables table of the refresh rule: inet, IPv4 and IPv6 sessions alike
REFRESH_FAMILY = "inet"
REFRESH_BITS = (0x20000000, 0x40000000)  # conntrack mark bits: UDP and others, TCP
STATS_EVERY_S = 2.0  # how often conntrackd's counters are read for the status
STATS_RETRY_S = 0.1  # how often while conntrackd does not answer yet (it starts beside this daemon)
COLD_SYNC_LOG = {"received": "peer table received", "no peer": "no peer heard, no longer waiting",
                 "timed out": "timed out, no longer waiting (activeness taken without the peer's sessions)"}
SIOCGIFFLAGS = 0x8913
IFF_UP, IFF_RUNNING = 0x1, 0x40


def has_carrier(sock: socket.socket, ifname: str) -> bool:
    try:
        raw = fcntl.ioctl(sock.fileno(), SIOCGIFFLAGS, struct.pack("16sH14x", ifname.encode(), 0))
    except OSError:
        return False
    flags = struct.unpack("16sH14x", raw)[1]
    return bool(flags & IFF_UP) and bool(flags & IFF_RUNNING)


RTF_UP, RTF_GATEWAY = 0x1, 0x2


def ipv4_routes() -> list[tuple[str, bytes, bytes, int]]:
    """The main table of this namespace's IPv4 routes: (device, destination, mask, flags) each."""
    out = []
    for line in Path("/proc/net/route").read_text().splitlines()[1:]:
        fields = line.split()
        out.append((fields[0], bytes.fromhex(fields[1])[::-1], bytes.fromhex(fields[7])[::-1], int(fields[3], 16)))
    return out


def route_to(address: str, avoid_dev: str | set[str] | frozenset[str] = frozenset(),
             over: set[str] | None = None) -> bool:
    """Is there a route to ADDRESS/32 in this namespace's main table, not over AVOID_DEV (a device or
    a set of them), and over one of OVER when given?"""
    avoid = {avoid_dev} if isinstance(avoid_dev, str) else avoid_dev
    wanted = socket.inet_aton(address)
    return any(mask == b"\xff\xff\xff\xff" and dst == wanted for dev, dst, mask, _flags in ipv4_routes()
               if dev not in avoid and (over is None or dev in over))


def routed_devices() -> set[str]:
    """The devices a route of this namespace's main table goes through a gateway over (the routes
    BIRD installed from BGP: the kernel's own routes of a link have none)."""
    gateway = RTF_UP | RTF_GATEWAY
    devs = {dev for dev, _dst, _mask, flags in ipv4_routes() if flags & gateway == gateway}
    with contextlib.suppress(OSError):  # an IPv6-only session routes over its link too
        for line in Path("/proc/net/ipv6_route").read_text().splitlines():
            fields = line.split()
            if len(fields) == 10 and int(fields[8], 16) & gateway == gateway:
                devs.add(fields[9])
    return devs


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


def refresh_rules(udp_bit: int, tcp_bit: int) -> str:
    """The refresh rule for the windows' parities: each session's mark bit of its protocol set to the
    parity on its next packet (a change makes the kernel report the session, conntrackd sends it)."""
    def statement(bit: int, parity: int) -> str:
        return f"ct mark set ct mark or {bit:#x}" if parity else f"ct mark set ct mark and {0xFFFFFFFF ^ bit:#x}"
    return (f"table {REFRESH_FAMILY} {REFRESH_TABLE} {{\n  chain pre {{\n"
            f"    type filter hook prerouting priority -150; policy accept;\n"
            f"    ct state established meta l4proto tcp {statement(REFRESH_BITS[1], tcp_bit)}\n"
            f"    ct state established meta l4proto != tcp {statement(REFRESH_BITS[0], udp_bit)}\n"
            f"  }}\n}}\n")


def set_refresh(udp_bit: int, tcp_bit: int) -> bool:
    """Replace the refresh table atomically (one nft transaction)."""
    # the table of the ip family too, as the daemon of an older lab left it: two rules flipping the
    # same bit to opposite parities would report every packet's session to conntrackd
    text = (f"table {REFRESH_FAMILY} {REFRESH_TABLE}\ndelete table {REFRESH_FAMILY} {REFRESH_TABLE}\n"
            f"table ip {REFRESH_TABLE}\ndelete table ip {REFRESH_TABLE}\n" + refresh_rules(udp_bit, tcp_bit))
    done = subprocess.run(["nft", "-f", "-"], input=text, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(f"{time.strftime('%H:%M:%S')} session refresh: nft failed: {done.stderr.strip()[-200:]}", flush=True)
    return done.returncode == 0


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
        # The node's links to the MXs: one that lost its carrier counts again once BGP routes over it,
        # and so do all of them when this node starts (powered on: its sessions are not up yet).
        self.links = sorted({*config.monitored, *self.monitor_devs.values()})
        self.path_return = PathReturn(set(self.links))
        self.routes_pending: list[str] = []  # links with carrier, not yet routed over
        self.started = time.monotonic()
        self.resumed: str | None = None  # the role taken up from the previous instance, after a crash
        self.sent = 0
        self.seq = 0
        # What BIRD runs with: the role file as it is now (rendered at plan time, rewritten since).
        try:
            text = Path(config.role_file).read_text()
        except OSError:
            text = ""
        # A file that does not define all three (a power cut while an older release wrote it left it
        # empty, or it is gone) keeps BIRD from starting: the first apply() writes it anew. Until then
        # the most careful reading: no group active here, every route prepended.
        self.role_file_ok = all(f"define {name} =" in text for name in ("SRG1_ACTIVE", "SRG2_ACTIVE", "SRG0_SIGNAL"))
        self.bird_state = ("SRG1_ACTIVE = 1" in text, "SRG2_ACTIVE = 1" in text, "SRG0_SIGNAL = 1" in text) \
            if self.role_file_ok else (False, False, True)
        self.signal_installed = self.bird_state[2] and COLD_SYNC_WAIT_NOTE not in text and ROUTES_WAIT_NOTE not in text
        self.probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind((config.local_ip, PORT))
        self.sock.setblocking(False)
        self.link = PeerLink(self.sock, config.peer, config.peer_ip)
        self.sync = SessionSync(config.refresh_s, config.refresh_tcp_s, config.cold_sync_hold_s)
        self.sync_thread: threading.Thread | None = None
        # the cold sync's thread wakes the loop when it ends: its result goes out in a heartbeat at once
        self.sync_done_r, self.sync_done_w = socket.socketpair()
        self.sync_done_r.setblocking(False)
        self.epochs: tuple[int, int] | None = None  # the refresh rule installed (None: none yet)
        self.refreshes = 0  # refresh windows begun
        self.stats: dict[str, int] = {}
        # What the last heartbeat told the peer and the last status showed: a change of either is
        # sent (and written) at once, not at the next interval (see tick).
        self.told: tuple[object, ...] | None = None
        self.shown: tuple[object, ...] | None = None
        self.icl_was_up = False
        self.resume(resumed(config.status_file, MnhaStatus))
        if self.resumed is not None:  # restarted after a crash: the kernel kept the routes and BIRD its sessions
            self.path_return.regaining.clear()
        # A node that starts waits for its peer's table; one that resumed its role (the daemon
        # restarted, the kernel kept the sessions) does not.
        self.sync.start(self.started, bool(config.sync_config) and self.resumed is None)

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

    def icl_up(self) -> bool:
        if self.c.icl_routed:  # through the MXs: up while one of their MNHA-VRs routes to the peer
            return route_to(self.c.peer_loopback, over=set(self.c.icl_routed))
        return has_carrier(self.probe, self.c.icl_dev)

    def tick(self, now: float, send: bool) -> None:
        # Silence for threshold x interval, or the ICL lost (a direct ICL's carrier; a routed one: no
        # route to the peer's loopback over the MXs' MNHA-VR; the peer powered off, or the path cut:
        # the split-brain rule below tells them apart), means no peer over the ICL.
        self.link.expire(now, self.interval * self.threshold, self.icl_up())
        self.schedule_sync(now)
        seen = route_to(self.c.peer_loopback, {self.c.icl_dev, *self.c.icl_routed})
        if now >= self.next_check:  # SRG0 monitoring, every minimum-interval
            self.next_check = now + self.monitor_interval
            results = {ip: has_carrier(self.probe, dev) for ip, dev in self.monitor_devs.items()}
            failed = self.monitor.update(results, time.time())
            if failed != self.srg0_failed:
                self.srg0_failed = failed
                print(f"{time.strftime('%H:%M:%S')} SRG0 {'lost activeness' if failed else 'active again'}: "
                      f"{self.monitor.events[-2][1] if failed and len(self.monitor.events) > 1 else ''}", flush=True)
        # A link to an MX that came back counts once BGP routes over it (PathReturn): until every such
        # link is routed, every route stays prepended (apply). Read every tick, as carrier is.
        carrier = {dev: has_carrier(self.probe, dev) for dev in self.links}
        live = self.path_return.update(carrier, routed_devices)
        self.routes_pending = sorted(dev for dev, up in carrier.items() if up and not live[dev])
        # A monitored failure also makes the node unhealthy for the SRG1/SRG2 elections.
        healthy = all(carrier[dev] for dev in self.c.monitored) and not self.srg0_failed
        starting = not self.peer.alive and now - self.started < self.interval * self.threshold
        if self.c.mode == "srg0":
            role = role2 = Role.ACTIVE
        elif starting:
            role, role2 = self.srg1.role, self.srg2.role  # start-up: let the peer's heartbeats arrive
        else:
            hold = self.sync.awaiting  # no activeness before the peer's sessions are here (cold sync)
            role = (hold and self.srg1.hold(healthy, self.peer, now)) or self.srg1.decide(healthy, self.peer, seen, now)
            role2 = ((hold and self.srg2.hold(healthy, self.peer.srg2(), now))
                     or self.srg2.decide(healthy, self.peer.srg2(), seen, now)) \
                if self.c.mode == "srg1+srg2" else Role.BACKUP
        if role is not Role.INIT:
            self.apply(role, role2)
        # Besides every interval, a heartbeat goes at once when what it says changed (roles, health,
        # the sync flags), when the ICL came up (a routed ICL: BGP brought the peer's loopback) and
        # when the peer is heard anew (it learns of this node without waiting for the next interval):
        # each step of the start-up handshake (heard, waiting, cold sync sent) costs a round trip,
        # not an interval. The receiver only counts the silence between heartbeats.
        icl_up = self.icl_up()
        sync_flags = self.sync.flags() if self.c.sync_config else 0
        told = (role, role2, healthy, sync_flags, self.peer.alive)
        if (icl_up and not self.icl_was_up) or (self.told is not None and told != self.told):
            send = True
        self.icl_was_up = icl_up
        shown = (told, self.peer.srg2_role if self.peer.alive else None, self.peer.sync, self.sync.awaiting,
                 self.sync.sending, bool(self.stats), self.srg0_failed, seen, icl_up, tuple(self.routes_pending))
        if not send:
            if shown != self.shown:  # `lab up` and `lab status` read the status: keep it current
                self.write_status(now, healthy, seen)
                self.shown = shown
            return
        self.told, self.shown = told, shown
        self.seq += 1
        srg2 = (role2, self.srg2.priority) if self.c.mode == "srg1+srg2" else None
        try:
            sync = self.sync.flags() if self.c.sync_config else None
            self.sock.sendto(encode_heartbeat(self.c.node, role, self.srg1.priority, healthy, self.seq, srg2, sync),
                             (self.c.peer_ip, PORT))
            self.sent += 1
        except OSError:
            pass  # ICL down: the peer will notice the silence
        self.write_status(now, healthy, seen)

    def schedule_sync(self, now: float) -> None:
        """Session sync (dataplane.core.mnha.SessionSync): the refresh rule swapped when a window
        begins, a cold sync started when the peer asks for one, conntrackd's counters read."""
        if not self.c.sync_config:
            return
        epochs = self.sync.epochs(time.time())
        if epochs != self.epochs and set_refresh(*epochs):
            self.refreshes += self.epochs is not None
            self.epochs = epochs
        was_awaiting = self.sync.awaiting
        kind = self.sync.tick(now, self.peer.alive, self.peer.sync, self.interval * self.threshold,
                              self.link.instances, self.icl_up())
        if was_awaiting and not self.sync.awaiting:
            ended = COLD_SYNC_LOG.get(self.sync.wait_ended or "", "no longer waiting")
            print(f"{time.strftime('%H:%M:%S')} cold sync: {ended} after {self.sync.awaited_s} s", flush=True)
        if kind is not None:
            self.sync_thread = threading.Thread(target=self._cold_sync, args=(kind == "whole",), daemon=True)
            self.sync_thread.start()

    def read_stats(self) -> None:
        """conntrackd's counters, every STATS_EVERY_S (a thread: a slow answer never delays a heartbeat)."""
        assert self.c.sync_config
        while True:
            stats = parse_stats(conntrackd(self.c.sync_config, "-s", timeout=5.0) or "")
            if stats:
                queue = parse_stats(conntrackd(self.c.sync_config, "-s", "queue", timeout=5.0) or "")
                stats |= {k: v for k, v in queue.items() if k == "rsqueue"}
                network = parse_stats(conntrackd(self.c.sync_config, "-s", "network", timeout=5.0) or "")
                stats |= {k: v for k, v in network.items() if k == "before"}
            self.stats = stats
            time.sleep(STATS_EVERY_S if stats else STATS_RETRY_S)

    def _cold_sync(self, whole: bool) -> None:
        assert self.c.sync_config
        ok, seconds, sessions = cold_sync(self.c.sync_config, whole=whole)
        self.sync.finished(seconds, sessions, ok)
        with contextlib.suppress(OSError):
            self.sync_done_w.send(b"x")

    def sync_ended(self, now: float) -> None:
        with contextlib.suppress(OSError):
            self.sync_done_r.recv(64)

    def receive(self, now: float) -> None:
        self.link.drain(now)

    @property
    def peer(self) -> PeerView:
        return self.link.view

    def apply(self, role: Role, role2: Role = Role.BACKUP) -> None:
        """On BGP (the JVD's export policies): a group's routes are prepended 3x while it is backup
        here, every route 3x while the SRG0 signal route exists, else once."""
        # While this node of an SRG0 pair waits for its peer's session table (cold sync) with the
        # peer there to carry the traffic (or not heard yet since the start), every route is
        # prepended as with the signal route (not installed). In an SRG1 pair the waiting node is
        # kept out of activeness instead (tick).
        holding = holds_routes(self.c.mode, self.sync.awaiting, not self.sync.heard_once, self.peer.alive,
                               self.peer.healthy, self.sync.mutual)
        # A link back without BGP routes over it yet (PathReturn): the session of the other side may be
        # up already, and a shorter path there would draw traffic this node cannot forward yet.
        # Only a shorter path is held back: a change to a longer one (activeness lost) goes at once.
        state = (role is Role.ACTIVE, role2 is Role.ACTIVE, self.srg0_failed or holding)
        pending = ", ".join(self.routes_pending)
        if self.routes_pending:
            held = (state[0] and self.bird_state[0], state[1] and self.bird_state[1], state[2] or self.bird_state[2])
            waiting, state = held != state, held
        else:
            waiting = False
        if self.srg0_failed != self.signal_installed:
            set_signal_route(self.c.signal_route, self.c.signal_table, self.srg0_failed)
            self.signal_installed = self.srg0_failed
        if state == self.bird_state and self.role_file_ok:
            return
        # at once (a sibling file renamed over it): a BIRD starting now, or a power cut now, never
        # finds half a file (an empty include is a syntax error: that BIRD would not start)
        write_atomic(
            self.c.role_file,
            f"define SRG1_ACTIVE = {int(state[0])};  # {role.value}\n"
            f"define SRG2_ACTIVE = {int(state[1])};  # {role2.value}\n"
            f"define SRG0_SIGNAL = {int(state[2])};  # signal route {self.c.signal_route}"
            f"{f' ({COLD_SYNC_WAIT_NOTE})' if holding and not self.srg0_failed else ''}"
            f"{f' ({ROUTES_WAIT_NOTE} {pending})' if waiting else ''}\n")
        self.role_file_ok = True
        try:
            reply = bird_configure(self.c.bird_socket)
            self.bird_state = state
        except Exception as exc:  # noqa: BLE001 - BIRD restarting: it reads the file when it starts
            reply = f"configure failed: {exc}"
        print(f"{time.strftime('%H:%M:%S')} SRG1 {role.value}, SRG2 {role2.value}, signal route "
              f"{'present' if self.srg0_failed else 'absent'}"
              f"{', routes held prepended (cold sync)' if holding and not self.srg0_failed else ''}"
              f"{f', routes held prepended ({ROUTES_WAIT_NOTE} {pending})' if waiting else ''}"
              f": BIRD {reply}",
              flush=True)

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
            healthy=healthy, peer_seen_in_network=seen, resumed=self.resumed,
            sync=self.sync_status() if self.c.sync_config else None,
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
                events=[MnhaMonitorEvent(at=at, what=what) for at, what in monitor.events],
                links_unrouted=list(self.routes_pending)),
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

    def sync_status(self) -> MnhaSync:
        sync, stats = self.sync, self.stats
        return MnhaSync(
            sessions=kernel_sessions(), cache=stats.get("cache_active"),
            sent_packets=stats.get("packets_sent"), received_packets=stats.get("packets_received"),
            sent_bytes=stats.get("bytes_sent"), received_bytes=stats.get("bytes_received"),
            injected=stats.get("inject_created", 0) + stats.get("inject_updated", 0) if stats else None,
            removed=stats.get("inject_destroyed"),
            errors=sum(stats.get(k, 0) for k in ("inject_created_failed", "inject_updated_failed",
                                                  "inject_destroyed_failed", "send_errors", "receive_errors",
                                                  "malformed")) if stats else None,
            lost=stats.get("lost"), stale=stats.get("before"), resend_queue=stats.get("rsqueue"),
            daemon_answering=bool(stats),
            refresh_s=sync.refresh, refresh_tcp_s=sync.refresh_tcp, refreshes=self.refreshes,
            awaiting_peer=sync.awaiting, awaited_s=sync.awaited_s, cold_sync_ended=sync.wait_ended,
            peer_awaiting=bool(self.peer.sync & SYNC_AWAITING),
            sending=sync.sending, cold_syncs=sync.cold_syncs, last_cold_sync_s=sync.last_cold_s,
            last_cold_sync_sessions=sync.last_cold_sessions)

    def run(self) -> None:
        if self.c.sync_config:
            threading.Thread(target=self.read_stats, daemon=True).start()
        heartbeat_loop(self.interval, {self.sock: self.receive, self.sync_done_r: self.sync_ended}, self.tick)


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
    exit_now(main(sys.argv))
