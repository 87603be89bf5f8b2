"""Topology 4 as the JVD runs it: two MXs forwarding at once under TLB, no SRD (the design guide: SRD "is not
needed with Traffic Load Balancer"); SRD stays a named option a user adds with `srd:` (pure, no root)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab_orchestrator.events import catalog as eventsmod
from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod

REPO = Path(__file__).resolve().parents[2]
DUAL_MX_TLB = ["topology4", "topology4-cgnat", "topology4-srg1"]
SRD_EVENTS = {"srd-switchover", "srd-link-failure"}


def _plan(file: Path) -> dict[str, object]:
    plan: dict[str, object] = json.loads(planmod.build(load_topology(file).topology).to_json())
    return plan


def _applicable(plan: dict[str, object]) -> dict[str, eventsmod.Applicability]:
    return {a.event.name: a for a in eventsmod.applicable(plan)}


def _with_srd(tmp_path: Path, name: str) -> Path:
    """The shipped lab with SRD added as docs/topology.md says: the inter-MX link and the `srd:` pair."""
    text = (REPO / f"labs/{name}.yml").read_text()
    text = text.replace("\nmnha:\n", "\n  - {endpoints: [mx1:ge-0/0/9, mx2:ge-0/0/9], zone: icl}\n\nmnha:\n", 1)
    path = tmp_path / f"{name}-srd.yml"
    path.write_text(text + "\nsrd: {nodes: [mx1, mx2], master: mx1}\n")
    return path


@pytest.mark.parametrize("name", DUAL_MX_TLB)
def test_shipped_topology4_runs_both_mxs_without_srd(name: str) -> None:
    topo = load_topology(REPO / f"labs/{name}.yml").topology
    assert topo.srd is None and topo.services.load_balancing == "tlb"
    plan = _plan(REPO / f"labs/{name}.yml")
    processes = plan["processes"]
    assert isinstance(processes, list)
    assert not [p for p in processes if p["name"] == "srdd"]
    assert {p["node"] for p in processes if p["name"] == "mxlb"} == {"mx1", "mx2"}, "each MX runs its own TLB"
    verdicts = _applicable(plan)
    for event in SRD_EVENTS:
        assert not verdicts[event].applicable and verdicts[event].reason == "this lab has no srd"
    assert verdicts["restart-tlb-selector"].applicable and verdicts["mx-reboot"].applicable


def test_gateways_peer_both_mxs_and_neither_mx_prepends() -> None:
    plan = planmod.build(load_topology(REPO / "labs/topology4.yml").topology)
    gateway = plan.files["nodes/gw-trust/bird.conf"]
    assert "merge paths on;" in gateway, "the gateway installs equal paths through both MXs as one route"
    assert gateway.count("protocol bgp ") == 2
    for mx in ("mx1", "mx2"):
        for instance in ("trust-vr", "untrust-vr"):
            text = plan.files[f"nodes/{mx}/bird-{instance}.conf"]
            assert "SRD_MASTER" not in text and "bgp_path.prepend" not in text, (mx, instance)


def test_srd_on_topology4_is_an_option_a_user_adds(tmp_path: Path) -> None:
    plan = _plan(_with_srd(tmp_path, "topology4"))
    processes = plan["processes"]
    assert isinstance(processes, list)
    assert {p["node"] for p in processes if p["name"] == "srdd"} == {"mx1", "mx2"}
    verdicts = _applicable(plan)
    assert all(verdicts[event].applicable for event in SRD_EVENTS)


def test_ecmp_dual_mx_keeps_srd() -> None:
    verdicts = _applicable(_plan(REPO / "labs/topology2.yml"))
    assert all(verdicts[event].applicable for event in SRD_EVENTS)
    assert not verdicts["restart-tlb-selector"].applicable
