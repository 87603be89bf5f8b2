"""The MX selector's pure core (dataplane.core.selector): member verdicts, the route gate, the hold-down,
MNHA takeover, restore policies, adopting a programmed map, the monitor's reports, the nft map diff."""

from __future__ import annotations

from typing import Any

import pytest
from statusdata import mxlb_member, mxlb_status

from dataplane.core.chash import SelectorTable, build_initial, plain_ecmp
from dataplane.core.health import HealthState, ProfileHealth
from dataplane.core.selector import (
    ROUTE_HOLD_S,
    ROUTE_QUIET_S,
    ROUTE_SETTLE_S,
    TAKEOVER_GRACE_S,
    MemberState,
    SelectorCore,
    map_commands,
    pick_hop,
    read_map,
    routed_everywhere,
)
from lab_orchestrator.runtime import readiness
from labkit.configs import Hop
from labkit.status import MxlbStatus

ORDER = ["srx1", "srx2", "srx3", "srx4"]
BUCKETS = 64
SIDES = ("trust", "untrust")


def member(name: str, carrier: bool = True, routed: bool = True, tlb: bool = False) -> MemberState:
    state = MemberState(name, 0x100 + ORDER.index(name) + 1, carrier={s: carrier for s in SIDES},
                        routed={s: routed for s in SIDES})
    if tlb:
        state.health = ProfileHealth({"icmp": HealthState(2, 2), "tcp": HealthState(2, 2)})
    return state


def core(mode: str = "chash", peers: dict[str, str] | None = None, policy: str = "proportional",
         tlb: bool = False) -> SelectorCore:
    members = {name: member(name, tlb=tlb) for name in ORDER}
    selector = SelectorCore(ORDER, BUCKETS, mode, peers or {}, policy, members)
    selector.table = selector.initial()
    return selector


def steady(selector: SelectorCore, now: float = 100.0) -> None:
    """Routes came at 0 and have been quiet since: the gate opens."""
    selector.routes_seen(0.0)
    assert selector.routes_decide(now)


def report(name: str, up: bool, probes: int, ok_streak: int,
           profiles: tuple[str, ...] = ("icmp", "tcp")) -> dict[str, Any]:
    return {"at": 5.0, "members": {name: {"profiles": {p: {
        "up": up, "last_result": "ok" if up else "timeout", "probes": probes, "last_change": 1.0,
        "fail_streak": 0 if up else 2, "ok_streak": ok_streak} for p in profiles}}}}


# ------------------------------------------------------------ MemberState
def test_a_member_needs_carrier_on_every_side() -> None:
    state = member("srx1")
    assert state.alive() and state.alive(True)
    state.carrier["untrust"] = False
    assert not state.alive() and not state.alive(True)
    assert not MemberState("srx1", 0x101).alive(), "no side seen yet: not alive"


def test_routes_decide_only_once_the_gate_is_open() -> None:
    state = member("srx1")
    state.in_ecmp = False
    assert state.alive(False), "before the gate, carrier alone decides"
    assert not state.alive(True)


def test_a_lost_carrier_takes_the_member_out_of_ecmp_until_routes_hold_again() -> None:
    state = member("srx1")
    state.lost_carrier(50.0)
    assert not state.in_ecmp and state.changed_at == 50.0
    assert state.hold_down(50.5), "routed, but not for ROUTE_HOLD_S yet"
    assert not state.in_ecmp
    assert not state.hold_down(50.0 + ROUTE_HOLD_S)
    assert state.in_ecmp


def test_hold_down_follows_a_withdrawal_only_after_it_held() -> None:
    state = member("srx1")
    state.set_routed("trust", False, 10.0)
    assert state.changed_at == 10.0 and not state.routed_everywhere
    assert state.hold_down(10.0 + ROUTE_HOLD_S / 2) and state.in_ecmp
    # back before the hold-down expired: nothing to follow, nothing pending
    state.set_routed("trust", True, 10.0 + ROUTE_HOLD_S / 2)
    assert not state.hold_down(10.0 + ROUTE_HOLD_S * 2) and state.in_ecmp


def test_set_routed_restarts_the_hold_down_only_on_a_flip() -> None:
    state = member("srx1")
    state.set_routed("trust", True, 10.0)
    assert state.changed_at == 0.0
    state.set_routed("untrust", False, 11.0)
    assert state.changed_at == 11.0
    state.set_routed("trust", False, 12.0)  # still not routed everywhere: no flip
    assert state.changed_at == 11.0


