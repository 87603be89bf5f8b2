"""A run whose sender is held off the CPU during the event (SIGSTOP for 500 ms, as a paused virtual
machine would hold it) is not judged: with --reruns the case runs again and the second run is the
verdict, the first one's reason kept; with --reruns 0 the case is an error (exit 3). The same for a
run in which a task at the lab daemons' priority (the runner's CPU-wait probe) was held off the CPU
longer than the lab's timers allow."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from running import LAB, REPO, lab

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("bird") is None, reason="needs bird2 (make deps)"),
]

NAME = "rerun1"
# no baseline: the first sender the run spawns is the event's own
ARGS = ["--flows", "20", "--rate", "400", "--warmup", "2", "--duration", "2", "--baseline", "0"]
HOLD_S = 0.5  # the resolution is 50 ms (20 pps per flow): late means over 4 intervals
PROBE_HOLD_S = 1.6  # longer than the lab's timers allow a daemon to wait (keptup.CPU_WAIT_MAX_S: 1 s)


def parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def senders_of(ancestor: int) -> list[int]:
    """The generator's senders started by process ANCESTOR (its children, or theirs)."""
    return descendants("dataplane.traffic send", ancestor)


def descendants(pattern: str, ancestor: int) -> list[int]:
    """The processes whose command line holds PATTERN started by process ANCESTOR (its children, or theirs)."""
    done = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True)
    found = []
    for pid in (int(p) for p in done.stdout.split()):
        up = pid
        while up > 1 and up != ancestor:
            up = parent(up)
        if up == ancestor:
            found.append(pid)
    return found


def hold_the_first_sender(ancestor: int, stop: threading.Event) -> None:
    """Once a sender of the run has sent for a second, hold it off the CPU for HOLD_S, once."""
    while not stop.is_set():
        found = senders_of(ancestor)
        if found:
            time.sleep(1.0)
            os.kill(found[0], signal.SIGSTOP)
            time.sleep(HOLD_S)
            os.kill(found[0], signal.SIGCONT)
            return
        time.sleep(0.02)


def hold_the_cpu_probe(ancestor: int, stop: threading.Event, held: list[int] | None = None) -> None:
    """Once a sender of the run has sent for a while, hold the runner's CPU-wait probe (a process at
    the lab daemons' priority) off the CPU for PROBE_HOLD_S, once: as if the machine had left it none.
    The probe held is appended to HELD."""
    while not stop.is_set():
        if senders_of(ancestor):
            time.sleep(1.0)
            probes = descendants("lab_orchestrator.events.cpuwait", ancestor)
            if not probes:
                return  # HELD stays empty: the test says so
            os.kill(probes[0], signal.SIGSTOP)
            time.sleep(PROBE_HOLD_S)
            os.kill(probes[0], signal.SIGCONT)
            if held is not None:
                held.append(probes[0])
            return
        time.sleep(0.02)


def run(tmp_path: Path, reruns: int, hold: Any = hold_the_first_sender,
        *hold_args: Any) -> tuple[dict[str, Any], int]:
    out = tmp_path / f"events-{reruns}-{hold.__name__}.json"
    stop = threading.Event()
    proc = subprocess.Popen([*LAB, "events", "run", "--lab", NAME, "-e", "srx-link-failure", *ARGS,
                             "--reruns", str(reruns), "--json-out", str(out)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    holder = threading.Thread(target=hold, args=(proc.pid, stop, *hold_args), daemon=True)
    holder.start()
    try:
        stdout, stderr = proc.communicate(timeout=240)
    finally:
        stop.set()
        holder.join(5)
        if proc.poll() is None:
            proc.kill()
    done = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
    assert out.exists(), done.stderr + done.stdout
    return json.loads(out.read_text())["events"][0], done.returncode


@pytest.fixture(scope="module")
def running_lab(tmp_path_factory: pytest.TempPathFactory) -> Any:
    text = (REPO / "labs" / "topology1.yml").read_text()
    old = text.split("\nname: ", 1)[1].split("\n", 1)[0]
    topo = tmp_path_factory.mktemp("rerun") / f"{NAME}.yml"
    topo.write_text(text.replace(f"name: {old}", f"name: {NAME}", 1))
    lab("up", str(topo))
    yield NAME
    lab("down", "--lab", NAME, check=False)


def test_a_held_sender_makes_the_run_not_judged_and_the_case_runs_again(running_lab: str, tmp_path: Path) -> None:
    event, code = run(tmp_path, 1)
    assert event["status"] == "passed" and code == 0, event.get("error")
    reasons = event.get("runs_not_judged")
    assert reasons and len(reasons) == 1, {name: s["max_lag_ms"] for name, s in event["senders"].items()}
    assert "the generator fell behind" in reasons[0] and "ms behind its schedule" in reasons[0]
    assert all(s["max_lag_ms"] < HOLD_S * 1000 / 2 for s in event["senders"].values())  # the judged run's


def test_without_reruns_the_held_run_is_an_error(running_lab: str, tmp_path: Path) -> None:
    event, code = run(tmp_path, 0)
    assert event["status"] == "error" and code == 3
    assert "the generator fell behind" in event["error"] and event["runs_not_judged"] == []
    held = event["result"]["senders"]
    assert max(s["max_lag_ms"] for s in held.values()) >= HOLD_S * 1000 * 0.9


def test_a_held_daemon_priority_task_makes_the_run_not_judged_and_the_case_runs_again(
        running_lab: str, tmp_path: Path) -> None:
    import re

    held: list[int] = []
    event, code = run(tmp_path, 1, hold_the_cpu_probe, held)
    assert held, "the run's CPU-wait probe was never found beside its senders"
    assert event["status"] == "passed" and code == 0, event.get("error")
    reasons = event.get("runs_not_judged")
    assert reasons and len(reasons) == 1, event.get("checks")
    assert "the machine was overloaded" in reasons[0], reasons[0]
    waited = re.search(r"waited (\d+\.\d) s for a CPU", reasons[0])
    assert waited and float(waited.group(1)) >= 0.9 * PROBE_HOLD_S, reasons[0]  # the hold, not another wait
    judged = {c["name"]: c for c in event["checks"]}["lab daemons had a CPU"]
    assert judged["ok"] and "longest wait" in judged["detail"], judged
