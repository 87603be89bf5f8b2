"""events.routelog: the route monitors' output read back, timed from the event, bounded."""

from __future__ import annotations

import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lab_orchestrator.events import routelog
from lab_orchestrator.events.result import EventResult, RouteChange


def stamp(wall: float) -> str:
    """As iproute2 prints it with TZ=UTC0 (naive, UTC)."""
    return "[" + datetime.fromtimestamp(wall, UTC).replace(tzinfo=None).isoformat(timespec="microseconds") + "]"


def test_lines_are_timed_on_the_monotonic_clock() -> None:
    wall0 = 1_796_434_000.0
    lines = [f"{stamp(wall0 + 1.25)} Deleted 198.51.100.0/28 via 198.18.0.11 dev ge-0-2-1 proto bird metric 32 ",
             f"{stamp(wall0 + 2.5)} 198.51.100.0/28 via 198.18.0.15 dev ge-0-2-2 proto bird metric 32"]
    changes = routelog.parse("t3-mx1-untrust-vr", lines, wall_minus_mono=wall0 - 100.0)
    assert [(round(c.at, 3), c.change) for c in changes] == [
        (101.25, "Deleted 198.51.100.0/28 via 198.18.0.11 dev ge-0-2-1 proto bird metric 32"),
        (102.5, "198.51.100.0/28 via 198.18.0.15 dev ge-0-2-2 proto bird metric 32")]
    assert {c.ns for c in changes} == {"t3-mx1-untrust-vr"}


def test_noise_and_unstamped_lines_are_left_out() -> None:
    wall = 1_796_434_000.0
    lines = [f"{stamp(wall)} local 198.18.0.10 dev ge-0-2-1 table local proto kernel scope host src 198.18.0.10 ",
             f"{stamp(wall)} fe80::/64 dev ge-0-2-1 proto kernel metric 256 pref medium",
             f"{stamp(wall)} multicast ff00::/8 dev ge-0-2-1 table local proto kernel metric 256 pref medium",
             f"{stamp(wall)} Deleted ff00::/8 dev ge-0-2-1 table main metric 256 pref medium",
             "Deleted 10.0.0.0/8 via 10.1.1.1 dev eth0",  # no time stamp: not iproute2's -ts form
             f"{stamp(wall)} 198.18.0.10/31 dev ge-0-2-1 proto kernel scope link src 198.18.0.10 linkdown ",
             # kept: a link-local next hop, a prefix that merely contains ff00, a blackhole
             f"{stamp(wall)} 2001:db8::/64 via fe80::1 dev ge-0-2-1 proto bird metric 32 pref medium",
             f"{stamp(wall)} 2001:db8:ff00::/40 dev ge-0-2-1 metric 1024 pref medium",
             f"{stamp(wall)} Deleted blackhole default table 199 proto static metric 4294967295"]
    assert [c.change for c in routelog.parse("ns", lines, 0.0)] == [
        "198.18.0.10/31 dev ge-0-2-1 proto kernel scope link src 198.18.0.10 linkdown",
        "2001:db8::/64 via fe80::1 dev ge-0-2-1 proto bird metric 32 pref medium",
        "2001:db8:ff00::/40 dev ge-0-2-1 metric 1024 pref medium",
        "Deleted blackhole default table 199 proto static metric 4294967295"]


def test_a_multipath_route_keeps_its_next_hops_on_its_line() -> None:
    # iproute2 -o joins a multipath route's next-hop lines with a backslash and a tab
    line = (f"{stamp(1_796_434_000.0)} Deleted 198.51.100.0/28 proto bird metric 32 \\\tnexthop via 198.18.0.11 "
            "dev ge-0-2-1 weight 1 \\\tnexthop via 198.18.0.15 dev ge-0-2-2 weight 1 ")
    assert [c.change for c in routelog.parse("ns", [line], 0.0)] == [
        "Deleted 198.51.100.0/28 proto bird metric 32 | nexthop via 198.18.0.11 dev ge-0-2-1 weight 1"
        " | nexthop via 198.18.0.15 dev ge-0-2-2 weight 1"]


