"""The CPU-wait probe and its check: a case in which a task at the lab daemons' priority waited longer
than CPU_WAIT_MAX_S for a CPU is not judged (the machine was overloaded, not the event at fault)."""

from __future__ import annotations

import io
import json
import os
import threading
import time

import pytest

from lab_orchestrator.events import cpuwait, keptup


def test_the_probe_reports_when_its_input_ends_and_notes_a_late_wake_up(monkeypatch: pytest.MonkeyPatch) -> None:
    read_end, write_end = os.pipe()
    stdin = os.fdopen(read_end, "r")
    out = io.StringIO()
    real_select = cpuwait.select.select
    calls = {"n": 0}

    def slow_select(*args: object) -> object:
        calls["n"] += 1
        if calls["n"] == 3:
            time.sleep(0.3)  # this wake-up comes 300 ms late, as a starved task's would
        return real_select(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(cpuwait.select, "select", slow_select)
    closer = threading.Timer(0.5, lambda: os.close(write_end))
    closer.start()
    began = time.monotonic_ns()
    try:
        cpuwait.watch(stdin, out, period=0.02)
    finally:
        closer.join()
        stdin.close()
    waits = json.loads(out.getvalue())["waits"]
    assert any(250 <= ms <= 1000 and ns > began for ns, ms in waits), waits  # others may be late on a busy machine


def test_the_worst_wait_inside_the_window_and_when() -> None:
    waits = [[1_000_000_000, 40.0], [2_500_000_000, 1500.0], [9_000_000_000, 3000.0]]
    assert cpuwait.worst(waits, 2.0, 5.0) == (1500.0, 0.5)
    assert cpuwait.worst(waits, 3.0, 5.0) == (0.0, None)


def test_a_case_with_a_long_wait_is_flagged_and_a_short_one_is_not() -> None:
    marks = {"traffic": 100.0, "event": 103.0, "stopped": 120.0}
    starved = keptup.cpu_left([[104_200_000_000, 2400.0]], marks)
    assert not starved.ok and "waited 2.4 s for a CPU (+1.2 s from the event)" in starved.detail
    fine = keptup.cpu_left([[104_200_000_000, 300.0]], marks)
    assert fine.ok and "300 ms" in fine.detail
    outside = keptup.cpu_left([[130_000_000_000, 5000.0]], marks)
    assert outside.ok, "after the traffic stopped: not the case's concern"
    assert keptup.cpu_left([], {"traffic": 1.0}).detail == "not measured"
    assert keptup.cpu_left(None, marks).detail == "not measured", "the probe gave no report"


def test_the_probe_runs_as_a_child_and_reports_when_stopped() -> None:
    probe = cpuwait.CpuWait().start()
    time.sleep(0.3)
    waits = probe.stop()
    assert waits is not None, "the child reported"
    assert probe.stop() is None, "stopped once"


def test_packets_a_receiver_dropped_make_the_case_not_judged_and_the_merge_counts_every_family() -> None:
    from lab_orchestrator.events import families

    merged = families.merge_reports([{"per_flow": [], "socket_drops": 5}, {"per_flow": [], "socket_drops": 7}])
    assert merged is not None and merged["socket_drops"] == 12
    assert keptup.receivers_dropped(merged, {"socket_drops": 0}) == [
        "the forward receivers' sockets dropped 12 packets"]
    assert keptup.receivers_dropped({"per_flow": []}, None) == []


def test_a_baseline_whose_receiver_dropped_packets_names_the_load() -> None:
    from lab_orchestrator.events import baseline

    clean = baseline.Direction(sent=1000, due=1000, lost=0, flows_silent=0, max_lag_ms=1.0)
    dropped = baseline.Direction(sent=1000, due=1000, lost=30, flows_silent=0, max_lag_ms=1.0, dropped=30)
    load = baseline.Carried(100, 10000, 1.0, {"forward": clean, "reverse": dropped})
    why = baseline.judge(load)
    assert "reverse: the receiver's socket dropped 30 packets (the receiver could not keep up)" in why
    assert baseline.behind(dropped, load.resolution_ms), "the generator fell behind"
    assert not baseline.only_behind(load), "packets were lost: not a case that only needs running again"
    assert baseline.cannot_carry(load, why).startswith(
        "the generator or the path cannot carry 100 flows x 2 directions at 10000 pps here (")


def test_a_sample_sent_late_leaves_the_case_not_judged() -> None:
    """The sessions' sample must go out within 2 s of the event to say anything of those 2 s: later, the
    case is not judged (run again), not failed."""
    on_time = keptup.sample_in_time(1.84, 2.0)
    assert on_time.ok and keptup.not_judged([on_time]) is None
    late = keptup.sample_in_time(2.7, 2.0)
    assert not late.ok and "2.7 s after the event, later than 2 s" in late.detail
    why = keptup.not_judged([late])
    assert why is not None and "too busy to ask the sessions in time" in why
