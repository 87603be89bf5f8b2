"""On real namespaces: topology 4 as the JVD runs it, both MXs forwarding at once (no SRD). The gateways
install their routes over both MXs, each SRX's routes toward the two MXs are equal, and each MX's TLB picks
the same SRX for a flow, so the SRX that sees a flow's forward packets sees its answers."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from running import FLOWS, REPO, SRX, RunningLab, lab

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(any(shutil.which(t) is None for t in ("bird", "conntrack", "conntrackd")),
                       reason="needs bird2, conntrack and conntrackd (make deps)"),
]

PORT = 45100


def next_hop_devices(running: RunningLab, node: str, prefix: str) -> set[str]:
    """The interfaces of NODE's kernel route to PREFIX (every next hop of a multipath route)."""
    return set(re.findall(r"dev (\S+)", running.exec(node, "ip", "route", "show", prefix)))


def received(running: RunningLab, mx: str) -> int:
    """Packets the MX's TRUST-VR received from the trust gateway."""
    out = lab("exec", "--lab", running.name, mx, "--instance", "TRUST-VR", "--", "cat",
              "/sys/class/net/ge-0-0-0/statistics/rx_packets").stdout
    return int(out.strip())


def directions(running: RunningLab, srx: str) -> list[tuple[str, int, int]]:
    """(subscriber, packets it sent, packets answered) of each probe session on SRX (conntrack's counters)."""
    out = running.exec(srx, "conntrack", "-L", "-p", "udp", "--orig-port-src", str(PORT), check=False)
    found = []
    for line in out.splitlines():
        counts = [int(n) for n in re.findall(r"packets=(\d+)", line)]
        source = re.search(r"src=(\S+)", line)
        if source and len(counts) == 2:
            found.append((source.group(1), counts[0], counts[1]))
    return found


def test_both_mxs_forward_and_every_flow_is_symmetric(tmp_path: Path) -> None:
    with RunningLab("dm4", REPO / "labs/topology4.yml", tmp_path) as running:
        # the gateways spread over both MXs (multipath), the SRXs' routes to both MXs are equal
        assert next_hop_devices(running, "gw-trust", "203.0.113.0/24") == {"Gi0-1", "Gi0-2"}
        assert next_hop_devices(running, "gw-untrust", "100.64.0.0/16") == {"Gi0-1", "Gi0-2"}
        for srx in SRX:
            assert next_hop_devices(running, srx, "default") == {"ge-0-0-1", "ge-0-0-3"}, srx
            assert next_hop_devices(running, srx, "100.64.0.0/16") == {"ge-0-0-0", "ge-0-0-2"}, srx
        running.wait_members({"MNHA_SRX1", "MNHA_SRX3"})
        before = {mx: received(running, mx) for mx in ("mx1", "mx2")}
        assert running.probe(PORT)["missing"] == []
        grew = {mx: received(running, mx) - before[mx] for mx in ("mx1", "mx2")}
        # each MX carries a share of the flows (the gateway's hash), not only its BGP keepalives
        assert all(n > FLOWS // 5 for n in grew.values()), grew
        seen: dict[str, str] = {}
        for srx in SRX:
            for source, sent, answered in directions(running, srx):
                if sent == 0:
                    continue  # a copy synchronised from the MNHA peer
                assert answered > 0, f"{source}: {srx} saw its forward packets, not its answer"
                assert source not in seen, f"{source} forwarded by {seen[source]} and {srx}"
                seen[source] = srx
        assert len(seen) == FLOWS
