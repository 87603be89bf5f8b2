"""The event catalog names its targets by the roles node kinds declare, and shows them by kind name."""

from __future__ import annotations

from lab_orchestrator import kinds
from lab_orchestrator.events import catalog as events


def test_a_role_target_is_shown_and_matched_by_the_kinds_that_declare_it() -> None:
    firewalls = kinds.names(lambda k: k.firewall)
    balancers = kinds.names(lambda k: k.load_balancer)
    assert firewalls and balancers and not firewalls & balancers
    power_off = events.BY_NAME["srx-power-off"]
    assert power_off.target == events.FIREWALL and power_off.node_kinds == firewalls
    assert power_off.target_name == "/".join(sorted(firewalls))
    assert events.BY_NAME["gres"].node_kinds == balancers


def test_other_targets_are_shown_as_they_are_and_match_no_kind() -> None:
    for name, target in (("mnha-pair-power-off", "mnha-pair"), ("daemon-crash", "node"),
                         ("flexvpn-member-power-off", "flexvpn-member")):
        assert events.BY_NAME[name].target_name == target
        assert events.BY_NAME[name].node_kinds == frozenset()


def test_a_role_requirement_is_met_by_a_node_of_a_kind_with_that_role() -> None:
    firewall_kind = sorted(kinds.names(lambda k: k.firewall))[0]
    plan: dict[str, object] = {"nodes": [{"kind": firewall_kind}], "processes": []}
    assert events.features(plan) == {events.FIREWALL}
    verdicts = {a.event.name: a for a in events.applicable(plan)}
    assert verdicts["srx-power-off"].applicable
    balancer_names = "/".join(sorted(kinds.names(lambda k: k.load_balancer)))
    assert verdicts["gres"].reason == f"this lab has no {balancer_names}"