def test_tlb_member_follows_health_and_must_prove_itself_after_a_carrier_loss() -> None:
    state = member("srx1", tlb=True)
    assert state.alive()
    assert state.health is not None
    state.health.states["icmp"].probes = 10
    state.lost_carrier(1.0)
    assert state.proving == {"icmp": 10, "tcp": 0}
    assert not state.health.up and not state.alive()
    # the monitor says up again, but with probes from before the loss: not proven
    for s in state.health.states.values():
        s.up, s.ok_streak = True, 5
    state.health.states["icmp"].probes = 11
    state.health.states["tcp"].probes = 1
    assert not state.proven() and not state.alive()
    state.health.states["icmp"].probes = 12
    state.health.states["tcp"].probes = 2
    assert state.proven() and state.alive()


def test_must_prove_forces_a_tlb_member_down_and_leaves_ecmp_members_alone() -> None:
    tlb, ecmp = member("srx1", tlb=True), member("srx2")
    tlb.must_prove("why")
    ecmp.must_prove("why")
    assert tlb.proving == {"icmp": 0, "tcp": 0}
    assert tlb.health is not None and tlb.health.last_result == "icmp: why; tcp: why"
    assert ecmp.proving is None and ecmp.alive()


# ------------------------------------------------------------ the route gate
def test_the_gate_stays_closed_until_a_route_came() -> None:
    selector = core()
    assert not selector.routes_decide(1000.0)


def test_the_gate_opens_once_routes_are_quiet() -> None:
    selector = core()
    selector.routes_seen(10.0)
    assert selector.first_routed_at == 10.0
    selector.route_event(11.0)
    assert not selector.routes_decide(11.0 + ROUTE_QUIET_S / 2)
    assert selector.routes_decide(11.0 + ROUTE_QUIET_S)
    selector.route_event(20.0)
    assert selector.routes_decide(20.0), "once open it stays open"


def test_the_gate_opens_after_the_settle_time_even_while_routes_churn() -> None:
    selector = core()
    selector.routes_seen(10.0)
    selector.route_event(10.0 + ROUTE_SETTLE_S - 0.1)
    assert not selector.routes_decide(10.0 + ROUTE_SETTLE_S - 0.1)
    selector.route_event(10.0 + ROUTE_SETTLE_S)
    assert selector.routes_decide(10.0 + ROUTE_SETTLE_S)


def test_routes_seen_marks_members_routed_everywhere() -> None:
    selector = core()
    selector.members["srx2"].routed["untrust"] = False
    selector.routes_seen(3.0)
    assert [n for n, s in selector.members.items() if s.seen] == ["srx1", "srx3", "srx4"]


def test_before_the_gate_a_withdrawn_route_does_not_take_a_member_out() -> None:
    selector = core()
    selector.members["srx2"].routed["trust"] = False
    assert selector.desired(1.0) == selector.table
    assert not selector.members["srx2"].in_ecmp, "remembered as out of the ECMP set"


def test_before_the_gate_a_member_back_from_a_carrier_loss_waits_for_its_routes() -> None:
    """Start-up, the gate still closed (routes churning): an SRX whose link flapped is not re-added on
    carrier alone (its BGP sessions are down; the gate opening would take it out again), but once its
    next hop is back and has held ROUTE_HOLD_S."""
    selector = core()
    selector.routes_seen(0.0)
    srx2 = selector.members["srx2"]
    srx2.carrier["trust"] = False
    srx2.lost_carrier(1.0)
    assert set(selector.desired(1.0).members()) == {"srx1", "srx3", "srx4"}
    selector.commit(selector.desired(1.0), "carrier lost", 1.0)
    # BGP withdraws its next hop, the link comes back, routes still churning: the gate stays closed
    srx2.set_routed("untrust", False, 1.2)
    srx2.carrier["trust"] = True
    for now in (1.5, 2.0, 2.5):
        selector.route_event(now)
        assert not selector.routes_decide(now)
        assert "srx2" not in selector.desired(now).members(), "carrier alone does not bring it back"
    # its sessions are back: routed again, held down before it is re-added
    srx2.set_routed("untrust", True, 3.0)
    selector.route_event(3.0)
    assert "srx2" not in selector.desired(3.0 + ROUTE_HOLD_S / 2).members() and selector.pending_hold
    back = selector.desired(3.0 + ROUTE_HOLD_S)
    assert set(back.members()) == set(ORDER) and not srx2.rerouting
    selector.commit(back, "routes back", 4.0)
    # the gate opening later changes nothing
    assert selector.routes_decide(3.0 + ROUTE_SETTLE_S) and selector.desired(3.0 + ROUTE_SETTLE_S) == back


