"""README, docs/, every command's help text, code comments and docstrings speak of the product only:
no word of the process that made it (issue numbers, branches, the machine it was written on, a round's
goal). The list is narrow on purpose: product words that share a term pass ("IKE session", "session
sync", "pki.issue", "the MNHA table push", benchmark "goal" columns)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lab_orchestrator.cli import app
from lab_orchestrator.cli.docgen import _commands

REPO = Path(__file__).resolve().parents[2]
PROCESS_WORDS = [
    (r"\bissues? #?\d+", "an issue number"),
    (r"\bsession push\b", "a session's push"),
    (r"\bworktrees?\b", "a worktree"),
    (r"\bworking branch\b", "a branch"),
    (r"\brebased\b", "a rebase"),
    (r"\bdevelopment machine\b", "the development machine"),
    (r"\bend of the session\b", "a session's end"),
    (r"\banother session's\b", "another session"),
    (r"\bthis round\b(?!-)", "a round"),
    (r"\bwithin its [\w -]*goal\b", "a round's goal"),
    (r"\bthe former default\b", "a former default"),
    (r"\bacceptance tests?'? bounds?\b", "the acceptance tests"),
    (r"\bfarm-(bench|studio)\b", "a forbidden name"),
    (r"\binstall-and-use review\b", "a review of the work"),
    (r"\bthe brief's list\b", "a task's brief"),
]
SCANNED = ("README.md", "Makefile", "pyproject.toml", "docs", "lab_orchestrator", "dataplane", "labkit", "bench",
           "templates", "labs", "images", "tests", ".github", ".ci")
SUFFIXES = {".md", ".py", ".yml", ".yaml", ".j2", ".toml", ".txt", ".sh", ".conf", ""}
# files that hold the words as data: this test and the older list of test_docs.py
EXEMPT = {Path(__file__).resolve(), REPO / "tests" / "unit" / "test_docs.py"}


def _files() -> list[Path]:
    out = []
    for top in SCANNED:
        path = REPO / top
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        out += [p for p in candidates if p.suffix in SUFFIXES and p.resolve() not in EXEMPT
                and "__pycache__" not in p.parts and ".egg-info" not in str(p)]
    return out


def found_in(text: str) -> list[tuple[str, str]]:
    return [(what, m.group(0)) for pattern, what in PROCESS_WORDS for m in re.finditer(pattern, text, re.I)]


def test_the_list_catches_what_it_should_and_passes_product_words() -> None:
    bad = ["the failure events (issue 6)", "before it was rebased onto the main line", "before the end of the session",
           "same day (before the session push)", "the worktree moved", "measured on the development machine",
           "within its 15-minute goal", "Goals are the acceptance tests' bounds", "64 (the former default)",
           "Issue 5 acceptance", "# install-and-use review: HSRP timers", "The brief's list: each must"]
    good = ["an IKE session", "MNHA session sync", "pki.issue(directory)", "the MNHA table push", "| goal |",
            "the SSH session ends", "sessions pushed to the peer", "issues a certificate", "this round-robin",
            "the brief's 1 M sessions"]
    assert all(found_in(text) for text in bad), [t for t in bad if not found_in(t)]
    assert not any(found_in(text) for text in good), [t for t in good if found_in(t)]


def test_files_name_no_process_words() -> None:
    files = _files()
    assert len(files) > 200
    hits = [f"{p.relative_to(REPO)}:{text[:m.start()].count(chr(10)) + 1}: {m.group(0)!r} ({what})"
            for p in files for text in [p.read_text(errors="replace")]
            for pattern, what in PROCESS_WORDS for m in re.finditer(pattern, text, re.I)]
    assert not hits, "\n".join(hits)


@pytest.mark.parametrize("path", [path for path, _ in _commands()])
def test_help_names_no_process_words(path: str) -> None:
    result = CliRunner().invoke(app, [*path.split()[1:], "--help"], env={"COLUMNS": "300"})
    assert result.exit_code == 0
    assert not found_in(" ".join(result.output.split())), found_in(result.output)
