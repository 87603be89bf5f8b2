"""MNHA (Multi Node High Availability) decisions for one SRX of a pair: pure, no I/O.

Routing (L3) mode, as in the JVD. SRG0 is active on both nodes, always. SRG1 is active on one
node and backup on the other; the backup keeps its sessions in sync (conntrackd) but steers
traffic away by advertising its routes with an AS-path prepend.

Election (both nodes see each other's heartbeats over the ICL):
  an unhealthy node (a monitored interface down) is INELIGIBLE; otherwise the peer's state
  decides: a node whose peer is INELIGIBLE is ACTIVE; an ACTIVE node stays ACTIVE unless the peer
  has a higher priority and preemption is on; two nodes that are not ACTIVE pick the higher
  priority (tie: the lower node name).

Split brain. When heartbeats stop, a node cannot tell a dead peer from a dead ICL. The rule here
("activeness by routes"): it asks whether it still sees the peer in the network, i.e. whether a
route to the peer's loopback, learned from BGP over a data link, is still there.
  * peer not seen: the peer is gone -> ACTIVE;
  * peer still seen (only the ICL failed): keep the role held before (an ACTIVE node stays ACTIVE,
    a BACKUP stays BACKUP); a node that had no role yet becomes ACTIVE only with the higher
    priority. So the two nodes never both become ACTIVE while both are alive.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from labkit.status import ColdSyncEnd


class Role(StrEnum):
    INIT = "init"
    ACTIVE = "active"
    BACKUP = "backup"
    INELIGIBLE = "ineligible"


@dataclass(frozen=True)
class PeerView:
    """What the last heartbeat from the peer said (None fields: no heartbeat within the threshold)."""

    alive: bool
    role: Role = Role.INIT
    priority: int = 0
    healthy: bool = True
    srg2_role: Role = Role.INIT  # an srg1+srg2 pair: the peer's SRG2 (version 2 heartbeats)
    srg2_priority: int = 0
    sync: int = 0  # the peer's cold-sync flags (SYNC_AWAITING | SYNC_SENDING | SYNC_DONE; version 3)

    def srg2(self) -> PeerView:
        """The peer as seen by the SRG2 election."""
        return PeerView(self.alive, self.srg2_role, self.srg2_priority, self.healthy)


@dataclass
class Srg1:
    node: str
    peer: str
    priority: int  # 1..255, higher wins
    preempt: bool = True
    role: Role = Role.INIT
    transitions: list[tuple[float, Role, str]] = field(default_factory=list)

    def _wins_over(self, peer: PeerView) -> bool:
        return (self.priority, self.peer) > (peer.priority, self.node)  # tie: the lower node name wins

    def hold(self, healthy: bool, peer: PeerView, now: float = 0.0) -> Role | None:
        """This node waits for its peer's session table (cold sync): while the peer is alive, healthy
        and eligible, a node not active stays BACKUP (an SRX takes no activeness until the cold sync
        completes). None: no reason to hold (decide as usual)."""
        if healthy and peer.alive and peer.healthy and peer.role is not Role.INELIGIBLE \
                and self.role is not Role.ACTIVE:
            return self._set(Role.BACKUP, "cold sync from the peer not complete", now)
        return None

    def decide(self, healthy: bool, peer: PeerView, peer_seen_in_network: bool, now: float = 0.0) -> Role:
        if not healthy:
            return self._set(Role.INELIGIBLE, "a monitored interface is down", now)
        if peer.alive:
            if not peer.healthy or peer.role is Role.INELIGIBLE:
                return self._set(Role.ACTIVE, "peer is ineligible", now)
            if self.role is Role.ACTIVE:
                if peer.role is Role.ACTIVE and not self._wins_over(peer):
                    return self._set(Role.BACKUP, "both active: the higher priority keeps it", now)
                if self.preempt and peer.priority > self.priority and peer.role is not Role.INIT:
                    return self._set(Role.BACKUP, "preempted by a higher priority peer", now)
                return self._set(Role.ACTIVE, "", now)
            if peer.role is Role.ACTIVE:
                if self.preempt and self.priority > peer.priority:
                    return self._set(Role.ACTIVE, "preempting a lower priority peer", now)
                return self._set(Role.BACKUP, "peer is active", now)
            winner = self._wins_over(peer)
            return self._set(Role.ACTIVE if winner else Role.BACKUP, "election", now)
        if not peer_seen_in_network:
            return self._set(Role.ACTIVE, "peer lost (no heartbeat, no route to it)", now)
        if self.role in (Role.ACTIVE, Role.BACKUP):
            return self._set(self.role, "ICL down but peer alive: role kept (split-brain rule)", now)
        winner = self.priority > peer.priority if peer.priority else self.node < self.peer
        return self._set(Role.ACTIVE if winner else Role.BACKUP, "ICL down at start: priority decides", now)

    def _set(self, role: Role, why: str, now: float) -> Role:
        if role is not self.role:
            self.transitions = (self.transitions + [(now, role, why)])[-20:]
            self.role = role
        return role


# Heartbeat wire format over the ICL (UDP): magic, version, role, priority, healthy, sequence, node.
MAGIC = b"MNHA"
# Cold-sync flags (version 3): this node waits for the peer's session table (it has just started);
# this node is sending its table to the peer; the peer's table request is done (acknowledged).
SYNC_AWAITING, SYNC_SENDING, SYNC_DONE = 0x1, 0x2, 0x4


def encode_heartbeat(node: str, role: Role, priority: int, healthy: bool, seq: int,
                     srg2: tuple[Role, int] | None = None, sync: int | None = None) -> bytes:
    """Version 1; version 2 (an srg1+srg2 pair) adds the SRG2 role and priority before the name;
    version 3 (a pair with session sync) always carries the SRG2 fields, then the cold-sync flags."""
    name = node.encode()[:32]
    roles = list(Role)
    version = 3 if sync is not None else 1 if srg2 is None else 2
    head = MAGIC + bytes([version, roles.index(role), priority & 0xFF, int(healthy)]) + seq.to_bytes(4, "big")
    if version >= 2:
        role2, priority2 = srg2 if srg2 is not None else (Role.INIT, 0)
        head += bytes([roles.index(role2), priority2 & 0xFF])
    if version == 3:
        head += bytes([(sync or 0) & 0x7])
    return head + bytes([len(name)]) + name


class HeartbeatError(ValueError):
    pass


def decode_heartbeat(data: bytes) -> tuple[str, Role, int, bool, int]:
    """(node, role, priority, healthy, sequence); HeartbeatError on anything malformed."""
    node, role, priority, healthy, seq, _role2, _priority2 = decode_heartbeat_ext(data)
    return node, role, priority, healthy, seq


def decode_heartbeat_ext(data: bytes) -> tuple[str, Role, int, bool, int, Role, int]:
    """As decode_heartbeat, plus the SRG2 role and priority (INIT, 0 in a version 1 heartbeat)."""
    node, role, priority, healthy, seq, role2, priority2, _sync = decode_heartbeat_full(data)
    return node, role, priority, healthy, seq, role2, priority2


def decode_heartbeat_full(data: bytes) -> tuple[str, Role, int, bool, int, Role, int, int]:
    """As decode_heartbeat_ext, plus the cold-sync flags (0 before version 3)."""
    if len(data) < 13 or data[:4] != MAGIC or data[4] not in (1, 2, 3):
        raise HeartbeatError("not an MNHA heartbeat")
    roles = list(Role)
    if data[5] >= len(roles) or data[7] > 1:
        raise HeartbeatError("bad field")
    srg2_role, srg2_priority, sync, at = Role.INIT, 0, 0, 12
    if data[4] >= 2:
        if len(data) < 15 or data[12] >= len(roles):
            raise HeartbeatError("bad field")
        srg2_role, srg2_priority, at = roles[data[12]], data[13], 14
    if data[4] == 3:
        if len(data) < 16 or data[14] > 0x7:
            raise HeartbeatError("bad field")
        sync, at = data[14], 15
    length = data[at]
    if len(data) != at + 1 + length:
        raise HeartbeatError("bad length")
    try:
        node = data[at + 1:].decode()
    except UnicodeDecodeError:
        raise HeartbeatError("bad node name") from None
    return (node, roles[data[5]], data[6], bool(data[7]), int.from_bytes(data[8:12], "big"),
            srg2_role, srg2_priority, sync)


# ----------------------------------------------------------------------------- SRG monitoring
#
# `services-redundancy-group N monitor` (the JVD's SRG0): a monitor-object holds BFD-liveliness
# destinations, each with a weight. A destination is down after MULTIPLIER consecutive failed
# checks (BFD's detection time: interval x multiplier) and up again after one good check. The
# weights of the down destinations add up; reaching the liveliness threshold fails the object; a
# failed object adds its object-threshold to the SRG's failure weight; reaching srg-threshold, the
# node loses activeness (and, with install-on-failure-route, installs the signal route).


@dataclass(frozen=True)
class Destination:
    ip: str
    weight: int
    interface: str = ""
    src_ip: str = ""


@dataclass(frozen=True)
class MonitorObject:
    name: str
    destinations: tuple[Destination, ...]
    threshold: int  # bfd-liveliness threshold
    object_threshold: int


@dataclass
class SrgMonitor:
    objects: tuple[MonitorObject, ...]
    srg_threshold: int
    multiplier: int = 3
    misses: dict[str, int] = field(default_factory=dict)  # destination ip -> consecutive failed checks
    down: set[str] = field(default_factory=set)
    events: list[tuple[float, str]] = field(default_factory=list)  # (when, what), newest last

    def update(self, results: dict[str, bool], now: float = 0.0) -> bool:
        """Account one check of every destination (ip -> reachable); return True while the SRG
        has failed (lost activeness)."""
        was_failed = self.failed()
        for obj in self.objects:
            for dest in obj.destinations:
                ok = results.get(dest.ip, False)
                if ok:
                    self.misses[dest.ip] = 0
                    if dest.ip in self.down:
                        self.down.discard(dest.ip)
                        self._event(now, f"{obj.name}: bfd-liveliness {dest.ip} up")
                else:
                    self.misses[dest.ip] = self.misses.get(dest.ip, 0) + 1
                    if dest.ip not in self.down and self.misses[dest.ip] >= self.multiplier:
                        self.down.add(dest.ip)
                        self._event(now, f"{obj.name}: bfd-liveliness {dest.ip} down"
                                         f"{' via ' + dest.interface if dest.interface else ''}")
        failed = self.failed()
        if failed != was_failed:
            self._event(now, "SRG failed: activeness lost (monitoring)" if failed
                        else "SRG monitoring recovered: activeness regained")
        return failed

    def object_weight(self, obj: MonitorObject) -> int:
        return sum(d.weight for d in obj.destinations if d.ip in self.down)

    def object_failed(self, obj: MonitorObject) -> bool:
        return self.object_weight(obj) >= obj.threshold

    def srg_weight(self) -> int:
        return sum(obj.object_threshold for obj in self.objects if self.object_failed(obj))

    def failed(self) -> bool:
        return bool(self.objects) and self.srg_weight() >= self.srg_threshold

    def _event(self, now: float, what: str) -> None:
        self.events = (self.events + [(now, what)])[-20:]


@dataclass
class PathReturn:
    """When a monitored link counts as live again (the lab's stand-in for BFD liveliness to the MX).

    Carrier alone says the link is back, not that the node can forward over it: after a link comes
    back, BIRD needs a moment (up to seconds) to bring each BGP session up, and the sessions of the
    trust and the untrust side come up at different times. A node that regained activeness at carrier
    would announce itself with its short AS path on the side whose session came up first, and draw
    that direction's traffic while it has no route to the other side (it drops it). So a link whose
    carrier was lost is live again only once the kernel also has a route through a gateway over it
    (BGP's routes: the kernel's own routes of a link have no gateway). A link that never lost its
    carrier is live on carrier alone (`lab up` waits for the sessions itself). Pure: the caller reads
    carrier and routes."""

    regaining: set[str] = field(default_factory=set)  # links whose carrier was lost, not routed since

    def update(self, carrier: Mapping[str, bool], routed: Callable[[], set[str]]) -> dict[str, bool]:
        """Liveness of each link of CARRIER (device -> carrier); ROUTED returns the devices with a
        gateway route over them, asked only while a link with carrier waits for its routes."""
        self.regaining |= {dev for dev, up in carrier.items() if not up}
        if any(carrier.get(dev) for dev in self.regaining):
            self.regaining -= routed() & {dev for dev, up in carrier.items() if up}
        return {dev: up and dev not in self.regaining for dev, up in carrier.items()}


@dataclass
class SessionSync:
    """MNHA session sync of one node (pure): the cold-sync handshake and the refresh windows.

    Steady state is conntrackd's own event-driven sync (FTFW): a session is sent when it opens, when
    its state or mark changes, and when it ends (the peer deletes its copy). A copy takes the timeout
    the session had on the sending node and ages on the peer's clock, so the copies of live flows are
    refreshed: every refresh window the node flips one bit of its sessions' conntrack mark on their
    next packet (an nftables rule the daemon swaps), and the kernel reports the change as an update
    that conntrackd sends. Cost: one message per live session per window (a session without packets
    sends nothing and ends on both nodes); no table dump, no bulk re-send, no cache flush. The node
    that carries a flow refreshes it, so after a failover the new carrier keeps the old carrier's
    copy alive and the old carrier never deletes the flow it no longer carries.

    Cold sync: a node whose daemon starts (power on, reboot), or that hears its peer again after
    losing it (ICL or peer back), announces SYNC_AWAITING in its heartbeats and holds its
    activeness (routes prepended, SRG1 not active) until the peer's heartbeat says SYNC_DONE: the
    peer, on seeing the request, has conntrackd send its cache (to a peer back as a new instance,
    i.e. empty: the kernel's whole table re-read first, the copies it carries for the peer too) and
    waits until the reliable protocol has the messages acknowledged. A node
    that hears no peer, or waits longer than HOLD_CAP seconds, stops waiting."""

    refresh: float  # the refresh window of UDP (and other) sessions, seconds
    refresh_tcp: float  # the refresh window of TCP sessions
    hold_cap: float = 60.0
    awaiting: bool = False  # this node waits for the peer's table
    started: float = 0.0
    awaited_s: float | None = None  # how long the last wait lasted (None: not finished)
    wait_ended: ColdSyncEnd | None = None  # how the last wait ended (None: not finished)
    sending: bool = False  # a cold sync to the peer runs
    done: bool = False  # the peer's current request has been answered
    cold_syncs: int = 0
    last_cold_s: float | None = None  # duration of the last cold sync sent to the peer
    last_cold_sessions: int | None = None
    peer_was_alive: bool = False
    heard_once: bool = False
    peer_instance: int = 0  # the peer's daemon instance last heard (PeerLink.instances)
    icl_since: float | None = None  # since when the ICL is up (None: down)
    peer_empty: bool = False  # the peer came back as a new instance: it holds none of its sessions
    mutual: bool = False  # the wait began when the peer was heard again: the peer waits for this node too

    def start(self, now: float, awaiting: bool) -> None:
        self.started, self.awaiting, self.awaited_s, self.wait_ended, self.mutual = now, awaiting, None, None, False

    def flags(self) -> int:
        return ((SYNC_AWAITING if self.awaiting else 0) | (SYNC_SENDING if self.sending else 0)
                | (SYNC_DONE if self.done else 0))

    def tick(self, now: float, peer_alive: bool, peer_flags: int, start_window: float,
             peer_instance: int = 0, icl_up: bool = True) -> str | None:
        """'cold' when a cold sync to the peer is to start now ('whole': the peer came back empty,
        it needs the copies of its own sessions this node holds too), else None; updates the wait. A peer
        heard again after it was lost (its ICL, its links) makes this node wait for its table too:
        sessions opened on either side meanwhile were not synced. Not a peer that comes back as a
        new instance (PEER_INSTANCE changed: it powered on, or its daemon restarted): it has no
        session this node lacks (a powered-on node starts empty, and whatever it opens since is
        sent as it opens; a restarted daemon's node kept syncing), while it waits for this node's
        table itself; were this node to hold its activeness too, the empty node could win the
        traffic before its table arrived. No peer heard means no peer only once the ICL has been up
        for START_WINDOW (a routed ICL is there once BGP has brought the peer's loopback: a node
        that powers on hears its peer only then)."""
        if not icl_up:
            self.icl_since = None
        elif self.icl_since is None:
            self.icl_since = now
        if peer_alive and not self.peer_was_alive and self.heard_once:
            if peer_instance == self.peer_instance:
                self.awaiting, self.started, self.awaited_s, self.wait_ended, self.mutual = True, now, None, None, True
            else:
                self.peer_empty = True  # its next cold sync: the whole table, the copies of its own too
        if peer_alive:
            self.peer_instance = peer_instance
        self.heard_once = self.heard_once or peer_alive
        self.peer_was_alive = peer_alive
        if self.awaiting:
            finished = peer_alive and bool(peer_flags & SYNC_DONE)
            alone = (not peer_alive and self.icl_since is not None
                     and now - max(self.started, self.icl_since) > start_window)
            if finished or alone or now - self.started > self.hold_cap:
                self.awaiting = False
                self.awaited_s = round(now - self.started, 3)
                self.wait_ended = "received" if finished else "no peer" if alone else "timed out"
        if not peer_alive or not peer_flags & SYNC_AWAITING:
            self.done = False  # answered requests are forgotten; the next one gets a new cold sync
            return None
        if self.sending or self.done:
            return None
        self.sending = True
        return "whole" if self.peer_empty else "cold"

    def finished(self, seconds: float, sessions: int | None, ok: bool) -> None:
        self.sending = False
        self.done = ok
        self.peer_empty = self.peer_empty and not ok
        if ok:
            self.cold_syncs += 1
            self.last_cold_s, self.last_cold_sessions = round(seconds, 3), sessions

    def epochs(self, now: float) -> tuple[int, int]:
        """The refresh windows' parities (UDP and others, TCP): a change flips that mark bit."""
        return int(now // self.refresh) % 2, int(now // self.refresh_tcp) % 2


# The note on the SRG0_SIGNAL line of a BIRD role include written while the node waits for its
# peer's session table: every route prepended, the signal route itself not installed.
COLD_SYNC_WAIT_NOTE = "waiting for the cold sync"
ROUTES_WAIT_NOTE = "links back, no BGP route yet over"  # PathReturn: see Daemon.apply


def holds_routes(mode: str, awaiting: bool, never_heard: bool, peer_alive: bool, peer_healthy: bool,
                 mutual: bool = False) -> bool:
    """Does a node of an SRG0 pair keep every route prepended while it waits for its peer's session
    table (cold sync)? While the peer can carry the traffic, and from its start until the peer is
    first heard (NEVER_HEARD: a node that powers on has its BGP sessions up before it hears its
    peer, over an ICL that BGP routes; it must not draw traffic meanwhile; the wait itself ends
    when no peer is heard over an ICL that is up, see SessionSync.tick). A peer unhealthy or lost
    after it was heard: no hold. Nor for a MUTUAL wait (the two nodes hear each other again after
    their ICL was cut: each waits for the other's table): both would prepend every route, which
    changes no preference between them but makes every router choose its paths again."""
    return mode == "srg0" and awaiting and not mutual and (never_heard or (peer_alive and peer_healthy))


def refresh_windows(udp_timeout: int, tcp_timeout: int) -> tuple[float, float]:
    """Refresh windows for the given inactivity timeouts: a quarter of each (a copy refreshed on the
    first packet of every window lives while packets arrive at most 3/4 of the timeout apart)."""
    return max(1.0, udp_timeout / 4), max(1.0, min(tcp_timeout / 4, 600.0))
