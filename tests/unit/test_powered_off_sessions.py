"""A powered-off SRX's session table is not shown: its tables are emptied when it powers on, so what it
still holds while down is unreachable (`lab sessions` on it says so instead of listing stale sessions)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab_orchestrator.api.running import Lab
from lab_orchestrator.events import sessions as sessionsmod
from lab_orchestrator.model.diagnostics import LabError
from lab_orchestrator.runtime import hostcheck
from lab_orchestrator.runtime.state import LabState


def test_a_powered_off_node_has_no_session_table_to_show(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hostcheck, "require_root", lambda: None)
    read: list[str] = []
    monkeypatch.setattr(sessionsmod, "read", lambda ns: read.append(ns) or [])
    state = LabState("t", "f.yml", str(tmp_path), "ready", ["t-srx1", "t-srx2"], "br", [], "tbl", "198.19.0.0/24")
    state.down_nodes = ["srx1"]
    lab = Lab(state)
    with pytest.raises(LabError, match="srx1 in lab t is powered off"):
        lab.sessions("srx1")
    assert read == []  # its table was never read
    assert lab.sessions("srx2") == [] and read == ["t-srx2"]
