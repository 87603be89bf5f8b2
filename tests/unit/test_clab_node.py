"""The node agent's pure parts: reading an export's node config, which interfaces it waits for and moves,
the daemon order, readiness. (Building a node needs root and a container; see docs/containerlab.md.)"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from lab_orchestrator.clab import agent as clab_node
from lab_orchestrator.clab import export as clab_export
from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod

REPO = Path(__file__).resolve().parents[2]


@cache
def exported(lab: str) -> clab_export.ClabExport:
    path = REPO / "labs" / f"{lab}.yml"
    return clab_export.export(planmod.build(load_topology(path).topology, f"labs/{path.name}"))


def config_of(tmp_path: Path, lab: str, node: str) -> clab_node.NodeConfig:
    result = exported(lab)
    folder = tmp_path / node
    folder.mkdir()
    for rel, content in result.files.items():
        if rel.startswith(f"nodes/{node}/"):
            (folder / Path(rel).name).write_text(content)
    return clab_node.load_config(folder / clab_export.NODE_CONFIG_FILE)


def test_mx_interfaces_move_into_their_routing_instances(tmp_path: Path) -> None:
    config = config_of(tmp_path, "topology3", "mx1")
    assert config.master_ns == "t3-mx1" and config.node_dir == Path("/run/lab/t3/nodes/mx1")
    assert config.namespaces == ["t3-mx1", "t3-mx1-trust-vr", "t3-mx1-untrust-vr"]
    names = clab_node.interface_names(config)
    assert sorted(names) == sorted(["ge-0-0-0", "ge-0-0-1", "ge-0-1-1", "ge-0-1-2", "ge-0-1-3", "ge-0-1-4",
                                    "ge-0-2-1", "ge-0-2-2", "ge-0-2-3", "ge-0-2-4",
                                    "ge-0-3-1", "ge-0-3-2", "ge-0-3-3", "ge-0-3-4"])
    moves = dict(clab_node.moves(config))
    # every trust/untrust port lives in its instance; the SRXs' ICLs stay in the MNHA-VR (the master)
    assert set(moves) == {n for n in names if not n.startswith("ge-0-3-")}
    assert moves["ge-0-0-0"] == "t3-mx1-trust-vr" and moves["ge-0-2-4"] == "t3-mx1-untrust-vr"


def test_srx_stays_in_the_container_namespace(tmp_path: Path) -> None:
    config = config_of(tmp_path, "topology3", "srx1")
    assert clab_node.moves(config) == []
    assert sorted(clab_node.interface_names(config)) == ["ge-0-0-0", "ge-0-0-1", "ge-0-0-4"]  # ge-0/0/4: ICL to mx1
    routing, other = clab_node.ordered_daemons(config)
    assert [d.name for d in routing] == ["bird"]
    assert sorted(d.name for d in other) == ["conntrackd", "mnhad", "responder"]
    responder = next(d for d in other if d.name == "responder")
    assert responder.argv[-1] == "/run/lab/t3/nodes/srx1/responder.json"
    assert routing[0].argv[:2] == ["bird", "-f"] and routing[0].log == "/run/lab/t3/logs/srx1-bird.log"
    assert [r.file for r in config.plan.rulesets] == ["nodes/srx1/srx.nft"]


def test_lan_container_waits_for_its_switch_ports(tmp_path: Path) -> None:
    config = config_of(tmp_path, "flexvpn", "lan0")
    assert config.kind == "lan" and config.master_ns == "flexvpn-lan0"
    assert clab_node.interface_names(config) == ["p0", "p1", "p2", "p3"]
    assert clab_node.moves(config) == [] and config.plan.processes == []
    assert [b.name for b in config.plan.bridges] == ["br0"]


def test_readiness_names_what_is_missing(tmp_path: Path) -> None:
    config = config_of(tmp_path, "topology3", "gw-trust")
    assert config.wait_sessions == ["peer_mx1"]
    expected = [e.prefix for e in config.plan.expected_routes]
    assert expected, "a gateway waits for the far side's prefixes"
    sock = "/run/lab/t3/nodes/gw-trust/bird.ctl"
    routes = {"t3-gw-trust": set(expected)}
    assert clab_node.readiness(config, {sock: {"peer_mx1": "Established"}}, routes) == []
    assert clab_node.readiness(config, {sock: {"peer_mx1": "Active Socket: Connection refused"}}, routes) == [
        "gw-trust peer_mx1 Active Socket: Connection refused"]
    assert clab_node.readiness(config, {}, {}) == ["gw-trust peer_mx1 missing"] + [
        f"route {p} missing on gw-trust" for p in expected]


def test_config_format_is_checked(tmp_path: Path) -> None:
    bad = tmp_path / "clab-node.json"
    bad.write_text(json.dumps({"format": 99}))
    with pytest.raises(SystemExit, match="unknown node config format 99"):
        clab_node.load_config(bad)


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert clab_node.main([]) == 2
    config = config_of(tmp_path, "topology3", "srx1")
    path = str(config.source_dir / clab_export.NODE_CONFIG_FILE)
    assert clab_node.main(["link", "ge-0-0-0", "sideways", path]) == 2
    assert "usage:" in capsys.readouterr().err
