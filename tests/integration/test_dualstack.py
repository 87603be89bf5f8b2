"""The dual-stack topology 3 (labs/topology3-dualstack.yml) up for real (root): IPv6 BGP sessions on the
same links as IPv4, IPv6 forwarded end to end through the SRXs' security policy, and IPv6 flows steered
by the MX's TLB selector with the IPv4 bucket semantics, verified from the SRXs' own session tables
(conntrack): each flow crosses one SRX both ways, the SRX of its bucket's member; the same for the
traffic generator's IPv6 IMIX flows, sent both ways."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from ipaddress import ip_address
from typing import Any

import pytest
from running import REPO, SRX, RunningLab, lab

from dataplane.core import nfthash
from dataplane.traffic import Receiver, Sender, make_flows, reverse_flows
from lab_orchestrator.events import sessions
from labkit import birdctl

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(shutil.which("bird") is None or shutil.which("conntrack") is None,
                       reason="needs bird2 and conntrack (make deps)"),
]

SERVER6 = "2001:db8:203::9"
GEN6_SOURCES = "2001:db8:172:80::2:0/112"  # the generator's flows: not the probe's addresses
GEN6_SPORT = 41800
CLIENTS6 = "2001:db8:172:80::/112"
FLOWS6 = 300
PORT6 = 41600


@pytest.fixture(scope="module")
def dual(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningLab]:
    with RunningLab("ds3", REPO / "labs/topology3-dualstack.yml", tmp_path_factory.mktemp("dual")) as running:
        running.echo(SERVER6, 7006)
        yield running


def _probe6(dual: RunningLab) -> dict[str, object]:
    out = dual.exec("client", sys.executable, "-m", "dataplane.traffic.udpprobe", "probe", "--sources", CLIENTS6,
                    "--count", str(FLOWS6), "--to", f"[{SERVER6}]:7006", "--port", str(PORT6))
    result: dict[str, object] = json.loads(out)
    return result


def test_every_ipv6_session_is_established_beside_its_ipv4_twin(dual: RunningLab) -> None:
    state = dual.running.state.state_dir
    for conf in ("bird-trust-vr", "bird-untrust-vr"):
        states = {p.name: p.info for p in birdctl.protocols(f"{state}/nodes/mx1/{conf}.ctl")}
        v6 = {name: info for name, info in states.items() if name.endswith("_v6")}
        assert len(v6) == 5 and all(info.startswith("Established") for info in v6.values()), v6
        assert all(name[:-3] in states for name in v6)  # each beside its IPv4 session
    routes = dual.exec("mx1", "ip", "-6", "route", "show", "table", "main")
    assert "2001:db8:172:80::/96" not in routes  # the master instance holds no lab routes
    trust = subprocess.run(["ip", "netns", "exec", dual.ns("mx1") + "-trust-vr", "ip", "-6", "route", "show",
                            "2001:db8:203::/64"], capture_output=True, text=True, check=True).stdout
    assert "proto bird" in trust, trust  # the server's IPv6 prefix learned through the SRXs


def test_ipv6_flows_cross_the_srx_of_their_bucket_both_ways(dual: RunningLab) -> None:
    result = _probe6(dual)
    assert result["missing"] == [], f"{len(result['missing'])} IPv6 flows got no echo"  # type: ignore[arg-type]
    carriers: dict[str, str] = {}
    for srx in SRX:
        for s in sessions.read(dual.ns(srx)):
            if s.protocol == "udp" and s.source_port == PORT6 and s.packets > 0:
                assert ":" in s.source
                assert s.source not in carriers, f"{s.source} crossed {carriers.get(s.source)} and {srx}"
                carriers[s.source] = srx
    answered = [str(ip_address(a)) for a in result["answered"]]  # type: ignore[union-attr]
    assert sorted(carriers) == sorted(answered)
    # each flow on the SRX of its bucket: the selector's table (same map as IPv4) names the pair
    status = dual.selector()
    config = dual.selector_config()
    table, buckets, seed = status["table"], int(config["buckets"]), int(config["seed"])  # type: ignore[call-overload]
    pairs = {"MNHA_SRX1": {"srx1", "srx2"}, "MNHA_SRX3": {"srx3", "srx4"}}
    wrong = {a: (srx, table[nfthash.bucket(a, buckets, seed)]) for a, srx in carriers.items()  # type: ignore[index]
             if srx not in pairs[table[nfthash.bucket(a, buckets, seed)]]}  # type: ignore[index]
    assert not wrong, f"flows off their bucket's member: {dict(list(wrong.items())[:5])}"
    assert {pair for pair, nodes in pairs.items() if set(carriers.values()) & nodes} == set(pairs)


def test_ipv4_still_steered_in_the_same_lab(dual: RunningLab) -> None:
    result = dual.probe(40700, "100.64.8.0/24")
    assert result["missing"] == []
    assert len(dual.carriers(40700, {"srx1": 1, "srx2": 1, "srx3": 3, "srx4": 3})) == len(result["answered"])  # type: ignore[arg-type]


def test_generator_ipv6_flows_both_ways_each_on_one_srx(dual: RunningLab) -> None:
    """The traffic generator's IPv6 IMIX flows, client -> server and back on the same 5-tuples, all
    delivered; each flow's session on one SRX only, and that session counted both directions' packets
    (the forward and the return path crossed the same SRX: CHASH/TLB symmetry, from conntrack)."""
    forward = make_flows(40, GEN6_SOURCES, "2001:db8:203::a", sport=GEN6_SPORT)
    back = reverse_flows(forward, 100000)
    per_flow = 25  # packets per flow and direction: 1000 pps for 1 s
    rx_f = Receiver(iface="eth1", ns=dual.ns("server"), family=6, rate_per_flow=per_flow).spawn().wait_ready()
    rx_r = Receiver(iface="eth1", ns=dual.ns("client"), family=6, rate_per_flow=per_flow).spawn().wait_ready()
    sent_f: dict[str, Any] = {}
    sent_r: dict[str, Any] = {}
    try:
        sent_f = Sender(iface="eth1", ns=dual.ns("client"), flows=forward, rate=1000, count=1000).spawn().wait()
        sent_r = Sender(iface="eth1", ns=dual.ns("server"), flows=back, rate=1000, count=1000).spawn().wait()
    finally:
        got_f = rx_f.stop(sent=sent_f or None)
        got_r = rx_r.stop(sent=sent_r or None)
    assert sent_f["family"] == 6 and sent_f["sent"] == 1000 and sent_r["sent"] == 1000
    assert sent_f["avg_size"] > 711.83  # IMIX with 84 for 64: the IPv6 header needs it
    assert got_f["received"] == 1000 and got_f["lost"] == 0, got_f
    assert got_r["received"] == 1000 and got_r["lost"] == 0, got_r
    counted: dict[str, list[tuple[str, int]]] = {}
    for srx in SRX:
        for s in sessions.read(dual.ns(srx)):
            if s.protocol == "udp" and s.source_port == GEN6_SPORT and s.packets > 0:
                counted.setdefault(s.source, []).append((srx, s.packets))
    assert sorted(counted) == sorted(f.src for f in forward)
    split = {a: where for a, where in counted.items() if len(where) != 1}
    assert not split, f"flows counted on two SRXs: {dict(list(split.items())[:4])}"
    both_ways = {a: where[0] for a, where in counted.items() if where[0][1] != 2 * per_flow}
    assert not both_ways, f"sessions without both directions' packets: {dict(list(both_ways.items())[:4])}"
    assert len({where[0][0] for where in counted.values()}) >= 2  # the flows spread over the SRXs


def test_traffic_by_hand_sends_every_family(dual: RunningLab) -> None:
    """`lab traffic start` on the dual-stack lab: IPv4, IPv6 and NAT64 flows side by side (a third of the
    flows each), every process reported with its family, each family's flows delivered both ways."""
    started = json.loads(lab("traffic", "start", "--lab", dual.name, "--flows", "21", "--rate", "1050",
                             "--duration", "30", "--json").stdout)
    suffixes = ((4, ""), (6, "-ipv6"), (64, "-nat64"))
    try:
        assert started["families"] == [4, 6, 64]
        assert {p["name"]: p["family"] for p in started["processes"]} == {
            f"{role}-{way}{suffix}": fam for fam, suffix in suffixes
            for role in ("rx", "tx") for way in ("forward", "reverse")}
        assert {p["flows"] for p in started["processes"]} == {7}
        time.sleep(2.0)
    finally:
        reports = json.loads(lab("traffic", "stop", "--lab", dual.name, "--json").stdout)
    assert {name: r["family"] for name, r in reports.items()} == {p["name"]: p["family"] for p in started["processes"]}
    for _, suffix in suffixes:
        sent = reports[f"tx-forward{suffix}"]["sent"]
        assert sent > 500 and reports[f"rx-forward{suffix}"]["received"] == sent, reports
        assert reports[f"rx-reverse{suffix}"]["lost"] == 0 and reports[f"rx-reverse{suffix}"]["received"] > 0, reports


