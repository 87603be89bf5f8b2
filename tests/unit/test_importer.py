"""`lab import`: the parsers, link inference, the mapping to the lab's schema and the report.

The fixtures (tests/fixtures/import/) are small configurations written for these tests."""

from __future__ import annotations

import json
import subprocess
import sys
from ipaddress import IPv4Network
from pathlib import Path

import pytest

from lab_orchestrator.importer import import_configs
from lab_orchestrator.importer.parse import ParseError, detect, parse_ios, parse_junos, parse_junos_set
from lab_orchestrator.model.validate import load_topology

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "import"
JUNOS_FILES = [FIXTURES / n for n in ("lb1.conf", "fw-a.conf", "fw-b.set", "edge.conf")]


# ------------------------------------------------------------------------------------------ parsers

def test_junos_braces_flatten_to_paths_with_their_lines() -> None:
    text = "a {\n    b 1;\n    c {\n        d [ x y ];\n    }\n    e { }\n}\n"
    got = [(s.path, s.line) for s in parse_junos(text, "t.conf")]
    assert got == [(("a", "b", "1"), 2), (("a", "c", "d", "x", "y"), 4), (("a", "e"), 6)]


def test_junos_comments_quotes_and_inactive() -> None:
    text = ('## header\n/* a\n block */\nx {\n    # note\n    inactive: y 1;\n'
            '    as-path-prepend "65000 65000"; /* tail */\n}\n')
    stmts = parse_junos(text, "t.conf")
    assert [s.path for s in stmts] == [("x", "y", "1"), ("x", "as-path-prepend", "65000 65000")]
    assert [s.inactive for s in stmts] == [True, False]
    assert stmts[1].line == 7


@pytest.mark.parametrize("text, line, message", [
    ("a {\n  b 1;\n", 1, "never closed"),
    ("a {\n  b 1\n}\n", 2, "missing ';'"),
    ("}\n", 1, "without a matching"),
    ("a [ b\n", 1, "unterminated"),
])
def test_junos_errors_are_located(text: str, line: int, message: str) -> None:
    with pytest.raises(ParseError) as caught:
        parse_junos(text, "bad.conf")
    assert caught.value.line == line and message in caught.value.message
    assert str(caught.value).startswith(f"bad.conf:{line}: ")


def test_set_lines_and_braces_give_the_same_paths() -> None:
    braces = "system {\n    host-name fw;\n}\ninterfaces {\n    ae0 {\n        unit 5 {\n" \
             "            family inet {\n                address 10.0.0.1/31;\n            }\n        }\n    }\n}\n"
    sets = "set system host-name fw\nset interfaces ae0 unit 5 family inet address 10.0.0.1/31\n"
    assert [s.path for s in parse_junos(braces, "a")] == [s.path for s in parse_junos_set(sets, "b")]
    with pytest.raises(ParseError, match="b:2: not a set statement"):
        parse_junos_set("set a b\nshow c\n", "b")


def test_ios_indented_and_flat_listings_agree() -> None:
    indented = "hostname r1\n!\ninterface Ethernet0/1\n ip address 10.1.1.1 255.255.255.0\n standby 1 ip 10.1.1.9\n" \
               "!\ncrypto ikev2 cluster\n standby-group g\n no shutdown\nip local pool p 10.9.0.1 10.9.0.254\n"
    flat = "\n".join(line.strip() for line in indented.splitlines() if line.strip() != "!") + "\n"
    a, b = parse_ios(indented, "a"), parse_ios(flat, "b")
    assert [s.path for s in a] == [s.path for s in b]
    assert ("interface", "Ethernet0/1", "standby", "1", "ip", "10.1.1.9") in [s.path for s in a]
    assert ("ip", "local", "pool", "p", "10.9.0.1", "10.9.0.254") in [s.path for s in a]


def test_ios_prompts_and_show_commands_are_skipped() -> None:
    text = "R1#show run interface Ethernet0/0\ninterface Ethernet0/0\nip address 10.0.0.1 255.255.255.0\n" \
           "R1(config)#crypto ikev2 cluster\nR1(config-ikev2-cluster)#slave priority 50\n"
    paths = [s.path for s in parse_ios(text, "r")]
    assert paths == [("interface", "Ethernet0/0", "ip", "address", "10.0.0.1", "255.255.255.0"),
                     ("crypto", "ikev2", "cluster", "slave", "priority", "50")]


