"""Validation: every problem of a topology file, located as FILE:LINE: yaml.path: message (hint).

Golden cases live in tests/golden/errors/: NAME.yml is a bad topology, NAME.txt the exact
diagnostics `lab validate` prints for it (one per line). Files are loaded with a path relative to
that folder, so the goldens hold no machine-specific path. A first line
`# host_routes: NET NET ...` in NAME.yml stands in for this machine's routes.

UPDATE_GOLDEN=1 rewrites the .txt files from the current output.
"""

from __future__ import annotations

import json
import subprocess
import sys
from ipaddress import IPv4Network, IPv6Network, ip_network
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lab_orchestrator.cli import app
from lab_orchestrator.model.diagnostics import Diagnostic, TopologyInvalid, dotted
from lab_orchestrator.model.schema import Services
from lab_orchestrator.model.validate import load_topology

REPO = Path(__file__).resolve().parents[2]
ERRORS = REPO / "tests" / "golden" / "errors"
LABS = sorted((REPO / "labs").glob("*.yml"))
CASES = sorted(p.stem for p in ERRORS.glob("*.yml"))

# The problems a topology file must be told about: each has a golden case (renaming a case must not
# silently drop one).
REQUIRED_CASES = {
    "unknown_key_top", "unknown_key_nested", "yaml_syntax", "yaml_indent", "duplicate_key",
    "missing_required", "wrong_type", "as_zero", "bad_ip", "dangling_endpoint", "endpoint_format",
    "interface_twice", "linux_name_clash", "ifname_too_long", "mx_link_no_zone", "duplicate_address",
    "overlapping_pools", "mnha_same_node", "mnha_non_srx", "mnha_no_icl", "srd_non_mx",
    "ikev2_standby_group", "host_routes", "many_errors", "empty",
    # HSRP timers, IKEv2 pools of one cluster, standby VIP subnet, no nodes
    "hsrp_hello_not_below_hold", "ikev2_pools_overlap", "standby_vip_outside_subnet", "no_nodes",
    # dual stack: IPv6 checked as IPv4 is (families, subnets, overlaps, the host's IPv6 routes)
    "v6_addresses", "v6_host_routes", "v6_without_pools", "v6_family",
    # services.default_policy: Junos's two keywords only
    "default_policy_unknown",
    # use_case mixed: nat_sources are whole client prefixes, each once, leaving one SFW; only with mixed
    "mixed_nat_sources", "mixed_without_nat_sources", "nat_sources_without_mixed", "mixed_all_translated",
    # services.nat_pool_scope pair: only where one node of a pair translates at a time, one pool per pair
    "nat_pool_scope_pair_both_translate", "nat_pool_scope_pair_two_pools",
}


def _host_routes(text: str) -> list[IPv4Network | IPv6Network]:
    first = text.splitlines()[0] if text else ""
    if first.startswith("# host_routes:"):
        return [ip_network(n) for n in first.partition(":")[2].split()]
    return []


def _diagnose(name: str, monkeypatch: pytest.MonkeyPatch) -> list[Diagnostic]:
    monkeypatch.chdir(ERRORS)
    text = (ERRORS / f"{name}.yml").read_text()
    with pytest.raises(TopologyInvalid) as info:
        load_topology(f"{name}.yml", _host_routes(text))
    return info.value.diagnostics


def _rendered(diagnostics: list[Diagnostic]) -> str:
    return "".join(d.render() + "\n" for d in diagnostics)


def _load_text(tmp_path: Path, text: str, host_routes: list[IPv4Network] | None = None,
               name: str = "t.yml") -> list[Diagnostic]:
    path = tmp_path / name
    path.write_text(text)
    try:
        load_topology(path, host_routes or [])
    except TopologyInvalid as exc:
        return exc.diagnostics
    return []


# --- golden error files ---------------------------------------------------------------------


def test_required_cases_present() -> None:
    assert set(CASES) >= REQUIRED_CASES, f"missing golden cases: {sorted(REQUIRED_CASES - set(CASES))}"


def test_every_golden_text_has_its_topology() -> None:
    orphans = sorted(p.name for p in ERRORS.glob("*.txt") if not (ERRORS / f"{p.stem}.yml").exists())
    assert not orphans


