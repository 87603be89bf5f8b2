"""`lab report` end to end on topology1: a small plan (one topology, two events) with captures, and a
drop on purpose that the capture must expose (the generator and the capture then disagree)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest

from lab_orchestrator.runtime.state import state_dir

REPO = Path(__file__).resolve().parents[2]
LAB = "rp1"

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("bird") is None or shutil.which("conntrack") is None,
                       reason="needs bird2 and conntrack (make deps)"),
    pytest.mark.skipif(shutil.which("dumpcap") is None, reason="needs dumpcap (tshark)"),
]


def lab(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "lab_orchestrator.cli", *args], cwd=REPO, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def topology(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """topology1 renamed rp1, running for the module (the report reuses it and leaves it up)."""
    folder = tmp_path_factory.mktemp("report")
    file = folder / f"{LAB}.yml"
    file.write_text((REPO / "labs/topology1.yml").read_text().replace("name: t1", f"name: {LAB}", 1))
    done = lab("up", str(file))
    assert done.returncode == 0, done.stderr
    try:
        yield file
    finally:
        lab("down", "--lab", LAB)


class Page(HTMLParser):
    """The matrix rows (event names) and the timelines per case section."""

    def __init__(self) -> None:
        super().__init__()
        self.matrix_rows: list[str] = []
        self.matrix_cells: list[str] = []
        self.timelines: dict[str, int] = {}
        self.section: str | None = None
        self._in_matrix = False
        self._in_th: bool = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "table" and a.get("id") == "matrix":
            self._in_matrix = True
        elif self._in_matrix and tag == "th":
            self._in_th = True
        elif self._in_matrix and tag == "td" and a.get("data-case"):
            self.matrix_cells.append(str(a["data-case"]))
        elif tag == "section":
            self.section = a.get("id")
        elif tag == "svg" and a.get("class") == "timeline" and self.section:
            self.timelines[self.section] = self.timelines.get(self.section, 0) + 1

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self._in_matrix = False
        elif tag == "th":
            self._in_th = False

    def handle_data(self, data: str) -> None:
        if self._in_matrix and self._in_th and data.strip():
            self.matrix_rows.append(data.strip())


def test_small_plan_end_to_end_with_captures(topology: Path, tmp_path: Path) -> None:
    plan = tmp_path / "small.yml"
    plan.write_text(f"""name: small
traffic: {{flows: 100, rate_per_flow: 100, warmup: 1.0, hold: 1.5, settle: 1.0, down_time: 1.0}}
labs:
  - topology: {topology}
    events: [srx-power-off, restart-tlb]
""")
    out = tmp_path / "out"
    done = lab("report", "--plan", str(plan), "--out", str(out), "--capture", "--markdown", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout)["summary"]["passed"] == 2
    doc = json.loads((out / "report.json").read_text())
    assert doc["labs"][LAB]["reused_running_lab"] is True
    assert (state_dir(LAB) / "state.json").exists(), "a lab the report did not bring up stays up"
    assert [c["event"] for c in doc["cases"]] == ["srx-power-off", "restart-tlb"]
    for case in doc["cases"]:
        cap = case["capture"]
        assert cap["flagged"] == 0 and cap["packets"] > 100 * 200, case["id"]
        rows = cap["flows"]
        assert len(rows) == 2 * 100, "every flow, both directions"
        assert not [r for r in rows if r["differs"]]
        assert all(abs(r["capture_lost"] - r["generator_lost"]) <= 1 for r in rows)
    power = doc["cases"][0]["result"]
    assert power["flows_moved"] == power["flows_moved_ideal"] > 0 and power["convergence_ms"]["max"] > 0
    lossy = [r for r in doc["cases"][0]["capture"]["flows"] if r["generator_lost"]]
    assert lossy, "the power-off lost packets, and the capture saw the same loss"
    # the HTML: self-contained, the matrix, one timeline per case
    html = (out / "report.html").read_text()
    page = Page()
    page.feed(html)
    assert page.matrix_cells == [f"{LAB}/srx-power-off", f"{LAB}/restart-tlb"]
    assert "srx-power-off" in page.matrix_rows and "restart-tlb" in page.matrix_rows
    assert page.timelines == {f"case-{LAB}-srx-power-off": 1, f"case-{LAB}-restart-tlb": 1}
    assert "<script" not in html and "http://" not in html.replace("http://www.w3.org/", "")
    suite = ET.parse(out / "report.xml").getroot()
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["srx-power-off on srx1", "restart-tlb on mx1"]
    assert [float(c.get("time") or 0) for c in cases] == pytest.approx([c["duration_s"] for c in doc["cases"]],
                                                                         abs=0.01)
    assert "| srx-power-off | pass" in (out / "report.md").read_text()


def test_a_drop_on_purpose_makes_capture_and_generator_disagree(topology: Path, tmp_path: Path) -> None:
    """A firewall rule in the server host drops every 4th packet of one flow (100.64.0.4, flow 3)
    after the wire: the capture (on the wire) sees every packet, the generator's socket receiver
    (behind the host's netfilter) misses a quarter of them: the report must flag that flow, and only it."""
    server = f"{LAB}-server"
    rules = ("add table inet drop_test\n"
             "add chain inet drop_test input { type filter hook input priority 0; }\n"
             "add rule inet drop_test input ip saddr 100.64.0.4 udp dport 7000 numgen inc mod 4 0 drop\n")
    subprocess.run(["ip", "netns", "exec", server, "nft", "-f", "-"], input=rules, text=True, check=True)
    try:
        out = tmp_path / "drop"
        # the drop is the fault under test: no baseline check (it would make the case an error), and a
        # fixed load (a calibration would measure the drop too)
        done = lab("report", "--lab", LAB, "-e", "restart-tlb", "--capture", "--receiver", "socket",
                   "--flows", "100", "--rate-per-flow", "100", "--baseline", "0", "--out", str(out))
    finally:
        subprocess.run(["ip", "netns", "exec", server, "nft", "delete", "table", "inet", "drop_test"], check=False)
    assert done.returncode == 1, done.stderr[-3000:]
    case = json.loads((out / "report.json").read_text())["cases"][0]
    cap = case["capture"]
    assert case["status"] == "failed" and cap["flagged"] == 1
    flagged = [r for r in cap["flows"] if r["differs"]]
    assert {(r["flow"], r["direction"]) for r in flagged} == {(3, "forward")}
    row = flagged[0]
    assert row["capture_lost"] == 0 and row["generator_lost"] > 50, row
    html = (out / "report.html").read_text()
    assert "DIFFERS" in html and "capture differs: 1 flow(s)" in html
    failure = ET.parse(out / "report.xml").getroot().find("testcase/failure")
    assert failure is not None and "capture and generator differ on 1 flow(s)" in (failure.get("message") or "")
