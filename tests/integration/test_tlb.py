"""TLB in topology3 on real namespaces (SFW and CGNAT): one real-service per MNHA pair (the JVD),
ICMP + TCP 8088 health checks, the SRG0 signal route steering a pair to its healthy node, restart."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections import Counter
from collections.abc import Iterator
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

import pytest
from running import FLOWS, REPO, SRX, RunningLab, lab

from lab_orchestrator.events import sessions

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("bird") is None or shutil.which("conntrack") is None,
                       reason="needs bird2 and conntrack (make deps)"),
]

INTERVAL_S, FAILURES = 1.0, 1  # the JVD's profiles (services.health_checks defaults)
PAIRS = {"MNHA_SRX1": ("srx1", "srx2"), "MNHA_SRX3": ("srx3", "srx4")}


@pytest.fixture(scope="module")
def tlb(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningLab]:
    with RunningLab("tl3", REPO / "labs/topology3.yml", tmp_path_factory.mktemp("tlb")) as running:
        yield running


def pair_address(running: RunningLab, node: str) -> str:
    plan = json.loads(Path(f"/run/lab/{running.name}/plan.json").read_text())
    return next(n["lo_units"]["1"] for n in plan["nodes"] if n["name"] == node)


def block_health_checks(running: RunningLab, srx: str) -> None:
    """The SRX keeps its links and BGP but stops answering pings to its pair's address."""
    loopback = pair_address(running, srx)
    subprocess.run(["ip", "netns", "exec", running.ns(srx), "nft", "-f", "-"], check=True, text=True,
                   input=("table inet hc_block {\n chain input {\n  type filter hook input priority -5;\n"
                          f"  ip daddr {loopback} icmp type echo-request drop\n }}\n}}\n"))


def unblock(running: RunningLab, srx: str) -> None:
    running.exec(srx, "nft", "delete table inet hc_block", check=False)


def test_tlb_one_real_service_per_pair_probed_by_icmp_and_tcp(tlb: RunningLab) -> None:
    assert tlb.probe(41000)["missing"] == []
    where = tlb.carriers(41000)
    assert len(where) == FLOWS, (len(where), list(tlb.flows_without_carrier(41000).items())[:10])
    # The A node advertises the pair address with the shorter path (the JVD's prepends: A once, B
    # twice): the MX's route has only the A node, which carries the pair.
    assert set(Counter(where.values())) == {"srx1", "srx3"}
    routes = lab("exec", "--lab", tlb.name, "mx1", "--instance", "TRUST-VR", "--", "birdc", "-s",
                 f"/run/lab/{tlb.name}/nodes/mx1/bird-trust-vr.ctl", "show", "route",
                 f"{pair_address(tlb, 'srx1')}/32", "all").stdout
    paths = [line.split("BGP.as_path:")[1].split() for line in routes.splitlines() if "BGP.as_path:" in line]
    assert sorted(paths) == [["65001", "65001"], ["65002", "65002", "65002"]], routes
    kernel = subprocess.run(["ip", "-n", f"{tlb.name}-mx1-trust-vr", "route", "show",
                             f"{pair_address(tlb, 'srx1')}/32"], capture_output=True, text=True, check=True).stdout
    assert "nexthop" not in kernel and kernel.strip(), f"one path (the A node), not ECMP: {kernel!r}"
    status = tlb.selector()
    assert status["mode"] == "tlb"
    for member in status["members"]:  # type: ignore[union-attr]
        assert member["name"] in PAIRS and member["alive"]
        assert set(member["health"]["profiles"]) == {"icmp-profile", "tcp-profile"}
        assert all(p["up"] for p in member["health"]["profiles"].values())
        assert "tcp/8088 connected" in member["health"]["profiles"]["tcp-profile"]["last_result"]
    deadline = time.monotonic() + 8  # the daemon reads the counters about once a second
    while True:
        counters = {m["name"]: m["counters"].get("trust", {}).get("packets", 0)  # type: ignore[union-attr]
                    for m in tlb.selector()["members"]}  # type: ignore[union-attr]
        if all(counters[s] > 0 for s in PAIRS) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert all(counters[s] > 0 for s in PAIRS), f"per-real-service packet counters: {counters}"


