"""A lab imported from device configurations (tests/fixtures/import/, and the JVD's in jvd/) comes up
with every BGP session Established and goes down clean."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from labtools import LabOwner, explain, free_mgmt_subnet, leftovers, run_lab, status_of

pytestmark = pytest.mark.root

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "import"


def up_ready(owner: LabOwner, topology: Path) -> tuple[Any, dict[str, Any]]:
    """Bring an imported TOPOLOGY up on a free management subnet: its claim and its ready status."""
    topology.write_text(topology.read_text() + f"addressing:\n  mgmt: {free_mgmt_subnet()}\n")
    facts = owner.claim(topology)
    up = run_lab("up", str(topology))
    assert up.returncode == 0, explain(up)
    report = status_of(facts.name)
    assert report["status"] == "ready", report
    return facts, report


def test_imported_lab_comes_up_with_bgp_established(owner: LabOwner, tmp_path: Path) -> None:
    topology = tmp_path / "it-import.yml"
    files = [str(FIXTURES / n) for n in ("lb1.conf", "fw-a.conf", "fw-b.set", "edge.conf")]
    result = run_lab("import", *files, "-o", str(topology), "--lab-name", "it-import", "--report-out",
                     str(tmp_path / "report.txt"), timeout=60)
    assert result.returncode == 0, explain(result)
    facts, report = up_ready(owner, topology)
    sessions = [(n["name"], s["protocol"], s["info"]) for n in report["nodes"] for s in n["bgp"]]
    # lb1: 2 gateways + 4 firewall sessions; each firewall 2; each gateway 1
    assert len(sessions) == 6 + 4 + 2, sessions
    assert all(info.startswith("Established") for _, _, info in sessions), sessions
    assert {(name, proto) for name, proto, _ in sessions} == facts.sessions
    down = run_lab("down", "--lab", facts.name)
    assert down.returncode == 0, explain(down)
    assert leftovers(facts) == []


JVD_FILES = ("mx1_mx304.conf", "srx1a_srx4600.conf", "srx1b_srx4600.conf", "srx2a_srx4600.conf", "srx2b_srx4600.conf",
             "gateway_emulator_mx304.conf")


def test_imported_jvd_lab_runs_sfw_and_napt44_side_by_side(owner: LabOwner, tmp_path: Path) -> None:
    """The JVD's six configurations import as use_case mixed (NAPT44 for 172.80.0.0/12, SFW for
    172.160.0.0/12) with each pair's ICL routed through the MX: the lab comes up ready (the untrust
    gateway has learned the pools and the SFW prefix) and the traffic generator's flows from both
    prefixes are answered."""
    topology = tmp_path / "it-jvd.yml"
    result = run_lab("import", *(str(FIXTURES / "jvd" / n) for n in JVD_FILES), "-o", str(topology),
                     "--lab-name", "it-jvd", timeout=60)
    assert result.returncode == 0, explain(result)
    assert "use_case: mixed" in topology.read_text()
    facts, report = up_ready(owner, topology)
    sessions = [(n["name"], s["info"]) for n in report["nodes"] for s in n["bgp"]]
    assert sessions and all(info.startswith("Established") for _, info in sessions), sessions
    # the ICL routed through mx1's MNHA-VR, as the files have it: its eBGP sessions with each SRX are up
    # (ready: the MNHA pairs have heard each other over it and synchronised)
    icl = {s["protocol"] for n in report["nodes"] if n["name"] == "mx1" for s in n["bgp"]}
    assert {f"icl_{srx}" for srx in ("srx1a", "srx1b", "srx2a", "srx2b")} <= icl, icl
    start = run_lab("traffic", "start", "--lab", facts.name, "--flows", "20", "--rate", "1000", "--duration", "20")
    assert start.returncode == 0, explain(start)
    time.sleep(3)
    stop = run_lab("traffic", "stop", "--lab", facts.name, "--json")
    assert stop.returncode == 0, explain(stop)
    reports = json.loads(stop.stdout)
    for direction in ("rx-forward", "rx-reverse"):
        assert reports[direction]["received"] > 0 and reports[direction]["flows_never_seen"] == 0, reports
    assert reports["rx-reverse"]["lost"] == 0, reports
    down = run_lab("down", "--lab", facts.name)
    assert down.returncode == 0, explain(down)
    assert leftovers(facts) == []
