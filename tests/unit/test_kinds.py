"""The node-kind registry: every kind the model accepts is registered, with consistent facts."""

from __future__ import annotations

from typing import get_args

import pytest

from lab_orchestrator import kinds
from lab_orchestrator.model.schema import NodeKind


def test_every_model_kind_is_registered_and_nothing_else() -> None:
    assert set(kinds.KINDS) == set(get_args(NodeKind))


@pytest.mark.parametrize("name", sorted(kinds.KINDS))
def test_kind_facts_are_consistent(name: str) -> None:
    kind = kinds.get(name)
    assert kind.name == name
    assert kind.sysctls[:2] == kinds.NO_IPV6, "IPv6 off in every namespace"
    assert (kind.device_config is None) == (kind.ssh_vendor is None), "a CLI needs a config to show"
    forwards = ("net.ipv4.ip_forward", "1") in kind.sysctls
    assert forwards == kind.routes, "routers forward, hosts do not"
    assert kind.bgp_instances == (kind.instances or (None,))


def test_the_mx_runs_its_routing_instances_as_namespaces() -> None:
    mx = kinds.get("mx")
    assert mx.instances == ("TRUST-VR", "UNTRUST-VR")
    assert mx.as_field("TRUST-VR") == "trust_as" and mx.as_field("UNTRUST-VR") == "untrust_as"
    assert kinds.get("srx").as_field(None) == "as_"


@pytest.mark.parametrize("local, remote, zone, expected", [
    ("mx", "srx", "trust", "fw_srx_1"),
    ("mx", "ios-router", "trust", "core_srx_1"),
    ("srx", "mx", "untrust", "untrust_srx_1"),
    ("ios-router", "mx", "trust", "peer_srx_1"),
])
def test_bgp_protocol_names_carry_the_role(local: str, remote: str, zone: str, expected: str) -> None:
    assert kinds.get(local).protocol_name(kinds.get(remote), zone, "srx-1") == expected


def test_an_unknown_kind_is_a_key_error() -> None:
    with pytest.raises(KeyError):
        kinds.get("vsrx")


def test_roles_are_asked_not_compared_by_name() -> None:
    assert kinds.names(lambda k: k.load_balancer) == {"mx"}
    assert kinds.names(lambda k: k.firewall) == {"srx"}
    assert kinds.names(lambda k: k.gateway) == {"ios-router"}
    assert kinds.names(lambda k: k.end_host) == {"host"}
    assert kinds.names(lambda k: k.ssh_vendor == "junos") == {"mx", "srx"}


def test_each_kind_names_its_config_file_and_ssh_peer_groups() -> None:
    assert kinds.get("mx").config_file == "juniper.conf" and kinds.get("ios-router").config_file == "running-config"
    mx, srx = kinds.get("mx"), kinds.get("srx")
    assert mx.peer_group("fw_srx1", "trust") == "SRX-TRUST"
    assert mx.peer_group("core_gw1", "untrust") == "GW-UNTRUST"
    assert srx.peer_group("untrust_mx1", "untrust") == "MX-UNTRUST"
    assert kinds.get("ios-router").peer_group("peer_mx1", None) == ""
    # an IPv6 session's group: the JVD's `IPv6_` prefix on its IPv4 twin's
    assert mx.peer_group("fw_srx1_v6", "trust", 6) == "IPv6_SRX-TRUST"
    assert srx.peer_group("untrust_mx1_v6", "untrust", 6) == "IPv6_MX-UNTRUST"
    assert kinds.get("ios-router").peer_group("peer_mx1_v6", None, 6) == ""


def test_bgp_exports_follow_the_jvd_route_exchange() -> None:
    mx, srx, gw = kinds.get("mx"), kinds.get("srx"), kinds.get("ios-router")
    assert '"core_*"' in mx.bgp_export("fw_srx1", "trust", 65000, "sfw")
    assert mx.bgp_export("core_gw1", "trust", 65000, "sfw") == 'where proto ~ "fw_*" || proto = "loopback"'
    assert srx.bgp_export("trust_mx1", "trust", 65001, "cgnat") == 'where proto ~ "untrust_*" || proto = "loopback"'
    assert "bgp_path.prepend(65001)" in srx.bgp_export("untrust_mx1", "untrust", 65001, "cgnat")
    assert srx.bgp_export("untrust_mx1", "untrust", 65001, "sfw") == 'where proto ~ "trust_*" || proto = "loopback"'
    assert gw.bgp_export("peer_mx1", None, 65002, "sfw") == 'where proto = "originated"'


def test_containerlab_kinds_stand_in_for_lab_kinds() -> None:
    from lab_orchestrator.clab.export import VENDOR_KINDS

    assert {v: spec.replaces for v, spec in VENDOR_KINDS.items()} == {
        "juniper_vjunosrouter": ("mx",), "juniper_vsrx": ("srx",), "juniper_crpd": ("mx",),
        "cisco_iol": ("ios-router",)}


@pytest.mark.parametrize("kind, fields, problems", [
    ("mx", {}, [(("bgp",), "an mx needs bgp.trust_as and bgp.untrust_as")]),
    ("mx", {"bgp": {"trust_as": 1, "untrust_as": 2, "as": 3}},
     [(("bgp", "as"), "an mx takes trust_as/untrust_as, not as")]),
    ("mx", {"bgp": {"trust_as": 1, "untrust_as": 2}}, []),
    ("srx", {}, [(("bgp",), "an srx needs bgp.as")]),
    ("srx", {"bgp": {"as": 1, "trust_as": 2}}, [(("bgp",), "trust_as/untrust_as apply to an mx, not to srx")]),
    ("ios-router", {"bgp": {"as": 1, "untrust_as": 2}},
     [(("bgp",), "trust_as/untrust_as apply to an mx, not to ios-router")]),
    ("ios-router", {}, []),
    ("host", {"bgp": {"as": 1}}, [(("bgp",), "a host does not speak BGP")]),
    ("host", {}, []),
])
def test_each_kind_checks_its_own_node_settings(kind: str, fields: dict[str, object],
                                                problems: list[tuple[tuple[str, ...], str]]) -> None:
    from lab_orchestrator.model.schema import Node

    node = Node.model_validate({"kind": kind, **fields})
    assert [(path, message) for path, message, _ in kinds.get(kind).check_node(node)] == problems