def test_detect() -> None:
    assert detect("a {\n b;\n}\n") == "junos"
    assert detect("set a b\nset c d\n") == "junos-set"
    assert detect("hostname r\ninterface Ethernet0/0\n") == "ios"


# ------------------------------------------------------------------------------ Junos to the lab

@pytest.fixture(scope="module")
def junos_lab() -> dict:
    return import_configs(JUNOS_FILES, name="fx").topology


def test_kinds_and_gateway_split(junos_lab: dict) -> None:
    kinds = {n: v["kind"] for n, v in junos_lab["nodes"].items()}
    assert kinds == {"lb1": "mx", "fw-a": "srx", "fw-b": "srx", "edge-in": "ios-router", "edge-out": "ios-router",
                     "client": "host", "server": "host"}


def test_links_from_shared_subnets_keep_vendor_names_and_zones(junos_lab: dict) -> None:
    links = {tuple(link["endpoints"]): (link.get("zone"), link.get("addresses")) for link in junos_lab["links"]}
    assert links[("lb1:ae0.10", "fw-a:ae0.10")] == ("trust", ["10.50.1.0/31", "10.50.1.1/31"])
    assert links[("lb1:ae1.20", "fw-b:ae0.20")] == ("untrust", ["10.50.2.2/31", "10.50.2.3/31"])
    assert links[("edge-in:xe-0/0/0.0", "lb1:xe-0/0/0.0")][0] == "trust"
    assert links[("edge-out:xe-0/0/1.0", "lb1:xe-0/0/1.0")][0] == "untrust"
    assert links[("fw-a:ae0.30", "fw-b:ae0.30")][0] == "icl"
    assert len(links) == 9


def test_bgp_mnha_nat_and_chash(junos_lab: dict) -> None:
    nodes = junos_lab["nodes"]
    assert nodes["lb1"]["bgp"] == {"trust_as": 64601, "untrust_as": 64602}
    assert nodes["fw-a"]["bgp"] == {"as": 64610} == nodes["fw-b"]["bgp"]
    assert nodes["edge-out"]["bgp"] == {"as": 64603, "default_originate": True}
    assert (nodes["fw-a"]["nat_pool"], nodes["fw-b"]["nat_pool"]) == ("100.71.0.0/27", "100.71.0.32/27")
    assert junos_lab["services"] == {"load_balancing": "ecmp-chash", "use_case": "cgnat"}
    assert junos_lab["mnha"] == [{"nodes": ["fw-a", "fw-b"], "heartbeat_ms": 400, "heartbeat_threshold": 4,
                                  "monitor": {"zone": "trust", "weight": 200, "threshold": 200,
                                              "object_threshold": 200, "srg_threshold": 200},
                                  "signal_route": "10.255.0.1"}]


def test_implied_hosts_are_added_and_say_so(junos_lab: dict) -> None:
    client, server = junos_lab["nodes"]["client"], junos_lab["nodes"]["server"]
    assert client["prefixes"] == ["10.60.0.0/16"] and server["prefixes"] == ["203.0.113.0/24"]
    assert client["source"][0].startswith("added: ") and server["source"][0].startswith("added: ")
    links = [link for link in junos_lab["links"] if "client:eth1" in link["endpoints"]]
    assert links == [{"endpoints": ["client:eth1", "edge-in:xe-0/0/2.0"],
                      "addresses": ["10.50.8.2/24", "10.50.8.1/24"]}]


def test_imported_lab_validates_and_carries_its_sources(tmp_path: Path) -> None:
    imported = import_configs(JUNOS_FILES, name="fx")
    path = tmp_path / "fx.yml"
    path.write_text(imported.yaml())
    topo = load_topology(path).topology
    assert "fw-a.conf:8: chassis high-availability local-id 1" in topo.nodes["fw-a"].source
    assert any(line.startswith("fw-b.set:") for line in topo.nodes["fw-b"].source)


