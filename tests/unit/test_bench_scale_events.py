"""The scale benchmark's table (bench/scale_events.py): a judged event, and one whose flows were not
judged but whose background sessions were probed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmod import load

scale_events = load("scale_events")

SESSIONS = {"opened": 1000, "carried_before": {"srx1": 480}, "synced_before": {"srx1": 480}, "failed_over": 480,
            "survived": 1000, "lost": 0, "judged": 1000, "expected_lost": 0, "probe_at_s": 3.2,
            "early": {"step": 1, "sampled": 1000, "at_s": 0.8, "sent_by_s": 1.21, "judged": 1000, "failed_over": 480,
                      "survived": 480, "lost": 0, "lost_pct": 0.0, "expected_lost": 0}}


def _row(doc: dict[str, object], line: str) -> list[str]:
    text = scale_events.markdown({"udp_timeout": 120, "exit_code": 0, **doc}, "lab events run", 60.0, 1000)
    rows = [r for r in text.splitlines() if r.startswith(line)]
    assert len(rows) == 1, text
    return [cell.strip() for cell in rows[0].strip("|").split("|")]


def test_a_judged_event_shows_its_sessions_and_verdict() -> None:
    event = {"event": "srx-power-off", "target": "srx1", "status": "passed", "sessions": SESSIONS,
             "convergence_ms": {"max": 412.4}, "packets_lost_by_unaffected_flows": 0}
    cells = _row({"events": [event]}, "| srx-power-off")
    assert cells[:4] == ["srx-power-off", "srx1", "passed", "1000"]
    assert cells[6:8] == ["480 / 1000", "0 / 1000"] and cells[13] == "412" and cells[14] == "0"
    assert cells[10:13] == ["0.8-1.21 (1000 sampled, 1 in 1)", "480 / 480", "0 / 1000"]
    # a report without the sample (kept before it was taken): dashes, not a failure
    early_less = {**event, "sessions": {k: v for k, v in SESSIONS.items() if k != "early"}}
    assert _row({"events": [early_less]}, "| srx-power-off")[10:13] == ["-", "-", "-"]


def test_flows_not_judged_still_show_the_sessions_that_were_probed() -> None:
    """A sender that fell behind makes the flows' figures untrustworthy, not the sessions' probe."""
    error = {"event": "srx-power-off", "target": "srx1", "status": "error", "error": "the generator fell behind",
             "result": {"sessions": SESSIONS, "convergence_ms": {"max": 99.0},
                        "packets_lost_by_unaffected_flows": 3}}
    cells = _row({"events": [error]}, "| srx-power-off")
    assert cells[2] == "flows not judged: the generator fell behind"
    assert cells[6:8] == ["480 / 1000", "0 / 1000"]
    assert cells[14] == "3"  # lost packets are counted whatever the sender's lateness
    bare = {"event": "srx-power-off", "target": "srx1", "status": "error", "error": "no report"}
    assert _row({"events": [bare]}, "| srx-power-off")[2:4] == ["error: no report", "-"]


def test_a_benchmark_runs_the_lab_command_of_its_own_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not another checkout's `lab` found first on PATH: the figures are of the code beside the script."""
    common = load("common")
    python = tmp_path / "bin" / "python3"
    python.parent.mkdir()
    python.write_text("")
    monkeypatch.setattr(common.sys, "executable", str(python))
    monkeypatch.setattr(common.shutil, "which", lambda name: "/usr/local/bin/lab")
    assert common.lab_cmd() == ["/usr/local/bin/lab"], "no lab beside this Python: the one on PATH"
    (tmp_path / "bin" / "lab").write_text("#!/bin/sh\n")
    (tmp_path / "bin" / "lab").chmod(0o755)
    assert common.lab_cmd() == [str(tmp_path / "bin" / "lab")]