def test_ssh_cli_shows_the_ipv6_routes_and_sessions(dual: RunningLab) -> None:
    """The node CLI on the dual-stack lab: Junos-like `show route table ...inet6.0` and `show bgp summary`,
    IOS-like `show ipv6 route` and `show bgp ipv6 unicast summary`, read from the kernel and BIRD."""
    routes = lab("show", "mx1", "--lab", dual.name, "route", "table", "TRUST-VR.inet6.0").stdout
    assert "TRUST-VR.inet6.0: " in routes and "[BGP/170]" in routes and "inet.0:" not in routes, routes
    assert "fe80:" not in routes, routes
    summary = lab("show", "mx1", "--lab", dual.name, "bgp", "summary").stdout
    rows = summary.splitlines()
    assert "TRUST-VR.inet6.0" in rows and "UNTRUST-VR.inet6.0" in rows, summary
    for peer in ("2001:db8:1::12", "2001:db8:1::16"):  # srx1's IPv6 sessions, both sides
        row = next(line for line in rows if line.startswith(peer + " "))
        assert row.split()[-1] == "Establ", summary
    assert any(line.startswith("  TRUST-VR.inet6.0: ") for line in rows), summary
    ios6 = lab("show", "gw-trust", "--lab", dual.name, "ipv6", "route").stdout
    assert ios6.startswith("IPv6 Routing Table - default - ") and "\nB   " in ios6 and "\nC   " in ios6, ios6
    sessions = lab("show", "gw-trust", "--lab", dual.name, "bgp", "ipv6", "unicast", "summary").stdout
    assert "2001:DB8:1::A" in sessions and sessions.splitlines()[-1].split()[-1].isdigit(), sessions
    ipv4 = lab("show", "gw-trust", "--lab", dual.name, "ip", "bgp", "summary").stdout
    assert "2001" not in ipv4.upper() and "198.18.0.5" in ipv4, ipv4