def test_tlb_and_pair_addresses(tmp_path: Path) -> None:
    lb = (FIXTURES / "lb1.conf").read_text().replace(
        "policy-options {", "services {\n    traffic-load-balance {\n        instance t {\n"
        "            group g {\n                network-monitoring-profile [ p ];\n            }\n"
        "            real-service r1 {\n                address 10.50.9.9;\n            }\n        }\n    }\n"
        "    network-monitoring {\n        profile p {\n            tcp {\n                port 8081;\n"
        "            }\n            probe-interval 2;\n            failure-retries 3;\n        }\n    }\n}\n"
        "policy-options {", 1).replace("load-balance consistent-hash;", "load-balance per-packet;")
    fw_a = (FIXTURES / "fw-a.conf").read_text().replace(
        "    lo0 {\n", "    lo0 {\n        unit 1 {\n            family inet {\n                address 10.50.9.9/32;\n"
        "            }\n        }\n")
    fw_b = (FIXTURES / "fw-b.set").read_text() + "set interfaces lo0 unit 1 family inet address 10.50.9.9/32\n"
    for name, text in (("lb1.conf", lb), ("fw-a.conf", fw_a), ("fw-b.set", fw_b)):
        (tmp_path / name).write_text(text)
    files = [tmp_path / "lb1.conf", tmp_path / "fw-a.conf", tmp_path / "fw-b.set", FIXTURES / "edge.conf"]
    imported = import_configs(files, name="fx")
    topo = imported.topology
    assert topo["services"]["load_balancing"] == "tlb"
    assert topo["services"]["health_checks"] == [{"type": "tcp", "port": 8081, "interval_ms": 2000, "failures": 3}]
    assert topo["mnha"][0]["pair_address"] == "10.50.9.9"


@pytest.mark.parametrize("on_b", [True, False])
def test_default_policy_permit_all_of_every_srx_is_the_labs(tmp_path: Path, on_b: bool) -> None:
    fw_a = (FIXTURES / "fw-a.conf").read_text().replace(
        "    policies {\n", "    policies {\n        default-policy {\n            permit-all;\n        }\n", 1)
    fw_b = (FIXTURES / "fw-b.set").read_text() + \
        ("set security policies default-policy permit-all\n" if on_b else "")
    (tmp_path / "fw-a.conf").write_text(fw_a)
    (tmp_path / "fw-b.set").write_text(fw_b)
    files = [FIXTURES / "lb1.conf", tmp_path / "fw-a.conf", tmp_path / "fw-b.set", FIXTURES / "edge.conf"]
    imported = import_configs(files, name="fx")
    rows = [r for r in imported.report_json()["statements"] if "default-policy" in r["statement"]]
    assert len(rows) == 1 + on_b
    if on_b:  # both SRXs: the lab's default policy is theirs
        assert imported.topology["services"]["default_policy"] == "permit-all"
        assert all(r["status"] == "emulated" and "services.default_policy permit-all" in r["note"] for r in rows)
    else:  # fw-b has Junos's deny-all: one default policy for the lab, deny-all (the model's default)
        assert "default_policy" not in imported.topology["services"]
        assert rows[0]["file"] == "fw-a.conf" and rows[0]["status"] == "approximated"
    path = tmp_path / "fx.yml"
    path.write_text(imported.yaml())
    assert load_topology(path).topology.services.default_policy == ("permit-all" if on_b else "deny-all")


# ------------------------------------------------------------------------------------ the report

def test_every_statement_has_a_status_and_a_reason() -> None:
    imported = import_configs(JUNOS_FILES, name="fx")
    rows = imported.report_json()["statements"]
    total = sum(len(d.statements) for d in imported.result.devices)
    assert len(rows) == total > 100
    assert all(r["status"] in ("emulated", "approximated", "ignored", "unsupported") and r["note"] for r in rows)
    by_line = {(r["file"], r["line"]): r for r in rows}
    assert by_line[("lb1.conf", 52)]["status"] == "ignored" and "SNMP" in by_line[("lb1.conf", 52)]["note"]
    assert by_line[("fw-b.set", 28)]["status"] == "ignored" and "inactive" in by_line[("fw-b.set", 28)]["note"]
    assert by_line[("fw-a.conf", 51)]["status"] == "approximated"  # the shared pool, halved
    assert by_line[("edge.conf", 18)]["status"] == "approximated"  # mtu 9000


def test_unsupported_statements_are_listed_with_file_and_line(tmp_path: Path) -> None:
    text = (FIXTURES / "edge.conf").read_text().replace(
        "routing-instances {", "protocols {\n    ospf {\n        area 0.0.0.0;\n    }\n}\nrouting-instances {", 1)
    (tmp_path / "edge.conf").write_text(text)
    files = [FIXTURES / "lb1.conf", FIXTURES / "fw-a.conf", FIXTURES / "fw-b.set", tmp_path / "edge.conf"]
    imported = import_configs(files, name="fx")
    report = imported.report_text("fx.yml")
    line = text.splitlines().index("        area 0.0.0.0;") + 1
    assert f"edge.conf:{line}: protocols ospf area 0.0.0.0  -- protocol not modelled" in report
    assert "UNSUPPORTED (1):" in report


