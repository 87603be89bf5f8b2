"""SRXs built but not in service (`in_service: false`): planned like any SRX, listed as spares, and
refused on any other kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab_orchestrator import api
from lab_orchestrator.diagnostics import TopologyInvalid
from lab_orchestrator.eventrun import default_target
from lab_orchestrator.events import CATALOG

REPO = Path(__file__).resolve().parents[2]


def spare_topology(tmp_path: Path, extra: str = "") -> Path:
    text = (REPO / "labs/topology1.yml").read_text()
    spare = "  srx5: {kind: srx, bgp: {as: 65005}, in_service: false}\n"
    srx4 = "  srx4: {kind: srx, bgp: {as: 65004}}\n"
    text = text.replace(srx4, srx4 + spare + extra)
    text = text.replace("  - {endpoints: [mx1:ge-0/2/4, srx4:ge-0/0/1], zone: untrust}\n",
                        "  - {endpoints: [mx1:ge-0/2/4, srx4:ge-0/0/1], zone: untrust}\n"
                        "  - {endpoints: [mx1:ge-0/1/5, srx5:ge-0/0/0], zone: trust}\n"
                        "  - {endpoints: [mx1:ge-0/2/5, srx5:ge-0/0/1], zone: untrust}\n")
    path = tmp_path / "spare.yml"
    path.write_text(text)
    return path


def test_a_spare_srx_is_built_like_the_others_and_listed(tmp_path: Path) -> None:
    plan = api.plan(spare_topology(tmp_path), state_root=str(tmp_path))
    assert plan.spares == ["srx5"]
    assert any(n.name == "srx5" and n.kind == "srx" for n in plan.nodes)
    assert any(s.peer_node == "srx5" or s.node == "srx5" for s in plan.sessions), "its BGP sessions are planned"
    events = {e.name: e for e in CATALOG}
    assert default_target(plan, events["nexthop-add"]) == "srx5", "nexthop-add brings the spare in"
    assert default_target(plan, events["srx-power-off"]) == "srx1"
    assert default_target(plan, events["nexthop-delete"]) == "srx1", "a spare is never the delete target"


def test_only_an_srx_can_be_out_of_service(tmp_path: Path) -> None:
    path = spare_topology(tmp_path)
    path.write_text(path.read_text().replace("server: {kind: host,", "server: {kind: host, in_service: false,"))
    with pytest.raises(TopologyInvalid) as info:
        api.load(path, check_host=False)
    assert any("only an srx can be built out of service" in d.render() for d in info.value.diagnostics)
