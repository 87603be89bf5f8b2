"""The BIRD log of an event case (lab_orchestrator.events.bgplog): parsing, timing, reading what was appended."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from lab_orchestrator.events import bgplog

STAMP = "2026-12-05 07:51:29.970"
WALL = datetime.fromisoformat(STAMP).timestamp()  # BIRD writes the local time


def test_lines_are_timed_on_the_monotonic_clock_and_unstamped_ones_left_out() -> None:
    lines = [f"{STAMP} <TRACE> peer_mx1: Connection closed",
             "  a continuation without a stamp",
             "2026-12-05 07:51:30.802 <INFO> Graceful restart done",
             "2026-13-45 07:51:30.802 <INFO> not a date"]
    parsed = bgplog.parse("gw-untrust bird", lines, wall_minus_mono=WALL - 100.0)
    assert [(round(x.at, 3), x.level, x.text) for x in parsed] == [
        (100.0, "TRACE", "peer_mx1: Connection closed"), (100.832, "INFO", "Graceful restart done")]
    assert {x.log for x in parsed} == {"gw-untrust bird"}


def test_kept_starts_at_since_in_time_order_and_stops_at_the_limit() -> None:
    lines = [bgplog.Line(t, log, "TRACE", text) for t, log, text in
             ((3.0, "b", "x"), (1.0, "a", "y"), (2.0, "b", "a"), (2.0, "a", "z"), (0.5, "a", "early"))]
    assert [(x.at, x.log) for x in bgplog.kept(lines, since=1.0)] == [(1.0, "a"), (2.0, "a"), (2.0, "b"), (3.0, "b")]
    assert len(bgplog.kept(lines, limit=2)) == 2


def test_protocol_state_changes_are_not_kept() -> None:
    lines = [bgplog.Line(1.0, "mx1 bird", "TRACE", text) for text in
             ("fw_srx1: State changed to flush", "fw_srx1: Neighbor lost", "fw_srx1: State changed to start",
              "Graceful restart done")]
    assert [x.text for x in bgplog.kept(lines)] == ["Graceful restart done", "fw_srx1: Neighbor lost"]


def test_only_what_was_appended_after_start_is_read(tmp_path: Path) -> None:
    log = tmp_path / "mx1-bird.log"
    log.write_text(f"{STAMP} <TRACE> before the case\n")
    reader = bgplog.BgpLog({"mx1 bird": log, "srx9 bird": tmp_path / "absent.log"}).start()
    with log.open("a") as f:
        f.write(f"{STAMP} <TRACE> fw_srx1: BGP session established\n")
    assert [x.text for x in reader.lines()] == ["fw_srx1: BGP session established"]


def test_a_log_rewritten_shorter_is_read_from_its_start(tmp_path: Path) -> None:
    log = tmp_path / "mx1-bird.log"
    log.write_text(f"{STAMP} <TRACE> a long line before the case, longer than what follows\n")
    reader = bgplog.BgpLog({"mx1 bird": log}).start()
    log.write_text(f"{STAMP} <INFO> Started\n")
    assert [x.text for x in reader.lines()] == ["Started"]