def test_each_event_runs_on_a_lab_of_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three events: three `lab events run`, one event each, the results in one document (a second
    event on the same lab would meet the first one's sessions still in the tables)."""
    calls: list[list[str]] = []

    def fake_run(argv: list[str], **_: object) -> object:
        calls.append(argv)
        event = argv[argv.index("-e") + 1]
        Path(argv[argv.index("--json-out") + 1]).write_text(
            json.dumps({"events": [{"event": event, "target": "srx1", "status": "passed"}]}))
        return type("Done", (), {"returncode": 1 if event == "srx-reboot" else 0, "stdout": "", "stderr": ""})()

    monkeypatch.setattr(scale_events.subprocess, "run", fake_run)
    monkeypatch.setattr(scale_events, "lab_cmd", lambda: ["lab"])
    doc, command, _ = scale_events.run(1000, ["srx-power-off", "mnha-pair-power-off", "srx-reboot"], tmp_path)
    assert [c[c.index("-e") + 1] for c in calls] == ["srx-power-off", "mnha-pair-power-off", "srx-reboot"]
    assert all(c.count("-e") == 1 for c in calls)
    assert [e["event"] for e in doc["events"]] == ["srx-power-off", "mnha-pair-power-off", "srx-reboot"]
    assert doc["exit_code"] == 1 and command.count("lab events run") == 3


def test_an_event_without_a_report_is_a_row_and_the_others_stay(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    downs: list[list[str]] = []

    def fake_run(argv: list[str], **_: object) -> object:
        if "down" in argv:
            downs.append(argv)
            return type("Done", (), {"returncode": 0, "stdout": "", "stderr": ""})()
        event = argv[argv.index("-e") + 1]
        if event == "srx-reboot":
            raise scale_events.subprocess.TimeoutExpired(argv, 1.0)
        if event == "mnha-pair-power-off":  # ended without writing its report
            return type("Done", (), {"returncode": 2, "stdout": "", "stderr": "lab t3\nbroke | here\n"})()
        Path(argv[argv.index("--json-out") + 1]).write_text(
            json.dumps({"events": [{"event": event, "target": "srx1", "status": "passed"}]}))
        return type("Done", (), {"returncode": 0, "stdout": "", "stderr": ""})()

    monkeypatch.setattr(scale_events.subprocess, "run", fake_run)
    monkeypatch.setattr(scale_events, "lab_cmd", lambda: ["lab"])
    doc, _, _ = scale_events.run(1000, ["srx-power-off", "mnha-pair-power-off", "srx-reboot"], tmp_path)
    rows = {e["event"]: e for e in doc["events"]}
    assert rows["srx-power-off"]["status"] == "passed"
    assert rows["mnha-pair-power-off"]["error"] == "no report (exit 2): lab t3 broke / here"  # one table cell
    assert rows["srx-reboot"]["error"] == "timed out (its lab taken down)"
    assert downs == [["lab", "down", "--lab", scale_events.LAB]]
    assert doc["exit_code"] == 2
    assert scale_events.exit_code([0, 3, 1]) == 1 and scale_events.exit_code([0, -9, 3]) == -9


def test_a_case_not_judged_runs_again_on_a_fresh_lab_and_its_reason_is_kept(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """srx-power-off not judged twice, then judged: three labs, the verdict of the third and both
    reasons under the table; mnha-pair-power-off failed: a verdict, never run again; srx-reboot not
    judged up to the limit of attempts: its last reason is its row; nexthop-delete not judged for a
    reason that is not the machine's: run once."""
    runs: list[str] = []
    outcomes = {"srx-power-off": ["error", "error", "passed"], "mnha-pair-power-off": ["failed"],
                "srx-reboot": ["error", "error", "error", "error"], "nexthop-delete": ["error", "passed"]}

    def fake_run(argv: list[str], **_: object) -> object:
        event = argv[argv.index("-e") + 1]
        runs.append(event)
        status = outcomes[event].pop(0)
        case: dict[str, object] = {"event": event, "target": "srx1", "status": status, "sessions": SESSIONS,
                                   "convergence_ms": {"max": 50.0}}
        if status == "error":
            case["error"] = f"paused {len(runs)}"
            case["again"] = event != "nexthop-delete"  # its precondition would fail again
        Path(argv[argv.index("--json-out") + 1]).write_text(json.dumps({"events": [case]}))
        code = {"passed": 0, "failed": 1, "error": 3}[status]
        return type("Done", (), {"returncode": code, "stdout": "", "stderr": ""})()

    monkeypatch.setattr(scale_events.subprocess, "run", fake_run)
    monkeypatch.setattr(scale_events, "lab_cmd", lambda: ["lab"])
    doc, _, _ = scale_events.run(1000, ["srx-power-off", "mnha-pair-power-off", "srx-reboot", "nexthop-delete"],
                                 tmp_path, attempts=3)
    assert runs == ["srx-power-off"] * 3 + ["mnha-pair-power-off"] + ["srx-reboot"] * 3 + ["nexthop-delete"]
    rows = {e["event"]: e for e in doc["events"]}
    assert rows["srx-power-off"]["status"] == "passed"
    assert rows["srx-power-off"]["earlier_attempts"] == ["paused 1", "paused 2"]
    assert rows["mnha-pair-power-off"]["earlier_attempts"] == []
    assert rows["nexthop-delete"]["status"] == "error", "a precondition that would fail again: one run"
    assert rows["srx-reboot"]["error"] == "paused 7" and rows["srx-reboot"]["earlier_attempts"] == ["paused 5",
                                                                                                 "paused 6"]
    assert doc["exit_code"] == 1
    text = scale_events.markdown({**doc, "udp_timeout": 120}, "lab events run", 60.0, 1000)
    assert "- srx-power-off: attempt 3; not judged before: paused 1; paused 2" in text
    assert "- mnha-pair-power-off" not in text
    # one attempt (the default of run()): a case not judged is its row, with nothing run again
    runs.clear()
    outcomes["srx-reboot"] = ["error"]
    once, _, _ = scale_events.run(1000, ["srx-reboot"], tmp_path)
    assert runs == ["srx-reboot"] and once["events"][0]["earlier_attempts"] == []
    assert "fresh lab" not in scale_events.markdown({**once, "udp_timeout": 120}, "lab events run", 60.0, 1000)