def test_before_the_gate_a_carrier_blip_shorter_than_bgp_returns_after_the_hold_down() -> None:
    selector = core()
    selector.routes_seen(0.0)
    srx4 = selector.members["srx4"]
    srx4.carrier["untrust"] = False
    srx4.lost_carrier(1.0)
    assert "srx4" not in selector.desired(1.0).members()
    srx4.carrier["untrust"] = True  # its routes never left
    assert "srx4" not in selector.desired(1.2).members()
    assert "srx4" in selector.desired(1.0 + ROUTE_HOLD_S).members()


# ------------------------------------------------------------ the table
def test_a_failed_member_moves_only_its_buckets() -> None:
    selector = core()
    steady(selector)
    before = selector.table
    selector.members["srx3"].lost_carrier(100.0)
    selector.members["srx3"].carrier["trust"] = False
    after = selector.desired(100.0)
    assert "srx3" not in after.members() and after.n_buckets == BUCKETS
    assert all(a == b for a, b in zip(before.buckets, after.buckets, strict=True) if a != "srx3")


def test_a_withdrawal_moves_buckets_only_after_the_hold_down() -> None:
    selector = core()
    steady(selector)
    selector.members["srx2"].set_routed("trust", False, 100.0)
    assert selector.desired(100.0 + ROUTE_HOLD_S / 2) == selector.table and selector.pending_hold
    after = selector.desired(100.0 + ROUTE_HOLD_S)
    assert "srx2" not in after.members() and not selector.pending_hold


def test_plain_ecmp_recomputes_the_table() -> None:
    selector = core(mode="ecmp")
    steady(selector)
    selector.members["srx1"].carrier["trust"] = False
    assert selector.desired(100.0) == plain_ecmp(["srx2", "srx3", "srx4"], BUCKETS)
    for state in selector.members.values():
        state.carrier["trust"] = False
    assert selector.desired(100.0) == SelectorTable()


def test_with_no_member_alive_the_table_is_empty() -> None:
    selector = core()
    for state in selector.members.values():
        state.carrier["untrust"] = False
    assert selector.desired(1.0) == SelectorTable()


def test_an_mnha_peer_takes_over_before_bgp_and_keeps_it_for_the_grace_time() -> None:
    selector = core(peers={"srx1": "srx2", "srx2": "srx1"})
    steady(selector)
    # srx2 is the SRG1 backup: its prepended path is not in the ECMP route, so it holds no buckets
    selector.members["srx2"].in_ecmp = False
    selector.members["srx2"].routed = {s: False for s in SIDES}
    selector.table = build_initial(["srx1", "srx3", "srx4"], BUCKETS)
    selector.members["srx1"].lost_carrier(100.0)
    selector.members["srx1"].carrier["trust"] = False
    took = selector.desired(100.0)
    assert took.share("srx2") == selector.table.share("srx1") and "srx1" not in took.members()
    assert selector.takeover_until == {"srx2": 100.0 + TAKEOVER_GRACE_S}
    selector.commit(took, "failover", 1.0)
    # within the grace its routes are still missing: it keeps the buckets
    assert selector.desired(100.0 + TAKEOVER_GRACE_S - 0.1) == took
    # after the grace without routes it is out
    assert "srx2" not in selector.desired(100.0 + TAKEOVER_GRACE_S + 0.1).members()
    assert selector.takeover_until == {}


def test_a_takeover_ends_when_the_peer_loses_carrier() -> None:
    selector = core(peers={"srx1": "srx2", "srx2": "srx1"})
    steady(selector)
    selector.takeover_until = {"srx2": 200.0}
    selector.members["srx2"].carrier["trust"] = False
    selector.desired(100.0)
    assert selector.takeover_until == {}


