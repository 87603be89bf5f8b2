"""The MX selector's decisions, pure: which SRXs are alive, which table follows, how the map changes.

`dataplane.daemons.mxlb` (the daemon) reads the kernel (carrier, BGP next hops), the health monitor's reports
and the programmed map, and hands them here; this module decides and says what to write. No socket,
no netlink, no clock: every time is an argument (monotonic seconds), so each rule is unit-tested.

- `MemberState`: one SRX (or TLB real-service): carrier per side, BGP next hop per side with a
  hold-down, TLB health and the "prove yourself again after a carrier loss" rule.
- `SelectorCore`: the route gate (carrier alone decides while BGP converges after start-up), the
  MNHA takeover (a leaving SRX's peer takes its buckets before BGP says so), the table
  (`dataplane.core.chash`), the monitor's reports, adopting a programmed map on start.
- `map_commands` / `map_updates` / `read_map`: the nft map (or the eBPF selector's array) as a diff of
  two tables, and back from its elements.
- `pick_hop`: which SRX of an MNHA pair carries a TLB real-service.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from labkit.configs import Hop

from .chash import SelectorTable, build_initial, plain_ecmp, reconcile_pairs
from .health import ProfileHealth

ROUTE_SETTLE_S = 10.0  # the route gate opens at the latest this long after the first route came
ROUTE_QUIET_S = 2.0  # ... or once routes have been quiet this long
ROUTE_HOLD_S = 1.0  # a member's routed state must hold this long before the table follows it
TAKEOVER_GRACE_S = 5.0  # an MNHA peer that took over keeps its buckets this long while BGP catches up
HISTORY = 20  # table changes kept in the status


@dataclass
class MemberState:
    name: str
    mark: int
    carrier: dict[str, bool] = field(default_factory=dict)  # side -> link has carrier
    routed: dict[str, bool] = field(default_factory=dict)  # side -> next hop in the watched routes
    seen: bool = False  # next hop has been in the routes at least once (BGP came up)
    health: ProfileHealth | None = None  # TLB only

    in_ecmp: bool = True  # the routed state after the hold-down (what the selector acts on)
    changed_at: float = 0.0  # when the raw routed state last flipped
    # TLB, after a carrier loss: each profile's probe count then; the member is out until the
    # monitor reports `recoveries` successful probes of every profile made since.
    proving: dict[str, int] | None = None
    # ECMP, after a carrier loss: out until its BGP next hop is back (held down), even while the
    # route gate is still closed (start-up): carrier alone would re-add an SRX whose sessions are
    # still down, and take it out again when the gate opens.
    rerouting: bool = False
    # TLB: wall clock when the MX last moved this real-service's path (a link of one of its SRXs
    # went down or up, its table was pointed at the other SRX). A probe sent before that went the
    # old way: its loss says nothing about the path the real-service takes now.
    path_moved_at: float = 0.0
    voided: dict[str, float] = field(default_factory=dict)  # profile -> last_change of a down not counted

    @property
    def routed_everywhere(self) -> bool:
        """Its BGP next hop is in the watched routes on every side it was seen on."""
        return bool(self.routed) and all(self.routed.values())

    def alive(self, routes_decide: bool = False) -> bool:
        """Carrier on every side, and: TLB, passing health checks; ECMP, its BGP next hop in the
        watched routes (held down for ROUTE_HOLD_S) once the route gate is open."""
        if not self.carrier or not all(self.carrier.values()):
            return False
        if self.health is not None:
            return self.health.up and self.proving is None
        if routes_decide or self.rerouting:
            return self.in_ecmp
        return True

    def lost_carrier(self, now: float | None = None) -> None:
        """A link of this SRX went down: whatever comes back must prove itself again (TLB: pass
        `recoveries` health checks; ECMP: its BGP next hop back for ROUTE_HOLD_S). Without this an SRX
        that just came back (rebooted, not yet routing) would be handed flows it drops."""
        self.in_ecmp = False
        self.changed_at = time.monotonic() if now is None else now
        self.voided.clear()
        if self.health is None:
            self.rerouting = True
        if self.health is not None:
            self.proving = {name: state.probes for name, state in self.health.states.items()}
            if self.health.up:
                self.health.force_down("carrier lost")

    def proven(self) -> bool:
        """TLB: has every profile passed `recoveries` probes since the last carrier loss?"""
        if self.proving is None or self.health is None:
            return True
        if all(s.up and min(s.ok_streak, s.probes - self.proving.get(n, 0)) >= s.recoveries
               for n, s in self.health.states.items()):
            self.proving = None
        return self.proving is None

    def hold_down(self, now: float) -> bool:
        """Follow the routed state only once it has held ROUTE_HOLD_S: a path that leaves the ECMP
        set for a moment while BGP reconverges (an SRD switchover, an SRG1 role change) must not
        reshuffle the table. Carrier loss is not held down. True while a change is pending."""
        routed = self.routed_everywhere
        if routed == self.in_ecmp:
            return False
        if now - self.changed_at >= ROUTE_HOLD_S:
            self.in_ecmp = routed
            if routed:
                self.rerouting = False
            return False
        return True

    def set_routed(self, side: str, routed: bool, now: float) -> None:
        """SIDE's watched routes have (or lack) this member's next hop; a flip restarts the hold-down."""
        was = self.routed_everywhere
        self.routed[side] = routed
        if self.routed_everywhere != was:
            self.changed_at = now

    def void_down(self, profile: str, values: Mapping[str, Any], was_up: bool) -> bool:
        """TLB: should PROFILE's "down" (VALUES, as the monitor reports it) be left uncounted? Yes while
        it comes only from probes sent before the MX moved the path: the flip to down was made by a
        probe that left before `path_moved_at` (while the profile was up here), and no probe sent
        since has failed. The first failed probe sent after the move counts as usual."""
        last_change = float(values["last_change"])
        if was_up and float(values.get("last_sent", 0.0)) < self.path_moved_at:
            self.voided[profile] = last_change
            return True
        if self.voided.get(profile) == last_change and int(values["fail_streak"]) == 0:
            return True
        self.voided.pop(profile, None)
        return False

    def must_prove(self, why: str) -> None:
        """TLB: out until `recoveries` probes of every profile made from now on have passed."""
        if self.health is not None:
            self.voided.clear()
            self.proving = {n: h.probes for n, h in self.health.states.items()}
            self.health.force_down(why)


class SelectorCore:
    """The selector's state and decisions. The daemon (dataplane.daemons.mxlb.Daemon) adds the kernel."""

    def __init__(self, order: Sequence[str], buckets: int, mode: str, peers: Mapping[str, str],
                 restore_policy: str, members: dict[str, MemberState]) -> None:
        self.order = list(order)
        self.buckets = buckets
        self.mode = mode  # chash | ecmp | tlb
        self.peers = dict(peers)
        # how a member that comes back is given buckets (dataplane.core.chash.reconcile_pairs)
        self.restore_policy = restore_policy
        self.members = members
        self.left: dict[str, tuple[int, ...]] = {}  # member -> the buckets it held when it left the table
        self.table = SelectorTable()
        self.takeover_until: dict[str, float] = {}
        self.pending_hold = False
        self.first_routed_at: float | None = None
        self.last_route_event = 0.0
        self.gate_open = False
        self.changes = 0
        self.history: list[dict[str, Any]] = []
        self.health_reports = 0
        self.health_report_at = 0.0

    # ------------------------------------------------------------ routes
    def routes_seen(self, now: float) -> None:
        """After a read of the routes: a member routed on every side has been seen (BGP came up)."""
        for state in self.members.values():
            if state.routed_everywhere:
                state.seen = True
                if self.first_routed_at is None:
                    self.first_routed_at = now

    def route_event(self, now: float) -> None:
        self.last_route_event = now

    def routes_decide(self, now: float) -> bool:
        """The route gate. While BGP converges after start-up, next hops come and go (an SRX's best
        path flips between MXs, a longer path leaves the ECMP set for a moment); acting on that
        would make each MX churn its table in its own order, and two MXs would end with different
        tables. So until the routes have been quiet for ROUTE_QUIET_S after the first one came (at
        most ROUTE_SETTLE_S), carrier alone decides. After that, an SRX out of the
        ECMP route (withdrawn, or an MNHA SRG1 backup whose prepended path is not in it) is out."""
        if self.gate_open:
            return True
        if self.first_routed_at is None:
            return False
        quiet = now - self.last_route_event >= ROUTE_QUIET_S
        if quiet or now - self.first_routed_at >= ROUTE_SETTLE_S:
            self.gate_open = True
        return self.gate_open

    # ------------------------------------------------------------ the table
    def alive(self, now: float) -> list[str]:
        """The members the table should hold now, in the topology's order."""
        decide = self.routes_decide(now)
        self.pending_hold = False
        for state in self.members.values():
            # before the gate opens carrier decides (except for a member back from a carrier loss);
            # afterwards routes, held down
            if not decide and not state.rerouting:
                state.in_ecmp = state.routed_everywhere
            elif state.hold_down(now):
                self.pending_hold = True
        alive = [name for name in self.order if name in self.members and self.members[name].alive(decide)]
        # An SRX leaving the table hands over to its MNHA peer as soon as the peer can forward
        # (carrier up), before BGP says so: an SRG1 backup holds the synced sessions and is about
        # to become active; waiting for its routes would send the flows to another pair, which has none.
        for name in self.table.members():
            peer = self.peers.get(name)
            if name not in alive and peer in self.members and peer not in alive and self.members[peer].alive(False):
                alive.append(peer)
                self.takeover_until[peer] = now + TAKEOVER_GRACE_S
        # ...and keeps them while its routes catch up (SRG1 election, BGP), for TAKEOVER_GRACE_S.
        for name, until in list(self.takeover_until.items()):
            if now > until or not self.members[name].alive(False):
                del self.takeover_until[name]
            elif name not in alive:
                alive.append(name)
        return [name for name in self.order if name in alive]

    def desired(self, now: float) -> SelectorTable:
        alive = self.alive(now)
        if self.mode == "ecmp":
            return plain_ecmp(alive, self.buckets) if alive else SelectorTable()
        # An SRX of an MNHA pair fails over to its peer (which has its sessions) and back from it.
        return reconcile_pairs(self.table, alive, self.order, self.peers, n_buckets=self.buckets,
                               policy=self.restore_policy, remembered=self.left)

    def commit(self, table: SelectorTable, reason: str, at: float) -> None:
        """TABLE is programmed (AT: wall-clock time): remember who left with which buckets."""
        for name in self.table.members():
            if name not in table.counts():
                self.left[name] = tuple(b for b, held in enumerate(self.table.buckets) if held == name)
        self.changes += 1
        self.note(reason, at, table)
        self.table = table

    def note(self, reason: str, at: float, table: SelectorTable | None = None) -> None:
        """One line of the change history (the last HISTORY are kept)."""
        members = list((table if table is not None else self.table).members())
        self.history = (self.history + [{"at": at, "reason": reason, "members": members}])[-HISTORY:]

    def settling(self) -> bool:
        """A change of the table is pending: a member's routed state is held down, or an MNHA peer
        keeps a leaving SRX's buckets while BGP catches up (the table will move without a new event)."""
        return self.pending_hold or bool(self.takeover_until)

    def members_status(self) -> list[dict[str, Any]]:
        """Each member's standing as the status file reports it (the daemon adds health, via, counters):
        what `lab up` compares with the table (lab_orchestrator.runtime.readiness)."""
        counts = self.table.counts() if self.table.n_buckets else {}
        return [{"name": name, "mark": state.mark, "alive": state.alive(self.gate_open), "carrier": state.carrier,
                 "routed": state.routed, "buckets": counts.get(name, 0), "route_gate_open": self.gate_open}
                for name, state in sorted(self.members.items(), key=lambda kv: kv[1].mark)]

    def initial(self) -> SelectorTable:
        return build_initial([n for n in self.order if n in self.members], self.buckets)

    def adopt(self, tables: Sequence[SelectorTable | None]) -> bool:
        """Start-up, after a first read of the kernel: take the map programmed on every side as the
        current table if it is one of ours and the same everywhere (True); else False."""
        first = tables[0] if tables else None
        if first is None or any(t != first for t in tables):
            return False
        self.table = first
        # A restart in steady state: routes are there, so they decide from the first moment.
        self.gate_open = self.first_routed_at is not None
        # A member missing from the programmed map was taken out for a reason (withdrawn or
        # failed): it comes back only once its routes do, not merely because its link is up.
        for name, state in self.members.items():
            if name not in first.members():
                state.seen = True
                state.must_prove("out of the programmed map at start")
        return True

    # ------------------------------------------------------------ health (TLB), from the monitor
    def health_report(self, report: Mapping[str, Any]) -> list[str]:
        """Take the monitor's state of each real-service and profile (a member that lost carrier
        here stays out until it has proven itself in the monitor's probes made since). Returns a
        line per member whose verdict changed."""
        self.health_reports += 1
        self.health_report_at = float(report["at"])
        lines = []
        for name, data in report["members"].items():
            state = self.members.get(name)
            if state is None or state.health is None:
                continue
            before = state.alive()
            for profile, values in data["profiles"].items():
                health = state.health.states.get(profile)
                if health is None:
                    continue
                up, result = bool(values["up"]), str(values["last_result"])
                if not up and state.proving is None and state.void_down(profile, values, health.up):
                    up, result = True, f"{result} (sent before the path moved: not counted)"
                health.up, health.last_result = up, result
                health.probes, health.last_change = int(values["probes"]), float(values["last_change"])
                health.fail_streak, health.ok_streak = int(values["fail_streak"]), int(values["ok_streak"])
            state.proven()
            if state.alive() != before:
                lines.append(f"{name} health {'up' if state.alive() else 'down'}: {state.health.last_result}")
        return lines


