"""The dual-stack plan (addressing.v6): IPv6 beside IPv4, as the JVD runs it, without moving any IPv4 fact.

topology3-dualstack.yml is topology3.yml plus `addressing.v6` and the hosts' prefixes6: its IPv4 plan
must be topology3's, and every IPv6 fact is checked here by what it must be (not only by the goldens).
"""

from __future__ import annotations

import json
from dataclasses import replace
from ipaddress import IPv6Interface, IPv6Network
from pathlib import Path
from typing import Any, TypeVar

import pytest

from lab_orchestrator import kinds
from lab_orchestrator.cli_ssh import junosconf
from lab_orchestrator.model.schema import Topology
from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod
from lab_orchestrator.plan.features import ipv6
from lab_orchestrator.plan.plantypes import LabPlan

REPO = Path(__file__).resolve().parents[2]
T = TypeVar("T", bound=Any)


def _topology(stem: str) -> Topology:
    return load_topology(REPO / "labs" / f"{stem}.yml").topology


def _plan(stem: str) -> LabPlan:
    return planmod.build(_topology(stem), f"labs/{stem}.yml", "/run/lab")


@pytest.fixture(scope="module")
def dual() -> LabPlan:
    return _plan("topology3-dualstack")


@pytest.fixture(scope="module")
def single() -> LabPlan:
    return _plan("topology3-mixed")  # the dual-stack lab's IPv4 half: SFW44 and NAPT44 by source prefix


def _unnamed(item: T) -> T:
    """ITEM without its lab's name (t3d-NODE and t3-mix-NODE are the same namespace of the same node)."""
    return replace(item, ns=item.ns.removeprefix("t3-mix-").removeprefix("t3d-"))


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


def _set_lines(dual: LabPlan, node: str) -> list[str]:
    return junosconf.to_set(junosconf.parse(dual.files[f"nodes/{node}/juniper.conf"])).splitlines()


def test_junos_configs_carry_the_ipv6_addresses_the_lab_configures(dual: LabPlan) -> None:
    """`family inet6` beside `family inet` on every unit the lab gives an IPv6 address, and nowhere else."""
    for node in dual.nodes:
        if node.kind not in ("mx", "srx"):
            continue
        lines = _set_lines(dual, node.name)
        expected = {f"set interfaces {i.alias} unit 0 family inet6 address {i.address6}"
                    for i in dual.interfaces() if i.node == node.name and i.address6}
        units = {"": "0", "TRUST-VR": "1", "UNTRUST-VR": "2"}
        expected |= {f"set interfaces lo0 unit {units[key]} family inet6 address {address}/128"
                     for key, address in node.loopbacks6.items()}
        expected |= {f"set interfaces lo0 unit {unit} family inet6 address {address}/128"
                     for unit, address in node.lo_units6.items()}
        assert {line for line in lines if " family inet6 " in line} == expected, node.name
        assert len(expected) > 3


def test_junos_configs_have_the_ipv6_sessions_in_their_own_groups(dual: LabPlan) -> None:
    """Each IPv6 session in an `IPv6_` group (the JVD's naming) of its instance, with its peer AS, the
    export policy and options of its IPv4 twin's group; the IPv4 groups keep the IPv4 sessions only."""
    for node in dual.nodes:
        if node.kind not in ("mx", "srx"):
            continue
        lines = _set_lines(dual, node.name)
        kind = kinds.get(node.kind)
        sessions = [s for s in dual.sessions if s.node == node.name and s.zone != "icl"]
        assert sessions
        for s in sessions:
            bgp = f"set routing-instances {s.instance} protocols bgp" if s.instance else "set protocols bgp"
            group = kind.peer_group(s.protocol, s.zone, s.family)
            assert group.startswith("IPv6_") == (s.family == 6)
            assert f"{bgp} group {group} neighbor {s.peer_address} peer-as {s.peer_as}" in lines, (node.name, s)
            if s.family == 6:
                twin = kind.peer_group(s.protocol, s.zone)
                options = {line.split(f" group {group} ", 1)[1] for line in lines if f" group {group} " in line
                           and " neighbor " not in line}
                # IPv6 has no IPv4 pool: the twin's NAT-POOL and NAT64-POOL are the IPv4 group's alone
                assert options and options == {line.split(f" group {twin} ", 1)[1] for line in lines
                                               if f" group {twin} " in line and " neighbor " not in line} - \
                    {"export NAT-POOL", "export NAT64-POOL"}
            if s.instance:  # the instance's AS is the session's local AS (BIRD's `local as`)
                assert f"set routing-instances {s.instance} routing-options autonomous-system {s.local_as}" in lines
        for line in lines:
            if " protocols bgp group " in line and " neighbor " in line and " group IPv6_" not in line:
                assert ":" not in line.split(" neighbor ")[1].split()[0], line