def test_unhealthy_pair_is_removed_in_time_and_only_its_flows_move(tlb: RunningLab) -> None:
    tlb.probe(41010)
    before = tlb.carriers(41010)
    for srx in PAIRS["MNHA_SRX3"]:
        block_health_checks(tlb, srx)
    started = time.monotonic()
    try:
        tlb.wait_members({"MNHA_SRX1"}, timeout=INTERVAL_S * (FAILURES + 3))
        detected = time.monotonic() - started
        assert detected <= INTERVAL_S * FAILURES + INTERVAL_S + 0.5, f"detected after {detected:.2f} s"
        member = next(m for m in tlb.selector()["members"] if m["name"] == "MNHA_SRX3")  # type: ignore[union-attr]
        assert "no echo reply" in member["health"]["profiles"]["icmp-profile"]["last_result"]
        assert member["carrier"] == {"trust": True, "untrust": True}, "links stayed up"
        assert tlb.probe(41011)["missing"] == []
        after = tlb.carriers(41011)
    finally:
        for srx in PAIRS["MNHA_SRX3"]:
            unblock(tlb, srx)
    moved = {a for a in before if before[a] != after[a]}
    assert moved == {a for a in before if before[a] == "srx3"}
    tlb.wait_members(set(PAIRS), timeout=INTERVAL_S * 6)


