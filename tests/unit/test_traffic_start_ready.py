"""`lab traffic start` waits for each step's processes to say they are ready before the next step."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from lab_orchestrator.events import traffic
from lab_orchestrator.model.diagnostics import LabError
from lab_orchestrator.runtime import supervisor


def _record(pid: int, log: Path, name: str = "tx-forward") -> supervisor.ProcessRecord:
    started = supervisor.starttime(pid)
    return supervisor.ProcessRecord("_traffic", name, "", pid, started if started is not None else -1, str(log), [])


def test_returns_once_every_log_says_ready(tmp_path: Path) -> None:
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    a.write_text('{"ready": true}\n')
    b.write_text("")

    def later() -> None:
        time.sleep(0.3)
        b.write_text('{"ready": true}\n')

    threading.Thread(target=later).start()
    began = time.monotonic()
    traffic.wait_ready([_record(os.getpid(), a, "rx-forward"), _record(os.getpid(), b, "tx-forward")], timeout=5)
    assert time.monotonic() - began >= 0.25  # it waited for the second one


def test_a_process_that_died_first_is_named_with_its_last_line(tmp_path: Path) -> None:
    log = tmp_path / "dead.log"
    log.write_text("Traceback (most recent call last):\nOSError: no such device eth1\n")
    child = subprocess.Popen(["sleep", "0.2"])
    record = _record(child.pid, log)
    child.wait()
    with pytest.raises(LabError, match=r"tx-forward ended before it was ready: OSError: no such device eth1"):
        traffic.wait_ready([record], timeout=5)


def test_a_process_never_ready_times_out(tmp_path: Path) -> None:
    log = tmp_path / "slow.log"
    log.write_text('{"received": 0}\nnot json\n')
    with pytest.raises(LabError, match=r"not ready after 0 s: rx-reverse"):
        traffic.wait_ready([_record(os.getpid(), log, "rx-reverse")], timeout=0.1)