def map_commands(old: SelectorTable, new: SelectorTable, mark_of: Mapping[str, int], family: str = "ip") -> str:
    """The nft commands that turn map `FAMILY mxlb sel` holding OLD into NEW ("" when nothing moves)."""
    sel = f"{family} mxlb sel"
    if new.n_buckets and old.n_buckets == new.n_buckets:
        # Only the buckets that move (a failover moves 1/N of them): with thousands of buckets a
        # full rewrite costs ~17 ms per side, the changed ones well under 1 ms. One transaction.
        moved = [b for b, (was, now) in enumerate(zip(old.buckets, new.buckets, strict=True)) if was != now]
        if not moved:
            return ""
        keys = ", ".join(str(b) for b in moved)
        elements = ", ".join(f"{b} : {mark_of[new.buckets[b]]}" for b in moved)
        return f"delete element {sel} {{ {keys} }}; add element {sel} {{ {elements} }}"
    if new.n_buckets:
        elements = ", ".join(f"{b} : {mark_of[name]}" for b, name in enumerate(new.buckets))
        return f"flush map {sel}; add element {sel} {{ {elements} }}"
    return f"flush map {sel}"


def map_updates(old: SelectorTable, new: SelectorTable, mark_of: Mapping[str, int], size: int) -> list[tuple[int, int]]:
    """The (bucket, mark) writes that turn the eBPF selector's array of SIZE buckets holding OLD into
    NEW (the same table as `map_commands`; mark 0 is what a missing nft element is: no member)."""
    if new.n_buckets and old.n_buckets == new.n_buckets:
        return [(b, mark_of[now]) for b, (was, now) in enumerate(zip(old.buckets, new.buckets, strict=True))
                if was != now]
    if new.n_buckets:
        return [(b, mark_of[name]) for b, name in enumerate(new.buckets)]
    return [(b, 0) for b in range(size)]


