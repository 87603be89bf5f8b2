"""A venv holding only the built wheel (no checkout on the path) brings the shipped topology3 up by name
from another directory, its daemons run from that venv, and `lab down` leaves nothing behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from labtools import REPO, UP_TIMEOUT, LabOwner, explain, leftovers

pytestmark = pytest.mark.root


def _cmdline(pid: int) -> list[str]:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")
    except OSError:
        return []


def test_wheel_venv_brings_topology3_up_and_down(installed_wheel, owner: LabOwner) -> None:
    facts = owner.claim(REPO / "labs" / "topology3.yml")
    up = installed_wheel.run("up", "topology3", timeout=UP_TIMEOUT)
    assert up.returncode == 0, explain(up)
    status = installed_wheel.run("status", facts.name, "--json")
    assert status.returncode == 0, explain(status)
    (report,) = json.loads(status.stdout)
    assert report["name"] == facts.name and report["status"] == "ready", report
    state = json.loads((facts.state_dir / "state.json").read_text())
    pythons = {_cmdline(p["pid"])[0] for p in state["processes"] if "python" in Path(_cmdline(p["pid"])[0]).name}
    assert pythons and all(Path(p).is_relative_to(installed_wheel.venv) for p in pythons), pythons
    down = installed_wheel.run("down", "topology3", timeout=60)
    assert down.returncode == 0, explain(down)
    assert leftovers(facts) == []
