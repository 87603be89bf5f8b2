"""Convergence budgets of `lab events run`: parsing, which budget holds for which event, verdicts."""

from __future__ import annotations

from typing import Any

import pytest

from lab_orchestrator import budgets, eventrun
from lab_orchestrator.budgets import Budget, BudgetError


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


def test_junit_fails_the_case_that_broke_a_budget() -> None:
    broken, fine = report(conv=812.5), report(event="gres", conv=100.0)
    for r in (broken, fine):
        r.update({"longest_gap_ms": 1.0, "flows_moved": 0, "flows_moved_ideal": 0})
        r["budgets"] = budgets.judge(r, budgets.collect(300, None, []))
    xml = eventrun.junit([broken, fine], "t1")
    assert 'failures="1"' in xml
    assert "broke the budget convergence_ms &lt;= 300 (all events): measured 812.5" in xml
