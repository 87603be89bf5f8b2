"""Power off (srx-power-off, mnha-pair-power-off, reboots): a node whose links went down is in the
lab's record as powered off even when a later step of the power-off fails, so the restore powers it
on again. The netns operations are fakes: no namespace, no supervisor."""

from __future__ import annotations

import subprocess
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from lab_orchestrator.model.diagnostics import LabError
from lab_orchestrator.runtime import ops, supervisor
from lab_orchestrator.runtime.state import LabState
from lab_orchestrator.runtime.supervisor import ProcessRecord


class FakeNodes:
    """Records what the power-off and power-on did to the links and the daemons; STOP_FAILS: the
    node whose daemons do not stop."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, stop_fails: str | None = None,
                 forget_fails: str | None = None) -> None:
        self.done: list[tuple[str, str]] = []
        self.stop_fails, self.forget_fails = stop_fails, forget_fails
        monkeypatch.setattr(ops, "set_links", self.set_links)
        monkeypatch.setattr(ops, "stop_processes", self.stop_processes)
        monkeypatch.setattr(ops, "forget_node_state", self.forget)
        monkeypatch.setattr(ops, "reapply", lambda plan, namespaces: None)
        monkeypatch.setattr(ops, "start_processes", lambda state, records, recover=False: self.done.append(
            ("start", ",".join(r.node for r in records))))

    def set_links(self, ns: str, up: bool, only: set[str] | None = None) -> list[str]:
        self.done.append(("up" if up else "down", ns))
        return []

    def forget(self, ns: str) -> None:
        if ns == self.forget_fails:
            raise LabError(f"{ns}: emptying its 2000000 sessions (conntrack -F) did not end within 210 s")
        self.done.append(("forget", ns))

    def stop_processes(self, state: LabState, node: str, kill: bool = True, names: Any = None) -> list[Any]:
        if node == self.stop_fails:
            raise LabError("the lab supervisor closed the connection")
        self.done.append(("stop", node))
        return []


def _lab(tmp_path: Path) -> tuple[LabState, Any]:
    plan = SimpleNamespace(name="t", state_dir=str(tmp_path), files={}, mnha=[],
                           nodes=[SimpleNamespace(name=n, namespaces=[f"{n}-trust", f"{n}-untrust"])
                                  for n in ("srx1", "srx2")])
    state = LabState("t", "f.yml", str(tmp_path), "ready", [], "br", [], "tbl", "198.19.0.0/24")
    state.save()
    return state, plan


def test_a_power_off_that_fails_after_the_links_went_down_leaves_the_node_recorded_down(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = FakeNodes(monkeypatch, stop_fails="srx1")
    state, plan = _lab(tmp_path)
    with pytest.raises(LabError, match="closed the connection"):
        ops.power_off(state, plan, "srx1")
    assert nodes.done == [("down", "srx1-trust"), ("down", "srx1-untrust")]
    assert LabState.load(tmp_path).down_nodes == ["srx1"]  # on disk: what `lab restore` reads
    nodes.done.clear()
    restored = LabState.load(tmp_path)
    assert ops.restore(restored, plan, "srx1") == ["srx1 powered on"]
    # it boots empty: its tables are emptied while its links are still down, then they come up
    assert nodes.done == [("forget", "srx1-trust"), ("forget", "srx1-untrust"), ("up", "srx1-trust"),
                          ("up", "srx1-untrust"), ("start", "")]
    assert restored.down_nodes == []


def test_a_pair_powered_off_together_is_recorded_down_whole_when_a_stop_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both nodes drop carrier before any daemon is stopped: both are down, both are recorded."""
    nodes = FakeNodes(monkeypatch, stop_fails="srx1")
    state, plan = _lab(tmp_path)
    with pytest.raises(LabError):
        ops.power_off(state, plan, "srx1", "srx2")
    assert [ns for what, ns in nodes.done if what == "down"] == ["srx1-trust", "srx1-untrust", "srx2-trust",
                                                                "srx2-untrust"]
    assert LabState.load(tmp_path).down_nodes == ["srx1", "srx2"]


def test_a_clean_power_off_records_the_node_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nodes = FakeNodes(monkeypatch)
    state, plan = _lab(tmp_path)
    ops.power_off(state, plan, "srx2")
    # links down, daemons stopped; the tables are left for the power-on (nothing can reach them)
    assert nodes.done == [("down", "srx2-trust"), ("down", "srx2-untrust"), ("stop", "srx2")]
    assert LabState.load(tmp_path).down_nodes == ["srx2"]
    with pytest.raises(LabError, match="already powered off"):
        ops.power_off(LabState.load(tmp_path), plan, "srx2")


