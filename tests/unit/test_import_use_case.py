"""`lab import`: the SRXs' use case (sfw, cgnat, mixed) from their source-NAT rules and security policies.

The JVD's own configurations (tests/fixtures/import/jvd/) run NAPT44 and SFW side by side: rule
srx_nat_rule1 translates source-address 172.80.0.0/12, policy SFW44_POLICY permits 172.160.0.0/12
untranslated, so the import is use_case mixed. The small fixtures (tests/fixtures/import/) have one rule
that covers their one client prefix: cgnat, and mixed once a second client prefix or a narrower rule
is written into them."""

from __future__ import annotations

from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import pytest

from lab_orchestrator.importer import ImportResult, import_configs
from lab_orchestrator.importer.junos import read as read_junos
from lab_orchestrator.importer.parse import parse_junos_set
from lab_orchestrator.model.schema import Topology
from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "import"
JVD = FIXTURES / "jvd"
JVD_FILES = [JVD / n for n in ("mx1_mx304.conf", "srx1a_srx4600.conf", "srx1b_srx4600.conf", "srx2a_srx4600.conf",
                               "srx2b_srx4600.conf", "gateway_emulator_mx304.conf")]


def _rows(imported: ImportResult, file: str, line: int) -> dict[str, Any]:
    return next(r for r in imported.report_json()["statements"] if (r["file"], r["line"]) == (file, line))


def _load(imported: ImportResult, tmp_path: Path) -> tuple[Topology, Path]:
    path = tmp_path / "lab.yml"
    path.write_text(imported.yaml())
    return load_topology(path).topology, path


# ------------------------------------------------------------------------------------------ the JVD

@pytest.fixture(scope="module")
def jvd() -> ImportResult:
    return import_configs(JVD_FILES, name="jvd")


def test_jvd_srx_configurations_are_sfw_and_napt44_side_by_side(jvd: ImportResult) -> None:
    services, nodes = jvd.topology["services"], jvd.topology["nodes"]
    assert services["use_case"] == "mixed"
    assert services["nat_sources"] == ["172.80.0.0/12"]
    # 172.160.0.0/12 is a client prefix (SFW44_POLICY permits it as a source, the gateway routes it to the
    # traffic generator's client side); the MX originates it on the untrust side as the way back to it
    assert nodes["client"]["prefixes"] == ["172.80.0.0/12", "172.160.0.0/12"]
    assert nodes["server"]["prefixes"] == ["203.0.113.0/24"]
    # TLB, SRG0, A/B prepends: one node translates at a time, so the pair keeps its one pool (no halves)
    assert {n: nodes[n].get("nat_pool") for n in ("srx1a", "srx1b", "srx2a", "srx2b")} == {
        "srx1a": "100.64.1.0/24", "srx1b": "100.64.1.0/24", "srx2a": "100.64.3.0/24", "srx2b": "100.64.3.0/24"}
    for srx, line in (("srx1a", 103), ("srx1b", 106)):
        row = _rows(jvd, f"{srx}_srx4600.conf", line)  # address 100.64.1.0/24 of pool srx_nat_pool1
        assert row["status"] == "emulated" and "srx1a and srx1b share" in row["note"], row


def test_jvd_report_says_where_the_use_case_comes_from(jvd: ImportResult) -> None:
    notes = jvd.report_json()["notes"]
    decision = next(n for n in notes if n.startswith("use_case "))
    assert decision.startswith("use_case mixed: srx1a_srx4600.conf:118 rule srx_nat_rule1 (source-address "
                               "172.80.0.0/12) translates 172.80.0.0/12; srx1a_srx4600.conf:201 policy SFW44_POLICY "
                               "(source-address 172.160.0.0/12) permits untranslated")
    assert any(n.startswith("172.160.0.0/12: a client prefix, not a server's: mx1_mx304.conf:959") for n in notes)
    rule = _rows(jvd, "srx1a_srx4600.conf", 118)
    assert rule["status"] == "emulated" and "services.nat_sources 172.80.0.0/12" in rule["note"]
    policy = _rows(jvd, "srx1a_srx4600.conf", 201)
    assert policy["status"] == "approximated" and "SFW client prefix" in policy["note"]
    back = _rows(jvd, "mx1_mx304.conf", 959)  # route 172.160.0.0/12 discard in UNTRUST_VR
    assert "route back to a client prefix" in back["note"]
    gateway = _rows(jvd, "gateway_emulator_mx304.conf", 191)  # route 172.160.0.0/12 next-hop 172.16.8.1
    assert gateway["status"] == "emulated" and "nodes.client.prefixes" in gateway["note"]
    for srx in ("srx1b", "srx2a", "srx2b"):  # every SRX's rule says the same
        assert any(r["file"] == f"{srx}_srx4600.conf" and "services.nat_sources" in r["note"]
                   for r in jvd.report_json()["statements"])
    nat64 = _rows(jvd, "srx1a_srx4600.conf", 139)  # srx_nat64_rule2 then source-nat pool nat_64_source_ipv4_pool
    assert nat64["status"] == "ignored" and "NAT64" in nat64["note"]


