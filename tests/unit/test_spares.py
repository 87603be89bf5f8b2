"""SRXs built but not in service (`in_service: false`): planned like any SRX, listed as spares, and
refused on any other kind."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab_orchestrator import api
from lab_orchestrator.events.catalog import CATALOG
from lab_orchestrator.events.run import default_target
from lab_orchestrator.model.diagnostics import TopologyInvalid

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


def spare_pair_topology(tmp_path: Path, load_balancing: str | None = None, name: str | None = None,
                        half: bool = False) -> Path:
    """topology3 (single MX, two MNHA pairs, TLB per pair) with a third pair srx5/srx6 built but not in
    service; LOAD_BALANCING replaces TLB (e.g. ecmp-chash); HALF: only srx5 is a spare (invalid)."""
    text = (REPO / "labs/topology3.yml").read_text()
    if name:
        text = text.replace("name: t3", f"name: {name}", 1)
    if load_balancing:
        text = text.replace("load_balancing: tlb", f"load_balancing: {load_balancing}", 1)
    srx4 = "  srx4: {kind: srx, bgp: {as: 65004}}\n"
    spare6 = "in_service: true" if half else "in_service: false"
    text = text.replace(srx4, srx4 + "  srx5: {kind: srx, bgp: {as: 65005}, in_service: false}\n"
                        f"  srx6: {{kind: srx, bgp: {{as: 65006}}, {spare6}}}\n")
    last = "  - {endpoints: [mx1:ge-0/2/4, srx4:ge-0/0/1], zone: untrust}\n"
    text = text.replace(last, last + "".join(
        f"  - {{endpoints: [mx1:ge-0/1/{n}, srx{n}:ge-0/0/0], zone: trust}}\n"
        f"  - {{endpoints: [mx1:ge-0/2/{n}, srx{n}:ge-0/0/1], zone: untrust}}\n" for n in (5, 6)))
    icl = "  - {endpoints: [mx1:ge-0/3/4, srx4:ge-0/0/4], zone: icl}\n"
    assert icl in text
    text = text.replace(icl, icl + "".join(f"  - {{endpoints: [mx1:ge-0/3/{n}, srx{n}:ge-0/0/4], zone: icl}}\n"
                                           for n in (5, 6)))
    text = text.replace("  - {nodes: [srx3, srx4]}\n", "  - {nodes: [srx3, srx4]}\n  - {nodes: [srx5, srx6]}\n")
    assert text.count("srx5") >= 5 and text.count("srx6") >= 5
    path = tmp_path / "spare-pair.yml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("load_balancing", [None, "ecmp-chash"])
def test_a_spare_mnha_pair_is_planned_and_added_as_a_pair(tmp_path: Path, load_balancing: str | None) -> None:
    plan = api.plan(spare_pair_topology(tmp_path, load_balancing), state_root=str(tmp_path))
    assert plan.spares == ["srx5", "srx6"]
    assert ["srx5", "srx6"] in plan.mnha
    events = {e.name: e for e in CATALOG}
    assert default_target(plan, events["nexthop-add"]) == "srx5"
    assert default_target(plan, events["mnha-pair-power-off"]) == "srx1", "a spare pair is never powered off"


def test_half_a_spare_pair_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TopologyInvalid) as info:
        api.load(spare_pair_topology(tmp_path, half=True), check_host=False)
    text = "\n".join(d.render() for d in info.value.diagnostics)
    assert "srx5 is out of service but its MNHA peer is not" in text and "nodes.srx5.in_service" in text


def test_a_next_hop_deletion_or_addition_moves_a_whole_mnha_pair(tmp_path: Path) -> None:
    """In an MNHA lab `nexthop-delete`/`nexthop-add` act on the target's pair (the JVD's "adding/deleting
    a scale-out SRX MNHA pair"); a standalone SRX is its own group."""
    from lab_orchestrator.runtime.ops import service_group

    pairs = api.plan(REPO / "labs/topology3.yml", state_root=str(tmp_path / "t3"))
    assert service_group(pairs, "srx1") == ["srx1", "srx2"]
    assert service_group(pairs, "srx4") == ["srx3", "srx4"]
    single = api.plan(REPO / "labs/topology1.yml", state_root=str(tmp_path / "t1"))
    assert service_group(single, "srx2") == ["srx2"]