def test_trust_link_failure_signals_and_the_peer_carries_the_pair(tlb: RunningLab) -> None:
    """The JVD's SRG0: srx1 loses its trust link, installs the signal route, prepends 3x; the MX
    sends the pair's flows both ways through srx2 (sessions synced); the other pair is untouched."""
    tlb.probe(41050)
    before = tlb.carriers(41050)
    ends = [(tlb.ns("srx1"), "ge-0-0-0"), (f"{tlb.name}-mx1-trust-vr", "ge-0-1-1")]
    for ns, dev in ends:
        subprocess.run(["ip", "-n", ns, "link", "set", dev, "down"], check=True)
    try:
        deadline = time.monotonic() + 6
        while time.monotonic() < deadline:
            status = json.loads(Path(f"/run/lab/{tlb.name}/nodes/srx1/mnha-status.json").read_text())
            via = next(m for m in tlb.selector()["members"] if m["name"] == "MNHA_SRX1")["via"]  # type: ignore
            if status["srg0"]["signal_route"]["installed"] and via == {"trust": "srx2", "untrust": "srx2"}:
                break
            time.sleep(0.2)
        assert status["srg0"]["role"] == "ineligible"
        assert via == {"trust": "srx2", "untrust": "srx2"}
        assert "192.168.255.0" in tlb.exec("srx1", "ip", "route", "show", "table", "50")
        routes = lab("exec", "--lab", tlb.name, "mx1", "--instance", "UNTRUST-VR", "--", "birdc", "-s",
                     f"/run/lab/{tlb.name}/nodes/mx1/bird-untrust-vr.ctl", "show", "route",
                     f"{pair_address(tlb, 'srx1')}/32", "all").stdout
        assert "65001 65001 65001 65001" in routes, routes
        assert tlb.probe(41051)["missing"] == []
        after = tlb.carriers(41051)
        moves = (Counter((before[a], after[a]) for a in before),
                 Path(f"/run/lab/{tlb.name}/logs/mx1-mxlb.log").read_text()[-3000:],
                 Path(f"/run/lab/{tlb.name}/logs/mx1-healthd.log").read_text()[-3000:])
        assert {a for a in before if after[a] != before[a]} == {a for a in before if before[a] == "srx1"}, moves
        assert {after[a] for a in before if before[a] == "srx1"} == {"srx2"}, moves
    finally:
        for ns, dev in ends:
            subprocess.run(["ip", "-n", ns, "link", "set", dev, "up"], check=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        via = next(m for m in tlb.selector()["members"] if m["name"] == "MNHA_SRX1")["via"]  # type: ignore
        status = json.loads(Path(f"/run/lab/{tlb.name}/nodes/srx1/mnha-status.json").read_text())
        if via == {"trust": "srx1", "untrust": "srx1"} and not status["srg0"]["signal_route"]["installed"]:
            break
        time.sleep(0.2)
    assert via == {"trust": "srx1", "untrust": "srx1"}, "restoring the link undoes it"
    assert not status["srg0"]["signal_route"]["installed"], "restoring the link removes the signal route"


def test_a_pair_s_probes_follow_its_traffic_not_the_instance_s_routes(tlb: RunningLab) -> None:
    """While BGP converges after an SRX's link failure, the trust instance can route a pair's address
    through an SRX of another pair (the default route, until the path through the pair's other node
    is in): a probe sent that way gets no answer, and one failure takes the healthy pair out. The probes
    follow the real-service's own table (its selector mark), as its traffic does: with the instance
    routing srx1's pair address to srx3, the pair stays healthy and no bucket moves."""
    tlb.wait_members(set(PAIRS))
    table = tlb.selector()["table"]
    ns, address = f"{tlb.name}-mx1-trust-vr", pair_address(tlb, "srx1")
    trust = next(s for s in tlb.selector_config()["selectors"] if s["side"] == "trust")  # type: ignore[attr-defined]
    via_srx3 = next(h["nexthop"] for m in trust["members"] for h in m["hops"] if h["node"] == "srx3")
    health = Path(f"/run/lab/{tlb.name}/nodes/mx1/health-status.json")
    leak = ["route", f"{address}/32", "via", via_srx3, "metric", "1"]  # ahead of BGP's route
    subprocess.run(["ip", "-n", ns, *leak[:1], "add", *leak[1:]], check=True)
    try:
        instead = subprocess.run(["ip", "-n", ns, "route", "get", address], capture_output=True, text=True,
                                 check=True).stdout
        seq = json.loads(health.read_text())["seq"]

        def probed() -> bool:  # three rounds of both profiles, or the pair reported down
            report = json.loads(health.read_text())
            return bool(report["seq"] >= seq + 6 or not report["members"]["MNHA_SRX1"]["up"])

        _wait(probed, timeout=8)
        reported = json.loads(health.read_text())
    finally:
        subprocess.run(["ip", "-n", ns, *leak[:1], "del", *leak[1:]], check=True)
    assert f"via {via_srx3} " in instead, f"the instance sends the address to srx3: {instead}"
    assert reported["members"]["MNHA_SRX1"]["up"], reported["members"]["MNHA_SRX1"]
    assert reported["seq"] >= seq + 6, "the monitor probed meanwhile"
    assert tlb.selector()["table"] == table, "no bucket moved"


def test_no_healthy_srx_withdraws_the_route_and_drops_at_the_mx(tlb: RunningLab) -> None:
    for srx in SRX:
        block_health_checks(tlb, srx)
    try:
        tlb.wait_members(set(), timeout=INTERVAL_S * (FAILURES + 3))
        routes = lab("exec", "--lab", tlb.name, "mx1", "--instance", "TRUST-VR", "--", "ip", "route", "show",
                     "table", "199").stdout
        assert "metric 1 " not in routes and "blackhole" in routes, routes
        result = tlb.probe(41020, sources="100.64.40.0/26")
        assert result["answered"] == []
        for srx in SRX:  # nothing was sent into a (dead) SRX: no session for these flows anywhere
            assert not [s for s in sessions.read(tlb.ns(srx)) if s.source_port == 41020]
        unblock(tlb, "srx3")
        unblock(tlb, "srx4")
        tlb.wait_members({"MNHA_SRX3"}, timeout=INTERVAL_S * 6)
        routes = lab("exec", "--lab", tlb.name, "mx1", "--instance", "TRUST-VR", "--", "ip", "route", "show",
                     "table", "199").stdout
        assert "metric 1 " in routes, "first SRX back: the route returns"
        assert tlb.probe(41021, sources="100.64.41.0/26")["missing"] == []
    finally:
        for srx in SRX:
            unblock(tlb, srx)
    tlb.wait_members(set(PAIRS), timeout=INTERVAL_S * 8)


def test_restart_tlb_process_adopts_the_table(tlb: RunningLab) -> None:
    before = tlb.selector()
    lab("restart", "--lab", tlb.name, "mx1", "mxlb", "--kill")
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        after = tlb.selector()
        if after["pid"] != before["pid"]:
            break
        time.sleep(0.1)
    assert after["pid"] != before["pid"]
    assert after["table"] == before["table"], "the restarted daemon adopted the programmed map"
    assert after["changes"] == 0, "and rewrote nothing"
    assert tlb.probe(41030)["missing"] == []


def test_tlb_cgnat_forward_by_hash_return_by_pool(tmp_path: Path) -> None:
    with RunningLab("tl3n", REPO / "labs/topology3-cgnat.yml", tmp_path) as running:
        assert running.probe(41040)["missing"] == []
        plan = json.loads(Path(f"/run/lab/{running.name}/plan.json").read_text())
        pools = {n["name"]: n["nat_pool"] for n in plan["nodes"] if n["kind"] == "srx"}
        used = Counter()
        for srx in SRX:
            for s in sessions.read(running.ns(srx)):
                if s.protocol == "udp" and s.source_port == 41040 and s.packets > 0:  # not a synced copy
                    used[srx] += 1
                    assert IPv4Address(s.reply_destination) in IPv4Network(pools[srx])
        assert sum(used.values()) == FLOWS and set(used) == {"srx1", "srx3"}  # the first node of each pair
        assert [s["side"] for s in running.selector_config()["selectors"]] == ["trust"]


def _roles(running: RunningLab) -> dict[str, tuple[str, str | None]]:
    out = {}
    for srx in SRX:
        status = json.loads(Path(f"/run/lab/{running.name}/nodes/{srx}/mnha-status.json").read_text())
        out[srx] = (status["srg1"]["role"], (status.get("srg2") or {}).get("role"))
    return out


def _via(running: RunningLab) -> dict[str, dict[str, str]]:
    return {m["name"]: m["via"] for m in running.selector()["members"]}  # type: ignore[union-attr]


def _wait(check: object, timeout: float = 12.0) -> None:
    deadline = time.monotonic() + timeout
    while not check() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.2)


