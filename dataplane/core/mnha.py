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

from dataclasses import dataclass, field
from enum import StrEnum


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


def encode_heartbeat(node: str, role: Role, priority: int, healthy: bool, seq: int,
                     srg2: tuple[Role, int] | None = None) -> bytes:
    """Version 1; version 2 (an srg1+srg2 pair) adds the SRG2 role and priority before the name."""
    name = node.encode()[:32]
    roles = list(Role)
    head = MAGIC + bytes([1 if srg2 is None else 2, roles.index(role), priority & 0xFF, int(healthy)]) \
        + seq.to_bytes(4, "big")
    if srg2 is not None:
        head += bytes([roles.index(srg2[0]), srg2[1] & 0xFF])
    return head + bytes([len(name)]) + name


class HeartbeatError(ValueError):
    pass


def decode_heartbeat(data: bytes) -> tuple[str, Role, int, bool, int]:
    """(node, role, priority, healthy, sequence); HeartbeatError on anything malformed."""
    node, role, priority, healthy, seq, _role2, _priority2 = decode_heartbeat_ext(data)
    return node, role, priority, healthy, seq


def decode_heartbeat_ext(data: bytes) -> tuple[str, Role, int, bool, int, Role, int]:
    """As decode_heartbeat, plus the SRG2 role and priority (INIT, 0 in a version 1 heartbeat)."""
    if len(data) < 13 or data[:4] != MAGIC or data[4] not in (1, 2):
        raise HeartbeatError("not an MNHA heartbeat")
    roles = list(Role)
    if data[5] >= len(roles) or data[7] > 1:
        raise HeartbeatError("bad field")
    srg2_role, srg2_priority, at = Role.INIT, 0, 12
    if data[4] == 2:
        if len(data) < 15 or data[12] >= len(roles):
            raise HeartbeatError("bad field")
        srg2_role, srg2_priority, at = roles[data[12]], data[13], 14
    length = data[at]
    if len(data) != at + 1 + length:
        raise HeartbeatError("bad length")
    try:
        node = data[at + 1:].decode()
    except UnicodeDecodeError:
        raise HeartbeatError("bad node name") from None
    return (node, roles[data[5]], data[6], bool(data[7]), int.from_bytes(data[8:12], "big"),
            srg2_role, srg2_priority)


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
class SessionSync:
    """When this node has its session daemon push its session table to the peer, or empty its cache
    (pure).

    The session daemon (conntrackd) sends a session when it opens and when its state changes, never
    again: the peer's copy then ages on its own clock (a UDP stream: 120 s after that last change)
    while the session lives on here. And it tells the peer to delete a session when one in its own
    cache ends here, whoever carries the flow now. Together: a flow that failed over to the peer and
    came back left there a session the peer had opened itself (its copy had aged out); when that one
    expired, the peer's session daemon had this node delete its live session, and a return packet
    arriving before the next forward packet re-opened it was dropped. An MNHA backup session lives
    as long as the active one and never removes it. So:

    - cold: at each of COLD delays after the peer is heard again (power on, reboot, ICL back): the
      whole table is pushed, then the cache emptied (dataplane.daemons.mnhad.cold_sync);
    - refresh: every REFRESH seconds while the peer is heard, the same push: the copies age with
      the sessions here (REFRESH under the 120 s a replied UDP flow's session lives);
    - flush: every FLUSH seconds, only the cache is emptied: a session opened here leaves it before
      it could expire (a UDP flow seen one way only: 30 s), so its end is never sent to the peer
      (the peer's copy then ages out by itself, on the clock the refreshes keep).
    At most one action per tick; a refresh empties the cache too."""

    cold: tuple[float, ...]
    refresh: float
    flush: float = 0.0
    due: list[float] = field(default_factory=list)
    next_refresh: float = float("inf")
    next_flush: float = float("inf")
    peer_was_alive: bool = False

    @staticmethod
    def _after(beat: float, period: float, now: float) -> float:
        """The next beat of a period after NOW (a late tick does not shift the beat)."""
        while beat <= now:
            beat += period
        return beat

    def tick(self, now: float, peer_alive: bool, cold: bool = True) -> str | None:
        """'cold', 'refresh' or 'flush' when that is due now, else None. COLD False: a peer heard now
        for the first time gets no cold pushes (this node is the one starting: see
        dataplane.daemons.mnhad.Daemon.just_started); refreshes and flushes are scheduled all the same."""
        if peer_alive and not self.peer_was_alive:
            self.due = [now + delay for delay in self.cold] if cold else []
            start = now + max(self.cold, default=0.0)
            self.next_refresh = start + self.refresh if self.refresh > 0 else float("inf")
            self.next_flush = start + self.flush if self.flush > 0 else float("inf")
        self.peer_was_alive = peer_alive
        if not peer_alive:
            self.due, self.next_refresh, self.next_flush = [], float("inf"), float("inf")
            return None
        if self.due and now >= self.due[0]:
            self.due.pop(0)
            return "cold"
        if now >= self.next_refresh:
            self.next_refresh = self._after(self.next_refresh, self.refresh, now)
            if self.next_flush <= now:
                self.next_flush = self._after(self.next_flush, self.flush, now)
            return "refresh"
        if now >= self.next_flush:
            self.next_flush = self._after(self.next_flush, self.flush, now)
            return "flush"
        return None