def read_map(elements: Iterable[tuple[int, int]], buckets: int, name_of: Mapping[int, str]) -> SelectorTable | None:
    """The table a programmed map (bucket -> mark) describes; None if it is not one of ours
    (another bucket count, or a mark of no member). An empty map is the empty table."""
    found = {int(k): int(v) for k, v in elements}
    if not found:
        return SelectorTable()
    if sorted(found) != list(range(buckets)) or any(v not in name_of for v in found.values()):
        return None
    return SelectorTable(tuple(name_of[found[b]] for b in range(buckets)))


def pick_hop(hops: Sequence[Hop], dev_up: Mapping[str, bool], routed: Iterable[str],
             everywhere: set[str] | None = None, current: str | None = None) -> Hop | None:
    """The SRX of the pair that carries a real-service on a side, or None for none.

    - The first, in pair order, whose link is up and whose next hop BGP has in the route to the
      real-service address on every side (EVERYWHERE: see `routed_everywhere`; an SRX that lost
      activeness prepends more and leaves that route).
    - Otherwise the hop in use (CURRENT, a next hop) while its link is up. With the A/B prepends each
      side's route holds the best path only: an A node whose links came back is the route on the
      side whose session came up first while the other side has no route through it yet; moving
      one side then would send that direction to a node that drops it.
    - Otherwise, if the pair was carrying (CURRENT set) and that hop's link went down: the first
      routed on this side, else the first with its link up (a link going down is acted on at once,
      before BGP moves the route).
    - Otherwise (the pair carries nothing: just powered on, no BGP route through it on every side)
      None: the pair's table stays a blackhole, so its health probes fail and it stays out of
      service until it is routed; an SRX that answers probes for its own loopback before BGP
      is up would otherwise draw the pair's flows and drop them."""
    via = set(routed)
    up = [h for h in hops if dev_up.get(h.dev, False)]
    preferred = [h for h in up if h.nexthop in via]
    both = [h for h in preferred if everywhere is not None and h.node in everywhere]
    if both:
        return both[0]
    kept = [h for h in up if h.nexthop == current]
    if kept:
        return kept[0]
    if current is None:
        return None
    chosen = preferred or up
    return chosen[0] if chosen else None


def routed_everywhere(name: str, hops_by_side: Mapping[str, Sequence[Hop]],
                      dev_up: Mapping[str, Mapping[str, bool]], routes: Mapping[str, Mapping[str, set[str]]]
                      ) -> set[str] | None:
    """The SRXs of pair member NAME that have their link up and are in BGP's route to its address on
    every side (None: no side has a route yet). The same SRX both ways: one whose links just came
    back may have its trust session up before its untrust one (no route to the servers yet), and
    would drop the forward traffic sent to it meanwhile."""
    out: set[str] | None = None
    for side, hops in hops_by_side.items():
        if name not in routes.get(side, {}):
            continue
        nodes = {h.node for h in hops if h.nexthop in routes[side][name] and dev_up.get(side, {}).get(h.dev)}
        out = nodes if out is None else out & nodes
    return out