def test_srg1_variant_only_active_nodes_carry_and_srg1_srg2_fails_over_group_by_group(tmp_path: Path) -> None:
    """topology3-srg1: srx1/srx2 SRG1 active/backup; srx3/srx4 SRG1 + SRG2 (a real-service each)."""
    with RunningLab("tl3s", REPO / "labs/topology3-srg1.yml", tmp_path) as running:
        wanted = {"srx1": ("active", None), "srx2": ("backup", None),
                  "srx3": ("active", "backup"), "srx4": ("backup", "active")}
        _wait(lambda: _roles(running) == wanted)
        assert _roles(running) == wanted
        running.wait_members({"MNHA_SRX1", "MNHA_SRX3", "MNHA_SRX4"})
        _wait(lambda: _via(running)["MNHA_SRX4"] == {"trust": "srx4", "untrust": "srx4"})
        assert running.probe(41060)["missing"] == []
        before = running.carriers(41060)
        assert set(before.values()) == {"srx1", "srx3", "srx4"}, "only active nodes carry; SRG1+SRG2: both"
        ends = [(running.ns("srx3"), "ge-0-0-0"), (f"{running.name}-mx1-trust-vr", "ge-0-1-3")]
        for ns, dev in ends:
            subprocess.run(["ip", "-n", ns, "link", "set", dev, "down"], check=True)
        try:
            _wait(lambda: _roles(running)["srx4"] == ("active", "active")
                  and _via(running)["MNHA_SRX3"] == {"trust": "srx4", "untrust": "srx4"})
            assert _roles(running)["srx4"] == ("active", "active")
            assert _via(running)["MNHA_SRX3"] == {"trust": "srx4", "untrust": "srx4"}
            assert running.probe(41061)["missing"] == []
            after = running.carriers(41061)
            assert {a for a in before if after[a] != before[a]} == {a for a in before if before[a] == "srx3"}
            assert {after[a] for a in before if before[a] == "srx3"} == {"srx4"}
        finally:
            for ns, dev in ends:
                subprocess.run(["ip", "-n", ns, "link", "set", dev, "up"], check=True)
        _wait(lambda: _roles(running) == wanted and _via(running)["MNHA_SRX3"] == {"trust": "srx3", "untrust": "srx3"})
        assert _roles(running) == wanted, "SRG1 preempts back to srx3"
        assert _via(running)["MNHA_SRX3"] == {"trust": "srx3", "untrust": "srx3"}