def test_b_node_prepends_its_ipv6_pair_address_as_bird_does(dual: LabPlan) -> None:
    """srx2 (B of its pair) prepends lo0.1's IPv6 /128 2x/4x in BIRD: its MNHA-PREPEND names it."""
    srx2 = next(n for n in dual.nodes if n.name == "srx2")
    pair6 = f"{srx2.lo_units6['1']}/128"
    assert f"if net ~ [ {pair6} ]" in dual.files["nodes/srx2/bird.conf"]
    lines = _set_lines(dual, "srx2")
    for term in ("pair-signal", "pair"):
        assert f"set policy-options policy-statement MNHA-PREPEND term {term} from route-filter {pair6} exact" in lines


def test_ios_configs_carry_the_ipv6_addresses_sessions_and_routes(dual: LabPlan) -> None:
    for name in ("gw-trust", "gw-untrust"):
        node = next(n for n in dual.nodes if n.name == name)
        text = dual.files[f"nodes/{name}/running-config"]
        assert "\nipv6 unicast-routing\n" in text
        for iface in (i for i in dual.interfaces() if i.node == name):
            block = text[text.index(f"\ninterface {iface.alias}\n"):]
            assert block[:block.index("\n!\n")].endswith(f"\n ipv6 address {iface.address6}")
        assert f" ipv6 address {node.loopbacks6['']}/128\n" in text
        ipv4 = text[text.index(" address-family ipv4\n"):]
        ipv4 = ipv4[:ipv4.index(" exit-address-family\n")]
        ipv6_af = text[text.index(" address-family ipv6\n"):]
        ipv6_af = ipv6_af[:ipv6_af.index(" exit-address-family\n")]
        for s in (s for s in dual.sessions if s.node == name):
            assert f" neighbor {s.peer_address} remote-as {s.peer_as}\n" in text
            assert (f"  neighbor {s.peer_address} activate\n" in ipv6_af) == (s.family == 6)
            assert (f"  neighbor {s.peer_address} activate\n" in ipv4) == (s.family == 4)
        for prefix, target in ipv6.statics6(_topology("topology3-dualstack"), dual, node):
            assert f"  network {prefix}\n" in ipv6_af
            assert f"\nipv6 route {prefix} {'Null0' if target == 'blackhole' else target.split()[1]}\n" in text
    assert "  network ::/0\n" in dual.files["nodes/gw-untrust/running-config"]


def test_ipv4_only_configs_have_no_ipv6(single: LabPlan) -> None:
    for name, text in single.files.items():
        if name.endswith(("juniper.conf", "running-config")):
            assert "inet6" not in text and "ipv6" not in text and "IPv6_" not in text, name


@pytest.mark.parametrize("stem", ["topology3-cgnat", "topology2-cgnat"])  # TLB; ECMP CHASH with two MXs
def test_a_dual_stack_cgnat_lab_hashes_back_only_the_ipv6_answers(tmp_path: Path, stem: str) -> None:
    """CGNAT: IPv4 answers come back by each pair's pool route; IPv6 (no pool) by the untrust selector's
    hash of the destination; its route gate watches the pools (ECMP, CHASH: an SRX is routed while the
    MX learns a pool from it)."""
    text = (REPO / "labs" / f"{stem}.yml").read_text()
    text = text.replace("\nservices:\n", "\naddressing:\n  v6: {}\nservices:\n", 1).replace(
        "prefixes: [100.64.0.0/16]}", 'prefixes: [100.64.0.0/16], prefixes6: ["2001:db8:172:80::/96"]}', 1).replace(
        "prefixes: [203.0.113.0/24]}", 'prefixes: [203.0.113.0/24], prefixes6: ["2001:db8:203::/64"]}', 1)
    path = tmp_path / "cgnat6.yml"
    path.write_text(text)
    plan = planmod.build(load_topology(path).topology, str(path), "/run/lab")
    untrust = plan.files["nodes/mx1/selector-untrust.nft"]
    assert 'ip6 daddr { 2001:db8:172:80::/96 } meta mark set 0x100' in untrust
    assert " ip daddr {" not in untrust  # no IPv4 rule: the pools route those answers
    config = json.loads(plan.files["nodes/mx1/mxlb.json"])
    side = next(s for s in config["selectors"] if s["side"] == "untrust")
    assert side["match_prefixes"] == ["2001:db8:172:80::/96"]
    assert side["watch_prefixes"] == sorted({n.nat_pool for n in plan.nodes if n.nat_pool})
    v4 = planmod.build(load_topology(REPO / "labs" / f"{stem}.yml").topology, "x", "/run/lab")
    assert "nodes/mx1/selector-untrust.nft" not in v4.files  # IPv4 only: no untrust selector at all