# ------------------------------------------------------------------------------------------- IOS

ROUTER = """hostname GW{n}
!
interface Ethernet0/2
 ip address 10.30.0.{n} 255.255.255.0
 standby 7 ip 10.30.0.50
 standby 7 priority {prio}
 standby 7 name cl
!
crypto ikev2 redirect gateway auth
crypto ikev2 cluster
 standby-group cl
 slave max-session 40
 no shutdown
!
crypto ikev2 authorization policy default
 pool p{n}
!
ip local pool p{n} 10.31.{n}.1 10.31.{n}.254
ip route 10.32.0.0 255.255.255.0 10.30.0.254
"""


def test_flexvpn_gateways_and_the_added_northbound_router(tmp_path: Path) -> None:
    files = []
    for n, prio in ((1, 150), (2, 120)):
        path = tmp_path / f"gw{n}.cfg"
        path.write_text(ROUTER.format(n=n, prio=prio))
        files.append(path)
    topo = import_configs(files, name="fv").topology
    gw1 = topo["nodes"]["gw1"]
    assert gw1["interfaces"] == {"Ethernet0/2": {"standby": {"group": 7, "ip": "10.30.0.50", "priority": 150,
                                                             "name": "cl"}}}
    assert gw1["ikev2_cluster"] == {"standby_group": "cl", "max_session": 40}
    assert gw1["ikev2"] == {"redirect": "auth", "pool": "10.31.1.0/24"}
    assert gw1["routes"] == [{"prefix": "10.32.0.0/24", "via": "10.30.0.254"}]
    wan = topo["nodes"]["wan"]
    assert wan["routes"] == [{"prefix": "10.31.1.0/24", "via": "10.30.0.1"},
                             {"prefix": "10.31.2.0/24", "via": "10.30.0.2"}]
    assert topo["links"][0]["endpoints"] == ["gw1:Ethernet0/2", "gw2:Ethernet0/2", "wan:Ethernet0/0"]
    assert topo["links"][1]["addresses"][0] == "10.32.0.1/24"  # the client LAN from the gateways' routes
    path = tmp_path / "fv.yml"
    path.write_text(import_configs(files, name="fv").yaml())
    load_topology(path)


def test_flexvpn_client_lan_option(tmp_path: Path) -> None:
    path = tmp_path / "gw1.cfg"
    path.write_text(ROUTER.format(n=1, prio=100).replace("ip route 10.32.0.0 255.255.255.0 10.30.0.254\n", ""))
    topo = import_configs([path], name="fv", client_lan=IPv4Network("10.33.0.0/24")).topology
    assert topo["nodes"]["gw1"]["routes"] == [{"prefix": "10.33.0.0/24", "via": "10.30.0.254"}]


def test_render_shows_the_statements_each_node_emulates(tmp_path: Path) -> None:
    from lab_orchestrator import api

    path = tmp_path / "fx.yml"
    path.write_text(import_configs(JUNOS_FILES, name="fx").yaml())
    api.render(path, tmp_path / "out")
    srx = (tmp_path / "out" / "nodes" / "fw-a" / "juniper.conf").read_text()
    assert "## imported: fw-a.conf:8: chassis high-availability local-id 1\n" in srx
    gateway = (tmp_path / "out" / "nodes" / "edge-in" / "running-config").read_text()
    assert "! imported: edge.conf:49: routing-instances IN_VR protocols bgp group lb neighbor 10.50.0.1\n" in gateway
    assert "OUT_VR" not in gateway  # the other routing instance is the other node's


BRANCH = """hostname Br{n}
crypto ikev2 client flexvpn hub
 peer 1 10.30.0.50
 client connect Tunnel2
crypto ikev2 redirect client max-redirects 3
crypto ikev2 dpd 4 2 periodic
interface Ethernet0/0
 ip address 10.32.0.2{n} 255.255.255.0
interface Tunnel2
 ip address negotiated
 tunnel source Ethernet0/0
 tunnel destination dynamic
ip route 10.30.0.0 255.255.255.0 10.32.0.1
ip route 10.30.0.254 255.255.255.255 Tunnel2
"""