@pytest.mark.parametrize("name", CASES)
def test_error_golden(name: str, monkeypatch: pytest.MonkeyPatch, golden) -> None:
    diagnostics = _diagnose(name, monkeypatch)
    assert diagnostics, "a golden error case must be invalid"
    golden(ERRORS / f"{name}.txt", _rendered(diagnostics))


@pytest.mark.parametrize("name", CASES)
def test_error_lines_point_at_the_offending_line(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Beyond the eye check of the goldens: each line exists, and when the path ends in a key,
    that line names a key of the path (a missing key is reported at its parent mapping)."""
    lines = (ERRORS / f"{name}.yml").read_text().splitlines() or [""]
    for diag in _diagnose(name, monkeypatch):
        assert diag.file == f"{name}.yml"
        assert 1 <= diag.line <= len(lines), diag.render()
        if not diag.path or not isinstance(diag.path[-1], str) or diag.message.startswith("missing required key"):
            continue
        if f"the default {dotted(diag.path)}" in diag.message:  # not written: reported at the parent
            continue
        text = lines[diag.line - 1]
        keys = [p for p in diag.path if isinstance(p, str)]
        assert any(k in text for k in keys), f"{diag.render()}\n  line {diag.line} is: {text!r}"


def test_golden_case_lines_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """A few lines checked against the file's text, independently of the goldens."""
    expect = {
        "unknown_key_nested": [(6, "nodes.srx1.bgp"), (8, "nodes.srx1.bgpp")],
        "duplicate_key": [(7, "nodes.r1.kind"), (8, "nodes.h1")],
        "as_zero": [(4, "nodes.mx1.bgp.untrust_as"), (5, "nodes.srx1.bgp.as")],
        "dangling_endpoint": [(8, "links[1].endpoints[1]")],
        "mnha_no_icl": [(11, "mnha[0].nodes")],
        "srg1_active_without_mode": [(12, "mnha[0].srg1_active")],
        "ikev2_standby_group": [(8, "nodes.router1.ikev2_cluster.standby_group")],
        "yaml_syntax": [(5, "")],
        "yaml_indent": [(6, "")],
    }
    for name, wanted in expect.items():
        got = [(d.line, dotted(d.path) if d.path else "") for d in _diagnose(name, monkeypatch)]
        assert got == wanted, name


def test_host_routes_case_reports_overlaps_but_not_the_default_route(monkeypatch: pytest.MonkeyPatch) -> None:
    messages = [d.message for d in _diagnose("host_routes", monkeypatch)]
    assert any("198.18.0.0/24, a route of this machine" in m for m in messages)
    assert any("192.0.2.0/24, a route of this machine" in m for m in messages)
    assert not any("0.0.0.0/0" in m for m in messages)


def test_many_errors_collects_every_stage(monkeypatch: pytest.MonkeyPatch) -> None:
    diagnostics = _diagnose("many_errors", monkeypatch)
    messages = " | ".join(d.message for d in diagnostics)
    assert len(diagnostics) >= 12
    # field errors (pydantic) and cross-reference errors together, in one run
    assert "unknown key 'loopbak'" in messages
    assert "must be less than or equal to 4294967294" in messages
    assert "which is not defined" in messages
    assert "is already used by" in messages
    assert "an MNHA pair needs two different nodes" in messages
    assert [d.line for d in diagnostics] == sorted(d.line for d in diagnostics)


# --- the CLI ----------------------------------------------------------------------------------


def test_cli_many_errors_exit_2_and_prints_every_diagnostic(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ERRORS)
    result = CliRunner().invoke(app, ["validate", "--no-host-check", "many_errors.yml"])
    assert result.exit_code == 2, result.output
    expected = (ERRORS / "many_errors.txt").read_text().splitlines()
    assert result.stderr.splitlines() == expected + [f"{len(expected)} error(s)"]


def test_cli_json_lists_every_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ERRORS)
    result = CliRunner().invoke(app, ["validate", "--no-host-check", "--json", "bad_ip.yml"])
    assert result.exit_code == 2
    data = json.loads(result.stdout)
    assert data["valid"] is False
    assert [(e["line"], e["path"]) for e in data["errors"]] == [
        (4, "nodes.r1.loopback"), (7, "nodes.h1.prefixes[0]"), (7, "nodes.h1.prefixes[1]"),
        (9, "links[0].addresses[1]"),
    ]
    assert all(e["file"] == "bad_ip.yml" for e in data["errors"])


