"""use_case mixed (labs/topology3-mixed.yml): SFW and NAPT44 on the same SRXs, chosen by source prefix, as
the JVD's SRXs run them (srx1a_srx4600.conf: rule srx_nat_rule1 translates source-address 172.80.0.0/12,
SFW44_POLICY passes 172.160.0.0/12). Client 100.64.0.0/17 is SFW, 100.64.128.0/17 is translated."""

from __future__ import annotations

from ipaddress import IPv4Network, ip_address
from pathlib import Path

import pytest

from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod
from lab_orchestrator.plan import trafficsetup
from lab_orchestrator.plan.pipeline import LabPlan

REPO = Path(__file__).resolve().parents[2]
SFW, NAT = "100.64.0.0/17", "100.64.128.0/17"
SRXS = ("srx1", "srx2", "srx3", "srx4")


def _plan(stem: str) -> LabPlan:
    return planmod.build(load_topology(REPO / "labs" / f"{stem}.yml").topology, f"labs/{stem}.yml", "/run/lab")


@pytest.fixture(scope="module")
def plan() -> LabPlan:
    return _plan("topology3-mixed")


def test_only_the_nat_prefix_is_translated(plan: LabPlan) -> None:
    for srx in SRXS:
        pool = IPv4Network(plan.node(srx).nat_pool)
        nft = plan.files[f"nodes/{srx}/srx.nft"]
        snat = [line for line in nft.splitlines() if " snat to " in line]
        assert len(snat) == 1, nft
        assert f"ip saddr {{ {NAT} }} counter snat to {pool.network_address}-{pool.broadcast_address} persistent" \
            in snat[0]
        assert SFW not in nft  # the SFW prefix meets the security policy only


def test_the_junos_config_shows_the_jvd_rule_with_its_source_match(plan: LabPlan) -> None:
    conf = plan.files["nodes/srx1/juniper.conf"]
    rule = conf.split("rule cgnat {", 1)[1].split("then {", 1)[0]
    assert f"source-address {NAT};" in rule and "destination-address 0.0.0.0/0;" in rule, rule
    assert "source-address 0.0.0.0/0;" not in rule
    assert "export [ MNHA-PREPEND NAT-POOL TRUST-TO-UNTRUST ];" in conf


def test_the_srx_announces_its_pools_and_the_sfw_prefix_not_the_nat_prefix(plan: LabPlan) -> None:
    bird = plan.files["nodes/srx1/bird.conf"]
    block = bird[bird.index("protocol bgp untrust_"):]
    untrust = next(line for line in block.splitlines() if "export" in line)
    assert "peer_pool" not in bird  # the pair shares its pool (TLB, SRG0): no peer's pool to announce
    assert f'if proto ~ "trust_*" && !(net ~ [ {NAT}+ ]) then accept; reject;' in untrust
    assert 'if proto = "originated" || proto = "loopback" then accept;' in untrust
    # the gateway on the untrust side waits for every pool and for the SFW prefix, never the NAT prefix
    pools = list(dict.fromkeys(n.nat_pool for n in plan.nodes if n.nat_pool))  # each pair's pool once
    assert len(pools) == len(plan.mnha)
    wanted = [r.prefix for r in plan.expected_routes if r.ns.endswith("-gw-untrust")]
    assert sorted(wanted) == sorted([*pools, SFW])


def test_the_mx_hashes_back_only_the_sfw_answers(plan: LabPlan) -> None:
    trust = plan.files["nodes/mx1/selector-trust.nft"]
    untrust = plan.files["nodes/mx1/selector-untrust.nft"]
    assert f"ip saddr {{ {SFW}, {NAT} }}" in trust  # both use cases are steered on the way out (the JVD's filter)
    assert f"ip daddr {{ {SFW} }} meta mark" in untrust  # NAPT44 answers come back by the pool routes


def test_the_generator_sends_from_both_prefixes(plan: LabPlan, tmp_path: Path) -> None:
    flows = trafficsetup.by_family(plan, [4], 7, 700.0, "imix", 1.0, fifo_dir=tmp_path)[4].flows
    assert [f.flow_id for f in flows] == list(range(7))
    inside = [NAT if ip_address(f.src) in IPv4Network(NAT) else SFW for f in flows]
    assert inside == [SFW, NAT, SFW, NAT, SFW, NAT, SFW]
    assert len({f.src for f in flows}) == 7


def test_other_labs_send_from_their_one_prefix_as_before(tmp_path: Path) -> None:
    for stem in ("topology3", "topology3-cgnat"):
        flows = trafficsetup.by_family(_plan(stem), [4], 5, 500.0, "imix", 1.0, fifo_dir=tmp_path)[4].flows
        assert [f.src for f in flows] == [f"100.64.0.{i}" for i in range(1, 6)], stem


def test_mixed_in_ecmp_mode_steers_only_the_sfw_answers(tmp_path: Path) -> None:
    text = (REPO / "labs" / "topology3-mixed.yml").read_text()
    text = text.replace("load_balancing: tlb", "load_balancing: ecmp-chash")
    lab = tmp_path / "mixed-ecmp.yml"
    lab.write_text(text)
    plan = planmod.build(load_topology(lab).topology, "mixed-ecmp.yml", "/run/lab")
    untrust = plan.files["nodes/mx1/selector-untrust.nft"]
    # without the match every answer would be hashed, the pool addresses' too: the wrong SRX, no binding
    assert f"ip daddr {{ {SFW} }} meta mark" in untrust
    trust = plan.files["nodes/mx1/selector-trust.nft"]
    assert "ip saddr {" not in trust  # ECMP hashes everything on the trust side, as before
