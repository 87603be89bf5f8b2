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
