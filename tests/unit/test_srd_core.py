"""SRD mastership: election, failure, CLI switchover (both directions), preemption."""

from __future__ import annotations

from dataplane.mnha import PeerView, Role
from dataplane.srd import Mastership


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
