"""`lab graph`: the design's columns for scale-out labs, boxes for pairs, interface names as tooltips."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.report import graph

REPO = Path(__file__).resolve().parents[2]


def topo(name: str):  # type: ignore[no-untyped-def]
    return load_topology(REPO / "labs" / f"{name}.yml", []).topology


def test_topology4_columns_follow_the_design() -> None:
    plan = graph.layout(topo("topology4"))
    column = {ident: col for ident, (_, col, _) in plan.nodes.items()}
    assert column["client"] == 0 and column["gw-trust"] == 1
    assert column["mx1__trust"] == column["mx2__trust"] == 2
    assert {column[f"srx{i}"] for i in range(1, 5)} == {3}
    assert column["mx1__untrust"] == column["mx2__untrust"] == 4
    assert column["gw-untrust"] == 5 and column["server"] == 6
    assert plan.boxes["MNHA pair 1 (SRG0)"] == ["srx1", "srx2"]
    assert not [box for box in plan.boxes if box.startswith("SRD")], "topology 4 runs both MXs without SRD"
    assert graph.layout(topo("topology2")).boxes["SRD pair (TRUST-VR)"] == ["mx1__trust", "mx2__trust"]


def test_links_attach_to_the_instance_of_their_zone() -> None:
    plan = graph.layout(topo("topology1"))
    by_tip = {tip: (a, b, zone) for a, b, zone, tip in plan.edges}
    assert by_tip["mx1 ge-0/1/1 - srx1 ge-0/0/0 (trust)"] == ("mx1__trust", "srx1", "trust")
    assert by_tip["mx1 ge-0/2/1 - srx1 ge-0/0/1 (untrust)"] == ("mx1__untrust", "srx1", "untrust")


def test_dot_has_no_end_labels_and_ranks_left_to_right() -> None:
    text = graph.dot(topo("topology4"))
    assert "taillabel" not in text and "headlabel" not in text  # interface names are tooltips only
    assert 'tooltip="mx1 ge-0/3/1 - srx1 ge-0/0/4 (icl)"' in text and "style=dashed" in text
    assert 'subgraph cluster_0 {' in text and 'label="MNHA pair 1 (SRG0)"' in text
    ranks = re.findall(r"\{ rank=same; ([^}]*) \}", text)
    assert ranks[2].split() == ['"mx1__trust"', '"mx2__trust"'] and len(ranks) == 7
    column = {ident: col for ident, (_, col, _) in graph.layout(topo("topology4")).nodes.items()}
    for a, b in re.findall(r'^  "([^"]+)" -- "([^"]+)" \[(?!style=invis)', text, flags=re.M):
        assert column[a] <= column[b], (a, b)  # every link drawn from its left end


@pytest.mark.parametrize("name", ["flexvpn", "topology2-cgnat"])
def test_every_shipped_family_renders(name: str) -> None:
    text = graph.dot(topo(name))
    assert text.startswith("graph ") and text.rstrip().endswith("}")
    assert "[\"" not in graph.mermaid(topo(name)).splitlines()[0]


def test_flexvpn_clients_left_routers_right() -> None:
    plan = graph.layout(topo("flexvpn"))
    column = {ident: col for ident, (_, col, _) in plan.nodes.items()}
    assert column["client1"] == 0 < column["wan"] < column["router1"] == column["router3"]
