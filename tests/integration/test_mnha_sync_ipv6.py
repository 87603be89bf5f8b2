"""MNHA session sync of IPv6 sessions (topology3-dualstack with an 8 s UDP timeout): the peer's copy
of a live IPv6 flow is kept by the refresh windows as an IPv4 flow's is, and outlives many timeouts
(a copy that aged out would leave the flow's return packets to the default deny after a failover)."""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator

import pytest
from running import REPO, RunningLab
from test_mnha import PEER

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
def short6(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningLab]:
    with RunningLab("ms6", REPO / "labs/topology3-dualstack.yml", tmp_path_factory.mktemp("mnhasync6"),
                    udp_timeout=str(UDP_TIMEOUT)) as running:
        yield running


def ipv6_session(running: RunningLab, node: str, source: str) -> sessions.Session | None:
    table = sessions.parse_conntrack(running.exec(node, "conntrack", "-L", "-f", "ipv6"))
    return next((s for s in table if s.source == source and s.source_port == SPORT6), None)


def test_a_live_ipv6_flows_copy_outlives_its_timeout(short6: RunningLab) -> None:
    seconds = 4 * UDP_TIMEOUT
    forward = make_flows(1, SOURCES6, SERVER6, sport=SPORT6)
    flow = forward[0]
    # both ways: the refresh rule touches established sessions (a reply seen), as every measured flow is
    ahead = Sender(iface="eth1", ns=short6.ns("client"), flows=forward, rate=50, duration=seconds).spawn()
    time.sleep(0.3)
    back = Sender(iface="eth1", ns=short6.ns("server"), flows=reverse_flows(forward, 100000), rate=50,
                  duration=seconds - 1).spawn()
    try:
        carrier = None
        deadline = time.monotonic() + 5
        while carrier is None and time.monotonic() < deadline:
            carrier = next((srx for srx in PEER if (s := ipv6_session(short6, srx, flow.src)) and s.packets > 20), None)
            time.sleep(0.2)
        assert carrier is not None, "no SRX carries the IPv6 flow"
        peer = PEER[carrier]
        started = time.monotonic()
        # three timeouts: without refreshes the copy (given the carrier's timeout when it was sent) is gone after one
        while time.monotonic() - started < 3 * UDP_TIMEOUT:
            copy = ipv6_session(short6, peer, flow.src)
            age = time.monotonic() - started
            assert copy is not None, f"{peer}'s copy of the IPv6 session vanished after {age:.1f} s"
            time.sleep(0.5)
    finally:
        sent = ahead.wait()
        back.wait()
    assert sent["sent"] >= 50 * (seconds - 1)