def test_jvd_import_validates_and_renders_the_translation_of_its_nat_sources(jvd: ImportResult, tmp_path: Path) -> None:
    topo, path = _load(jvd, tmp_path)
    assert topo.services.use_case == "mixed" and [str(p) for p in topo.services.nat_sources] == ["172.80.0.0/12"]
    files = dict(planmod.build(topo, str(path), "/run/lab").files)
    nft = files["nodes/srx1a/srx.nft"]
    assert "ip saddr { 172.80.0.0/12 } counter snat to 100.64.1.0-100.64.1.255" in nft
    assert "snat to 100.64.1.0-100.64.1.255" in files["nodes/srx1b/srx.nft"]  # the pair's one pool
    assert "protocol static peer_pool" not in files["nodes/srx1a/bird.conf"]
    assert "172.160.0.0/12" not in nft  # SFW: no translation


def test_jvd_icl_is_routed_through_the_mx_as_the_files_route_it(jvd: ImportResult) -> None:
    """mx1_mx304.conf's MNHA-VR (ae1.100..ae4.100, local-as 65050) and each SRX's MNHA-VR (local-as 65001 on
    node A, 65002 on node B): an icl link from each SRX to the MX, no direct SRX-SRX link."""
    topo = jvd.topology
    icl = [(link["endpoints"], link.get("addresses")) for link in topo["links"] if link.get("zone") == "icl"]
    assert icl == [([f"mx1:ae{n}.100", f"{srx}:ae{1 + (n > 2)}.100"], [f"10.3.{n}.1/30", f"10.3.{n}.2/30"])
                   for n, srx in ((1, "srx1a"), (2, "srx1b"), (3, "srx2a"), (4, "srx2b"))]
    nodes = topo["nodes"]
    assert nodes["mx1"]["bgp"] == {"trust_as": 65200, "untrust_as": 65400, "icl_as": 65050}
    assert {n: nodes[n]["bgp"] for n in ("srx1a", "srx1b", "srx2a", "srx2b")} == {
        "srx1a": {"as": 65001}, "srx1b": {"as": 65002}, "srx2a": {"as": 65001}, "srx2b": {"as": 65002}}
    assert "ICL srx1a - srx1b: routed through mx1 (MNHA-VR), as the configurations have it" in \
        jvd.report_json()["notes"]


def test_jvd_report_marks_the_routed_icl_emulated(jvd: ImportResult) -> None:
    ha = _rows(jvd, "srx1a_srx4600.conf", 56)  # peer-id 2 routing-instance MNHA-VR
    assert ha["status"] == "emulated" and "ICL link to mx1" in ha["note"]
    assert _rows(jvd, "srx1a_srx4600.conf", 55)["status"] == "emulated"  # peer-id 2 interface lo0.0
    unit = _rows(jvd, "mx1_mx304.conf", 270)  # ae1 unit 100 family inet address 10.3.1.1/30
    assert unit["status"] == "emulated" and "mx1:ae1.100 - srx1a:ae1.100 (zone icl)" in unit["note"]
    neighbor = _rows(jvd, "mx1_mx304.conf", 773)  # mnha_pair_2_A_icl_ebgp neighbor 10.3.3.2
    assert neighbor["status"] == "emulated" and "mx1 (AS 65050) - srx2a (AS 65001)" in neighbor["note"]
    assert _rows(jvd, "mx1_mx304.conf", 738)["status"] == "emulated"  # local-as 65050
    assert _rows(jvd, "mx1_mx304.conf", 751)["status"] == "emulated"  # mnha_pair_1_B peer-as 65002
    assert _rows(jvd, "srx1a_srx4600.conf", 595)["status"] == "emulated"  # MNHA-VR local-as 65001
    # VR-1's local-as 65000: one AS per SRX in the lab, its MNHA-VR's
    vr1 = _rows(jvd, "srx1a_srx4600.conf", 624)
    assert vr1["status"] == "approximated" and "local-as 65000: the lab's is 65001" in vr1["note"]
    assert not [r for r in jvd.report_json()["statements"] if "direct" in r["note"] and "ICL" in r["note"]]


