"""docs/events-results.md is made from the kept event-run reports (bench/events_results.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from benchmod import load

REPO = Path(__file__).resolve().parents[2]
er = load("events_results")


def _flow(flow: int, lost_r: int = 0, expected: bool = False, carrier: str = "srx3") -> dict[str, Any]:
    return {"flow": flow, "src": f"100.64.0.{flow + 1}", "carrier_before": carrier, "carrier_during": carrier,
            "carrier_after": carrier, "lost_forward": 0, "lost_reverse": lost_r, "lost": lost_r,
            "gap_at_s": [1.0, 6.1], "expected_mover": {"event": expected, "restore": False}, "moved": False,
            "rebound": False, "max_gap_ms": 40.0}


def _event(name: str, passed: bool, flows: list[dict[str, Any]], unaffected: int = 0) -> dict[str, Any]:
    return {"event": name, "target": "mx2", "passed": passed, "recovered": True, "flows": 60,
            "affected_flows": 32, "unaffected_flows": 28, "convergence_ms": {"max": 20.0, "median": 20.0},
            "longest_gap_ms": 42.0, "packets_lost_by_unaffected_flows": unaffected, "flows_moved": 17,
            "flows_moved_ideal": 0, "flows_rebound": 0,
            "phases": {"event": {"expected_movers": 32, "movers": 17, "unexpected_movers": 0, "cross_mx_movers": 32}},
            "verdict_from": "selector tables", "tables_missed": 0, "resolution_ms": 20.0,
            "marks": {"event": 100.0, "restore": 101.5, "settled": 103.5}, "timeline": [[100.1, {"srx1": 1.0}]],
            "per_flow": flows}


def test_trim_keeps_figures_and_only_the_flows_that_lost_packets() -> None:
    report = {"lab": "t2-srg1", "events": [_event("srd-link-failure", False, [_flow(1), _flow(8, 1)], 1)]}
    (event,) = er.trim(report)
    assert "timeline" not in event and "per_flow" not in event
    assert [row["flow"] for row in event["lossy_flows"]] == [8]
    assert event["marks_s"] == {"event": 0.0, "restore": 1.5, "settled": 3.5}
    assert event["failure_reasons"] == ["unaffected flows lost 1 packets"]


def test_render_summarises_each_lab_and_names_what_failed(tmp_path: Path) -> None:
    kept = {
        "topology2-srg1": {"description": "dual MX", "started": "2026-12-01 21:44", "ended": "2026-12-01 21:49",
                           "commit": "abc1234", "rc": 1, "machine": None,
                           "events": er.trim({"events": [_event("srd-switchover", True, []),
                                                         _event("srd-link-failure", False, [_flow(8, 1)], 1)]})},
        "topology1": {"description": "single MX", "started": "2026-12-01 22:00", "ended": "2026-12-01 22:04",
                      "commit": "abc1234", "rc": 0, "machine": None,
                      "events": er.trim({"events": [_event("srx-power-off", True, [_flow(3, 2, expected=True)])]})},
    }
    text = er.render(kept)
    summary = text[text.index("## Summary"):]
    # the shipped order (topology1 first), passed / run, and why a failure failed
    assert summary.index("[topology1]") < summary.index("[topology2-srg1]")
    assert "| 1 / 1 | - |" in summary
    assert "| 1 / 2 | srd-link-failure: unaffected flows lost 1 packets |" in summary
    assert "## topology2-srg1: 1 / 2 passed" in text
    assert "| srd-link-failure | mx2 | **FAIL** | 32 / 60 | 20 | 1 | 17 (0) | 32 / 17 / 0 | 32 |" in text
    assert "flow 8 (100.64.0.9, srx3 → srx3): lost 0 forward, 1 reverse" in text
    assert "Not run yet: topology2, topology3" in text


def test_the_document_keeps_its_notes_and_the_kept_reports_make_it(tmp_path: Path) -> None:
    old = "# old\n\n" + er.NOTES_MARKER + "\n\nWhy flows lost packets.\n"
    new = er.document({}, old)
    assert new.endswith(er.NOTES_MARKER + "\n\nWhy flows lost packets.\n")
    # the committed document is what the committed reports make
    doc = (REPO / "docs" / "events-results.md").read_text()
    assert doc == er.document(er.load_kept(), doc), \
        "docs/events-results.md is stale: python3 bench/events_results.py write"


def test_kept_reports_are_one_event_per_line_and_read_back(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.setattr(er, "KEPT", tmp_path)
    report = {"events": [_event("gres", True, []), _event("srd-link-failure", False, [_flow(8, 1)], 1)]}
    er.record("topology2-srg1", report, "2026-12-01 21:44", "2026-12-01 21:49", "abc1234", 1, None)
    text = (tmp_path / "topology2-srg1.json").read_text()
    assert sum(line.startswith('{"event":') for line in text.splitlines()) == 2 and len(text.splitlines()) < 20
    back = json.loads(text)
    assert [e["event"] for e in back["events"]] == ["gres", "srd-link-failure"]
    assert back["rc"] == 1 and back["commit"] == "abc1234"


def test_flow_zero_that_lost_packets_is_kept_with_its_number_and_listed() -> None:
    """Flow number 0 equals False in Python: it must not be dropped as an empty field."""
    report = {"lab": "t3-nat", "events": [_event("restart-routing", False, [_flow(0, 52), _flow(13, 51)], 103)]}
    (event,) = er.trim(report)
    assert [row["flow"] for row in event["lossy_flows"]] == [0, 13]
    kept = {"lab": "t3-nat", "description": "d", "started": "s", "ended": "e", "commit": "c", "rc": 1,
            "events": [event]}
    text = "\n".join(er.lab_section("topology3-cgnat", kept))
    assert "flow 0 (100.64.0.1" in text and "flow 13 (100.64.0.14" in text


def test_a_case_not_judged_keeps_the_runners_sentence() -> None:
    error = {"event": "restart-routing", "target": "mx1", "status": "error", "flows": 60,
             "error": "the generator fell behind during the event (...): lower --rate/--flows"}
    kept = er.trim({"events": [error]})[0]
    assert "passed" not in kept and kept["error"] == error["error"]
    assert kept["failure_reasons"] == [error["error"]]


def test_a_dual_stack_lab_keeps_each_familys_verdict_and_shows_it() -> None:
    """The kept report of a dual-stack lab has each family's verdict; its table a column for them (and the
    re-bound column, its flows being translated), naming the family that failed."""
    def family(number: int, passed: bool, worst: float) -> dict[str, Any]:
        return {"family": number, "flows": 20, "affected_flows": 10, "unaffected_flows": 10,
                "convergence_ms": {"max": worst, "median": worst}, "longest_gap_ms": worst,
                "packets_lost_by_unaffected_flows": 0 if passed else 3, "flows_moved": 10, "recovered": True,
                "passed": passed, "received": 100, "lost": 1}

    event = _event("srx-power-off", False, [_flow(75001, 3)], 3)
    event["families"] = {"4": family(4, True, 80.0), "6": family(6, True, 90.0), "64": family(64, False, 120.0)}
    event["per_flow"][0]["bindings"] = ["198.51.100.40:40064"]
    (kept,) = er.trim({"events": [event]})
    assert kept["families"]["64"]["passed"] is False
    assert kept["lossy_flows"][0]["bindings"] == ["198.51.100.40:40064"]
    lines = er.lab_section("topology3-dualstack", {"description": "dual stack", "started": "s", "ended": "e",
                                                   "commit": "c", "rc": 1, "events": [kept]})
    header = next(line for line in lines if line.startswith("| event |"))
    assert header.endswith("| re-bound | per family: verdict, convergence max ms |")
    row = next(line for line in lines if line.startswith("| srx-power-off |"))
    assert row.endswith("| 0 | IPv4 pass 80, IPv6 pass 90, NAT64 **FAIL** 120 |")
    plain = er.lab_section("topology1", {"description": "v4", "started": "s", "ended": "e", "commit": "c", "rc": 0,
                                         "events": er.trim({"events": [_event("srx-power-off", True, [])]})})
    assert not any("per family" in line or "re-bound" in line for line in plain)
