"""On a dual-stack ECMP CHASH lab an SRX stays in the MX's selector table only while both its BGP
families route through it: its IPv6 session down alone takes it out, back up puts it back (real
namespaces, BIRD, mxlb)."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

from running import REPO, RunningLab

from labkit import birdctl


def _table(running: RunningLab) -> Counter[str]:
    assert running.lab is not None
    return Counter(running.lab.selector("mx1")["table"])


def _wait(running: RunningLab, members: set[str], timeout: float = 20.0) -> Counter[str]:
    ends = time.monotonic() + timeout
    while True:
        table = _table(running)
        if set(table) == members or time.monotonic() > ends:
            return table
        time.sleep(0.2)


def test_an_srx_without_its_ipv6_routes_leaves_the_table_and_comes_back(tmp_path: Path) -> None:
    with RunningLab("g6", REPO / "labs/topology1-dualstack.yml", tmp_path) as running:
        assert running.lab is not None
        everyone = {"srx1", "srx2", "srx3", "srx4"}
        assert set(_wait(running, everyone)) == everyone
        ctl = f"{running.lab.state.state_dir}/nodes/srx1/bird.ctl"
        birdctl.command(ctl, "disable trust_mx1_v6")  # its IPv4 sessions stay up
        try:
            table = _wait(running, everyone - {"srx1"})
            assert set(table) == everyone - {"srx1"}, f"srx1 kept its buckets without IPv6 routes: {table}"
        finally:
            birdctl.command(ctl, "enable trust_mx1_v6")
        table = _wait(running, everyone, timeout=30.0)
        assert set(table) == everyone, f"srx1 not back with its IPv6 routes: {table}"
