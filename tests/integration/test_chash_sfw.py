"""On real namespaces: CHASH symmetry, minimal movement, SFW and CGNAT.

A real echo server on the server host and 1000 subscriber addresses on the client host; which SRX
carried each flow is read back from the SRXs' own session tables (conntrack).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
from running import FLOWS, LAB, REPO, SRX, RunningLab

from lab_orchestrator.events import sessions

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("bird") is None or shutil.which("conntrack") is None,
                       reason="needs bird2 and conntrack (make deps)"),
]

@pytest.fixture(scope="module")
def sfw(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningLab]:
    with RunningLab("ch1", REPO / "labs/topology1.yml", tmp_path_factory.mktemp("chash")) as running:
        yield running


def test_all_flows_symmetric_and_evenly_spread(sfw: RunningLab) -> None:
    result = sfw.probe(40000)
    assert result["missing"] == [], "a reply that crossed another SRX would be dropped by its SFW"
    where = sfw.carriers(40000)
    assert len(where) == FLOWS
    counts = Counter(where.values())
    assert set(counts) == set(SRX)
    for srx, count in counts.items():
        assert abs(count - FLOWS / 4) <= 0.25 * FLOWS / 4, f"{srx} carries {count} of {FLOWS}"


def test_removal_moves_only_the_failed_srx_flows_and_readd_takes_evenly(sfw: RunningLab) -> None:
    sfw.probe(40010)
    before = sfw.carriers(40010)
    sfw.exec("srx2", "ip", "link", "set", "ge-0-0-0", "down")
    try:
        sfw.wait_members({"srx1", "srx3", "srx4"})
        assert sfw.probe(40011)["missing"] == []
        after = sfw.carriers(40011)
    finally:
        sfw.exec("srx2", "ip", "link", "set", "ge-0-0-0", "up")
    moved = {a for a in before if before[a] != after[a]}
    assert moved == {a for a in before if before[a] == "srx2"}, "exactly the flows of srx2 move"
    assert "srx2" not in after.values()

    sfw.wait_members(set(SRX))  # BGP back on srx2, then the selector re-adds it
    assert sfw.probe(40012)["missing"] == []
    readded = sfw.carriers(40012)
    moved_back = {a for a in after if after[a] != readded[a]}
    assert all(readded[a] == "srx2" for a in moved_back), "on add, flows move only to the new SRX"
    assert len(moved_back) / FLOWS <= 1 / 4 + 0.01 + 16 / FLOWS  # plus one bucket's worth of flows
    donors = Counter(after[a] for a in moved_back)
    assert set(donors) == {"srx1", "srx3", "srx4"}, f"taken from each SRX: {donors}"
    assert max(donors.values()) <= 2 * min(donors.values()), f"taken evenly: {donors}"


def test_untrust_initiated_flow_is_dropped(sfw: RunningLab) -> None:
    server = subprocess.Popen(
        [*LAB, "exec", "--lab", sfw.name, "client", "--", sys.executable, "-m", "dataplane.traffic.udpprobe",
         "serve", "--bind", "100.64.30.1", "--port", "7001", "--seconds", "5"], cwd=REPO,
        stdout=subprocess.PIPE, text=True)
    try:
        time.sleep(0.3)
        out = sfw.exec("server", sys.executable, "-m", "dataplane.traffic.udpprobe", "probe", "--sources",
                       "203.0.113.0/24", "--count", "20", "--to", "100.64.30.1:7001", "--timeout", "0.5")
        assert json.loads(out)["answered"] == []
    finally:
        server.terminate()
        server.wait(5)
    denied = sum(_deny_counter(sfw, srx) for srx in SRX)
    assert denied >= 20, "the SRXs' deny-all policy dropped them"


def _deny_counter(running: RunningLab, srx: str) -> int:
    text = running.exec(srx, "nft", "list", "chain", "inet", "srx", "forward")
    for line in text.splitlines():
        if "default-policy deny-all" in line:
            return int(line.split("packets")[1].split()[0])
    raise AssertionError(f"no deny counter on {srx}")


def test_cgnat_translates_into_each_srx_pool_and_returns_through_it(tmp_path: Path) -> None:
    with RunningLab("ch1n", REPO / "labs/topology1-cgnat.yml", tmp_path) as running:
        assert running.probe(40020)["missing"] == []
        plan = json.loads(Path(f"/run/lab/{running.name}/plan.json").read_text())
        pools = {n["name"]: n["nat_pool"] for n in plan["nodes"] if n["kind"] == "srx"}
        from ipaddress import IPv4Address, IPv4Network

        seen = 0
        for srx in SRX:
            for s in sessions.read(running.ns(srx)):
                if s.protocol == "udp" and s.source_port == 40020:
                    seen += 1
                    assert s.translated
                    assert IPv4Address(s.reply_destination) in IPv4Network(pools[srx]), (srx, s)
        assert seen == FLOWS


def test_plain_ecmp_reshuffles_surviving_flows(tmp_path: Path) -> None:
    with RunningLab("ch1e", REPO / "labs/topology1.yml", tmp_path, load_balancing="ecmp") as running:
        running.probe(40030)
        before = running.carriers(40030)
        running.exec("srx2", "ip", "link", "set", "ge-0-0-0", "down")
        running.wait_members({"srx1", "srx3", "srx4"})
        assert running.probe(40031)["missing"] == []
        after = running.carriers(40031)
        collateral = [a for a in before if before[a] != "srx2" and before[a] != after[a]]
        assert len(collateral) > FLOWS / 10, "plain ECMP moves flows of healthy SRXs too (that is the point)"
