"""Every shipped topology comes up with BGP established, forwards real packets, and goes down clean."""

from __future__ import annotations

import re
from ipaddress import IPv4Network
from pathlib import Path

import pytest
import yaml
from labtools import LABS, LabOwner, assert_down_clean, assert_ready, copy_lab, explain, flat, lab_name, ping, run_lab

pytestmark = pytest.mark.root

# client -> gw-trust -> MX TRUST-VR -> SRX -> MX UNTRUST-VR -> gw-untrust -> server: five routers,
# so an echo reply that crossed an SRX arrives with TTL 64 - 5.
THROUGH_SRX_TTL = 59


def _nat_sources(topology: Path) -> list[str]:
    services = yaml.safe_load(topology.read_text()).get("services") or {}
    return [str(p) for p in services.get("nat_sources", [])] if services.get("use_case") == "mixed" else []


# labs/flexvpn.yml comes up as shipped in test_flexvpn.py (`fvship`), whose first test and teardown
# check what this test checks: ready, forwarding, down with nothing left.
SHIPPED = [p for p in LABS if p.stem != "flexvpn"]


@pytest.mark.parametrize("shipped", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_lab_up_forwards_and_down_leaves_nothing(shipped: Path, owner: LabOwner, tmp_path: Path) -> None:
    # The shipped file as is, but named it-NAME with a management subnet of its own: other engineers
    # bring up the shipped labs under their own names on this machine meanwhile.
    topology = copy_lab(shipped, "it-" + lab_name(shipped), tmp_path)
    facts = owner.claim(topology)

    up = run_lab("up", str(topology))
    assert up.returncode == 0, explain(up)
    assert f"lab {facts.name} is up" in flat(up.stdout)
    assert_ready(facts)

    if {"client", "server"} <= set(facts.nodes):  # the JVD topologies (SFW and CGNAT)
        assert facts.sessions, "a JVD topology without BGP sessions"
        # a mixed lab (SFW and NAPT44 by source prefix): a client of its NAT prefix as well, translated
        sources = ["100.64.1.1"] + [str(next(IPv4Network(p).hosts())) for p in _nat_sources(shipped)]
        for source in sources:
            output = ping(facts.name, "client", "203.0.113.9", source=source)
            ttls = {int(t) for t in re.findall(r"ttl=(\d+)", output)}
            assert ttls == {THROUGH_SRX_TTL}, f"replies to {source} did not cross MX -> SRX -> MX: {output}"
    else:  # flexvpn: remote-access client across the WAN router to the cluster's LAN
        assert shipped.stem == "flexvpn-branch", f"no traffic check for {shipped}"
        ping(facts.name, "client1", "10.10.10.3")
        ping(facts.name, "client1", "10.10.10.1")  # router1's Ethernet0/1

    assert_down_clean(facts, "down", str(topology))
