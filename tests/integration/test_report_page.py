"""The HTML report in headless Chromium at 1400 px (no lab, no root): the summary table (event x lab) of
the JVD plan's eight labs, with wide figures in every cell, fits the page: no lab column behind a
horizontal scroll bar."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from headless import Chromium, chromium_problem

from lab_orchestrator.events.catalog import CATALOG
from lab_orchestrator.report import document as reportgen

LABS = ["t1", "t1-nat", "t2", "t2-nat", "t3", "t3-nat", "t4", "t4-nat", "t3-srg1", "t4-srg1", "t2-srg1"]


def _case(lab: str, event: str, index: int) -> dict[str, Any]:
    result = {"convergence_ms": {"max": 12345.6 + index, "median": 2345.6}, "packets_lost_by_unaffected_flows": 123456,
              "flows_moved": 1234, "flows_moved_ideal": 1234, "recovered": True, "resolution_ms": 5.0, "flows": 200}
    return {"id": f"{lab}/{event}", "lab": lab, "event": event, "status": "failed" if index % 7 == 0 else "passed",
            "result": result, "capture": {"flagged": 12} if index % 5 == 0 else None}


def test_the_summary_table_fits_1400_px(tmp_path: Path) -> None:
    reason = chromium_problem()
    if reason:
        pytest.skip(reason)
    events = [e.name for e in CATALOG]
    doc = {"plan": {"name": "jvd", "traffic": {}}, "labs": {lab: {"use_case": "cgnat"} for lab in LABS},
           "cases": [_case(lab, event, i) for i, (lab, event) in enumerate((lab, e) for lab in LABS for e in events)]}
    page = tmp_path / "report.html"
    page.write_text(reportgen.to_html(doc))
    with Chromium(width=1400) as browser:
        browser.open(page.as_uri())
        browser.wait_for("document.readyState === 'complete'", timeout=20)
        widths = browser.evaluate("[document.getElementById('matrix').getBoundingClientRect().right, "
                                  "document.documentElement.clientWidth, document.documentElement.scrollWidth]")
        right, viewport, scroll = widths
        assert right <= viewport and scroll <= viewport, widths
        last = browser.evaluate("document.querySelector('#matrix thead th:last-child').getBoundingClientRect().right")
        assert last <= viewport, last
