"""Shared test helpers: repository paths and golden files.

Golden files are compared byte for byte. `UPDATE_GOLDEN=1 python3 -m pytest tests/unit` rewrites
them from the current output instead (then review the diff before committing it).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
from wheelkit import InstalledWheel, build_and_install

REPO = Path(__file__).resolve().parent.parent
LABS = REPO / "labs"
GOLDEN = REPO / "tests" / "golden"


def updating_golden() -> bool:
    return os.environ.get("UPDATE_GOLDEN", "") not in ("", "0")


def check_golden(path: Path, actual: str) -> None:
    """Compare ACTUAL with the golden file PATH (or write it when UPDATE_GOLDEN is set)."""
    if updating_golden():
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != actual:
            path.write_text(actual)
        return
    if not path.exists():
        pytest.fail(f"golden file {path.relative_to(REPO)} is missing; run with UPDATE_GOLDEN=1 to create it")
    expected = path.read_text()
    assert actual == expected, f"output differs from golden {path.relative_to(REPO)} (UPDATE_GOLDEN=1 rewrites it)"


@pytest.fixture
def golden() -> Callable[[Path, str], None]:
    """`golden(path, text)`: compare TEXT with a golden file, or rewrite it under UPDATE_GOLDEN=1."""
    return check_golden


@pytest.fixture
def update_golden() -> bool:
    """True when the run rewrites goldens (UPDATE_GOLDEN=1) instead of comparing with them."""
    return updating_golden()


@pytest.fixture(scope="session")
def installed_wheel(tmp_path_factory: pytest.TempPathFactory) -> InstalledWheel:
    """`pip wheel` of a copy of the sources, installed (--no-deps, --no-index) into a fresh venv (tests/wheelkit.py)."""
    return build_and_install(tmp_path_factory)


# The suite's time per test file, printed at the end of a run of several files: the twenty slowest
# tests alone do not show which files spend the suite's time.
_FILE_SECONDS: dict[str, float] = {}
SLOWEST_FILES = 12


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    path = report.nodeid.split("::", 1)[0]
    _FILE_SECONDS[path] = _FILE_SECONDS.get(path, 0.0) + report.duration


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if len(_FILE_SECONDS) < 2:
        return
    total = sum(_FILE_SECONDS.values())
    terminalreporter.section("slowest test files")
    for path, seconds in sorted(_FILE_SECONDS.items(), key=lambda item: -item[1])[:SLOWEST_FILES]:
        terminalreporter.write_line(f"{seconds:8.1f} s {100 * seconds / total:5.1f} %  {path}")
    terminalreporter.write_line(f"{total:8.1f} s in {len(_FILE_SECONDS)} files (setup, call and teardown)")
