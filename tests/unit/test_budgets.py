"""Convergence budgets of `lab events run`: parsing, which budget holds for which event, verdicts."""

from __future__ import annotations

from typing import Any

import pytest

from lab_orchestrator.events import budgets
from lab_orchestrator.events.budgets import Budget, BudgetError


def report(event: str = "srx-power-off", conv: float = 420.0, unaffected: int = 0, gap: float = 450.0,
           moved: int = 50, ideal: int = 50) -> dict[str, Any]:
    return {"event": event, "target": "srx2", "convergence_ms": {"max": conv, "median": conv / 2},
            "packets_lost_by_unaffected_flows": unaffected, "longest_gap_ms": gap, "flows_moved": moved,
            "flows_moved_ideal": ideal, "passed": True, "recovered": True, "affected_flows": 50}


def test_parse_forms_and_errors() -> None:
    assert budgets.parse("convergence_ms=300") == Budget("convergence_ms", 300.0, None)
    assert budgets.parse("srx-power-off:unaffected_loss=0") == Budget("unaffected_loss", 0.0, "srx-power-off")
    with pytest.raises(BudgetError, match="expected \\[EVENT:\\]METRIC=LIMIT") as bad:
        budgets.parse("convergence<300")
    assert bad.value.exit_code == 2
    with pytest.raises(BudgetError, match="unknown metric speed; known: convergence_ms"):
        budgets.parse("speed=3")
    with pytest.raises(BudgetError, match="unknown event srx-explode"):
        budgets.parse("srx-explode:convergence_ms=3", {"srx-power-off"})


def test_per_event_budget_overrides_the_global_one() -> None:
    rules = budgets.collect(300, 0, ["srx-power-off:convergence_ms=500"])
    held = budgets.applicable(rules, "srx-power-off")
    assert sorted((b.metric, b.limit) for b in held) == [("convergence_ms", 500.0), ("unaffected_loss", 0.0)]
    assert {(b.metric, b.limit) for b in budgets.applicable(rules, "gres")} == {("convergence_ms", 300.0),
                                                                               ("unaffected_loss", 0.0)}


def test_a_broken_budget_names_event_metric_and_measure() -> None:
    result = report(conv=812.5, unaffected=3)
    result["budgets"] = budgets.judge(result, budgets.collect(300, 0, []))
    lines = budgets.violations(result)
    assert lines == [
        "srx-power-off on srx2 broke the budget convergence_ms <= 300 (all events): measured 812.5",
        "srx-power-off on srx2 broke the budget unaffected_loss <= 0 (all events): measured 3"]
    fine = report(conv=120.0)
    fine["budgets"] = budgets.judge(fine, budgets.collect(300, 0, []))
    assert budgets.violations(fine) == [] and all(row["ok"] for row in fine["budgets"])


def test_moved_excess_and_gap() -> None:
    assert budgets.measured(report(moved=57, ideal=50), "flows_moved_excess") == 7
    assert budgets.measured(report(moved=10, ideal=0), "flows_moved_excess") == 0  # MX events: no ideal
    assert budgets.measured(report(gap=99.5), "longest_gap_ms") == 99.5


def test_report_cases_that_break_a_budget_fail(tmp_path: Any) -> None:
    """`lab report --render report.json --budget ...`: the case over budget fails, JUnit says why."""
    import json
    import subprocess
    import sys
    from pathlib import Path

    from test_reportgen import document

    doc = document()
    before = {c["id"]: c["status"] for c in doc["cases"]}
    assert before["t1/srx-power-off"] == "passed"
    source = tmp_path / "in.json"
    source.write_text(json.dumps(doc))
    repo = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "lab_orchestrator.cli", "report", "--render", str(source),
                           "--out", str(tmp_path / "out"), "--budget", "srx-power-off:convergence_ms=1"],
                          cwd=repo, capture_output=True, text=True, timeout=60,
                          env={"PYTHONPATH": str(repo), "PATH": "/usr/bin:/bin", "COLUMNS": "200"})
    assert done.returncode == 1, done.stderr
    assert "t1: srx-power-off on srx1 broke the budget convergence_ms <= 1 (srx-power-off): measured" in done.stderr
    after = json.loads((tmp_path / "out" / "report.json").read_text())
    status = {c["id"]: c["status"] for c in after["cases"]}
    assert status["t1/srx-power-off"] == "failed" and status["t1/restart-tlb"] == "passed"
    junit = (tmp_path / "out" / "report.xml").read_text()
    assert "broke the budget convergence_ms &lt;= 1" in junit


def test_apply_to_report_leaves_errors_and_keeps_passing_cases() -> None:
    doc = {"cases": [{"lab": "t1", "status": "passed", "result": report(conv=50.0)},
                     {"lab": "t1", "status": "error", "result": None}]}
    assert budgets.apply_to_report(doc, budgets.collect(100, None, [])) == []
    assert [c["status"] for c in doc["cases"]] == ["passed", "error"]
    lines = budgets.apply_to_report(doc, budgets.collect(10, None, []))
    assert lines == ["t1: srx-power-off on srx2 broke the budget convergence_ms <= 10 (all events): measured 50"]
    assert doc["cases"][0]["status"] == "failed"
