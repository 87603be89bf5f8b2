"""containerlab export: schema validity of every shipped lab, goldens, interface names, vendor kinds, split.

The schema is containerlab's published one (v0.79), read from ../shared/containerlab/clab.schema.json
beside the repository (never copied in); the schema tests skip, saying why, where it is absent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import CliRunner

from lab_orchestrator.clab import export as clab_export
from lab_orchestrator.clab.export import ExportOptions
from lab_orchestrator.model import naming
from lab_orchestrator.model.diagnostics import LabError
from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod
from lab_orchestrator.plan.pipeline import LabPlan

REPO = Path(__file__).resolve().parents[2]
LABS = REPO / "labs"
GOLDEN = REPO / "tests" / "golden"
SCHEMA = REPO.parent / "shared" / "containerlab" / "clab.schema.json"
SHIPPED = sorted(LABS.glob("*.yml"))
IMAGES = {"juniper_vjunosrouter": "vrnetlab/juniper_vjunos-router:24.2R1-S2.5",
          "juniper_vsrx": "vrnetlab/juniper_vsrx:24.2R1.17", "juniper_crpd": "crpd:24.2R1.14",
          "cisco_iol": "vrnetlab/cisco_iol:17.12.01"}


@cache
def _plan(name: str) -> LabPlan:
    path = LABS / f"{name}.yml"
    return planmod.build(load_topology(path).topology, f"labs/{path.name}")


def plan_of(name: str) -> LabPlan:
    """A fresh copy (export reads, never writes, the plan; the copy keeps tests independent anyway)."""
    cached = _plan(name)
    return LabPlan.from_json(cached.to_json(), dict(cached.files))


@cache
def _validator() -> Any:
    jsonschema = pytest.importorskip("jsonschema", reason="jsonschema is not installed (pip install -e '.[dev]')")
    if not SCHEMA.is_file():
        pytest.skip(f"containerlab's schema is not at {SCHEMA} (the shared folder beside the repository); "
                    f"schema validation skipped")
    schema = json.loads(SCHEMA.read_text())
    try:
        import regex

        search: Callable[[str, str], object] = regex.search
    except ImportError:
        # The schema's patterns are Go/ECMAScript regexes: `[\p{N}\p{L}]` (a zone suffix of an address)
        # is "letters and digits", which Python's re spells [^\W_].
        def search(pattern: str, text: str) -> object:
            return re.search(pattern.replace(r"[\p{N}\p{L}]", r"[^\W_]"), text)

    def pattern(validator: Any, patrn: str, instance: Any, schema: Any) -> Iterator[Any]:
        if validator.is_type(instance, "string") and not search(patrn, instance):
            yield jsonschema.ValidationError(f"{instance!r} does not match {patrn!r}")

    base = jsonschema.validators.validator_for(schema)
    return jsonschema.validators.extend(base, {"pattern": pattern})(schema)


def schema_errors(text: str) -> list[str]:
    data = yaml.safe_load(text)
    return [f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message[:200]}"
            for e in _validator().iter_errors(data)]


# ---------------------------------------------------------------- schema
@pytest.mark.parametrize("lab", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_lab_exports_to_a_valid_topology(lab: Path) -> None:
    result = clab_export.export(plan_of(lab.stem))
    assert schema_errors(result.files[result.topology_file]) == []


@pytest.mark.parametrize("lab", SHIPPED, ids=lambda p: p.stem)
def test_every_shipped_lab_splits_into_two_valid_host_topologies(lab: Path) -> None:
    plan = plan_of(lab.stem)
    second = [n.name for n in plan.nodes[len(plan.nodes) // 2:]]
    result = clab_export.export(plan, ExportOptions(host2=tuple(second), underlay=("192.0.2.1", "192.0.2.2")))
    assert len(result.host_files) == 2
    for name in result.host_files:
        assert schema_errors(result.files[name]) == [], name


def test_vendor_kinds_export_to_a_valid_topology() -> None:
    t1 = clab_export.export(plan_of("topology1"), ExportOptions(
        vendor={"mx1": "juniper_vjunosrouter", "srx1": "juniper_vsrx"}, images=IMAGES))
    assert schema_errors(t1.files[t1.topology_file]) == []
    flex = clab_export.export(plan_of("flexvpn"), ExportOptions(vendor={"router1": "cisco_iol"}, images=IMAGES))
    assert schema_errors(flex.files[flex.topology_file]) == []
    crpd = clab_export.export(plan_of("topology3"), ExportOptions(vendor={"mx1": "juniper_crpd"}, images=IMAGES))
    assert schema_errors(crpd.files[crpd.topology_file]) == []


def test_the_schema_check_does_reject_a_broken_topology() -> None:
    """The validator is live: a field containerlab does not know, a bad kind and a bad address fail.
    (Endpoint strings are not checked by a draft-07 validator: the schema uses `prefixItems` for them;
    test_links_are_the_plan_veths_with_netns_interface_names checks their form.)"""
    result = clab_export.export(plan_of("topology3"))
    data = yaml.safe_load(result.files[result.topology_file])
    data["topology"]["nodes"]["mx1"]["interfaces"] = ["ge-0/0/0"]
    data["topology"]["nodes"]["srx1"]["kind"] = "juniper_mx"
    data["topology"]["nodes"]["srx2"]["mgmt-ipv4"] = "198.19.27.300"
    errors = schema_errors(yaml.safe_dump(data))
    for node in ("mx1", "srx1", "srx2"):
        assert any(e.startswith(f"topology.nodes.{node}") for e in errors), (node, errors)


# ---------------------------------------------------------------- goldens
@pytest.mark.parametrize("lab", ["topology1", "topology3"])
def test_clab_topology_golden(lab: str, golden: Callable[[Path, str], None]) -> None:
    result = clab_export.export(plan_of(lab))
    golden(GOLDEN / "clab" / lab / result.topology_file, result.files[result.topology_file])
    golden(GOLDEN / "clab" / lab / clab_export.SIDECAR_FILE, result.files[clab_export.SIDECAR_FILE])


def test_clab_node_config_golden(golden: Callable[[Path, str], None]) -> None:
    result = clab_export.export(plan_of("topology3"))
    golden(GOLDEN / "clab" / "topology3" / "nodes" / "mx1" / "clab-node.json",
           result.files["nodes/mx1/clab-node.json"])


def test_vendor_and_split_goldens(golden: Callable[[Path, str], None]) -> None:
    result = clab_export.export(plan_of("topology3"), ExportOptions(
        vendor={"srx1": "juniper_vsrx"}, images=IMAGES, host2=("srx3", "srx4"), underlay=("192.0.2.1", "192.0.2.2")))
    for name in result.host_files + [f"nodes/srx1/{clab_export.STARTUP_CONFIG_FILE}"]:
        golden(GOLDEN / "clab" / "topology3-vendor-split" / name, result.files[name])


def test_export_is_deterministic() -> None:
    assert clab_export.export(plan_of("topology2")).files == clab_export.export(plan_of("topology2")).files


# ---------------------------------------------------------------- structure
@pytest.mark.parametrize("lab", SHIPPED, ids=lambda p: p.stem)
def test_links_are_the_plan_veths_with_netns_interface_names(lab: Path) -> None:
    plan = plan_of(lab.stem)
    result = clab_export.export(plan)
    links = result.topology["topology"]["links"]
    assert len(links) == len(plan.veths)
    seen = set()
    for link, veth in zip(links, plan.veths, strict=True):
        ends = []
        for iface in (veth.a, veth.b):
            if iface.ns == iface.lan:
                ends.append(f"{iface.node}:{iface.name}")  # LAN container port pN
            else:
                ends.append(f"{iface.node}:{naming.linux_ifname(iface.alias)}")
        assert link["endpoints"] == ends
        assert all(re.fullmatch(r"[a-zA-Z0-9][a-zA-Z0-9-._]*:[A-Za-z0-9_.-]{1,15}", e) for e in ends), ends
        assert link["mtu"] == veth.a.mtu
        seen.update(ends)
    assert len(seen) == 2 * len(links), "an interface is used twice"
    nodes = result.topology["topology"]["nodes"]
    assert set(nodes) == {n.name for n in plan.nodes} | {b.ns[len(plan.name) + 1:] for b in plan.bridges}
    mgmt = {n: e["mgmt-ipv4"] for n, e in nodes.items()}
    assert len(set(mgmt.values())) == len(mgmt), "two containers share a management address"
    for port in plan.mgmt.ports:
        assert mgmt[port.node] == port.address.split("/")[0]


def test_node_folders_carry_the_rendered_files_and_the_agent_config() -> None:
    plan = plan_of("topology3")
    result = clab_export.export(plan)
    for rel, content in plan.files.items():
        if rel.startswith("nodes/"):
            assert result.files[rel] == content
    assert not any(rel.startswith("ssh") for rel in result.files), "the lab-wide SSH server is not exported"
    entry = result.topology["topology"]["nodes"]["mx1"]
    assert entry["binds"] == ["nodes/mx1:/etc/lab/node:ro"]
    assert entry["kind"] == "linux"
    linux = result.topology["topology"]["kinds"]["linux"]
    assert linux["image"] == clab_export.DEFAULT_NODE_IMAGE and linux["privileged"] is True
    assert "lab_orchestrator.clab.agent run /etc/lab/node/clab-node.json" in linux["cmd"]


@pytest.mark.parametrize("lab", SHIPPED, ids=lambda p: p.stem)
def test_node_slices_hold_only_their_node(lab: Path) -> None:
    plan = plan_of(lab.stem)
    result = clab_export.export(plan)
    for node in result.containers:
        config = json.loads(result.files[f"nodes/{node}/{clab_export.NODE_CONFIG_FILE}"])
        own = {ns["name"] for ns in config["plan"]["namespaces"]}
        assert own and all(ns.startswith(f"{plan.name}-{node}") for ns in own)
        for key in ("routes", "rules", "rulesets", "sessions", "expected_routes", "processes"):
            assert all(item["ns"] in own for item in config["plan"][key]), key
        assert all(p["node"] != "_lab" for p in config["plan"]["processes"])
        assert all(v["a"]["ns"] in own or v["b"]["ns"] in own for v in config["plan"]["veths"])
        sliced = LabPlan.from_json(json.dumps(config["plan"]))  # the agent reads it back this way
        assert sliced.name == plan.name and sliced.state_dir == "/run/lab/" + plan.name
        expected = [p.name for p in plan.processes if p.node == node]
        if clab_export.own_responder_of(plan, node) is not None:  # the lab-wide responder, per container
            expected.append("responder")
        assert [p.name for p in sliced.processes] == expected


def test_lans_become_bridge_containers() -> None:
    plan = plan_of("flexvpn")
    result = clab_export.export(plan)
    assert result.lans == ["lan0", "lan1"]
    config = json.loads(result.files["nodes/lan0/clab-node.json"])
    assert config["kind"] == "lan"
    assert [b["name"] for b in config["plan"]["bridges"]] == ["br0"]
    endpoints = [e for link in result.topology["topology"]["links"] for e in link["endpoints"]]
    assert [e for e in endpoints if e.startswith("lan0:")] == ["lan0:p0", "lan0:p1", "lan0:p2", "lan0:p3"]


# ---------------------------------------------------------------- vendor kinds
def test_vendor_node_gets_renamed_startup_config_and_raw_ports() -> None:
    plan = plan_of("topology3")
    result = clab_export.export(plan, ExportOptions(vendor={"mx1": "juniper_vjunosrouter"}, images=IMAGES))
    entry = result.topology["topology"]["nodes"]["mx1"]
    assert entry["kind"] == "juniper_vjunosrouter"
    assert entry["startup-config"] == "nodes/mx1/startup-config.cfg"
    assert "binds" not in entry
    assert result.topology["topology"]["kinds"]["juniper_vjunosrouter"] == {"image": IMAGES["juniper_vjunosrouter"]}
    config = result.files["nodes/mx1/startup-config.cfg"]
    ports = clab_export.vendor_port_map(plan, "mx1", "juniper_vjunosrouter")
    assert [vendor for _, _, vendor in ports] == [f"ge-0/0/{i}" for i in range(len(ports))]
    for iface, eth, vendor in ports:
        assert f"{iface.alias} -> {vendor} (container {eth})" in config
    body = "\n".join(line for line in config.splitlines() if not line.startswith("##"))
    assert "    ge-0/1/1 {" not in body and "interface ge-0/2/4.0;" not in body
    for _, _, vendor in ports:
        assert f"    {vendor} {{" in body and f"interface {vendor}.0;" in body
    assert 'description "trust: to srx1 ge-0/0/0";' in body  # descriptions keep the topology's names
    endpoints = [e for link in result.topology["topology"]["links"] for e in link["endpoints"]]
    assert sorted(e for e in endpoints if e.startswith("mx1:")) == sorted(f"mx1:{eth}" for _, eth, _ in ports)
    assert "nodes/mx1/clab-node.json" not in result.files  # no agent in a vendor container
    others = json.loads(result.files["nodes/srx1/clab-node.json"])
    assert others["wait_sessions"] == [], "sessions toward a vendor node are not waited for"


def test_iol_ports_skip_the_management_port() -> None:
    iol = clab_export.VENDOR_KINDS["cisco_iol"]
    assert [iol.port_name(i) for i in range(5)] == ["Ethernet0/1", "Ethernet0/2", "Ethernet0/3", "Ethernet1/0",
                                                     "Ethernet1/1"]
    assert clab_export.VENDOR_KINDS["juniper_crpd"].port_name(0) == "eth1"
    plan = plan_of("topology3")
    result = clab_export.export(plan, ExportOptions(vendor={"gw-trust": "cisco_iol"}, images=IMAGES))
    config = result.files["nodes/gw-trust/startup-config.cfg"]
    assert "\ninterface Ethernet0/1\n" in config and "\ninterface Ethernet0/2\n" in config
    assert "\ninterface Ethernet0/0\n" in config and "interface mgmt0" not in config
    assert "GigabitEthernet" not in config.split("\n", 4)[-1]


def test_rename_interfaces_is_one_pass_and_whole_names_only() -> None:
    text = ("interfaces {\n    ge-0/0/1 {\n        description \"to ge-0/0/0\";\n    }\n    ge-0/0/10 {\n    }\n}\n"
            "zones { interfaces { ge-0/0/1.0; ge-0/0/0.0; } }\n")
    out = clab_export.rename_interfaces(text, {"ge-0/0/1": "ge-0/0/0", "ge-0/0/0": "ge-0/0/1"}, "##")
    assert "    ge-0/0/0 {" in out and "    ge-0/0/10 {" in out
    assert 'description "to ge-0/0/0";' in out  # descriptions untouched
    assert "ge-0/0/0.0; ge-0/0/1.0;" in out  # swapped once, unit kept


@pytest.mark.parametrize("options, message", [
    (ExportOptions(vendor={"srx1": "juniper_vsrx"}), "--image juniper_vsrx=IMAGE"),
    (ExportOptions(vendor={"srx1": "juniper_vjunosrouter"}, images=IMAGES), "stands in for mx"),
    (ExportOptions(vendor={"srx1": "arista_ceos"}, images=IMAGES), "unknown vendor kind"),
    (ExportOptions(vendor={"nope": "juniper_vsrx"}, images=IMAGES), "not a node"),
    (ExportOptions(images={"juniper_mx": "x"}), "unknown kind"),
    (ExportOptions(host2=("srx1",)), "--underlay"),
    (ExportOptions(host2=("nope",), underlay=("192.0.2.1", "192.0.2.2")), "not a node"),
    (ExportOptions(host2=("srx1",), underlay=("192.0.2.1", "host-b")), "not an IPv4 address"),
    (ExportOptions(underlay=("192.0.2.1", "192.0.2.2")), "--host2"),
])
def test_export_refuses_bad_options_in_one_sentence(options: ExportOptions, message: str) -> None:
    with pytest.raises(LabError, match=re.escape(message)):
        clab_export.export(plan_of("topology3"), options)


# ---------------------------------------------------------------- two-host split
def test_split_turns_cross_host_links_into_vxlan_pairs() -> None:
    plan = plan_of("topology3")
    result = clab_export.export(plan, ExportOptions(host2=("srx3", "srx4"), underlay=("10.0.0.1", "10.0.0.2")))
    host1, host2 = (yaml.safe_load(result.files[n]) for n in result.host_files)
    assert set(host2["topology"]["nodes"]) == {"srx3", "srx4"}
    assert set(host1["topology"]["nodes"]) | {"srx3", "srx4"} == set(result.containers)
    vx1 = {link["vni"]: link for link in host1["topology"]["links"] if link.get("type") == "vxlan"}
    vx2 = {link["vni"]: link for link in host2["topology"]["links"] if link.get("type") == "vxlan"}
    assert set(vx1) == set(vx2) and len(vx1) == 6  # mx1 <-> srx3/srx4: trust, untrust, ICL
    for vni, link in vx1.items():
        assert link["remote"] == "10.0.0.2" and vx2[vni]["remote"] == "10.0.0.1"
        assert link["endpoint"]["node"] == "mx1" and vx2[vni]["endpoint"]["node"] in ("srx3", "srx4")
        assert link["dst-port"] == vx2[vni]["dst-port"] == clab_export.VXLAN_PORT
    local2 = [link for link in host2["topology"]["links"] if "endpoints" in link]
    assert local2 == []  # the pair's ICL goes through mx1
    plain = sum(1 for link in host1["topology"]["links"] if "endpoints" in link)
    assert plain + len(local2) + len(vx1) == len(plan.veths)


# ---------------------------------------------------------------- CLI
def test_cli_export_writes_the_folder(tmp_path: Path) -> None:
    from lab_orchestrator.cli import app

    out = tmp_path / "t3"
    result = CliRunner().invoke(app, ["export", str(LABS / "topology3.yml"), "--format", "containerlab",
                                      "--out", str(out), "--vendor", "srx2=juniper_vsrx",
                                      "--image", f"juniper_vsrx={IMAGES['juniper_vsrx']}",
                                      "--host2", "srx3,srx4", "--underlay", "192.0.2.1,192.0.2.2"])
    assert result.exit_code == 0, result.output
    assert (out / "t3.clab.yml").is_file() and (out / "t3.host2.clab.yml").is_file()
    assert (out / "nodes" / "mx1" / "clab-node.json").is_file()
    assert (out / "nodes" / "srx2" / "startup-config.cfg").is_file()
    sidecar = json.loads((out / clab_export.SIDECAR_FILE).read_text())
    assert sidecar["lab"] == "t3" and sidecar["vendor"] == {"srx2": "juniper_vsrx"}


def test_cli_export_errors_are_one_sentence(tmp_path: Path) -> None:
    from lab_orchestrator.cli import app

    result = CliRunner().invoke(app, ["export", str(LABS / "topology3.yml"), "--out", str(tmp_path),
                                      "--vendor", "srx2"])
    assert result.exit_code == 1
    assert "--vendor takes NAME=VALUE" in result.output and "Traceback" not in result.output