def test_cli_subprocess_exit_code(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real entry point (not the test runner): exit 2, diagnostics on stderr, nothing on stdout."""
    code = "import sys; from lab_orchestrator.cli import app; sys.argv[0] = 'lab'; app()"
    proc = subprocess.run([sys.executable, "-c", code, "validate", "--no-host-check", "many_errors.yml"],
                          cwd=ERRORS, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "COLUMNS": "80"})
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    assert proc.stderr.splitlines()[:-1] == (ERRORS / "many_errors.txt").read_text().splitlines()


@pytest.mark.parametrize("lab", LABS, ids=[p.stem for p in LABS])
def test_cli_shipped_labs_are_valid(lab: Path) -> None:
    result = CliRunner().invoke(app, ["validate", "--no-host-check", str(lab)])
    assert result.exit_code == 0, result.output
    assert "valid" in result.stdout


# --- loader behaviour -------------------------------------------------------------------------


@pytest.mark.parametrize("lab", LABS, ids=[p.stem for p in LABS])
def test_shipped_labs_ignore_a_default_route(lab: Path) -> None:
    """0.0.0.0/0 is on every machine; it must not make every lab overlap the host."""
    loaded = load_topology(lab, [IPv4Network("0.0.0.0/0")])
    assert loaded.topology.nodes


def test_host_route_inside_a_pool_is_reported(tmp_path: Path) -> None:
    text = "name: hr\nnodes:\n  h1: {kind: host}\n"
    assert _load_text(tmp_path, text, [IPv4Network("0.0.0.0/0")]) == []
    diags = _load_text(tmp_path, text, [IPv4Network("198.18.130.0/24")])
    assert [(d.line, dotted(d.path)) for d in diags] == [(1, "addressing.loopback")]


def test_two_problems_on_one_line_are_both_reported(tmp_path: Path) -> None:
    """Regression: diagnostics on the same line used to compare equal and be deduplicated away."""
    text = ("name: two\nnodes:\n  r1: {kind: ios-router}\n  r2: {kind: ios-router}\n"
            "links:\n  - {endpoints: [r1:Gi0/0, r2:Gi0/0], addresses: [10.0.0.1/30, 10.0.1.2/30]}\n"
            "  - {endpoints: [r1:Gi0/1, r2:Gi0/1], addresses: [10.0.0.1/30, 10.0.2.2/30]}\n")
    diags = _load_text(tmp_path, text)
    on_line_7 = sorted(d.message for d in diags if d.line == 7)
    assert len(on_line_7) == 2, on_line_7
    assert "address 10.0.0.1 is also used at links[0].addresses[0]" in on_line_7
    assert "10.0.2.2/30 is not in the subnet of 10.0.0.1/30" in on_line_7


def test_diagnostic_order_is_total_and_repeats_collapse() -> None:
    a = Diagnostic("f.yml", 3, ("nodes", "b"), "same message")
    b = Diagnostic("f.yml", 3, ("nodes", "a"), "same message")
    c = Diagnostic("f.yml", 1, ("name",), "z")
    assert a != b
    exc = TopologyInvalid([a, b, c, a])
    assert exc.diagnostics == [c, b, a]
    assert str(exc).splitlines() == [c.render(), b.render(), a.render()]


def test_render_format() -> None:
    assert Diagnostic("x.yml", 4, ("links", 3, "endpoints", 0), "bad", "fix it").render() == \
        "x.yml:4: links[3].endpoints[0]: bad (fix it)"
    assert Diagnostic("x.yml", 1, (), "bad").render() == "x.yml:1: (top): bad"


def test_field_error_does_not_echo_as_a_cross_reference_error(tmp_path: Path) -> None:
    """AS 0 is dropped to check the rest; the srx's 'needs bgp.as' would only repeat it."""
    text = ("name: echo\nnodes:\n  mx1: {kind: mx, bgp: {trust_as: 1, untrust_as: 2}}\n"
            "  srx1: {kind: srx, bgp: {as: 0}}\n  srx2: {kind: srx}\n"
            "links:\n  - {endpoints: [mx1:ge-0/0/0, srx1:ge-0/0/0], zone: dmz}\n")
    diags = {(dotted(d.path), d.message.split(",")[0]) for d in _load_text(tmp_path, text)}
    assert diags == {
        ("nodes.srx1.bgp.as", "must be greater than or equal to 1"),
        ("nodes.srx2.bgp", "an srx needs bgp.as"),  # not an echo: srx2 has no bgp at all
        ("links[0].zone", "must be 'trust'"),
    }


def test_a_node_without_a_usable_kind_does_not_stop_the_cross_references(tmp_path: Path) -> None:
    """A node whose kind is unusable is left out of the cross-reference checks (its name still counts as
    defined, so its links are no echo); the rest of the file is checked in the same run."""
    text = ("name: req\nnodes:\n  r1: {kind: router}\n"
            "links:\n  - [r1:Gi0/0, r9:Gi0/0]\n")
    diags = _load_text(tmp_path, text)
    assert [(d.line, dotted(d.path)) for d in diags] == [(3, "nodes.r1.kind"), (5, "links[0].endpoints[1]")]
    assert diags[0].message == "must be 'mx', 'srx', 'ios-router' or 'host', got 'router'"
    assert "'r9', which is not defined" in diags[1].message


def test_schema_and_semantic_errors_in_one_run(tmp_path: Path) -> None:
    """A duplicate key, a misspelt kind, an unknown key, a bad value and an undefined node: one run
    reports all five, each at its line; the misspelt kind gets its 'did you mean' and stands in as the
    kind it is closest to, so the links of that node are still checked."""
    text = ("name: all\n"
            "nodes:\n"
            "  client: {kind: host, prefixes: [100.64.0.0/16]}\n"
            "  gw: {kind: ios-routr, bgp: {as: 65010}}\n"
            "  mx1: {kind: mx, bgp: {trust_as: 65100, untrust_as: 65200}, colour: red}\n"
            "  srx1: {kind: srx, bgp: {as: notanumber}}\n"
            "  srx1: {kind: srx, bgp: {as: 65001}}\n"
            "links:\n"
            "  - [client:eth1, gw:GigabitEthernet0/0]\n"
            "  - {endpoints: [gw:GigabitEthernet0/1, mx1:ge-0/0/0], zone: trust}\n"
            "  - {endpoints: [mx1:ge-0/1/1, srx9:ge-0/0/0], zone: trust}\n"
            "  - {endpoints: [mx1:ge-0/2/1, srx1:ge-0/0/1], zone: untrust}\n")
    diags = _load_text(tmp_path, text)
    got = [(d.line, dotted(d.path)) for d in diags]
    assert got == [(4, "nodes.gw.kind"), (5, "nodes.mx1.colour"), (6, "nodes.srx1.bgp.as"), (7, "nodes.srx1"),
                   (11, "links[2].endpoints[1]")], got
    assert diags[0].hint == "did you mean 'ios-router'?"
    assert diags[3].message == "duplicate key 'srx1'"
    assert diags[4].hint.startswith("did you mean 'srx1'?")


def test_a_duplicate_key_does_not_hide_an_undefined_node(tmp_path: Path) -> None:
    text = ("name: dup\nnodes:\n  h1: {kind: host}\n  h1: {kind: host}\n  h2: {kind: host}\n"
            "links:\n  - [h1:eth1, h3:eth1]\n")
    messages = [d.message for d in _load_text(tmp_path, text)]
    assert "duplicate key 'h1'" in messages
    assert any("'h3', which is not defined" in m for m in messages), messages


def test_did_you_mean_only_when_one_name_is_closest() -> None:
    from lab_orchestrator.model.diagnostics import did_you_mean

    assert did_you_mean("topolgy3", ["topology3", "topology4-cgnat"]) == " (did you mean 'topology3'?)"
    assert did_you_mean("srx3", ["srx1", "srx2"]) == ""  # two as close: no guess
    assert did_you_mean("zzz", ["srx1"]) == ""


def test_a_misspelt_shipped_lab_name_gets_a_suggestion(tmp_path: Path) -> None:
    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with pytest.raises(TopologyInvalid) as info:
            load_topology("topolgy3")
    finally:
        os.chdir(cwd)
    assert info.value.diagnostics[0].hint.startswith("did you mean 'topology3'?")


def test_unreadable_and_non_mapping_files(tmp_path: Path) -> None:
    with pytest.raises(TopologyInvalid) as info:
        load_topology(tmp_path / "absent.yml")
    assert info.value.diagnostics[0].message == "cannot read file: No such file or directory"
    diags = _load_text(tmp_path, "- just\n- a list\n")
    assert [d.message for d in diags] == ["a topology file must be a mapping with 'name' and 'nodes'"]
    (tmp_path / "latin1.yml").write_bytes(b"name: caf\xe9\n")
    with pytest.raises(TopologyInvalid) as info:
        load_topology(tmp_path / "latin1.yml")
    assert info.value.diagnostics[0].message == "not UTF-8 text (byte 0xe9 at offset 9)"
    assert info.value.diagnostics[0].line == 1


def test_unknown_key_hint_lists_known_keys_when_nothing_is_close(tmp_path: Path) -> None:
    diags = _load_text(tmp_path, "name: k\nnodes:\n  h1: {kind: host}\nservices: {zzz: 1}\n")
    assert diags[0].message == "unknown key 'zzz'"
    assert diags[0].hint == f"known keys here: {', '.join(sorted(Services.model_fields))}"
    assert "buckets, default_policy, hash_seed" in diags[0].hint


def test_non_text_node_name_is_reported(tmp_path: Path) -> None:
    diags = _load_text(tmp_path, "name: k\nnodes:\n  1: {kind: host}\n")
    assert [(d.line, d.message, d.hint) for d in diags] == [(3, "key 1 must be text", "quote it")]


def test_bad_node_name_and_icl_misuse(tmp_path: Path) -> None:
    text = ("name: misc\nnodes:\n  Bad_Name: {kind: host}\n  h2: {kind: host}\n"
            "links:\n  - {endpoints: [Bad_Name:eth1, h2:eth1], zone: icl}\n")
    got = [(d.line, dotted(d.path), d.message) for d in _load_text(tmp_path, text)]
    assert got == [
        (3, "nodes.Bad_Name", "node name 'Bad_Name' is not usable"),
        (6, "links[0].zone", "zone icl joins two srx (MNHA), an srx and an mx (the MNHA ICL routed through "
                             "the mx) or two mx (SRD)"),
    ]


def test_srd_of_one_mx_twice(tmp_path: Path) -> None:
    text = "name: s\nnodes:\n  mx1: {kind: mx, bgp: {trust_as: 1, untrust_as: 2}}\nsrd: {nodes: [mx1, mx1]}\n"
    assert [d.message for d in _load_text(tmp_path, text)] == ["SRD needs two different mx nodes, got mx1 twice"]


def test_valid_topology_loads(tmp_path: Path) -> None:
    text = ("name: ok\nnodes:\n  r1: {kind: ios-router, bgp: {as: 65001}}\n"
            "  h1: {kind: host, prefixes: [10.9.0.0/24]}\n"
            "links:\n  - [h1:eth1, r1:GigabitEthernet0/0]\n")
    path = tmp_path / "ok.yml"
    path.write_text(text)
    loaded = load_topology(path)
    assert loaded.path == path
    assert loaded.topology.links[0].endpoints == ["h1:eth1", "r1:GigabitEthernet0/0"]
    assert loaded.source.line_of(("links", 0, "endpoints", 1)) == 6


def test_more_nodes_than_management_addresses_is_a_located_error(tmp_path: Path) -> None:
    hosts = "".join(f"  h{i}: {{kind: host}}\n" for i in range(254))
    diags = _load_text(tmp_path, "name: big\nnodes:\n" + hosts)
    assert [(d.line, dotted(d.path)) for d in diags] == [(2, "nodes")]
    assert "254 nodes need 254 management addresses" in diags[0].message and "/23" in diags[0].hint
    explicit = "name: big\naddressing:\n  mgmt: 10.9.0.0/29\nnodes:\n" + "".join(
        f"  h{i}: {{kind: host}}\n" for i in range(6))
    diags = _load_text(tmp_path, explicit)
    assert [(d.line, dotted(d.path)) for d in diags] == [(3, "addressing.mgmt")]
    assert "has 5" in diags[0].message
    assert _load_text(tmp_path, "name: big\naddressing:\n  mgmt: 10.9.0.0/23\nnodes:\n" + hosts) == []


PAIR_LAB = """name: pools
services: {load_balancing: tlb, use_case: cgnat%s}
nodes:
  mx1: {kind: mx, bgp: {trust_as: 65100, untrust_as: 65200}}
  srx1: {kind: srx, bgp: {as: 65001}%s}
  srx2: {kind: srx, bgp: {as: 65002}%s}
links:
  - {endpoints: [mx1:ge-0/0/0, srx1:ge-0/0/0], zone: trust}
  - {endpoints: [mx1:ge-0/0/1, srx2:ge-0/0/0], zone: trust}
  - {endpoints: [srx1:ge-0/0/9, srx2:ge-0/0/9], zone: icl}
mnha:
  - {nodes: [srx1, srx2]%s}
"""


@pytest.mark.parametrize(("services", "pool1", "pool2", "pair", "expected"), [
    ("", "", "", "", ("198.51.100.0/28", "198.51.100.0/28")),  # TLB SRG0 a-b: the pair's pool
    ("", ", nat_pool: 198.51.100.64/28", "", "", ("198.51.100.64/28", "198.51.100.64/28")),  # set on one node
    ("", ", nat_pool: 198.51.100.64/28", ", nat_pool: 198.51.100.64/28", "",
     ("198.51.100.64/28", "198.51.100.64/28")),  # the same pool written on both: not an overlap
    ("", ", nat_pool: 198.51.100.64/28", ", nat_pool: 198.51.100.80/28", "",
     ("198.51.100.64/28", "198.51.100.80/28")),  # two pools written: a pool per SRX, as written
    ("", "", "", ", mode: srg1+srg2", ("198.51.100.0/28", "198.51.100.16/28")),  # both translate
    ("", "", "", ", prepend: per-srx", ("198.51.100.0/28", "198.51.100.16/28")),  # equal paths: both
    (", tlb_real_service: srx", "", "", "", ("198.51.100.0/28", "198.51.100.16/28")),  # a real-service each
    (", nat_pool_scope: srx", "", "", "", ("198.51.100.0/28", "198.51.100.16/28")),  # asked for
])
def test_nat_pool_per_pair_where_one_node_translates(tmp_path: Path, services: str, pool1: str, pool2: str,
                                                     pair: str, expected: tuple[str, str]) -> None:
    from lab_orchestrator.plan import pipeline

    text = PAIR_LAB % (services, pool1, pool2, pair)
    if "srg1+srg2" in pair:
        text = text.replace(pair, ", mode: srg1+srg2, srg1_active: srx1")
    path = tmp_path / "t.yml"
    path.write_text(text)
    plan = pipeline.build(load_topology(path).topology, str(path), "/run/lab")
    assert (plan.node("srx1").nat_pool, plan.node("srx2").nat_pool) == expected


def test_the_same_pool_on_two_srxs_that_do_not_share_one_overlaps(tmp_path: Path) -> None:
    text = PAIR_LAB % (", nat_pool_scope: srx", ", nat_pool: 198.51.100.64/28", ", nat_pool: 198.51.100.64/28", "")
    diagnostics = _load_text(tmp_path, text)
    assert [d.path for d in diagnostics] == [("nodes", "srx2", "nat_pool")], _rendered(diagnostics)
    assert "overlaps 198.51.100.64/28 at nodes.srx1.nat_pool" in diagnostics[0].message


def test_nat_pool_scope_without_nat_pools_is_reported(tmp_path: Path) -> None:
    text = (PAIR_LAB % (", nat_pool_scope: srx", "", "", "")).replace("use_case: cgnat", "use_case: sfw")
    diagnostics = _load_text(tmp_path, text)
    assert [d.path for d in diagnostics] == [("services", "nat_pool_scope")], _rendered(diagnostics)
    assert "this lab's use_case is sfw" in diagnostics[0].message
