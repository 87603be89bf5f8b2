"""MNHA session sync without periodic full pushes (topology3 with an 8 s UDP timeout): the peer's
copy of a live flow is kept by the refresh windows, outlives many timeouts, and carries the flow
when its SRX powers off; the returning node's cold sync is acknowledged; the counters are shown."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from running import REPO, RunningLab, lab
from test_mnha import PEER, PushFlow, deny_count

from lab_orchestrator.events import sessions

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(any(shutil.which(t) is None for t in ("bird", "conntrack", "conntrackd")),
                       reason="needs bird2, conntrack and conntrackd (make deps)"),
]

UDP_TIMEOUT = 8  # refresh window: 2 s


@pytest.fixture(scope="module")
def short(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningLab]:
    with RunningLab("ms3", REPO / "labs/topology3.yml", tmp_path_factory.mktemp("mnhasync"),
                    udp_timeout=str(UDP_TIMEOUT)) as running:
        yield running


def mnha_status(running: RunningLab, node: str) -> dict[str, object]:
    data: dict[str, object] = json.loads(
        (Path(str(running.running.state_dir)) / "nodes" / node / "mnha-status.json").read_text())
    return data


def copy_of(running: RunningLab, node: str, port: int) -> sessions.Session | None:
    return next((s for s in sessions.read(running.ns(node)) if s.destination_port == port), None)


def test_the_srx_session_timeouts_are_the_labs(short: RunningLab) -> None:
    udp = short.exec("srx1", "sysctl", "-n", "net.netfilter.nf_conntrack_udp_timeout_stream").strip()
    tcp = short.exec("srx1", "sysctl", "-n", "net.netfilter.nf_conntrack_tcp_timeout_established").strip()
    assert (udp, tcp) == (str(UDP_TIMEOUT), "1800")


def test_a_live_flows_copy_outlives_its_timeout_and_carries_the_flow_after_a_power_off(short: RunningLab) -> None:
    seconds = 6 * UDP_TIMEOUT
    flow = PushFlow(short, "100.64.9.19", 7201, seconds=seconds, rate=50)
    carrier = flow.carrier()
    peer = PEER[carrier]
    started = time.monotonic()
    before = mnha_status(short, peer)["sync"]
    assert isinstance(before, dict)
    # Three timeouts: without refreshes the copy (given the carrier's timeout when the flow opened)
    # would be gone after one.
    while time.monotonic() - started < 3 * UDP_TIMEOUT:
        copy = copy_of(short, peer, 7201)
        assert copy is not None, f"the peer's copy vanished after {time.monotonic() - started:.1f} s"
        time.sleep(0.5)
    after = mnha_status(short, peer)["sync"]
    assert isinstance(after, dict)
    denied = deny_count(short, peer)
    lab("fail", "--lab", short.name, carrier, "srx-power-off")
    try:
        result = flow.result()
        assert deny_count(short, peer) == denied, "the peer's firewall dropped nothing: it had the session"
        assert result["received"] >= 0.97 * (result["highest_seq"] + 1)
        assert result["longest_gap_s"] < 0.5, f"the flow kept going: {result}"
    finally:
        lab("restore", "--lab", short.name, carrier)
    # The returning node waited for its peer's table, the peer sent it and had it acknowledged.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        back, sender = mnha_status(short, carrier).get("sync"), mnha_status(short, peer).get("sync")
        if isinstance(back, dict) and back.get("awaited_s") is not None and not back.get("awaiting_peer"):
            break
        time.sleep(0.2)
    assert isinstance(back, dict) and isinstance(sender, dict)
    assert back["awaited_s"] is not None and not back["awaiting_peer"], back
    assert int(sender["cold_syncs"]) >= 1 and sender["last_cold_sync_s"] is not None, sender
    # powered on before its BGP sessions were up, it no longer waits for routes over its MX links
    srg0 = mnha_status(short, carrier)["srg0"]
    assert isinstance(srg0, dict) and srg0["links_unrouted"] == [], srg0


def test_conntrackd_runs_as_an_ordinary_process(short: RunningLab) -> None:
    """Not conntrackd's own default (real time, priority 99), which starves the lab's other processes
    on its CPU for as long as it writes a cold sync."""
    import subprocess

    for srx in PEER:
        pids = subprocess.run(["ip", "netns", "pids", short.ns(srx)], capture_output=True, text=True).stdout.split()
        daemons = [int(p) for p in pids if Path(f"/proc/{p}/comm").read_text().strip() == "conntrackd"]
        assert daemons, f"{srx}: no conntrackd"
        assert all(os.sched_getscheduler(pid) == os.SCHED_OTHER for pid in daemons), srx


def test_the_sync_counters_are_in_lab_status(short: RunningLab) -> None:
    out = lab("status", "--lab", short.name, "--json").stdout
    nodes = {n["name"]: n for n in json.loads(out)[0]["nodes"]}
    for srx in PEER:
        sync = nodes[srx]["session_sync"]
        assert sync is not None and sync["daemon_answering"], f"{srx}: {sync}"
        assert isinstance(sync["sessions"], int) and isinstance(sync["cache"], int)
        # read from conntrackd's own `-s network` answer: none of the peer's messages dropped as older
        assert sync["stale"] == 0, f"{srx}: {sync}"