def test_jvd_import_plans_the_routed_icl(jvd: ImportResult, tmp_path: Path) -> None:
    from lab_orchestrator import api

    _, path = _load(jvd, tmp_path)
    topo = api.load(path, check_host=False).topology
    assert not [link for link in topo.links if link.zone == "icl" and all(
        topo.nodes[ep.split(":")[0]].kind == "srx" for ep in link.endpoints)]
    files = dict(api.plan(path, state_root=None).files)
    mx = files["nodes/mx1/bird.conf"]
    assert "protocol bgp icl_srx1a from peer {\n  neighbor 10.3.1.2 as 65001;" in mx
    assert "protocol bgp icl_srx2b from peer {\n  neighbor 10.3.4.2 as 65002;" in mx
    srx = files["nodes/srx1b/bird.conf"]
    assert "protocol bgp icl_mx1 from peer {\n  neighbor 10.3.2.1 as 65050;" in srx


# -------------------------------------------------------------------------- the small fixtures

def _variant(tmp_path: Path, rule: str = "10.60.0.0/16", extra_route: str | None = None,
             before: str | None = None) -> list[Path]:
    """fw-a (braces) and fw-b (set lines) with RULE as r1's source-address; EXTRA_ROUTE: a second client
    prefix routed by edge-in to the client; BEFORE: a set line of a rule r0 placed ahead of r1."""
    fw_a = (FIXTURES / "fw-a.conf").read_text().replace("source-address 10.60.0.0/16;", f"source-address {rule};")
    fw_b = (FIXTURES / "fw-b.set").read_text().replace("match source-address 10.60.0.0/16",
                                                       f"match source-address {rule}")
    if before:
        fw_b = fw_b.replace("set security nat source rule-set rs rule r1", before + "\nset security nat source "
                            "rule-set rs rule r1", 1)
        fw_a = fw_a.replace("                rule r1 {", "                rule r0 {\n                    match {\n"
                            "                        source-address 10.60.128.0/17;\n                    }\n"
                            "                    then {\n                        source-nat {\n"
                            "                            off;\n                        }\n                    }\n"
                            "                }\n                rule r1 {", 1)
    edge = (FIXTURES / "edge.conf").read_text()
    if extra_route:
        edge = edge.replace("route 10.60.0.0/16 next-hop 10.50.8.2;",
                            f"route 10.60.0.0/16 next-hop 10.50.8.2;\n                route {extra_route} next-hop "
                            "10.50.8.2;")
    for name, text in (("fw-a.conf", fw_a), ("fw-b.set", fw_b), ("edge.conf", edge)):
        (tmp_path / name).write_text(text)
    return [FIXTURES / "lb1.conf", tmp_path / "fw-a.conf", tmp_path / "fw-b.set", tmp_path / "edge.conf"]


def test_a_rule_that_covers_every_client_prefix_keeps_cgnat(tmp_path: Path) -> None:
    imported = import_configs(_variant(tmp_path), name="fx")
    assert imported.topology["services"]["use_case"] == "cgnat" and "nat_sources" not in imported.topology["services"]
    assert "use_case cgnat: fw-a.conf:59 rule r1 (source-address 10.60.0.0/16) covers every client prefix " \
           "(10.60.0.0/16)" in imported.report_json()["notes"]
    assert "covers every client prefix" in _rows(imported, "fw-b.set", 21)["note"]


def test_a_rule_that_matches_every_source_keeps_cgnat_with_two_client_prefixes(tmp_path: Path) -> None:
    imported = import_configs(_variant(tmp_path, rule="0.0.0.0/0", extra_route="10.61.0.0/16"), name="fx")
    assert imported.topology["nodes"]["client"]["prefixes"] == ["10.60.0.0/16", "10.61.0.0/16"]
    assert imported.topology["services"]["use_case"] == "cgnat"
    _load(imported, tmp_path)


def test_a_rule_that_covers_some_client_prefixes_is_mixed(tmp_path: Path) -> None:
    imported = import_configs(_variant(tmp_path, extra_route="10.61.0.0/16"), name="fx")
    services = imported.topology["services"]
    assert (services["use_case"], services["nat_sources"]) == ("mixed", ["10.60.0.0/16"])
    assert imported.topology["nodes"]["client"]["prefixes"] == ["10.60.0.0/16", "10.61.0.0/16"]
    note = next(n for n in imported.report_json()["notes"] if n.startswith("use_case"))
    assert note.startswith("use_case mixed: fw-a.conf:59 rule r1 (source-address 10.60.0.0/16) translates "
                           "10.60.0.0/16.") and note.endswith("10.61.0.0/16 SFW")
    topo, _ = _load(imported, tmp_path)
    assert [str(p) for p in topo.services.nat_sources] == ["10.60.0.0/16"]