def _kernel6_main(ns: str) -> dict[str, set[str]]:
    """The kernel's IPv6 main table of NS (without link-local and multicast routes): prefix -> its
    gateways, or its interface for a connected route."""
    result = subprocess.run(["ip", "-n", ns, "-6", "-j", "route", "show", "table", "main"], capture_output=True,
                            text=True, check=True)
    out: dict[str, set[str]] = {}
    for route in json.loads(result.stdout or "[]"):
        dst = "::/0" if route["dst"] == "default" else route["dst"] if "/" in route["dst"] else route["dst"] + "/128"
        if dst.startswith(("fe80:", "ff")):
            continue
        out[dst] = {h.get("gateway") or h.get("dev", "") for h in route.get("nexthops") or [route]}
    return out


def test_ssh_cli_forwarding_table_and_configuration_carry_ipv6(dual: RunningLab) -> None:
    """`show route forwarding-table` lists the kernel's IPv6 routes after the IPv4 ones (`family inet6`:
    only them), each with the kernel's next hops; the rendered configurations shown by `show configuration`
    and `show running-config` have the IPv6 addresses and sessions, in the groups `show bgp neighbor` names."""
    running = dual.running
    both, status = running.cli("mx1", "show route forwarding-table table TRUST-VR")
    assert status == 0 and both.index("Routing table: TRUST-VR.inet\n") < both.index("Routing table: TRUST-VR.inet6\n")
    out, status = running.cli("mx1", "show route forwarding-table table TRUST-VR.inet6 | display json")
    assert status == 0
    tables = json.loads(out)["forwarding-table-information"]["route-table"]
    assert [t["address-family"] for t in tables] == ["Internet6"]
    shown = {("::/0" if e["rt-destination"] == "default" else e["rt-destination"]):
             {h["to"] for h in e["nh"] if h["to"]} for e in tables[0]["rt-entry"]}
    kernel = _kernel6_main(running.ns("mx1", "TRUST-VR"))
    assert "::/0" in kernel and "2001:db8:172:80::/96" in kernel, kernel  # learned in BGP, installed by BIRD
    for dst, hops in kernel.items():
        assert dst in shown, (dst, sorted(shown))
        gateways = {h for h in hops if ":" in h}
        if gateways:
            assert shown[dst] == gateways, (dst, shown[dst], gateways)
    inet6, status = running.cli("mx1", "show route forwarding-table family inet6")
    assert status == 0 and "Internet:" not in inet6 and "Routing table: UNTRUST-VR.inet6\n" in inet6
    assert "fe80:" not in inet6
    one, status = running.cli("mx1", f"show route forwarding-table destination {SERVER6}")
    assert status == 0 and "Internet6:" in one and "Internet:" not in one, one
    config, _ = running.cli("mx1", "show configuration routing-instances TRUST-VR protocols bgp | display set")
    assert "group IPv6_SRX-TRUST neighbor 2001:db8:1::12 peer-as 65001" in config, config
    neighbor, _ = running.cli("mx1", "show bgp neighbor 2001:db8:1::12")
    assert "Group: IPv6_SRX-TRUST " in neighbor, neighbor
    srx, _ = running.cli("srx1", "show configuration interfaces | display set")
    assert "set interfaces ge-0/0/0 unit 0 family inet6 address 2001:db8:1::12/126" in srx, srx
    ios, _ = running.cli("gw-trust", "show running-config")
    assert " address-family ipv6\n" in ios and "  neighbor 2001:db8:1::a activate\n" in ios, ios
