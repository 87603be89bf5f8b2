"""The dual-stack plan (addressing.v6): IPv6 beside IPv4, as the JVD runs it, without moving any IPv4 fact.

topology3-dualstack.yml is topology3.yml plus `addressing.v6` and the hosts' prefixes6: its IPv4 plan
must be topology3's, and every IPv6 fact is checked here by what it must be (not only by the goldens).
"""

from __future__ import annotations

from dataclasses import replace
from ipaddress import IPv6Interface, IPv6Network
from pathlib import Path
from typing import Any, TypeVar

import pytest

from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod
from lab_orchestrator.plan.features import ipv6
from lab_orchestrator.plan.plantypes import LabPlan

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T", bound=Any)


def _plan(stem: str) -> LabPlan:
    return planmod.build(load_topology(REPO / "labs" / f"{stem}.yml").topology, f"labs/{stem}.yml", "/run/lab")


@pytest.fixture(scope="module")
def dual() -> LabPlan:
    return _plan("topology3-dualstack")


@pytest.fixture(scope="module")
def single() -> LabPlan:
    return _plan("topology3")


def _unnamed(item: T) -> T:
    """ITEM without its lab's name (t3d-NODE and t3-NODE are the same namespace of the same node)."""
    return replace(item, ns=item.ns.split("-", 1)[1])


def test_ipv4_plan_is_unchanged_by_ipv6(dual: LabPlan, single: LabPlan) -> None:
    assert [(_unnamed(replace(v.a, address6=None)), _unnamed(replace(v.b, address6=None))) for v in dual.veths] == \
        [(_unnamed(v.a), _unnamed(v.b)) for v in single.veths]
    assert [n.loopbacks for n in dual.nodes] == [n.loopbacks for n in single.nodes]
    assert [n.lo_units for n in dual.nodes] == [n.lo_units for n in single.nodes]
    assert [_unnamed(s) for s in dual.sessions if s.family == 4] == [_unnamed(s) for s in single.sessions]
    assert [_unnamed(r) for r in dual.routes if ":" not in r.dst] == [_unnamed(r) for r in single.routes]
    assert not single.dual_stack and dual.dual_stack


def test_every_interface_has_an_ipv6_address_in_its_peers_126(dual: LabPlan) -> None:
    seen: set[str] = set()
    for veth in dual.veths:
        a, b = IPv6Interface(veth.a.address6), IPv6Interface(veth.b.address6)
        assert a.network == b.network and a.network.prefixlen == 126
        assert a.network.subnet_of(IPv6Network("2001:db8:1::/48"))
        assert a.ip != a.network.network_address and b.ip != b.network.network_address  # not the anycast
        assert {str(a.ip), str(b.ip)}.isdisjoint(seen)
        seen |= {str(a.ip), str(b.ip)}


def test_loopbacks_and_pair_addresses_have_ipv6_twins(dual: LabPlan) -> None:
    for node in dual.nodes:
        assert set(node.loopbacks6) == set(node.loopbacks)
        assert set(node.lo_units6) == set(node.lo_units)
    all6 = [a for n in dual.nodes for a in n.loopbacks6.values()]
    assert len(all6) == len(set(all6))
    # one pair address per MNHA pair, the same on both nodes (the TLB real-service of the pair)
    for a, b in dual.mnha:
        assert dual.node(a).lo_units6 == dual.node(b).lo_units6 != {}


def test_every_session_has_an_ipv6_twin_on_the_same_link(dual: LabPlan) -> None:
    v4 = [s for s in dual.sessions if s.family == 4 and s.zone != "icl"]  # the ICL is IPv4 only (unit 100)
    assert any(s.zone == "icl" for s in dual.sessions) and not any(s.zone == "icl" and s.family == 6
                                                                   for s in dual.sessions)
    v6 = {(s.ns, s.protocol): s for s in dual.sessions if s.family == 6}
    assert len(v6) == len(v4) > 0
    by_address6 = {IPv6Interface(i.address6).ip: i for i in dual.interfaces() if i.address6}
    for s in v4:
        twin = v6[(s.ns, s.protocol + ipv6.V6_SUFFIX)]
        assert (twin.ns, twin.local_as, twin.peer_as, twin.zone) == (s.ns, s.local_as, s.peer_as, s.zone)
        local, peer = by_address6[IPv6Interface(f"{twin.local_address}/128").ip], \
            by_address6[IPv6Interface(f"{twin.peer_address}/128").ip]
        assert local.ns == s.ns and dual.peer_of(local) == peer


def test_namespaces_switch_ipv6_on_without_dad(dual: LabPlan, single: LabPlan) -> None:
    for ns in dual.namespaces:
        settings = dict(ns.sysctls)
        if ns.node.startswith("lan"):
            continue
        assert settings["net.ipv6.conf.all.disable_ipv6"] == "0"
        assert settings["net.ipv6.conf.default.accept_dad"] == "0" == settings["net.ipv6.conf.all.accept_dad"]
        # a failed link (or a powered-off node) comes back with its IPv6 addresses, as with IPv4
        assert settings["net.ipv6.conf.all.keep_addr_on_down"] == "1"
        router = ns.node not in ("client", "server")
        assert settings.get("net.ipv6.conf.all.forwarding") == ("1" if router else None)
    assert all(dict(ns.sysctls).get("net.ipv6.conf.all.disable_ipv6", "1") == "1" for ns in single.namespaces)


def test_hosts_answer_for_prefixes6_and_route_by_their_gateway(dual: LabPlan) -> None:
    local = {(r.ns, r.dst) for r in dual.routes if r.kind == "local"}
    assert ("t3d-client", "2001:db8:172:80::/96") in local and ("t3d-server", "2001:db8:203::/64") in local
    default = next(r for r in dual.routes if r.ns == "t3d-client" and r.dst == "::/0")
    gw = next(i for i in dual.interfaces() if i.node == "gw-trust" and i.peer_node == "client")
    assert default.via == str(IPv6Interface(gw.address6).ip)


def test_bird_gets_ipv6_channels_and_the_gateways_originate_prefixes6(dual: LabPlan) -> None:
    gw = dual.files["nodes/gw-untrust/bird.conf"]
    assert "protocol kernel kernel6" in gw and "protocol static originated6" in gw
    assert "route ::/0 blackhole;" in gw and "route 2001:db8:203::/64 via" in gw
    mx = dual.files["nodes/mx1/bird-trust-vr.conf"]
    block = mx[mx.index("protocol bgp fw_srx1_v6"):]
    block = block[:block.index("\n}\n")]
    assert "ipv6 {" in block and "net.len = 128" in block and "ipv4" not in block
    readiness = {(e.ns, e.prefix) for e in dual.expected_routes}
    assert ("t3d-gw-trust", "2001:db8:203::/64") in readiness
    assert ("t3d-gw-untrust", "2001:db8:172:80::/96") in readiness
