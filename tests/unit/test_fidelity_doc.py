"""docs/fidelity.md stays true to what the lab renders.

Every row of a table with a "lab line" column cites, for the JVD configuration statement it is about,
the line(s) of the lab's own rendered configuration that emulate it, as `LAB FILE: TEXT` (a shipped
lab, a file `lab render` writes for it, and text that must appear on one of that file's lines).
If a template or a lab changes so that the line is gone, this test fails and the row must be looked
at again. A row whose lab line is "—" cites none (the lab renders nothing for that statement).
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "fidelity.md"
JVD_FILES = ("mx1_mx304.conf", "srx1a_srx4600.conf", "srx1b_srx4600.conf", "srx2a_srx4600.conf",
             "srx2b_srx4600.conf", "gateway_emulator_mx304.conf")
STATUSES = ("faithful", "simplified", "not done", "assumption", "lab option")
CITED = re.compile(r"`([\w-]+) ([\w./-]+): ([^`]+)`")


def _cells(line: str) -> list[str]:
    # split on | but not on \| (escaped pipes inside a cell)
    parts = re.split(r"(?<!\\)\|", line.strip().strip("|"))
    return [p.strip().replace("\\|", "|") for p in parts]


def statement_rows() -> list[tuple[int, list[str]]]:
    """(line number, cells) of every row of the tables that have a "lab line" column."""
    rows: list[tuple[int, list[str]]] = []
    header: list[str] | None = None
    for number, line in enumerate(DOC.read_text(encoding="utf-8").splitlines(), 1):
        if not line.startswith("|"):
            header = None
            continue
        cells = _cells(line)
        if header is None:
            header = cells
            continue
        if set("".join(cells)) <= set("-: "):
            continue  # the separator row
        if "lab line" in header:
            rows.append((number, cells))
    return rows


ROWS = statement_rows()


@cache
def rendered(lab: str) -> dict[str, str]:
    path = REPO / "labs" / f"{lab}.yml"
    assert path.is_file(), f"docs/fidelity.md cites a lab that is not shipped: {lab}"
    built = planmod.build(load_topology(path).topology, f"labs/{lab}.yml", "/run/lab")
    return dict(built.files)


def test_the_doc_has_statement_rows() -> None:
    assert len(ROWS) >= 40
    cited = {f for _, cells in ROWS for f in JVD_FILES if f in cells[0]}
    assert cited == set(JVD_FILES), f"every JVD configuration file has rows; missing: {set(JVD_FILES) - cited}"


@pytest.mark.parametrize("number,cells", ROWS, ids=[f"line{n}" for n, _ in ROWS])
def test_row_is_well_formed_and_its_lab_lines_are_rendered(number: int, cells: list[str]) -> None:
    assert len(cells) == 4, f"docs/fidelity.md:{number}: 4 columns (statement, status, how, lab line)"
    statement, status, how, lab_line = cells
    assert any(f in statement for f in (*JVD_FILES, "every file")), \
        f"docs/fidelity.md:{number}: the statement cites its JVD file"
    assert status.startswith(STATUSES), f"docs/fidelity.md:{number}: status {status!r}"
    assert how, f"docs/fidelity.md:{number}: say how the lab does it"
    if lab_line == "—":
        return
    cites = CITED.findall(lab_line)
    assert cites, f"docs/fidelity.md:{number}: lab line is `LAB FILE: TEXT` or —, not {lab_line!r}"
    for lab, name, text in cites:
        files = rendered(lab)
        assert name in files, f"docs/fidelity.md:{number}: {lab} renders no {name}"
        assert any(text.strip() in line for line in files[name].splitlines()), \
            f"docs/fidelity.md:{number}: {lab} {name} has no line with {text.strip()!r}"
