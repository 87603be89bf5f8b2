"""`lab events run --tcp`: the TCP connections' baseline judgement, their figures in an event's
result (JSON, JUnit) and the default TCP budgets (rootless, pure)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from test_eventresult import sample

from lab_orchestrator.events import budgets, tcp
from lab_orchestrator.events.budgets import Budget
from lab_orchestrator.events.result import EventResult
from lab_orchestrator.events.verdict import junit


def client_report(**over: Any) -> dict[str, Any]:
    """What `tcpload long` prints for 200 connections that all answered to the end."""
    data: dict[str, Any] = {"connections": 200, "completed": 200, "reset": 0, "timed_out": 0, "failed": 0,
                            "retried": 0, "longest_gap_s": 0.312, "stalled": 0, "silent_at_end": 0, "stalls": [],
                            "not_completed": [], "started_at": 1000.0, "ended_at": 1014.0}
    data.update(over)
    return data


def tcp_figures(**over: Any) -> dict[str, Any]:
    return tcp.figures(client_report(**over), {"srx1": 120, "srx3": 80, "srx2": 0, "srx4": 0}, event_at=1003.0)


def test_a_baseline_whose_connections_all_answer_is_clean() -> None:
    report = client_report()
    assert tcp.judge_baseline(report) == []
    assert tcp.baseline_detail(report, []) == ("200 TCP connections established and answering (longest gap "
                                               "312 ms, 0 connects retried)")


def test_a_connection_that_does_not_answer_in_the_baseline_is_a_reason() -> None:
    report = client_report(completed=196, failed=1, reset=1, silent_at_end=2)
    why = tcp.judge_baseline(report)
    assert why == ["1 of 200 TCP connections never established", "1 of 200 TCP connections reset",
                   "2 of 200 TCP connections silent for over 1 s at the end"]
    assert tcp.baseline_detail(report, why).startswith("the path does not carry 200 long-lived TCP connections")
    assert tcp.judge_baseline(client_report(connections=0, completed=0)) == ["no TCP connection measured"]
    # a connect retried, then established and answering, is not a reason
    assert tcp.judge_baseline(client_report(retried=3)) == []


def test_figures_count_outcomes_and_place_stalls_from_the_event() -> None:
    stall = {"source": "100.64.128.7", "gap_s": 10.3, "at_s": 3.2, "outcome": "completed"}
    figures = tcp_figures(completed=199, reset=1, silent_at_end=0, stalled=1, longest_gap_s=10.3, stalls=[stall])
    assert {k: figures[k] for k in ("connections", "completed", "reset", "stuck", "longest_gap_ms", "stalled")} == {
        "connections": 200, "completed": 199, "reset": 1, "stuck": 0, "longest_gap_ms": 10300.0, "stalled": 1}
    # the client started 3 s before the event: a gap that began 3.2 s into its run began 0.2 s after the event
    assert figures["stalls"] == [{"source": "100.64.128.7", "gap_ms": 10300.0, "at_s": 0.2, "outcome": "completed"}]
    assert list(figures["carried_before"]) == ["srx1", "srx2", "srx3", "srx4"]


def test_connections_come_from_the_upper_half_of_the_client_prefix() -> None:
    assert str(tcp.sources("100.64.0.0/16", 200)) == "100.64.128.0/17"  # the UDP flows use its first addresses


def test_an_event_result_carries_its_tcp_figures_through_json_and_junit() -> None:
    plain = EventResult.from_json(sample())
    assert "tcp" not in plain.to_json(), "without --tcp the JSON keeps its keys"
    result = EventResult.from_json(sample(tcp=tcp_figures(completed=198, reset=2)))
    data = result.to_json()
    assert list(data)[-2:] == ["tcp", "status"] and data["tcp"]["reset"] == 2
    assert EventResult.from_json(data) == result
    result.judge(budgets.with_tcp_defaults([], mnha=True))
    assert result.status == "failed", "srx-power-off on an MNHA lab: no reset is the goal"
    assert result.failure_reasons() == ["srx-power-off on srx1 broke the budget tcp_reset <= 0 (srx-power-off): "
                                        "measured 2"]
    case = ET.fromstring(junit([result], "t3")).find("testcase")
    assert case is not None and case.find("failure") is not None
    out = case.find("system-out")
    assert out is not None and json.loads(out.text or "")["tcp"]["reset"] == 2


def judged(event: str, mnha: bool, given: list[Budget] | None = None, **over: Any) -> dict[tuple[str, str], bool]:
    result = sample(event=event, tcp=tcp_figures(**over))
    return {(row["metric"], row["scope"]): row["ok"]
            for row in budgets.judge(result, budgets.with_tcp_defaults(given or [], mnha))}


def test_the_default_tcp_budgets_are_the_jvds() -> None:
    # under 1 % reset for every event; a stuck connection of an MX reboot is not judged by default
    assert judged("mx-reboot", mnha=True, completed=198, reset=2) == {("tcp_reset_pct", "all events"): True}
    assert judged("mx-reboot", mnha=True, completed=197, reset=3)[("tcp_reset_pct", "all events")] is False
    assert judged("mx-reboot", mnha=True, completed=199, silent_at_end=1) == {("tcp_reset_pct", "all events"): True}
    # on an MNHA lab, none reset, none failed and none stuck for the failovers MNHA is for
    for event in ("srx-power-off", "srx-link-failure", "srx-reboot"):
        rows = judged(event, mnha=True, completed=199, reset=1)
        assert rows[("tcp_reset", event)] is False and rows[("tcp_failed", event)] is True
        assert rows[("tcp_reset_pct", "all events")] is True and rows[("tcp_stuck", event)] is True
        assert judged(event, mnha=True, completed=199, failed=1)[("tcp_failed", event)] is False
        assert judged(event, mnha=True, completed=199, silent_at_end=1)[("tcp_stuck", event)] is False
        assert judged(event, mnha=True, completed=199, timed_out=1)[("tcp_stuck", event)] is False
    # without MNHA pairs the 1 % holds for them too, and a session lost with its SRX is not judged stuck
    assert judged("srx-power-off", mnha=False, completed=199, reset=1) == {("tcp_reset_pct", "all events"): True}
    assert judged("srx-power-off", mnha=False, completed=199, silent_at_end=1) == {
        ("tcp_reset_pct", "all events"): True}


def test_a_users_tcp_budget_replaces_the_defaults_it_covers() -> None:
    rows = judged("srx-reboot", mnha=True, given=[budgets.parse("tcp_reset=3")], completed=198, reset=2)
    assert rows[("tcp_reset", "all events")] is True and ("tcp_reset", "srx-reboot") not in rows
    rows = judged("srx-reboot", mnha=True, given=[budgets.parse("srx-power-off:tcp_failed=5")], completed=200)
    assert ("tcp_failed", "srx-reboot") in rows, "a budget for another event leaves this one's default"
    gap = judged("gres", mnha=False, given=[budgets.parse("tcp_longest_gap_ms=500")], longest_gap_s=0.75)
    assert gap[("tcp_longest_gap_ms", "all events")] is False


def test_tcp_budgets_hold_only_for_events_run_with_tcp() -> None:
    result = sample()
    assert budgets.judge(result, budgets.with_tcp_defaults([Budget("convergence_ms", 300.0)], mnha=True)) == [
        {"metric": "convergence_ms", "limit": 300.0, "measured": 60.0, "ok": True, "scope": "all events"}]


@pytest.mark.parametrize("metric", ["tcp_reset_pct", "tcp_reset", "tcp_failed", "tcp_stuck", "tcp_longest_gap_ms"])
def test_every_tcp_metric_can_be_given(metric: str) -> None:
    assert budgets.parse(f"srx-power-off:{metric}=1") == Budget(metric, 1.0, "srx-power-off")
    assert budgets.measured(sample(tcp=tcp_figures()), metric) >= 0


def test_lab_report_judges_tcp_cases_with_the_defaults_beside_the_users_budgets() -> None:
    from lab_orchestrator.report import document

    case = {"id": "t3/srx-power-off", "lab": "t3", "event": "srx-power-off", "target": "srx1", "status": "passed",
            "result": sample(tcp=tcp_figures(completed=199, reset=1))}
    doc = {"labs": {"t3": {"mnha": True}}, "cases": [case]}
    broken = budgets.apply_to_report(doc, [Budget("convergence_ms", 300.0)])
    assert broken == ["t3: srx-power-off on srx1 broke the budget tcp_reset <= 0 (srx-power-off): measured 1"]
    assert case["status"] == "failed"
    assert document.figures(case)["tcp_reset"] == 1 and document.figures(case)["tcp_completed"] == 199
    suite = ET.fromstring(document.to_junit(doc))
    assert suite.get("failures") == "1" and "tcp_reset" in (suite.findtext("testcase/system-out") or "")
    plain = {"id": "t1/gres", "lab": "t1", "event": "gres", "status": "passed", "result": sample(event="gres")}
    assert not any(k.startswith("tcp_") for k in document.figures(plain)), "a case without TCP has no TCP figures"
