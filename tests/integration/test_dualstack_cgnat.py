"""A dual-stack CGNAT topology 3 (labs/topology3-cgnat.yml with `addressing.v6` and IPv6 prefixes) up for
real (root): IPv4 clients are translated into their pair's pool and come back by its route, IPv6 clients
(no NAT pool) have their answers hashed back by destination on the MX's untrust side, so each IPv6 flow
crosses one SRX both ways, verified from the SRXs' session tables."""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Iterator
from ipaddress import IPv4Address, ip_network
from pathlib import Path

import pytest
from running import REPO, SRX, RunningLab

from lab_orchestrator.events import sessions

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(shutil.which("bird") is None or shutil.which("conntrack") is None,
                       reason="needs bird2 and conntrack (make deps)"),
]

SERVER6 = "2001:db8:203::9"
CLIENTS6 = "2001:db8:172:80::/112"
PORT6, PORT4, FLOWS = 41700, 41710, 200


def _dual_cgnat(tmp: Path) -> Path:
    text = (REPO / "labs/topology3-cgnat.yml").read_text()
    for old, new in (("\nservices:\n", "\naddressing:\n  v6: {}\nservices:\n"),
                     ("client: {kind: host, prefixes: [100.64.0.0/16]}",
                      'client: {kind: host, prefixes: [100.64.0.0/16], prefixes6: ["2001:db8:172:80::/96"]}'),
                     ("server: {kind: host, prefixes: [203.0.113.0/24]}",
                      'server: {kind: host, prefixes: [203.0.113.0/24], prefixes6: ["2001:db8:203::/64"]}')):
        assert old in text, old
        text = text.replace(old, new, 1)
    path = tmp / "topology3-cgnat6.yml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def dc(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningLab]:
    tmp = tmp_path_factory.mktemp("dualcgnat")
    with RunningLab("dc6", _dual_cgnat(tmp), tmp) as running:
        running.echo(SERVER6, 7006)
        yield running


def _probe(dc: RunningLab, sources: str, target: str, port: int) -> dict[str, list[str]]:
    out = dc.exec("client", sys.executable, "-m", "dataplane.traffic.udpprobe", "probe", "--sources", sources,
                  "--count", str(FLOWS), "--to", target, "--port", str(port))
    result: dict[str, list[str]] = json.loads(out)
    return result


def test_ipv6_answers_come_back_through_the_srx_of_the_flow(dc: RunningLab) -> None:
    result = _probe(dc, CLIENTS6, f"[{SERVER6}]:7006", PORT6)
    assert result["missing"] == [], f"{len(result['missing'])} IPv6 flows got no answer"
    carriers: dict[str, str] = {}
    for srx in SRX:
        for s in sessions.read(dc.ns(srx)):
            if s.protocol == "udp" and s.source_port == PORT6 and s.packets >= 2:  # both ways on this SRX
                assert s.source not in carriers, f"{s.source} crossed {carriers[s.source]} and {srx}"
                carriers[s.source] = srx
    assert sorted(carriers) == sorted(result["answered"])
    assert len(set(carriers.values())) >= 2  # spread over the pairs by the selector, not one SRX


def test_ipv4_clients_are_still_translated_into_their_pairs_pool(dc: RunningLab) -> None:
    result = _probe(dc, "100.64.4.0/22", "203.0.113.9:7000", PORT4)
    assert result["missing"] == [], f"{len(result['missing'])} IPv4 flows got no answer"
    pools = {n.name: n.nat_pool for n in dc.running.plan().nodes if n.nat_pool}
    seen = 0
    for srx in SRX:
        for s in sessions.read(dc.ns(srx)):
            if s.protocol == "udp" and s.source_port == PORT4 and s.packets >= 2:
                assert s.translated and IPv4Address(s.reply_destination) in ip_network(pools[srx]), (srx, s)
                seen += 1
    assert seen == FLOWS
