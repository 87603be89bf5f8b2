"""docs/benchmarks.md is generated from the detail files (bench/summary.py): the two cannot disagree."""

from __future__ import annotations

import re
from pathlib import Path

from benchmod import load

REPO = Path(__file__).resolve().parents[2]
summary = load("summary")


def test_the_summary_is_current() -> None:
    assert (REPO / "docs" / "benchmarks.md").read_text() == summary.summary(), \
        "docs/benchmarks.md is stale: python3 bench/summary.py"


def test_every_summary_row_is_a_row_of_its_detail_file() -> None:
    text = (REPO / "docs" / "benchmarks.md").read_text()
    for part in text.split("\n## ")[1:]:
        link = re.search(r"Details: \[(benchmarks-[a-z0-9-]+\.md)\]", part)
        assert link, part[:80]
        detail = (REPO / "docs" / link.group(1)).read_text()
        rows = [line for line in part.splitlines() if line.startswith("| ") and not line.startswith("|---")]
        assert rows or "Median:" in part, f"no figure for {link.group(1)}"
        for row in rows:
            assert row in detail, f"{row!r} is not in {link.group(1)}"


def test_each_section_says_when_how_and_on_what() -> None:
    text = (REPO / "docs" / "benchmarks.md").read_text()
    for part in text.split("\n## ")[1:]:
        assert re.search(r"20\d\d-\d\d-\d\d", part), part[:80]
        assert re.search(r"`(python3 )?bench/[a-z0-9_]+\.py", part), part[:80]
        assert "Machine:" in part or "Intel" in part, part[:80]


def test_goal_rows_only_and_ratio_tables(tmp_path: Path) -> None:
    detail = tmp_path / "benchmarks-x.md"
    detail.write_text("# X bench\n\nMeasured 2026-12-01 by `bench/x.py`.\n\nMachine: 2 CPUs; load 1.\n\n"
                      "| metric | value | goal |\n|---|---|---|\n| a | 1 ms | < 2 ms |\n| b | 3 ms |  |\n\n"
                      "| ratio | median |\n|---|---|\n| ours / base | 1.2 |\n\n| other | x |\n|---|---|\n| z | 9 |\n\n"
                      "<!-- notes below this line are kept -->\n| metric | value | goal |\n|---|---|---|\n"
                      "| old | 5 | 6 |\n")
    text = "\n".join(summary.section(detail))
    assert "| a | 1 ms | < 2 ms |" in text and "| b |" not in text
    assert "| ours / base | 1.2 |" in text and "| z | 9 |" not in text and "| old |" not in text
    assert "Measured 2026-12-01 by `bench/x.py`." in text and "Machine: 2 CPUs." in text
