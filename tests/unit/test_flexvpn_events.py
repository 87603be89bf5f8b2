"""The FlexVPN member power-off event: listed for FlexVPN labs only, aimed at a member by default, and
refused on a router that is not a cluster member now (the master, or a node without the cluster)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from statusdata import clb_status, gateway_status

from lab_orchestrator.events import catalog as events
from lab_orchestrator.events import run as eventrun
from lab_orchestrator.model.diagnostics import LabError
from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod
from lab_orchestrator.runtime import ops

REPO = Path(__file__).resolve().parents[2]
EVENT = "flexvpn-member-power-off"


def _plan(lab: str) -> planmod.LabPlan:
    return planmod.build(load_topology(REPO / "labs" / lab).topology, f"labs/{lab}", "/run/lab", python="python3")


@pytest.mark.parametrize(("lab", "applies"), [("flexvpn.yml", True), ("flexvpn-branch.yml", True),
                                              ("topology1.yml", False), ("topology3.yml", False)])
def test_the_event_applies_to_flexvpn_labs_only(lab: str, applies: bool) -> None:
    verdict = next(a for a in events.applicable(json.loads(_plan(lab).to_json())) if a.event.name == EVENT)
    assert verdict.applicable is applies, verdict.reason
    if not applies:
        assert verdict.reason == "this lab has no flexvpn"


def test_default_target_is_the_lowest_priority_router() -> None:
    assert eventrun.default_target(_plan("flexvpn.yml"), events.BY_NAME[EVENT]) == "router3"


def _state(tmp_path: Path, roles: dict[str, str], down: tuple[str, ...] = ()) -> SimpleNamespace:
    for node, role in roles.items():
        folder = tmp_path / "nodes" / node
        folder.mkdir(parents=True)
        (folder / "ikev2-status.json").write_text(json.dumps(gateway_status(cluster=clb_status(role=role))))
    return SimpleNamespace(state_dir=str(tmp_path), down_nodes=list(down))


def test_members_are_read_from_the_routers_status(tmp_path: Path) -> None:
    plan = _plan("flexvpn.yml")
    state = _state(tmp_path, {"router1": "master", "router2": "slave", "router3": "slave"}, down=("router2",))
    assert ops.flexvpn_members(state, plan) == ["router3"]  # type: ignore[arg-type]


def test_the_master_is_not_powered_off_as_a_member(tmp_path: Path) -> None:
    plan = _plan("flexvpn.yml")
    state = _state(tmp_path, {"router1": "master", "router2": "slave", "router3": "slave"})
    with pytest.raises(LabError, match="router1 is no FlexVPN cluster member now .*members: router2, router3"):
        ops.inject(state, plan, EVENT, "router1")  # type: ignore[arg-type]
