"""Steal time (the hypervisor running something else) from /proc/stat, and the sentence of a late
sender that names it."""

from __future__ import annotations

from pathlib import Path

from dataplane.traffic import steal
from lab_orchestrator.events import baseline

STAT = """cpu  84233 0 15490 170206 390 0 13757 243 0 0
cpu0 41170 0 7786 86206 267 0 7100 110 0 0
cpu1 43063 0 7704 84000 122 0 6656 133 0 0
intr 1 2 3
"""


def test_parse_reads_each_cpu_and_skips_the_summary() -> None:
    assert steal.parse(STAT) == [110 * steal.TICK_MS, 133 * steal.TICK_MS]


def test_a_line_too_short_counts_no_steal() -> None:
    assert steal.parse("cpu0 1 2 3 4\n") == [0.0]


def test_read_of_a_missing_file_is_empty(tmp_path: Path) -> None:
    assert steal.read(str(tmp_path / "none")) == []
    path = tmp_path / "stat"
    path.write_text(STAT)
    assert len(steal.read(str(path))) == 2


def test_most_is_the_worst_cpu_and_zero_without_both_readings() -> None:
    assert steal.most([10.0, 20.0], [110.0, 30.0]) == 100.0
    assert steal.most([], [1.0]) == 0.0
    assert steal.most([1.0], [1.0, 2.0]) == 0.0


def test_this_machine_has_a_reading_per_cpu() -> None:
    import os
    got = steal.read()
    assert len(got) == os.cpu_count() and all(v >= 0 for v in got)


def sender(lag: float, stolen: float) -> dict[str, float]:
    return {"max_lag_ms": lag, "lag_p99_ms": 0.5, "max_lag_steal_ms": stolen}


def test_a_late_sender_names_the_steal_when_it_explains_half_the_delay() -> None:
    lines = baseline.senders_late({"forward": sender(101.0, 100.0)}, 10.0)
    assert len(lines) == 1 and "hypervisor took 100 ms" in lines[0] and "paused" in lines[0]


def test_steal_short_of_half_the_delay_is_not_named() -> None:
    lines = baseline.senders_late({"forward": sender(101.0, 40.0)}, 10.0)
    assert len(lines) == 1 and "hypervisor" not in lines[0]


def test_a_sender_on_schedule_has_no_sentence_whatever_the_steal() -> None:
    assert baseline.senders_late({"forward": sender(5.0, 100.0)}, 10.0) == []