def test_flexvpn_clients_join_the_client_lan(tmp_path: Path) -> None:
    files = []
    for n, text in ((1, ROUTER.format(n=1, prio=110)), (2, BRANCH.format(n=1)), (3, BRANCH.format(n=2))):
        path = tmp_path / f"r{n}.cfg"
        path.write_text(text)
        files.append(path)
    imported = import_configs(files, name="fv")
    topo = imported.topology
    assert topo["nodes"]["br1"]["flexvpn_client"] == {
        "peers": ["10.30.0.50"], "source": "Ethernet0/0", "tunnel": 2, "name": "hub", "routes": ["10.30.0.254/32"],
        "max_redirects": 3, "dpd_interval": 4, "dpd_retry": 2}
    lan = next(link for link in topo["links"] if "wan:Ethernet0/1" in link["endpoints"])
    assert lan["endpoints"] == ["wan:Ethernet0/1", "br1:Ethernet0/0", "br2:Ethernet0/0", "client1:eth1"]
    assert lan["addresses"] == ["10.32.0.1/24", "10.32.0.21/24", "10.32.0.22/24", "10.32.0.6/24"]
    rows = imported.report_json()["statements"]
    assert all(r["status"] == "emulated" for r in rows if r["file"] == "r2.cfg" and "Tunnel2" in r["statement"])
    path = tmp_path / "fv.yml"
    path.write_text(imported.yaml())
    load_topology(path)


# ------------------------------------------------------------------------------------------- CLI

def _lab(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lab_orchestrator.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=Path(__file__).resolve().parents[2])


def test_cli_writes_the_topology_and_the_report(tmp_path: Path) -> None:
    out, report = tmp_path / "fx.yml", tmp_path / "fx-report.txt"
    done = _lab("import", *map(str, JUNOS_FILES), "-o", str(out), "--report-out", str(report), "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["valid"] and data["output"] == str(out) and data["counts"]["emulated"] > 50
    assert out.read_text().startswith("# Imported by `lab import`")
    assert "fw-a.conf:8: chassis high-availability local-id 1  -- MNHA local-id" in report.read_text()
    again = _lab("import", *map(str, JUNOS_FILES), "-o", str(out))
    assert again.returncode == 2 and "exists (use --force to overwrite)" in again.stderr


def test_cli_bad_configuration_is_a_located_error(tmp_path: Path) -> None:
    bad = tmp_path / "bad.conf"
    bad.write_text("system {\n    host-name x\n}\n")
    done = _lab("import", str(bad), "-o", str(tmp_path / "x.yml"))
    assert done.returncode == 2
    assert "bad.conf:2: missing ';' after 'host-name x'" in done.stderr
    assert "Traceback" not in done.stderr and not (tmp_path / "x.yml").exists()


def test_cluster_configurations_import_as_the_shipped_flexvpn_lab(tmp_path: Path) -> None:
    """Gateways configured as the shipped FlexVPN lab describes them give that lab once loaded."""
    files = []
    for n, prio in ((1, 255), (2, 200), (3, None)):
        text = (f"hostname router{n}\ninterface Ethernet0/1\n ip address 10.10.10.{n} 255.255.255.0\n"
                f" standby 1 ip 10.10.10.100\n" + (f" standby 1 priority {prio}\n" if prio else "")
                + " standby 1 name group1\n!\ncrypto ikev2 redirect gateway init\ncrypto ikev2 cluster\n"
                f" standby-group group1\n slave max-session 10\n no shutdown\n!\n"
                f"crypto ikev2 authorization policy default\n pool clients\n!\n"
                f"ip local pool clients 172.16.{n}.1 172.16.{n}.254\n")
        path = tmp_path / f"router{n}.cfg"
        path.write_text(text)
        files.append(path)
    out = tmp_path / "flexvpn.yml"
    out.write_text(import_configs(files, name="flexvpn", client_lan=IPv4Network("10.10.20.0/24")).yaml())
    shipped = Path(__file__).resolve().parents[2] / "labs" / "flexvpn.yml"

    def model(path: Path) -> dict:
        topo = load_topology(path).topology
        return topo.model_dump(exclude={"description": True, "nodes": {n: {"source"} for n in topo.nodes}})

    assert model(out) == model(shipped)
