"""The node-kind registry: every kind the model accepts is registered, with consistent facts."""

from __future__ import annotations

from typing import get_args

import pytest

from lab_orchestrator import kinds
from lab_orchestrator.model import NodeKind


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