@pytest.mark.parametrize("policy", ["proportional", "keep-buckets"])
def test_a_returning_member_comes_back_by_the_restore_policy(policy: str) -> None:
    selector = core(policy=policy)
    steady(selector)
    initial = selector.table
    selector.members["srx2"].carrier["trust"] = False
    without = selector.desired(100.0)
    selector.commit(without, "srx2 down", 1.0)
    assert selector.left["srx2"] == tuple(b for b, n in enumerate(initial.buckets) if n == "srx2")
    selector.members["srx2"].carrier["trust"] = True
    back = selector.desired(100.0)
    mine = {b for b, n in enumerate(back.buckets) if n == "srx2"}
    if policy == "keep-buckets":
        assert mine == set(selector.left["srx2"])
        assert back == initial
    else:
        assert len(mine) == BUCKETS // 4
        assert all(back.share(n) == BUCKETS // 4 for n in ORDER)


def test_commit_counts_changes_and_keeps_a_bounded_history() -> None:
    selector = core()
    for i in range(25):
        selector.commit(selector.table, f"change {i}", float(i))
    assert selector.changes == 25 and len(selector.history) == 20
    assert selector.history[-1] == {"at": 24.0, "reason": "change 24", "members": ORDER}
    selector.note("srx1 trust via srx2", 30.0)
    assert selector.history[-1]["reason"] == "srx1 trust via srx2" and selector.changes == 25


# ------------------------------------------------------------ adopting the programmed map
def test_adopt_takes_a_consistent_map_and_makes_missing_members_prove_themselves() -> None:
    selector = core(tlb=True)
    programmed = build_initial(["srx1", "srx2", "srx3"], BUCKETS)
    selector.routes_seen(0.0)
    assert selector.adopt([programmed, programmed])
    assert selector.table == programmed and selector.gate_open
    srx4 = selector.members["srx4"]
    assert srx4.seen and srx4.proving is not None and not srx4.alive()
    assert selector.members["srx1"].proving is None


def test_adopt_without_routes_leaves_the_gate_closed() -> None:
    selector = core()
    assert selector.adopt([SelectorTable(), SelectorTable()])
    assert not selector.gate_open and selector.table == SelectorTable()


@pytest.mark.parametrize("tables", [[], [None], [build_initial(ORDER, BUCKETS), build_initial(ORDER[:3], BUCKETS)]])
def test_adopt_refuses_a_missing_or_inconsistent_map(tables: list[SelectorTable | None]) -> None:
    selector = core()
    before = selector.table
    assert not selector.adopt(tables)
    assert selector.table == before


# ------------------------------------------------------------ health reports
def test_health_reports_are_taken_and_changes_reported() -> None:
    selector = core(tlb=True)
    assert selector.health_report(report("srx1", False, 4, 0)) == ["srx1 health down: icmp: timeout; tcp: timeout"]
    assert selector.health_reports == 1 and selector.health_report_at == 5.0
    assert not selector.members["srx1"].alive()
    assert selector.health_report(report("srx1", False, 5, 0)) == []
    assert selector.health_report(report("srx1", True, 7, 2)) == ["srx1 health up: icmp: ok; tcp: ok"]


def probe(up: bool, sent: float, change: float, fail_streak: int) -> dict[str, Any]:
    """A report of srx1 whose two profiles read UP, the last probe sent at SENT (wall clock)."""
    return {"at": sent + 1, "members": {"srx1": {"profiles": {p: {
        "up": up, "last_result": "ok" if up else "timeout", "probes": 9, "last_change": change,
        "fail_streak": fail_streak, "ok_streak": 0 if fail_streak else 1, "last_sent": sent}
        for p in ("icmp", "tcp")}}}}


def test_a_probe_lost_to_the_mx_s_own_path_move_is_not_counted() -> None:
    """A probe sent before the MX pointed the real-service at the pair's other SRX (link of the first
    went down) failed: the member stays in. A probe sent after the move decides as usual."""
    selector = core(tlb=True)
    srx1 = selector.members["srx1"]
    srx1.path_moved_at = 100.0
    assert selector.health_report(probe(False, sent=99.5, change=100.5, fail_streak=2)) == []
    assert srx1.alive() and "not counted" in srx1.health.last_result  # type: ignore[union-attr]
    # the next probe went the new way and passed: the monitor still says down (it needs its
    # recoveries), but nothing failed since the move
    assert selector.health_report(probe(False, sent=101.0, change=100.5, fail_streak=0)) == []
    assert srx1.alive()
    # a probe sent after the move fails: now it counts
    assert selector.health_report(probe(False, sent=102.0, change=100.5, fail_streak=1)) == \
        ["srx1 health down: icmp: timeout; tcp: timeout"]
    assert not srx1.alive()


def test_a_down_member_is_not_brought_up_by_a_path_move() -> None:
    selector = core(tlb=True)
    srx1 = selector.members["srx1"]
    selector.health_report(probe(False, sent=50.0, change=50.5, fail_streak=2))
    assert not srx1.alive()
    srx1.path_moved_at = 100.0  # while it was down: a probe sent before it is no reason to count it up
    assert selector.health_report(probe(False, sent=99.5, change=50.5, fail_streak=3)) == []
    assert not srx1.alive()


def test_a_failure_sent_after_the_move_counts_at_once() -> None:
    selector = core(tlb=True)
    selector.members["srx1"].path_moved_at = 100.0
    assert selector.health_report(probe(False, sent=100.2, change=101.0, fail_streak=2)) == \
        ["srx1 health down: icmp: timeout; tcp: timeout"]


def test_a_carrier_loss_ends_a_void_down() -> None:
    selector = core(tlb=True)
    srx1 = selector.members["srx1"]
    srx1.path_moved_at = 100.0
    selector.health_report(probe(False, sent=99.5, change=100.5, fail_streak=2))
    assert srx1.alive()
    srx1.lost_carrier(101.0)
    assert not srx1.voided
    srx1.carrier = {s: True for s in SIDES}
    selector.health_report(probe(False, sent=101.5, change=100.5, fail_streak=0))
    assert not srx1.alive()  # it must prove itself after the carrier loss, as always


def test_health_reports_ignore_unknown_members_and_profiles() -> None:
    selector = core(tlb=True)
    assert selector.health_report(report("srx9", False, 1, 0)) == []
    assert selector.health_report(report("srx1", False, 1, 0, profiles=("http",))) == []
    assert selector.members["srx1"].alive()
    ecmp = core()
    assert ecmp.health_report(report("srx1", False, 1, 0)) == [] and ecmp.members["srx1"].alive()


# ------------------------------------------------------------ the nft map
MARKS = {name: 0x100 + i + 1 for i, name in enumerate(ORDER)}


def test_map_commands_rewrite_only_the_moved_buckets() -> None:
    old = SelectorTable(("srx1", "srx2", "srx1", "srx2"))
    new = SelectorTable(("srx1", "srx3", "srx1", "srx2"))
    assert map_commands(old, new, MARKS) == \
        "delete element ip mxlb sel { 1 }; add element ip mxlb sel { 1 : 259 }"
    assert map_commands(old, old, MARKS) == ""


def test_map_commands_fill_or_flush_the_whole_map() -> None:
    new = SelectorTable(("srx1", "srx2"))
    assert map_commands(SelectorTable(), new, MARKS) == \
        "flush map ip mxlb sel; add element ip mxlb sel { 0 : 257, 1 : 258 }"
    assert map_commands(SelectorTable(("srx1",) * 3), new, MARKS).startswith("flush map ip mxlb sel; add")
    assert map_commands(new, SelectorTable(), MARKS) == "flush map ip mxlb sel"


def test_read_map_gives_back_what_map_commands_wrote() -> None:
    names = {mark: name for name, mark in MARKS.items()}
    table = build_initial(ORDER, 8)
    assert read_map([(b, MARKS[n]) for b, n in enumerate(table.buckets)], 8, names) == table
    assert read_map([], 8, names) == SelectorTable()


@pytest.mark.parametrize("elements", [
    [(b, 257) for b in range(7)],  # a bucket missing
    [(b, 257) for b in range(9)],  # another bucket count
    [(b, 0x1ff if b == 3 else 257) for b in range(8)],  # a mark of no member
])
def test_read_map_refuses_a_map_that_is_not_ours(elements: list[tuple[int, int]]) -> None:
    assert read_map(elements, 8, {mark: name for name, mark in MARKS.items()}) is None


# ------------------------------------------------------------ TLB pair: which SRX carries it
HOPS = [Hop(node="srx1", dev="ae1", nexthop="10.0.0.1"), Hop(node="srx2", dev="ae2", nexthop="10.0.0.3")]


def test_pick_hop_prefers_the_srx_bgp_routes_through() -> None:
    up = {"ae1": True, "ae2": True}
    assert pick_hop(HOPS, up, {"10.0.0.3"}, {"srx2"}) == HOPS[1]
    assert pick_hop(HOPS, up, {"10.0.0.1", "10.0.0.3"}, {"srx1", "srx2"}) == HOPS[0]
    assert pick_hop(HOPS, up, {"10.0.0.1", "10.0.0.3"}, {"srx2"}, current="10.0.0.1") == HOPS[1]


def test_a_lost_link_moves_the_pair_at_once_before_bgp() -> None:
    """srx1 carried the pair; its link goes down while BGP's route still points at it: srx2 at once."""
    down = {"ae1": False, "ae2": True}
    assert pick_hop(HOPS, down, {"10.0.0.1"}, set(), current="10.0.0.1") == HOPS[1]
    assert pick_hop(HOPS, {}, {"10.0.0.1"}, set(), current="10.0.0.1") is None


def test_a_pair_powered_on_waits_for_bgp_on_every_side() -> None:
    """A pair that carries nothing (powered on again, its table a blackhole): no SRX until one is
    routed on every side, though their links are up and their own loopbacks would answer probes."""
    up = {"ae1": True, "ae2": True}
    assert pick_hop(HOPS, up, set(), None) is None
    assert pick_hop(HOPS, up, set(), set()) is None
    assert pick_hop(HOPS, up, {"10.0.0.1"}, set()) is None, "routed on this side only"
    assert pick_hop(HOPS, up, {"10.0.0.1"}, {"srx1"}) == HOPS[0]


def test_a_pair_returns_to_the_node_routed_on_both_sides() -> None:
    """srx1's links came back: its trust session is up (in the trust route), its untrust one not yet.
    The pair stays on srx2 both ways until srx1 is in the route on both sides, then returns."""
    sides = {"trust": HOPS, "untrust": [Hop(node="srx1", dev="ae11", nexthop="10.1.0.1"),
                                       Hop(node="srx2", dev="ae12", nexthop="10.1.0.3")]}
    up = {"trust": {"ae1": True, "ae2": True}, "untrust": {"ae11": True, "ae12": True}}
    routes = {"trust": {"P": {"10.0.0.1", "10.0.0.3"}}, "untrust": {"P": {"10.1.0.3"}}}
    both = routed_everywhere("P", sides, up, routes)
    assert both == {"srx2"}
    assert pick_hop(sides["trust"], up["trust"], routes["trust"]["P"], both).node == "srx2"  # type: ignore[union-attr]
    assert pick_hop(sides["untrust"], up["untrust"], routes["untrust"]["P"], both).node == "srx2"  # type: ignore[union-attr]
    routes["untrust"]["P"].add("10.1.0.1")
    both = routed_everywhere("P", sides, up, routes)
    assert both == {"srx1", "srx2"}
    assert pick_hop(sides["trust"], up["trust"], routes["trust"]["P"], both).node == "srx1"  # type: ignore[union-attr]
    # a link down on one side takes the node out on both
    up["untrust"]["ae11"] = False
    both = routed_everywhere("P", sides, up, routes)
    assert pick_hop(sides["trust"], up["trust"], routes["trust"]["P"], both).node == "srx2"  # type: ignore[union-attr]
    assert routed_everywhere("P", sides, up, {"trust": {}, "untrust": {}}) is None, "no route yet: no preference"


def test_a_pair_stays_on_its_b_node_until_the_a_node_is_routed_both_ways() -> None:
    """The A/B prepends: each side's route holds the best path only. srx1 (A) comes back; its trust
    session is up first, so the trust route is via srx1 while the untrust one is still via srx2 (B).
    The pair stays on srx2 on both sides (srx1 has no route to the servers yet) until srx1 is in the
    untrust route too; a side whose hop in use lost its link moves at once."""
    sides = {"trust": HOPS, "untrust": [Hop(node="srx1", dev="ae11", nexthop="10.1.0.1"),
                                       Hop(node="srx2", dev="ae12", nexthop="10.1.0.3")]}
    up = {"trust": {"ae1": True, "ae2": True}, "untrust": {"ae11": True, "ae12": True}}
    routes = {"trust": {"P": {"10.0.0.1"}}, "untrust": {"P": {"10.1.0.3"}}}
    both = routed_everywhere("P", sides, up, routes)
    assert both == set()
    trust = pick_hop(sides["trust"], up["trust"], routes["trust"]["P"], both, current="10.0.0.3")
    untrust = pick_hop(sides["untrust"], up["untrust"], routes["untrust"]["P"], both, current="10.1.0.3")
    assert (trust.node, untrust.node) == ("srx2", "srx2")  # type: ignore[union-attr]
    routes["untrust"]["P"] = {"10.1.0.1"}
    both = routed_everywhere("P", sides, up, routes)
    assert both == {"srx1"}
    trust = pick_hop(sides["trust"], up["trust"], routes["trust"]["P"], both, current="10.0.0.3")
    untrust = pick_hop(sides["untrust"], up["untrust"], routes["untrust"]["P"], both, current="10.1.0.3")
    assert (trust.node, untrust.node) == ("srx1", "srx1")  # type: ignore[union-attr]
    # sides disagree and the hop in use has no link: the routed node of this side, not a dead link
    up["trust"]["ae2"] = False
    routes["untrust"]["P"] = {"10.1.0.3"}
    both = routed_everywhere("P", sides, up, routes)
    assert pick_hop(sides["trust"], up["trust"], routes["trust"]["P"], both, current="10.0.0.3").node == "srx1"  # type: ignore[union-attr]


# ------------------------------------------------------------ members arriving one by one, and `lab up`
def test_srxs_routed_after_the_gate_opened_join_the_table_late_and_lab_up_waits_for_them() -> None:
    """Start-up with one SRX's BGP much earlier than the others' (a slow machine): the gate opens on
    quiet routes with only srx4 routed, the table shrinks to srx4; the others' routes arrive and are
    held down ROUTE_HOLD_S. Until they are in the table, the readiness `lab up` waits for says no
    (it once said yes as soon as the selector had written a status: the first flows all went to srx4)."""
    members = {name: member(name, routed=False) for name in ORDER}
    selector = SelectorCore(ORDER, BUCKETS, "chash", {}, "proportional", members)
    selector.table = selector.initial()  # the ruleset's map: every SRX, by carrier

    def status() -> MxlbStatus:
        members = [mxlb_member(**m) for m in selector.members_status()]
        return MxlbStatus.model_validate(mxlb_status(members, settling=selector.settling()))

    def settle(now: float) -> None:
        wanted = selector.desired(now)
        if wanted != selector.table:
            selector.commit(wanted, "test", now)

    members["srx4"].set_routed("trust", True, 1.0)
    members["srx4"].set_routed("untrust", True, 1.0)
    selector.route_event(1.0)
    selector.routes_seen(1.0)
    settle(1.5)
    assert list(selector.table.members()) == ORDER, "gate closed: carrier decides"
    assert readiness.selector_pending("mx1", status(), {}) != [], "srx1-3 have no BGP route yet"

    settle(1.0 + ROUTE_QUIET_S + 0.1)  # quiet routes: the gate opens with srx4 alone routed
    assert selector.gate_open and list(selector.table.members()) == ["srx4"]

    arrival = 1.0 + ROUTE_QUIET_S + 0.5
    for i, name in enumerate(("srx1", "srx2", "srx3")):  # one by one
        for side in SIDES:
            members[name].set_routed(side, True, arrival + i * 0.1)
        selector.route_event(arrival + i * 0.1)
        settle(arrival + i * 0.1)
        assert list(selector.table.members()) == ["srx4"], "held down"
        assert selector.settling()
        pending = readiness.selector_pending("mx1", status(), {})
        assert f"mx1: {name} routed but not in the selector's table yet" in pending

    settle(arrival + 0.2 + ROUTE_HOLD_S + 0.01)
    assert sorted(selector.table.members()) == ORDER
    settle(arrival + 0.2 + ROUTE_HOLD_S + 0.02)  # the hold-down cleared by this pass
    assert not selector.settling()
    assert readiness.selector_pending("mx1", status(), {}) == []
