"""Fixtures of the namespace (root) tests; the helpers live in labtools.py."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from labtools import LabOwner, host_problem


@pytest.fixture(autouse=True)
def _require_lab_host(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("root") is not None:
        reason = host_problem()
        if reason:
            pytest.skip(reason)


@pytest.fixture
def owner(tmp_path: Path) -> Iterator[LabOwner]:
    labs = LabOwner(tmp_path)
    try:
        yield labs
    finally:
        problems = labs.cleanup()
        if problems:
            print("cleanup problems:\n" + "\n".join(problems), file=sys.stderr)
