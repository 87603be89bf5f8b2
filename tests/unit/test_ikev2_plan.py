"""The FlexVPN planner (lab_orchestrator.plan.features.flexvpn): one daemon per FlexVPN router with its config,
the VIP sysctls, the redirect warning, and the `show` entry point on status files."""

from __future__ import annotations

import json
import time
from pathlib import Path

from statusdata import clb_status, gateway_status, hsrp_group, hsrp_status

from lab_orchestrator.cli_ssh import flexshow
from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod
from lab_orchestrator.plan.features import flexvpn
from lab_orchestrator.plan.pipeline import LabPlan

REPO = Path(__file__).resolve().parents[2]


def _plan(path: Path) -> LabPlan:
    return planmod.build(load_topology(path).topology, "labs/x.yml", "/run/lab", python="python3")


def _config(plan: LabPlan, node: str) -> dict[str, object]:
    data: dict[str, object] = json.loads(plan.files[f"nodes/{node}/flexvpn.json"])
    return data


def test_one_daemon_per_flexvpn_router() -> None:
    plan = _plan(REPO / "labs/flexvpn.yml")
    procs = [p for p in plan.processes if p.name == flexvpn.PROCESS_NAME]
    assert [p.node for p in procs] == ["router1", "router2", "router3"]
    for proc in procs:
        assert proc.ns == f"flexvpn-{proc.node}"
        assert proc.argv == ("python3", "-m", "dataplane.daemons.flexvpnd",
                             f"/run/lab/flexvpn/nodes/{proc.node}/flexvpn.json")
        assert f"nodes/{proc.node}/flexvpn.json" in plan.node(proc.node).files


def test_router_config_matches_the_topology() -> None:
    config = _config(_plan(REPO / "labs/flexvpn.yml"), "router1")
    groups = config["groups"]
    assert isinstance(groups, list)
    assert groups == [{
        "interface": "Et0-1", "alias": "Ethernet0/1", "address": "10.10.10.1", "prefixlen": 24, "group": 1,
        "vip": "10.10.10.100", "priority": 255, "preempt": False, "preempt_delay": 0, "hello_ms": 3000,
        "hold_ms": 10000, "timers_configured": False, "authentication": "cisco", "name": "group1", "version": 1,
        "vip_ifname": "hsrp1"}]
    cluster = config["cluster"]
    assert isinstance(cluster, dict)
    assert (cluster["standby_group"], cluster["max_session"], cluster["port"], cluster["holdtime_ms"]) == \
        ("group1", 10, 2012, 3000)
    ikev2 = config["ikev2"]
    assert isinstance(ikev2, dict)
    assert (ikev2["redirect"], ikev2["pool_first"], ikev2["pool_last"]) == ("init", "172.16.1.1", "172.16.1.254")
    assert ikev2["identities"] == ["10.10.10.1", "10.10.10.100"]
    assert config["hsrp_status"] == "/run/lab/flexvpn/nodes/router1/hsrp-status.json"
    assert config["warnings"] == []


def test_vip_sysctls_only_on_hsrp_routers() -> None:
    plan = _plan(REPO / "labs/flexvpn.yml")
    for ns in plan.namespaces:
        has = dict(ns.sysctls).get("net.ipv4.conf.all.arp_ignore") == "1"
        assert has == (ns.node in ("router1", "router2", "router3")), ns.name
        if has:
            assert dict(ns.sysctls)["net.ipv4.conf.all.arp_announce"] == "2"


def test_other_labs_get_no_flexvpn_daemon() -> None:
    plan = _plan(REPO / "labs/topology3.yml")
    assert not [p for p in plan.processes if p.name == flexvpn.PROCESS_NAME]
    assert not [f for f in plan.files if f.endswith("flexvpn.json")]


def test_redirect_without_cluster_warns_like_ios(tmp_path: Path) -> None:
    text = (REPO / "labs/flexvpn.yml").read_text()
    text = text.replace("    ikev2_cluster: {standby_group: group1, max_session: 10}\n    ikev2: {redirect: init, "
                        "pool: 172.16.3.0/24}", "    ikev2: {redirect: init, pool: 172.16.3.0/24}")
    assert "172.16.3.0/24" in text
    path = tmp_path / "x.yml"
    path.write_text(text)
    plan = _plan(path)
    warnings = _config(plan, "router3")["warnings"]
    assert warnings == ["crypto ikev2 redirect gateway init\n! (IKEv2 Cluster load-balancer is not enabled)"]
    assert _config(plan, "router3")["cluster"] is None
    assert _config(plan, "router1")["warnings"] == []


def test_preempt_delay_reaches_the_daemon(tmp_path: Path) -> None:
    text = (REPO / "labs/flexvpn.yml").read_text().replace(
        "priority: 200, name: group1}", "priority: 200, name: group1, preempt: true, preempt_delay: 30}")
    path = tmp_path / "x.yml"
    path.write_text(text)
    groups = _config(_plan(path), "router2")["groups"]
    assert isinstance(groups, list) and (groups[0]["preempt"], groups[0]["preempt_delay"]) == (True, 30)


def test_show_reads_the_status_files(tmp_path: Path) -> None:
    node = tmp_path / "nodes" / "router3"
    node.mkdir(parents=True)
    now = time.time()
    group = hsrp_group(state="Listen", active_mac="0000.0c07.ac01", name="group1",
                       active={"address": "10.10.10.1", "priority": 255, "expires_at": now + 9},
                       standby={"address": "10.10.10.2", "priority": 200, "expires_at": now + 8})
    (node / flexvpn.HSRP_STATUS).write_text(json.dumps(hsrp_status([group])))
    shut = clb_status(role="none", shutdown=True)
    (node / flexvpn.IKEV2_STATUS).write_text(json.dumps(gateway_status(cluster=shut)))
    text = flexshow.show(tmp_path, "router3", "show standby", now)
    assert "  Active router is 10.10.10.1, priority 255 (expires in 9.000 sec)" in text
    assert flexshow.show(tmp_path, "router3", "show crypto ikev2 cluster", now) == "Cluster is shutdown\n"
    assert "IPv4 Crypto IKEv2  SA" in flexshow.show(tmp_path, "router3", "show crypto ikev2 sa", now)