def test_kept_takes_the_earliest_and_counts_take_all() -> None:
    changes = [routelog.Change(float(i % 7), f"ns{i % 3}", f"route {i}") for i in range(200)]
    first = routelog.kept(changes)
    assert len(first) == routelog.MAX_KEPT
    assert [c.at for c in first] == sorted(c.at for c in first)
    assert max(c.at for c in first) <= min(c.at for c in changes if c not in first)
    assert routelog.counts(changes) == {"ns0": 67, "ns1": 67, "ns2": 66}
    assert {c.at for c in routelog.kept(changes, since=5.0)} == {5.0, 6.0}, "from SINCE on"


def test_the_log_runs_a_monitor_per_namespace_and_reads_what_it_wrote(monkeypatch: pytest.MonkeyPatch,
                                                                       tmp_path: Path) -> None:
    # a stand-in for iproute2: prints one stamped change naming its namespace, then waits to be stopped
    script = ("import sys, time, datetime\n"
              "print('[' + datetime.datetime.now().isoformat(timespec='microseconds') + '] Deleted default via '"
              " + sys.argv[1], flush=True)\n"
              "time.sleep(30)\n")
    monkeypatch.setattr(routelog, "monitor_argv", lambda ns: [sys.executable, "-c", script, ns])
    log = routelog.RouteLog(["a", "b"]).start()
    folder = log.folder
    assert folder is not None
    for _ in range(100):  # until both stand-ins have written their line
        if all((folder / ns).stat().st_size for ns in ("a", "b")):
            break
        time.sleep(0.05)
    log.stop()
    assert sorted(c.change for c in log.changes()) == ["Deleted default via a", "Deleted default via b"]
    assert not folder.exists(), "the monitors' files are removed"
    log.stop()  # a second stop changes nothing
    assert len(log.changes()) == 2


def test_a_failed_case_carries_its_route_changes_in_the_json() -> None:
    from test_eventresult import sample

    changes = [{"at_s": 1.007, "ns": "t3-mx1-untrust-vr", "change": "Deleted 198.51.100.0/28 via 198.18.0.11"}]
    result = EventResult.from_json(sample(passed=False, routes_changed={"t3-mx1-untrust-vr": 3},
                                          route_changes=changes))
    out = result.to_json()
    assert out["routes_changed"] == {"t3-mx1-untrust-vr": 3} and out["route_changes"] == changes
    assert result.route_changes == [RouteChange(**changes[0])]
    assert "route_changes" not in EventResult.from_json(sample()).to_json(), "absent when not recorded"
    passed = EventResult.from_json(sample(routes_changed={"t3-mx1-untrust-vr": 1}, route_changes=changes))
    assert "route_changes" not in passed.to_json(), "a passing case writes counts only"
    broken = EventResult.from_json(sample(route_changes=changes, budgets=[
        {"metric": "convergence_ms", "limit": 1.0, "measured": 60.0, "ok": False, "scope": "event"}]))
    assert broken.status == "failed" and broken.to_json()["route_changes"] == changes, "a broken budget fails it"


def test_a_failed_case_prints_its_first_route_changes(capsys: pytest.CaptureFixture[str]) -> None:
    from test_eventresult import sample

    from lab_orchestrator.cli import events as cli_events

    changes = [{"at_s": round(0.5 + i / 100, 3), "ns": "t3-mx1-untrust-vr", "change": f"Deleted 198.51.100.{i}/32 [x]"}
               for i in range(25)]
    result = EventResult.from_json(sample(passed=False, routes_changed={"t3-mx1-untrust-vr": 25, "t3-srx1": 4},
                                          route_changes=changes))
    cli_events.print_route_changes(result)
    text = capsys.readouterr().out
    assert "route changes during the case: 29 in 2 namespaces, the first 20:" in text
    assert "+0.500 s  t3-mx1-untrust-vr: Deleted 198.51.100.0/32 [x]" in text, "printed as is (no markup)"
    assert "198.51.100.19/32" in text and "198.51.100.20/32" not in text


def test_a_monitor_that_ended_by_itself_is_named_not_taken_for_silence(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(routelog, "monitor_argv", lambda ns: [sys.executable, "-c", "raise SystemExit(1)"]
                        if ns == "gone" else [sys.executable, "-c", "import time; time.sleep(30)"])
    log = routelog.RouteLog(["gone", "here"]).start()
    for _ in range(100):
        if log.procs[0][1].poll() is not None:
            break
        time.sleep(0.05)
    log.stop()
    assert log.unmonitored == ["gone"] and log.changes() == []
