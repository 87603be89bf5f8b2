"""The runner's pure parts: time estimates, case lines, re-rendering a saved report (no root)."""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from lab_orchestrator.model.diagnostics import LabError
from lab_orchestrator.report import document as reportgen
from lab_orchestrator.report import run as reportrun
from lab_orchestrator.report import testplan

sys.path.insert(0, str(Path(__file__).parent))
from test_reportgen import document  # noqa: E402


def test_estimate_counts_phases_and_labs() -> None:
    traffic = testplan.TrafficParams(warmup=1, hold=2, settle=1, down_time=3)
    assert reportrun.expected_case_seconds("gres", traffic) == 2 + reportrun.CASE_OVERHEAD_S
    assert reportrun.expected_case_seconds("srx-power-off", traffic) == 4 + reportrun.CASE_OVERHEAD_S
    assert reportrun.expected_case_seconds("srx-reboot", traffic) == 5 + reportrun.CASE_OVERHEAD_S
    cases = testplan.expand(testplan.load_plan(testplan.DEFAULT_PLAN), topologies=["1"], events=["gres"])
    assert reportrun.estimate(cases, traffic) == 2 * (2 + reportrun.CASE_OVERHEAD_S + reportrun.LAB_CYCLE_S)


def test_case_lines() -> None:
    doc = document()
    assert reportrun.describe(doc["cases"][0]) == (
        "t1/srx-power-off on srx1: PASSED convergence 45/40 ms, unaffected loss 0, moved 4/4, recovered (10 s)")
    assert "capture differs on 1 flow(s)" in reportrun.describe(doc["cases"][2])
    assert reportrun.describe(doc["cases"][3]) == "t1-nat/restart-tlb: ERROR RuntimeError: traffic receive child failed"


def test_render_again_from_a_saved_report(tmp_path: Path) -> None:
    saved = tmp_path / "report.json"
    saved.write_text(json.dumps(document()))
    outputs = reportrun.Outputs(tmp_path / "again", markdown=True)
    doc = reportrun.render_again(saved, outputs)
    assert outputs.html.read_text() == reportgen.to_html(doc)
    assert ET.parse(outputs.junit).getroot().get("tests") == "4"
    assert "| event | t1 | t1-nat |" in outputs.md.read_text()
    saved.write_text(json.dumps({"schema": 99}))
    with pytest.raises(LabError, match="not a `lab report` JSON"):
        reportrun.render_again(saved, outputs)
    with pytest.raises(LabError, match="cannot read report"):
        reportrun.render_again(tmp_path / "missing.json", outputs)


def test_machine_and_version_describe_this_host() -> None:
    m = reportrun.machine()
    assert m["cpus"] >= 1 and m["kernel"] and m["python"]
    assert reportrun.version()["lab"]
