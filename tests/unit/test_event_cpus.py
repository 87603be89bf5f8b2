"""The senders' own CPU during a case with big session tables (lab_orchestrator.events.cpus)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from lab_orchestrator.events import cpus
from lab_orchestrator.runtime import supervisor
from lab_orchestrator.runtime.state import LabState

TWO_CPUS = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs to run on")


def test_the_senders_get_the_last_cpu_and_the_rest_the_others() -> None:
    assert cpus.split([0, 1]) == (1, {0})
    assert cpus.split({3, 0, 2}) == (3, {0, 2})
    assert cpus.split([5]) is None, "one CPU: nothing to split"
    assert cpus.split([]) is None


@pytest.fixture
def daemon() -> Iterator[subprocess.Popen[bytes]]:
    """A process standing for a lab daemon, with a second thread (a thread keeps its own CPUs)."""
    code = "import threading, time; threading.Thread(target=time.sleep, args=(60,)).start(); time.sleep(60)"
    proc = subprocess.Popen([sys.executable, "-c", code])
    try:
        deadline = time.monotonic() + 10
        while len(os.listdir(f"/proc/{proc.pid}/task")) < 2:  # until its second thread runs
            assert time.monotonic() < deadline, "the stand-in daemon's second thread did not start"
            time.sleep(0.01)
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _state(tmp_path: Path, pids: list[int]) -> LabState:
    state = LabState("t", "f.yml", str(tmp_path), "ready", [], "br", [], "tbl", "198.19.0.0/24")
    state.processes = [supervisor.ProcessRecord("srx1", f"d{pid}", "ns", pid, supervisor.starttime(pid) or 0, "log", [])
                       for pid in pids]
    return state


def _affinities(pid: int) -> list[set[int]]:
    return [os.sched_getaffinity(int(tid)) for tid in os.listdir(f"/proc/{pid}/task")]


@TWO_CPUS
def test_every_thread_of_the_lab_and_of_the_run_leaves_the_senders_cpu_and_comes_back(
        tmp_path: Path, daemon: subprocess.Popen[bytes]) -> None:
    everything = os.sched_getaffinity(0)
    state = _state(tmp_path, [daemon.pid])
    with cpus.apart(state, True) as cpu:
        assert cpu == max(everything)
        others = everything - {cpu}
        assert _affinities(daemon.pid) == [others] * 2, "both threads of the daemon"
        assert os.sched_getaffinity(0) == others, "the run itself"
        started = subprocess.run([sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
                                 capture_output=True, text=True, check=True).stdout
        assert started.strip() == str(sorted(others)), "what the run starts inherits the others"
    assert _affinities(daemon.pid) == [everything] * 2
    assert os.sched_getaffinity(0) == everything


@TWO_CPUS
def test_a_daemon_started_during_the_case_gets_every_cpu_after_it(tmp_path: Path) -> None:
    everything = os.sched_getaffinity(0)
    state = _state(tmp_path, [])
    with cpus.apart(state, True) as cpu:
        assert cpu is not None
        late = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])  # inherits the others
        state.processes.append(supervisor.ProcessRecord("srx1", "late", "ns", late.pid,
                                                        supervisor.starttime(late.pid) or 0, "log", []))
    try:
        assert os.sched_getaffinity(late.pid) == everything
    finally:
        late.kill()
        late.wait()


def test_only_big_tables_with_realtime_senders_and_no_chosen_cpu_split() -> None:
    big = cpus.SPLIT_MIN_SESSIONS
    assert cpus.wanted(big, True, None)
    assert not cpus.wanted(big - 1, True, None), "the usual 2,000 sessions leave the senders free"
    assert not cpus.wanted(0, True, None)
    assert not cpus.wanted(big, False, None), "senders at normal priority are not woken past others"
    assert not cpus.wanted(big, True, 0), "a CPU chosen for the senders stays theirs, nothing moves"


def test_nothing_moves_when_not_wanted(tmp_path: Path, daemon: subprocess.Popen[bytes]) -> None:
    before, mine = _affinities(daemon.pid), os.sched_getaffinity(0)
    with cpus.apart(_state(tmp_path, [daemon.pid]), False) as cpu:
        assert cpu is None
        assert _affinities(daemon.pid) == before and os.sched_getaffinity(0) == mine
    assert _affinities(daemon.pid) == before


@TWO_CPUS
def test_the_cpus_come_back_when_the_case_breaks(tmp_path: Path, daemon: subprocess.Popen[bytes]) -> None:
    everything = os.sched_getaffinity(0)
    with pytest.raises(RuntimeError), cpus.apart(_state(tmp_path, [daemon.pid]), True):
        assert os.sched_getaffinity(0) != everything
        raise RuntimeError("the case broke")
    assert _affinities(daemon.pid) == [everything] * 2 and os.sched_getaffinity(0) == everything


@TWO_CPUS
def test_a_record_whose_process_ended_is_not_touched(tmp_path: Path, daemon: subprocess.Popen[bytes]) -> None:
    """Its pid may be another process's by now: a record with another start time stands for that."""
    state = _state(tmp_path, [])
    state.processes = [supervisor.ProcessRecord("srx1", "old", "ns", daemon.pid, 1, "log", [])]
    before = _affinities(daemon.pid)
    with cpus.apart(state, True) as cpu:
        assert cpu is not None and _affinities(daemon.pid) == before


def test_ended_processes_and_unset_pids_are_skipped(tmp_path: Path) -> None:
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    assert cpus.tasks([0, -1, gone.pid]) == []
    assert cpus.tasks([os.getpid()]) == sorted(int(t) for t in os.listdir("/proc/self/task"))
