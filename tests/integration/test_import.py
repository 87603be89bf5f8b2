"""A lab imported from device configurations (tests/fixtures/import/) comes up with every BGP session
Established and goes down clean."""

from __future__ import annotations

from pathlib import Path

import pytest
from labtools import LabOwner, explain, free_mgmt_subnet, leftovers, run_lab, status_of

pytestmark = pytest.mark.root

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "import"


def test_imported_lab_comes_up_with_bgp_established(owner: LabOwner, tmp_path: Path) -> None:
    topology = tmp_path / "it-import.yml"
    files = [str(FIXTURES / n) for n in ("lb1.conf", "fw-a.conf", "fw-b.set", "edge.conf")]
    result = run_lab("import", *files, "-o", str(topology), "--lab-name", "it-import", "--report-out",
                     str(tmp_path / "report.txt"), timeout=60)
    assert result.returncode == 0, explain(result)
    topology.write_text(topology.read_text() + f"addressing:\n  mgmt: {free_mgmt_subnet()}\n")
    facts = owner.claim(topology)
    up = run_lab("up", str(topology))
    assert up.returncode == 0, explain(up)
    report = status_of(facts.name)
    assert report["status"] == "ready", report
    sessions = [(n["name"], s["protocol"], s["info"]) for n in report["nodes"] for s in n["bgp"]]
    # lb1: 2 gateways + 4 firewall sessions; each firewall 2; each gateway 1
    assert len(sessions) == 6 + 4 + 2, sessions
    assert all(info.startswith("Established") for _, _, info in sessions), sessions
    assert {(name, proto) for name, proto, _ in sessions} == facts.sessions
    down = run_lab("down", "--lab", facts.name)
    assert down.returncode == 0, explain(down)
    assert leftovers(facts) == []
