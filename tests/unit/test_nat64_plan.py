"""NAT64 (`services.nat64`) planned without root: the pools per MNHA pair, the translator's
configuration and process, the SRX's rules and announcements, and the topology checks."""

from __future__ import annotations

from ipaddress import IPv4Network, IPv6Network
from pathlib import Path

import pytest

from lab_orchestrator.model import nat64 as facts
from lab_orchestrator.model.diagnostics import TopologyInvalid
from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod
from lab_orchestrator.plan.plantypes import LabPlan

REPO = Path(__file__).resolve().parents[2]
DUAL = REPO / "labs" / "topology3-dualstack.yml"
NAT64 = '  nat64: {source: "2001:db8:172:80::/112", address: "2001:db8:64::1", server: 203.0.113.64}\n'


def _plan(path: Path = DUAL) -> LabPlan:
    return planmod.build(load_topology(path).topology, str(path), "/run/lab")


def _variant(tmp_path: Path, old: str, new: str, base: Path = DUAL) -> Path:
    text = base.read_text()
    assert old in text
    path = tmp_path / "lab.yml"
    path.write_text(text.replace(old, new, 1))
    return path


def _problems(path: Path) -> str:
    with pytest.raises(TopologyInvalid) as caught:
        load_topology(path)
    return str(caught.value)


def test_one_pool_per_pair_after_the_other_pools() -> None:
    plan = _plan()
    pools = {n.name: n.nat64_pool for n in plan.nodes if n.kind == "srx"}
    # after the NAPT44 pools of the pairs (198.51.100.0/28 and .16/28): adding NAT64 moves none of them
    assert {n.name: n.nat_pool for n in plan.nodes if n.kind == "srx"} == {
        "srx1": "198.51.100.0/28", "srx2": "198.51.100.0/28", "srx3": "198.51.100.16/28", "srx4": "198.51.100.16/28"}
    assert pools["srx1"] == pools["srx2"] == "198.51.100.32/28"
    assert pools["srx3"] == pools["srx4"] == "198.51.100.48/28"
    assert all(n.nat64_pool is None for n in plan.nodes if n.kind != "srx")


def test_the_translator_maps_clients_one_to_one_and_the_address_to_the_server() -> None:
    plan = _plan()
    conf = plan.files["nodes/srx3/tayga.conf"]
    assert "tun-device nat64\n" in conf and f"ipv4-addr {facts.TRANSLATOR_V4}\n" in conf
    assert "map 203.0.113.64 2001:db8:64::1\n" in conf
    assert "map 10.255.0.0/16 2001:db8:172:80::/112\n" in conf
    assert f"ipv6-addr {plan.node('srx3').loopbacks6['']}\n" in conf
    process = next(p for p in plan.processes if p.node == "srx3" and p.name == "nat64")
    assert process.argv[2] == "dataplane.daemons.nat64d"
    routes = [process.argv[i + 1] for i, a in enumerate(process.argv) if a == "--route"]
    assert routes == ["2001:db8:64::1/128", "10.255.0.0/16", "192.0.0.1/32"]


def test_the_srx_permits_translates_and_announces_the_pool() -> None:
    plan = _plan()
    nft = plan.files["nodes/srx2/srx.nft"]
    assert 'oifname "nat64" ip6 saddr 2001:db8:172:80::/112 ip6 daddr 2001:db8:64::1 ct state new' in nft
    assert 'iifname "nat64" oifname { "ge-0-0-1" } ip saddr 10.255.0.0/16 ip daddr 203.0.113.64 ct state new' in nft
    assert "ip saddr 10.255.0.0/16 counter snat to 198.51.100.32-198.51.100.47 persistent" in nft
    bird = plan.files["nodes/srx2/bird.conf"]
    assert "route 198.51.100.32/28 blackhole;" in bird
    untrust = next(line for line in bird.splitlines() if "export filter" in line and 'proto = "originated"' in line)
    # the B node prepends the pool as the pair's lo0.1 (2x / 4x): the MX prefers the A node
    assert "198.51.100.32/28 ]" in untrust


def test_without_nat64_nothing_of_it_is_planned() -> None:
    plan = _plan(REPO / "labs" / "topology3.yml")
    assert not any(name.endswith("tayga.conf") for name in plan.files)
    assert not any(p.name == "nat64" for p in plan.processes)
    assert "nat64" not in plan.files["nodes/srx1/srx.nft"]
    assert all(n.nat64_pool is None for n in plan.nodes)


def test_mapped_clients_are_as_many_as_the_source() -> None:
    topo = load_topology(DUAL).topology
    assert topo.services.nat64 is not None
    assert facts.mapped_clients(topo.services.nat64) == IPv4Network("10.255.0.0/16")
    narrow = topo.services.nat64.model_copy(update={"source": IPv6Network("2001:db8:172:80::/120")})
    assert facts.mapped_clients(narrow) == IPv4Network("10.255.0.0/24")


def test_an_ipv4_lab_is_refused(tmp_path: Path) -> None:
    path = _variant(tmp_path, "  use_case: sfw\n", "  use_case: sfw\n" + NAT64, REPO / "labs" / "topology3.yml")
    assert "IPv4 only" in _problems(path)


def test_pairs_that_translate_on_both_nodes_are_refused(tmp_path: Path) -> None:
    path = _variant(tmp_path, "  load_balancing: tlb\n", "  load_balancing: tlb\n  tlb_real_service: srx\n")
    assert "would translate on both nodes at once" in _problems(path)