@pytest.mark.parametrize("rule, before, nat", [
    ("10.60.0.0/17", None, "10.60.0.0/17"),  # the rule matches the lower half of the client prefix
    ("10.60.0.0/16", "set security nat source rule-set rs rule r0 match source-address 10.60.128.0/17\n"
                     "set security nat source rule-set rs rule r0 then source-nat off", "10.60.0.0/17"),
])
def test_a_rule_that_matches_part_of_a_client_prefix_splits_it(tmp_path: Path, rule: str, before: str | None,
                                                               nat: str) -> None:
    imported = import_configs(_variant(tmp_path, rule=rule, before=before), name="fx")
    assert imported.topology["nodes"]["client"]["prefixes"] == ["10.60.0.0/17", "10.60.128.0/17"]
    assert imported.topology["services"]["nat_sources"] == [nat]
    assert any(n.startswith("client host client: 10.60.0.0/16 split into 10.60.0.0/17, 10.60.128.0/17")
               for n in imported.report_json()["notes"])
    _load(imported, tmp_path)


def test_a_source_no_address_book_resolves_keeps_cgnat_and_says_where(tmp_path: Path) -> None:
    files = _variant(tmp_path, extra_route="10.61.0.0/16")
    fw_a = files[1].read_text().replace("source-address 10.60.0.0/16;", "source-address-name clients;")
    files[1].write_text(fw_a)
    fw_b = files[2].read_text().replace("match source-address 10.60.0.0/16", "match source-address-name clients")
    files[2].write_text(fw_b)
    imported = import_configs([files[0], files[2], files[1], files[3]], name="fx")
    assert imported.topology["services"]["use_case"] == "cgnat"
    assert any(n.startswith("use_case cgnat: fw-b.set:21: source clients is in no address book")
               for n in imported.report_json()["notes"])
    # with the address book the name is 10.60.0.0/16: one of the two client prefixes
    files[2].write_text(fw_b + "set security address-book global address clients 10.60.0.0/16\n")
    again = import_configs([files[0], files[2], files[1], files[3]], name="fx")
    assert again.topology["services"]["nat_sources"] == ["10.60.0.0/16"]


def test_address_book_names_resolve_through_sets() -> None:
    text = ("set security address-book global address sfw_source_prefix_172.160.0.0/12 172.160.0.0/12\n"
            "set security address-book global address v6 2001:db8::/96\n"
            "set security address-book global address-set both address sfw_source_prefix_172.160.0.0/12\n"
            "set security address-book global address-set both address v6\n"
            "set security zones security-zone in address-book address lan 10.1.0.0/16\n")
    j = read_junos(parse_junos_set(text, "a.set"))
    sfw = [IPv4Network("172.160.0.0/12")]
    assert j.resolve("sfw_source_prefix_172.160.0.0/12") == j.resolve("172.160.0.0/12") == sfw
    assert [str(n) for n in j.resolve("both") or []] == ["172.160.0.0/12"]
    assert [str(n) for n in j.resolve("lan") or []] == ["10.1.0.0/16"]
    assert j.resolve("any") == [IPv4Network("0.0.0.0/0")]
    assert j.resolve("v6") == [] and j.resolve("nowhere") is None


def test_a_rule_that_matches_no_client_prefix_is_sfw(tmp_path: Path) -> None:
    imported = import_configs(_variant(tmp_path, rule="10.99.0.0/16"), name="fx")
    assert imported.topology["services"]["use_case"] == "sfw"
    assert "nat_pool" not in imported.topology["nodes"]["fw-a"]
    assert any(n.startswith("use_case sfw: no source-NAT rule matches a client prefix (fw-a.conf:59 rule r1")
               for n in imported.report_json()["notes"])
    _load(imported, tmp_path)


def test_the_import_doc_shows_the_jvd_report_as_it_is(jvd: ImportResult) -> None:
    doc = (Path(__file__).resolve().parents[2] / "docs" / "import.md").read_text(encoding="utf-8")
    section = doc.split("## Use case: SFW, CGNAT or both", 1)[1].split("\n## ", 1)[0]
    shown = [line for line in section.splitlines() if line.startswith(("  - ", "  srx1a_srx4600.conf:"))]
    assert len(shown) == 3
    report = jvd.report_text("jvd.yml").splitlines()
    for line in shown:
        assert line in report, f"docs/import.md shows a report line the import does not print: {line}"
