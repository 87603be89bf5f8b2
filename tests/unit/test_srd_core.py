"""SRD mastership: election, failure, CLI switchover (both directions), preemption."""

from __future__ import annotations

from dataplane.core.mnha import PeerView, Role
from dataplane.core.srd import Mastership


def view(node: Mastership) -> PeerView:
    return PeerView(True, node.role, node.priority, node.role is not Role.INELIGIBLE)


def settle(a: Mastership, b: Mastership, healthy_a: bool = True, alive_b: bool = True) -> None:
    for _ in range(4):
        a.decide(healthy_a, view(b) if alive_b else PeerView(False), alive_b)
        if alive_b:
            b.decide(True, view(a), True)


def pair(preempt: bool = False) -> tuple[Mastership, Mastership]:
    return Mastership("mx1", "mx2", 200, preempt), Mastership("mx2", "mx1", 100, preempt)


def test_configured_master_wins() -> None:
    a, b = pair()
    settle(a, b)
    assert a.master and not b.master


def test_cli_switchover_on_master_moves_mastership_and_it_holds() -> None:
    a, b = pair(preempt=True)
    settle(a, b)
    a.switchover(view(b))
    settle(a, b)
    assert b.master and not a.master, "holds even with preemption on"


def test_cli_switchover_on_standby_acquires() -> None:
    a, b = pair()
    settle(a, b)
    b.switchover(view(a))
    settle(a, b)
    assert b.master and not a.master


def test_switchover_and_back() -> None:
    a, b = pair()
    settle(a, b)
    a.switchover(view(b))
    settle(a, b)
    b.switchover(view(a))
    settle(a, b)
    assert a.master and not b.master


def test_monitored_link_failure_on_master_moves_mastership() -> None:
    a, b = pair()
    settle(a, b)
    settle(a, b, healthy_a=False)
    assert b.master and a.role is Role.INELIGIBLE


def test_master_reboot_without_preemption_stays_with_the_new_master() -> None:
    a, b = pair(preempt=False)
    settle(a, b)
    b.decide(True, PeerView(False), False)  # a powered off
    assert b.master
    a2 = Mastership("mx1", "mx2", 200, False)  # a boots again
    settle(a2, b)
    assert b.master and not a2.master


def test_master_reboot_with_preemption_returns_to_the_configured_master() -> None:
    a, b = pair(preempt=True)
    settle(a, b)
    b.decide(True, PeerView(False), False)
    a2 = Mastership("mx1", "mx2", 200, True)
    settle(a2, b)
    assert a2.master and not b.master


def test_a_failure_both_mxs_see_moves_nothing() -> None:
    """An SRX or a whole MNHA pair powers off: both MXs lose their links to it. Mastership stays
    (both giving it up would spread the gateways' traffic over both MXs)."""
    a, b = pair(preempt=True)
    settle(a, b)
    for _ in range(4):
        a.decide(False, PeerView(True, b.role, b.priority, False), True)
        b.decide(False, PeerView(True, a.role, a.priority, False), True)
    assert a.master and b.role is Role.BACKUP
    assert a.transitions[-1][2] != "a monitored interface is down"
    # the master's links come back a moment before the standby's, or after: nothing moves either
    b.decide(True, PeerView(True, a.role, a.priority, False), True)
    a.decide(False, PeerView(True, b.role, b.priority, True), True)
    assert b.master, "without a hold a healthy peer takes over at once (the daemon holds, below)"


def test_a_change_of_health_settles_before_it_moves_mastership() -> None:
    a = Mastership("mx1", "mx2", 200, True, hold_s=0.5)
    b = Mastership("mx2", "mx1", 100, True, hold_s=0.5)
    for now in (0.0, 0.6, 1.2):
        a.decide(True, view(b), True, now)
        b.decide(True, view(a), True, now)
    assert a.master and not b.master
    # the pair powers off: a sees it at 2.00, b at 2.05, each tells the other at once
    a.decide(False, PeerView(True, b.role, b.priority, True), True, 2.00)
    b.decide(False, PeerView(True, a.role, a.priority, False), True, 2.05)
    for now in (2.06, 2.3, 2.6, 3.0):
        a.decide(False, PeerView(True, b.role, b.priority, False), True, now)
        b.decide(False, PeerView(True, a.role, a.priority, False), True, now)
    assert a.master and b.role is Role.BACKUP
    # links back on both, a heartbeat apart: still nothing moves
    b.decide(True, PeerView(True, a.role, a.priority, False), True, 5.00)
    a.decide(True, PeerView(True, b.role, b.priority, True), True, 5.05)
    for now in (5.1, 5.6, 6.0):
        b.decide(True, view(a), True, now)
        a.decide(True, view(b), True, now)
    assert a.master and b.role is Role.BACKUP
    assert all(role is not Role.INELIGIBLE for _, role, _ in a.transitions + b.transitions)
    # a failure only the master sees (its own link to one SRX): mastership moves once it settled
    a.decide(False, view(b), True, 8.0)
    assert a.master, "held"
    b.decide(True, PeerView(True, a.role, a.priority, False), True, 8.01)
    assert not b.master, "held"
    for now in (8.3, 8.6, 8.7):
        a.decide(False, view(b), True, now)
        b.decide(True, PeerView(True, a.role, a.priority, False), True, now)
    assert b.master and a.role is Role.INELIGIBLE