def test_an_sfw_lab_announces_the_nat64_pool_toward_untrust(tmp_path: Path) -> None:
    path = _variant(tmp_path, "  use_case: mixed\n  nat_sources: [100.64.128.0/17]\n", "  use_case: sfw\n")
    plan = _plan(path)
    bird = plan.files["nodes/srx1/bird.conf"]
    assert "route 198.51.100.0/28 blackhole;" in bird  # the NAT64 pool is the first (no NAPT44 pools)
    # the IPv4 untrust session announces it; the IPv6 one (no IPv4 route to carry) is as before
    exports = [line for line in bird.splitlines() if "export" in line and 'proto ~ "trust_*"' in line]
    assert len(exports) == 2 and ['proto = "originated"' in line for line in exports].count(True) == 1
    assert "table ip srx_nat " not in plan.files["nodes/srx1/srx.nft"]


@pytest.mark.parametrize(("old", "new", "message"), [
    ('"2001:db8:172:80::/112"', '"2001:db8:172:80::/96"', "services.nat64.source: 2001:db8:172:80::/96 has more"),
    ("server: 203.0.113.64}", "server: 203.0.113.64, mapped: 198.18.0.0/16}", "overlaps addressing.p2p"),
    ('address: "2001:db8:64::1"', 'address: "2001:db8:1::1"', "is inside addressing.v6.p2p"),
    ('address: "2001:db8:64::1"', 'address: "2001:db8:172:80::9"', "is one of the clients"),
    ("server: 203.0.113.64}", "server: 192.0.0.1}", "the translator's own range"),
    ('source: "2001:db8:172:80::/112"', 'source: "2001:db8:99::/112"', "inside no host's prefixes6"),
    ("server: 203.0.113.64}", "server: 203.0.113.64, mapped: 198.19.0.0/16}", "addressing.mgmt"),
])
def test_what_would_break_the_translator_is_refused(tmp_path: Path, old: str, new: str, message: str) -> None:
    assert message in _problems(_variant(tmp_path, old, new))


def test_the_readiness_waits_for_the_nat64_pools_at_the_untrust_gateway() -> None:
    plan = _plan()
    wanted = {e.prefix for e in plan.expected_routes if e.ns.endswith("gw-untrust")}
    assert {"198.51.100.32/28", "198.51.100.48/28"} <= wanted


def test_an_export_that_cannot_take_the_pool_is_refused() -> None:
    from lab_orchestrator.plan import render

    assert render._with_nat64_pool('where proto ~ "trust_*"') == 'where proto = "originated" || proto ~ "trust_*"'
    same = 'filter { if proto = "originated" then accept; reject; }'
    assert render._with_nat64_pool(same) == same
    with pytest.raises(ValueError, match="cannot add the NAT64 pool"):
        render._with_nat64_pool('filter { reject; }')


def test_the_rendered_configuration_has_the_jvds_nat64_stanzas() -> None:
    plan = _plan()
    conf = plan.files["nodes/srx2/juniper.conf"]
    for line in ("pool nat_64_source_ipv4_pool {", "198.51.100.32/28;", "rule srx_nat64_rule2 {",
                 "source-address 2001:db8:172:80::/112;", "destination-address 203.0.113.64/32;",
                 "rule-set nat_64_dest_rule {", "destination-address 2001:db8:64::1/128;",
                 "route 198.51.100.32/28 discard;", "export [ MNHA-PREPEND NAT64-POOL NAT-POOL TRUST-TO-UNTRUST ];"):
        assert line in conf, line
    ipv6_untrust = conf.split("group IPv6_MX-UNTRUST", 1)[1].split("}", 1)[0]
    assert "export" in ipv6_untrust and "NAT64-POOL" not in ipv6_untrust  # an IPv4 pool: not over IPv6


def _ends_in_reject(conf: str) -> set[str]:
    """The policy-statements of CONF whose last term rejects whatever reaches it."""
    out = set()
    for part in conf.split("    policy-statement ")[1:]:
        name, body = part.split(" {", 1)
        body = body.split("\n    }\n", 1)[0]
        last = body.rsplit("term ", 1)[-1]
        if "from" not in last and "then reject;" in last:
            out.add(name.strip())
    return out


@pytest.mark.parametrize("use_case", ["mixed", "sfw", "cgnat"])
def test_no_export_policy_follows_one_that_rejects_everything_left(tmp_path: Path, use_case: str) -> None:
    """Junos evaluates an export chain in order and stops at the first reject: a policy after one that
    ends in `then reject` announces nothing. The NAT64 pool's must come before such a policy."""
    new = {"mixed": "  use_case: mixed\n  nat_sources: [100.64.128.0/17]\n", "sfw": "  use_case: sfw\n",
           "cgnat": "  use_case: cgnat\n"}[use_case]
    plan = _plan(_variant(tmp_path, "  use_case: mixed\n  nat_sources: [100.64.128.0/17]\n", new))
    for srx in ("srx1", "srx2"):
        conf = plan.files[f"nodes/{srx}/juniper.conf"]
        final = _ends_in_reject(conf)
        assert {"TRUST-TO-UNTRUST", "UNTRUST-TO-TRUST"} & final  # the check sees the rejecting policies
        exports = [line.split("export", 1)[1].strip(" [];").split() for line in conf.splitlines()
                   if line.strip().startswith("export ")]
        assert any("NAT64-POOL" in chain for chain in exports), exports
        for chain in exports:
            for i, policy in enumerate(chain[:-1]):
                assert policy not in final, f"{srx}: {chain[i + 1:]} after {policy}, which rejects the rest"
