"""Each flow's session found by its tuple in a real namespace (ctnetlink GET from a socket opened in
that namespace), with both directions' packets, for IPv4 and IPv6; a flow without a session is absent,
among many flows (several chunks of requests, sessions found and missing mixed)."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from types import SimpleNamespace

import pytest

from lab_orchestrator.events.flowlookup import FlowCounters

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("nft") is None, reason="needs nftables"),
]

SEND = """
import socket
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 40001))
for _ in range(3): s.sendto(b"x", ("127.3.0.9", 7000))
s6 = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); s6.bind(("::1", 40002))
s6.sendto(b"x", ("::1", 7001))
for port in range(41000, 41150, 2):  # many flows: more than one chunk of requests
    m = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); m.bind(("127.0.0.1", port))
    m.sendto(b"x", ("127.3.0.9", 7000)); m.close()
for port in range(42000, 42060, 2):
    m = socket.socket(socket.AF_INET6, socket.SOCK_DGRAM); m.bind(("::1", port))
    m.sendto(b"x", ("::1", 7001)); m.close()
"""


@pytest.fixture
def namespace() -> Iterator[str]:
    name = f"lt-fl-{uuid.uuid4().hex[:6]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        def inside(*argv: str) -> None:
            subprocess.run(["ip", "netns", "exec", name, *argv], check=True, capture_output=True)

        inside("ip", "link", "set", "lo", "up")
        inside("sysctl", "-qw", "net.netfilter.nf_conntrack_acct=1")
        inside("nft", "add table inet t; add chain inet t o { type filter hook output priority 0; }; "
                      "add rule inet t o ct state new counter")
        inside("python3", "-c", SEND)
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], check=False)


def test_each_flow_s_session_is_found_by_its_tuple(namespace: str) -> None:
    v4 = SimpleNamespace(src="127.0.0.1", dst="127.3.0.9", sport=40001, dport=7000)
    v6 = SimpleNamespace(src="::1", dst="::1", sport=40002, dport=7001)
    none = SimpleNamespace(src="127.0.0.1", dst="127.3.0.9", sport=40003, dport=7000)
    with FlowCounters({"srx1": namespace}) as counters:
        got = counters.read([v4, v6, none])  # type: ignore[list-item]
    assert got[("127.0.0.1", 40001)] == {"srx1": 3}, "three datagrams, none answered"
    assert got[("::1", 40002)]["srx1"] >= 1, "IPv6 through its own socket (loopback: the reply counts too)"
    assert ("127.0.0.1", 40003) not in got


def test_many_flows_mixed_found_and_missing_in_one_reading(namespace: str) -> None:
    v4 = [SimpleNamespace(src="127.0.0.1", dst="127.3.0.9", sport=port, dport=7000) for port in range(41000, 41150)]
    v6 = [SimpleNamespace(src="::1", dst="::1", sport=port, dport=7001) for port in range(42000, 42060)]
    with FlowCounters({"srx1": namespace}) as counters:
        first = counters.read(v4 + v6)  # type: ignore[arg-type]
        again = counters.read(v6 + v4)  # type: ignore[arg-type]
    sent = {("127.0.0.1", p) for p in range(41000, 41150, 2)} | {("::1", p) for p in range(42000, 42060, 2)}
    assert set(first) == sent, "the even ports sent a datagram, the odd ones never did"
    assert all(first[("127.0.0.1", p)] == {"srx1": 1} for p in range(41000, 41150, 2))
    assert again == first, "the same answers whatever the order"
