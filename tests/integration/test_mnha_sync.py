"""MNHA session sync without periodic full pushes (topology3-dualstack with an 8 s UDP timeout): the
peer's copy of a live flow, IPv4 and IPv6 alike, is kept by the refresh windows and outlives many
timeouts (a copy that aged out would leave the flow's return packets to the default deny after a
failover); the IPv4 flow's copy carries the flow when its SRX powers off; the returning node's cold
sync is acknowledged; the counters are shown."""

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

from dataplane.traffic import Sender, make_flows, reverse_flows
from lab_orchestrator.events import sessions

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(any(shutil.which(t) is None for t in ("bird", "conntrack", "conntrackd", "tayga")),
                       reason="needs bird2, conntrack, conntrackd and tayga (make deps)"),
]

UDP_TIMEOUT = 8  # refresh window: 2 s
SOURCES6, SERVER6, SPORT6 = "2001:db8:172:80::3:0/112", "2001:db8:203::a", 41900


@pytest.fixture(scope="module")
def short(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningLab]:
    with RunningLab("ms3", REPO / "labs/topology3-dualstack.yml", tmp_path_factory.mktemp("mnhasync"),
                    udp_timeout=str(UDP_TIMEOUT)) as running:
        yield running


def mnha_status(running: RunningLab, node: str) -> dict[str, object]:
    data: dict[str, object] = json.loads(
        (Path(str(running.running.state_dir)) / "nodes" / node / "mnha-status.json").read_text())
    return data


def copy_of(running: RunningLab, node: str, port: int) -> sessions.Session | None:
    return next((s for s in sessions.read(running.ns(node)) if s.destination_port == port), None)


def ipv6_session(running: RunningLab, node: str, source: str) -> sessions.Session | None:
    table = sessions.parse_conntrack(running.exec(node, "conntrack", "-L", "-f", "ipv6"))
    return next((s for s in table if s.source == source and s.source_port == SPORT6), None)


def ipv6_carrier(running: RunningLab, source: str) -> str:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        found = next((srx for srx in PEER if (s := ipv6_session(running, srx, source)) and s.packets > 20), None)
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError("no SRX carries the IPv6 flow")


def test_the_srx_session_timeouts_are_the_labs(short: RunningLab) -> None:
    udp = short.exec("srx1", "sysctl", "-n", "net.netfilter.nf_conntrack_udp_timeout_stream").strip()
    tcp = short.exec("srx1", "sysctl", "-n", "net.netfilter.nf_conntrack_tcp_timeout_established").strip()
    assert (udp, tcp) == (str(UDP_TIMEOUT), "1800")


def test_a_live_flows_copy_outlives_its_timeout_and_carries_the_flow_after_a_power_off(short: RunningLab) -> None:
    # the IPv6 flow outlasts the check's three timeouts, started once both carriers are found (5 s each at most)
    seconds, seconds6 = 6 * UDP_TIMEOUT, 3 * UDP_TIMEOUT + 12
    flow = PushFlow(short, "100.64.9.19", 7201, seconds=seconds, rate=50)
    # an IPv6 flow beside it, both ways: the refresh rule touches established sessions (a reply seen)
    forward6 = make_flows(1, SOURCES6, SERVER6, sport=SPORT6)
    ahead6 = Sender(iface="eth1", ns=short.ns("client"), flows=forward6, rate=50, duration=seconds6).spawn()
    time.sleep(0.3)
    back6 = Sender(iface="eth1", ns=short.ns("server"), flows=reverse_flows(forward6, 100000), rate=50,
                   duration=seconds6 - 1).spawn()
    try:
        carrier = flow.carrier()
        peer, peer6 = PEER[carrier], PEER[ipv6_carrier(short, forward6[0].src)]
        started = time.monotonic()
        before = mnha_status(short, peer)["sync"]
        assert isinstance(before, dict)
        # Three timeouts: without refreshes a copy (given the carrier's timeout when the flow opened)
        # would be gone after one.
        while time.monotonic() - started < 3 * UDP_TIMEOUT:
            age = time.monotonic() - started
            assert copy_of(short, peer, 7201) is not None, f"{peer}'s copy vanished after {age:.1f} s"
            assert ipv6_session(short, peer6, forward6[0].src) is not None, \
                f"{peer6}'s copy of the IPv6 session vanished after {age:.1f} s"
            time.sleep(0.5)
    finally:
        sent6 = ahead6.wait()
        back6.wait()
    assert sent6["sent"] >= 50 * (seconds6 - 1)
    after = mnha_status(short, peer)["sync"]
    assert isinstance(after, dict)
    denied = deny_count(short, peer)
    lab("fail", "--lab", short.name, carrier, "srx-power-off")
    try:
        result = flow.result()
        assert result["highest_seq"] > 0.9 * 50 * seconds, f"the flow ran on after the power-off: {result}"
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