def test_a_power_on_whose_table_cannot_be_emptied_leaves_the_node_dark_and_down(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No link comes up over stale sessions: the node stays powered off, `lab restore` tries again."""
    nodes = FakeNodes(monkeypatch, forget_fails="srx1-untrust")
    state, plan = _lab(tmp_path)
    ops.power_off(state, plan, "srx1")
    nodes.done.clear()
    with pytest.raises(LabError, match="did not end within"):
        ops.power_on(state, plan, "srx1")
    assert nodes.done == [("forget", "srx1-trust")]
    assert LabState.load(tmp_path).down_nodes == ["srx1"]


def test_a_pair_powers_on_only_once_both_tables_are_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A pair comes back as a pair: when the second node's table cannot be emptied, neither comes up."""
    nodes = FakeNodes(monkeypatch, forget_fails="srx2-trust")
    state, plan = _lab(tmp_path)
    plan.mnha = [["srx1", "srx2"]]
    ops.power_off(state, plan, "srx1", "srx2")
    nodes.done.clear()
    with pytest.raises(LabError, match="did not end within"):
        ops.restore(state, plan, "srx1")
    assert nodes.done == [("forget", "srx1-trust"), ("forget", "srx1-untrust")]
    assert sorted(LabState.load(tmp_path).down_nodes) == ["srx1", "srx2"]
    nodes.forget_fails = None
    nodes.done.clear()
    assert ops.restore(state, plan, "srx2") == ["srx1 powered on", "srx2 powered on"]
    assert [what for what, _ in nodes.done] == ["forget"] * 4 + ["up", "up", "start", "up", "up", "start"]


class FailingSupervisor:
    """A supervisor that starts daemons with new pids until it meets FAILS, which it cannot start."""

    fails = ""

    def __init__(self, state_dir: str) -> None:
        self.next_pid = 5000

    def spawn(self, node: str, name: str, ns: str, argv: list[str], log: str, env: Any = None,
              restart: bool = False, stale_files: Any = ()) -> ProcessRecord:
        if name == self.fails:
            raise LabError(f"cannot start {name} on {node}: exec failed")
        self.next_pid += 1
        return ProcessRecord(node, name, ns, self.next_pid, 1, log, list(argv), restart, list(stale_files))


@pytest.mark.parametrize("recover", [False, True])
def test_daemons_started_before_one_that_cannot_start_are_in_the_record(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recover: bool) -> None:
    """Power on and restart start a node's daemons one after the other: when the third cannot start,
    the two that run are in the lab's record on disk with their new pids (what `lab down`, `lab status`
    and the next power-off read), not the pids of the daemons that were killed."""
    monkeypatch.setattr(supervisor, "Supervisor", FailingSupervisor)
    monkeypatch.setattr(FailingSupervisor, "fails", "conntrackd")
    state, _ = _lab(tmp_path)
    old = [ProcessRecord("srx1", name, "srx1-trust", 100 + i, 1, f"{name}.log", [name], True)
           for i, name in enumerate(("bird", "mnhad", "conntrackd", "responder"))]
    state.processes = list(old)
    state.save()
    with pytest.raises(LabError, match="cannot start conntrackd"):
        ops.start_processes(state, old, recover=recover)
    pids = {r.name: r.pid for r in LabState.load(tmp_path).processes}
    assert pids == {"bird": 5001, "mnhad": 5002, "conntrackd": 102, "responder": 103}


def test_emptying_a_large_table_gets_the_time_its_size_needs_and_a_timeout_is_a_lab_error(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """conntrack -F is given 10 s and 1 s per 10,000 sessions; one that still does not end is an error
    that says what and where (the node is already recorded down), never a traceback."""
    from lab_orchestrator.runtime import netns

    calls: list[tuple[list[str], float]] = []

    def run(ns: str, argv: list[str], stdin: str | None = None, timeout: float = 10.0) -> Any:
        calls.append((argv, timeout))
        raise subprocess.TimeoutExpired(argv, timeout)

    monkeypatch.setattr(netns, "run_in_namespace", run)
    monkeypatch.setattr(netns, "session_count", lambda ns: 2000000 if ns == "l-srx1" else 0)
    expected = r"l-srx1: emptying its 2000000 sessions \(conntrack -F\) did not end within 210 s"
    with pytest.raises(LabError, match=expected):
        ops.forget_node_state("l-srx1")
    assert calls == [(["conntrack", "-F"], 210.0)]
    assert ops.flush_timeout(0) == 10.0


@pytest.mark.parametrize("outcome, counted", [
    ((0, "2000000\n"), 2000000),
    ((1, "conntrack v1.4.7: Operation failed\n"), 0),
    ((0, "not a number\n"), 0),
    (subprocess.TimeoutExpired(["conntrack", "-C"], 10.0), 0),
    (FileNotFoundError("nsenter"), 0),
])
def test_a_namespace_s_session_count_is_the_kernel_s_counter_or_0(monkeypatch: pytest.MonkeyPatch, outcome: Any,
                                                                  counted: int) -> None:
    """One count for the power-off's flush and the session reads: `conntrack -C` in the namespace, 0 when
    it cannot be read (the caller then gets its base time)."""
    from lab_orchestrator.runtime import netns

    def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        assert argv == ["nsenter", "--net=/run/netns/l-srx1", "conntrack", "-C"]
        if isinstance(outcome, Exception):
            raise outcome
        return subprocess.CompletedProcess(argv, outcome[0], outcome[1], "")

    monkeypatch.setattr(netns.subprocess, "run", run)
    assert netns.session_count("l-srx1") == counted
