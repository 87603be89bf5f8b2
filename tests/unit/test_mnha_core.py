"""MNHA SRG1 election and split-brain rule, and the heartbeat codec (pure)."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataplane.core.mnha import HeartbeatError, PeerView, Role, Srg1, decode_heartbeat, encode_heartbeat

GONE = PeerView(alive=False)


def pair(preempt: bool = True) -> tuple[Srg1, Srg1]:
    return Srg1("srx1", "srx2", 200, preempt), Srg1("srx2", "srx1", 100, preempt)


def view(node: Srg1) -> PeerView:
    return PeerView(True, node.role, node.priority, node.role is not Role.INELIGIBLE)


def converge(a: Srg1, b: Srg1, healthy_a: bool = True, healthy_b: bool = True, icl: bool = True,
             seen: bool = True) -> None:
    for _ in range(4):
        a.decide(healthy_a, view(b) if icl else GONE, seen)
        b.decide(healthy_b, view(a) if icl else GONE, seen)


def test_higher_priority_becomes_active_the_other_backup() -> None:
    a, b = pair()
    converge(a, b)
    assert (a.role, b.role) == (Role.ACTIVE, Role.BACKUP)


def test_equal_priority_tie_goes_to_the_lower_name() -> None:
    a, b = Srg1("srx1", "srx2", 100), Srg1("srx2", "srx1", 100)
    converge(a, b)
    assert (a.role, b.role) == (Role.ACTIVE, Role.BACKUP)


def test_active_power_off_makes_the_backup_active() -> None:
    a, b = pair()
    converge(a, b)
    b.decide(True, GONE, peer_seen_in_network=False)
    assert b.role is Role.ACTIVE


def test_monitored_interface_down_makes_ineligible_and_peer_takes_over() -> None:
    a, b = pair()
    converge(a, b)
    converge(a, b, healthy_a=False)
    assert (a.role, b.role) == (Role.INELIGIBLE, Role.ACTIVE)


def test_preemption_returns_mastership_to_the_higher_priority() -> None:
    a, b = pair(preempt=True)
    converge(a, b)
    converge(a, b, healthy_a=False)
    converge(a, b)
    assert (a.role, b.role) == (Role.ACTIVE, Role.BACKUP)


def test_without_preemption_the_new_active_keeps_it() -> None:
    a, b = pair(preempt=False)
    converge(a, b)
    converge(a, b, healthy_a=False)
    converge(a, b)
    assert (a.role, b.role) == (Role.BACKUP, Role.ACTIVE)


def test_split_brain_icl_down_but_peer_seen_never_two_actives() -> None:
    a, b = pair()
    converge(a, b)
    for _ in range(10):
        converge(a, b, icl=False, seen=True)
        assert [a.role, b.role].count(Role.ACTIVE) == 1
    assert (a.role, b.role) == (Role.ACTIVE, Role.BACKUP), "roles are kept"


def test_split_brain_at_start_priority_decides() -> None:
    a, b = pair()
    converge(a, b, icl=False, seen=True)
    assert (a.role, b.role) == (Role.ACTIVE, Role.BACKUP)


def test_icl_comes_back_after_split_brain_with_both_active_resolves() -> None:
    a, b = pair()
    a.role, b.role = Role.ACTIVE, Role.ACTIVE  # e.g. each saw the other vanish, then ICL and routes came back
    converge(a, b)
    assert (a.role, b.role) == (Role.ACTIVE, Role.BACKUP)


def test_transitions_are_recorded_with_reasons() -> None:
    a, b = pair()
    converge(a, b)
    assert a.transitions[-1][1] is Role.ACTIVE and a.transitions[-1][2]


@given(st.lists(st.tuples(st.booleans(), st.booleans(), st.booleans(), st.booleans()), max_size=30))
@settings(max_examples=300, derandomize=True)
def test_never_two_actives_while_both_are_healthy_and_see_each_other(steps: list[tuple[bool, ...]]) -> None:
    a, b = pair()
    for healthy_a, healthy_b, icl, seen in steps:
        converge(a, b, healthy_a, healthy_b, icl, seen or icl)
        if icl:
            assert [a.role, b.role].count(Role.ACTIVE) <= 1
        if healthy_a and healthy_b and icl:
            assert sorted([a.role, b.role]) == sorted([Role.ACTIVE, Role.BACKUP])


def test_heartbeat_round_trip() -> None:
    data = encode_heartbeat("srx1", Role.BACKUP, 150, True, 77)
    assert decode_heartbeat(data) == ("srx1", Role.BACKUP, 150, True, 77)


TRUNCATED = encode_heartbeat("a", Role.ACTIVE, 1, True, 1)[:-1]


@pytest.mark.parametrize("junk", [b"", b"MNHA", b"XXXX" + bytes(12), TRUNCATED])
def test_heartbeat_rejects_malformed(junk: bytes) -> None:
    with pytest.raises(HeartbeatError):
        decode_heartbeat(junk)


@given(st.binary(max_size=64))
@settings(max_examples=500, derandomize=True)
def test_heartbeat_decoder_never_crashes(data: bytes) -> None:
    with contextlib.suppress(HeartbeatError):
        decode_heartbeat(data)


def test_session_sync_cold_pushes_then_a_refresh_per_period_while_the_peer_is_heard() -> None:
    from dataplane.core.mnha import SessionSync

    sync = SessionSync(cold=(0.2, 2.0), refresh=10.0)
    assert sync.tick(0.0, False) is None
    ticks = {round(t * 0.1, 1): sync.tick(round(t * 0.1, 1), True) for t in range(5, 400)}  # 0.5 .. 39.9 s
    pushes = [(t, kind) for t, kind in ticks.items() if kind]
    # heard at 0.5: cold at 0.7 and 2.5, then refreshes 10 s apart from the last cold push; no flush
    assert pushes == [(0.7, "cold"), (2.5, "cold"), (12.5, "refresh"), (22.5, "refresh"), (32.5, "refresh")]


def test_session_sync_flushes_between_refreshes_and_a_refresh_counts_as_one() -> None:
    from dataplane.core.mnha import SessionSync

    sync = SessionSync(cold=(0.0,), refresh=30.0, flush=10.0)
    ticks = {t: sync.tick(float(t), True) for t in range(0, 95)}
    assert [(t, k) for t, k in ticks.items() if k] == [
        (0, "cold"), (10, "flush"), (20, "flush"), (30, "refresh"), (40, "flush"), (50, "flush"),
        (60, "refresh"), (70, "flush"), (80, "flush"), (90, "refresh")]


def test_session_sync_stops_while_the_peer_is_away_and_starts_over_when_it_returns() -> None:
    from dataplane.core.mnha import SessionSync

    sync = SessionSync(cold=(0.5,), refresh=10.0, flush=4.0)
    assert sync.tick(1.0, True) is None and sync.tick(1.5, True) == "cold"
    assert sync.tick(5.5, True) == "flush"
    assert sync.tick(8.0, False) is None  # gone: nothing for a peer that does not answer
    assert all(sync.tick(t, False) is None for t in (20.0, 30.0, 40.0))
    assert sync.tick(41.0, True) is None and sync.tick(41.5, True) == "cold"  # back: a cold sync first
    assert sync.tick(45.4, True) is None and sync.tick(45.5, True) == "flush"
    assert sync.tick(51.5, True) == "refresh"


def test_session_sync_keeps_its_beat_after_a_late_tick_and_zero_periods_disable() -> None:
    from dataplane.core.mnha import SessionSync

    sync = SessionSync(cold=(), refresh=10.0)
    assert sync.tick(0.0, True) is None
    assert sync.tick(35.0, True) == "refresh"  # late (a busy machine): one push, not three
    assert sync.tick(39.9, True) is None and sync.tick(40.0, True) == "refresh"
    off = SessionSync(cold=(0.0,), refresh=0.0, flush=0.0)
    assert off.tick(0.0, True) == "cold"
    assert all(off.tick(t, True) is None for t in (10.0, 100.0, 1000.0))


def test_session_sync_without_cold_pushes_for_a_peer_found_at_start() -> None:
    from dataplane.core.mnha import SessionSync

    sync = SessionSync(cold=(0.2, 2.0), refresh=10.0, flush=4.0)
    kinds = [sync.tick(t / 10, True, cold=False) for t in range(0, 125)]
    assert "cold" not in kinds and kinds.count("refresh") == 1 and kinds.count("flush") >= 1
    assert sync.tick(20.0, False) is None
    back = [sync.tick(30.0 + t / 10, True) for t in range(0, 25)]
    assert back.count("cold") == 2, "a peer that comes back later gets its cold pushes"
