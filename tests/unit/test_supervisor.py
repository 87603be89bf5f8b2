"""The lab supervisor's restart logic: backoff policy, recovery command lines, readiness, and the
supervisor itself on real (rootless) child processes: a crash is restarted in recovery, a stop on
purpose is not, a crash loop backs off."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest

from lab_orchestrator.model.diagnostics import LabError
from lab_orchestrator.runtime import state as statemod
from lab_orchestrator.runtime import status, supervisor
from lab_orchestrator.runtime.supervisord import Supervisor


# ---------------------------------------------------------------- pure parts
def test_backoff_doubles_up_to_the_maximum() -> None:
    policy = supervisor.RestartPolicy(first_delay=0.1, factor=2.0, max_delay=1.0, stable_after=10.0)
    assert [policy.delay(n) for n in range(1, 7)] == [0.1, 0.2, 0.4, 0.8, 1.0, 1.0]


def test_a_stable_run_ends_the_crash_streak() -> None:
    policy = supervisor.RestartPolicy(stable_after=10.0)
    assert policy.streak(0, ran_for=0.5) == 1
    assert policy.streak(3, ran_for=0.5) == 4
    assert policy.streak(3, ran_for=10.0) == 1


def test_recovery_of_bird_is_graceful_restart_and_of_the_rest_a_resume() -> None:
    argv, env = supervisor.recovery(["bird", "-f", "-c", "x.conf"])
    assert argv == ["bird", "-f", "-c", "x.conf", "-R"] and supervisor.RESUME_ENV not in env
    assert supervisor.recovery(["/usr/sbin/bird", "-R"])[0] == ["/usr/sbin/bird", "-R"]  # not twice
    argv, env = supervisor.recovery(["python3", "-m", "dataplane.daemons.mnhad", "c.json"], {"A": "1"})
    assert argv == ["python3", "-m", "dataplane.daemons.mnhad", "c.json"]
    assert env == {"A": "1", supervisor.RESUME_ENV: "1"}


def test_exit_descriptions() -> None:
    assert supervisor.describe_exit(signal.SIGKILL) == "killed by SIGKILL"
    assert supervisor.describe_exit(3 << 8) == "exit status 3"


def _slot(name: str, state: str, restart: bool = True, pid: int = 0, starttime: int = 0,
          restart_at: float = 0.0) -> supervisor.Slot:
    return supervisor.Slot("mx1", name, "ns", ["x"], "log", restart=restart, pid=pid, starttime=starttime,
                           state=state, restart_at=restart_at, last_exit="killed by SIGKILL")


def test_readiness_counts_dead_and_backoff_but_not_stopped_or_unsupervised() -> None:
    me = os.getpid()
    mine = supervisor.starttime(me) or 0
    slots = [
        _slot("bird", "running", pid=me, starttime=mine),
        _slot("mxlb", "backoff", restart_at=100.5),
        _slot("healthd", "stopped"),  # powered off / being restarted on purpose
        _slot("tx", "exited", restart=False),  # traffic: not supervised
        _slot("srdd", "running", pid=me, starttime=mine + 1),  # its pid is someone else now: dead
    ]
    found = status.problems("ready", True, slots, now=100.0)
    assert len(found) == 2
    assert found[0].startswith("mx1/mxlb down (killed by SIGKILL), restart in 0.5 s")
    assert found[1] == "mx1/srdd is not running"
    assert status.problems("ready", True, slots[:1], now=0) == []
    assert "supervisor is not running" in status.problems("ready", False, [], now=0)[0]
    assert status.problems("creating", True, [], now=0) == ["lab is creating"]


def test_state_takes_pids_from_the_supervisor_table(tmp_path: Path) -> None:
    record = supervisor.ProcessRecord("mx1", "mxlb", "ns", 10, 20, "log", ["a"], restart=True)
    lab = statemod.LabState("t", "f.yml", str(tmp_path), "ready", [], "br", [], "tbl", "198.19.0.0/24",
                            processes=[record])
    lab.save()
    slot = supervisor.Slot("mx1", "mxlb", "ns", ["a"], "log", restart=True, pid=11, starttime=21,
                           restarts=1, running_argv=["a", "resumed"])
    (tmp_path / supervisor.TABLE_NAME).write_text(json.dumps({"processes": [slot.to_json()]}))
    loaded = statemod.LabState.load(tmp_path)
    got = loaded.processes[0]
    assert (got.pid, got.starttime, got.restarts, got.argv) == (11, 21, 1, ["a", "resumed"])


# ---------------------------------------------------------------- the supervisor on real children
SLEEPER = [sys.executable, "-c", "import os, sys, time; print(os.environ.get('LAB_RESUME', '-'), sys.argv[1:], "
           "flush=True); time.sleep(60)"]


def _run_until(sup: Supervisor, done: object, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sup.reap()
        sup.due()
        if callable(done) and done():
            return
        time.sleep(0.01)
    raise AssertionError("condition not reached")


@pytest.fixture
def sup(tmp_path: Path):  # type: ignore[no-untyped-def]
    s = Supervisor(tmp_path, supervisor.RestartPolicy(first_delay=0.05, factor=2.0, max_delay=0.4))
    yield s
    s.shutdown()


def _spawn(sup: Supervisor, tmp_path: Path, name: str, argv: list[str], restart: bool = True) -> supervisor.Slot:
    recover_argv, recover_env = supervisor.recovery([*argv, "recovering"])
    stale = tmp_path / f"{name}.lock"
    stale.write_text("left by a killed instance")
    reply = sup.spawn({"node": "n1", "name": name, "ns": "", "argv": argv, "log": str(tmp_path / f"{name}.log"),
                       "restart": restart, "recover_argv": recover_argv, "recover_env": recover_env,
                       "stale_files": [str(stale)]})
    assert reply["ok"], reply
    assert not stale.exists()
    return sup.slots[("n1", name)]


def test_a_crashed_daemon_comes_back_in_recovery(sup: Supervisor, tmp_path: Path) -> None:
    slot = _spawn(sup, tmp_path, "d", SLEEPER)
    first = slot.pid
    _run_until(sup, lambda: (tmp_path / "d.log").read_text().strip())
    os.kill(first, signal.SIGKILL)
    _run_until(sup, lambda: slot.state == "running" and slot.pid != first)
    assert slot.restarts == 1 and slot.last_exit == "killed by SIGKILL"
    assert slot.last_down_s is not None and slot.last_down_s < 1.0
    assert supervisor.slot_alive(slot)
    _run_until(sup, lambda: "recovering" in (tmp_path / "d.log").read_text())
    lines = (tmp_path / "d.log").read_text().splitlines()
    assert lines[0] == "- []" and lines[1] == "1 ['recovering']"  # first start plain, then resume
    sup.publish()
    table = supervisor.read_table(tmp_path)
    assert table is not None and table[0].restarts == 1 and table[0].pid == slot.pid


def test_a_daemon_stopped_on_purpose_stays_down(sup: Supervisor, tmp_path: Path) -> None:
    slot = _spawn(sup, tmp_path, "d", SLEEPER)
    pid = slot.pid
    sup.stop([], [("n1", "d")], timeout=2.0, kill=True)
    assert supervisor.starttime(pid) is None
    time.sleep(0.2)
    sup.reap()
    sup.due()
    assert slot.state == "stopped" and slot.restarts == 0
    again = sup.spawn({"node": "n1", "name": "d", "ns": "", "argv": SLEEPER, "log": str(tmp_path / "d.log"),
                       "restart": True})
    assert again["ok"] and sup.slots[("n1", "d")].state == "running"


def test_an_unsupervised_process_is_not_restarted(sup: Supervisor, tmp_path: Path) -> None:
    slot = _spawn(sup, tmp_path, "tx", [sys.executable, "-c", "pass"], restart=False)
    _run_until(sup, lambda: slot.state == "exited")
    assert slot.restarts == 0 and slot.last_exit == "exit status 0"


def test_a_crash_loop_backs_off(sup: Supervisor, tmp_path: Path) -> None:
    slot = _spawn(sup, tmp_path, "bad", [sys.executable, "-c", "import sys; sys.exit(3)"])
    _run_until(sup, lambda: slot.restarts >= 3, timeout=5.0)
    assert slot.streak >= 3 and slot.last_exit == "exit status 3"
    _run_until(sup, lambda: slot.state == "backoff")
    # the fourth crash in a row waits first_delay * 2**3 = 0.4 s (the maximum here)
    _run_until(sup, lambda: slot.streak >= 4 and slot.state == "backoff")
    assert slot.restart_at - slot.exited_at == pytest.approx(0.4, abs=0.01)


def test_spawn_refuses_a_second_instance(sup: Supervisor, tmp_path: Path) -> None:
    _spawn(sup, tmp_path, "d", SLEEPER)
    reply = sup.spawn({"node": "n1", "name": "d", "ns": "", "argv": SLEEPER, "log": str(tmp_path / "d.log")})
    assert not reply["ok"] and "already running" in reply["error"]


def test_spawn_all_starts_each_in_order_and_stops_at_the_first_refused(sup: Supervisor, tmp_path: Path) -> None:
    """`lab up` starts a lab's daemons with one request: each is forked in order; one that cannot
    start ends the batch with its reason, the ones before it running."""
    def item(name: str, argv: list[str]) -> dict[str, object]:
        return {"node": "n1", "name": name, "ns": "", "argv": argv, "log": str(tmp_path / f"{name}.log"),
                "restart": True}

    reply = sup.handle({"op": "spawn_all", "requests": [item("a", SLEEPER), item("b", SLEEPER)]})
    assert reply["ok"] and [r["pid"] for r in reply["replies"]] == [sup.slots[("n1", n)].pid for n in "ab"]
    reply = sup.handle({"op": "spawn_all", "requests": [item("c", SLEEPER), item("a", SLEEPER),
                                                        item("d", SLEEPER)]})
    assert not reply["ok"] and [r["ok"] for r in reply["replies"]] == [True, False]
    assert "already running" in reply["replies"][1]["error"] and ("n1", "d") not in sup.slots


# ---------------------------------------------------------------- a batch started part-way
class _Answers(supervisor.Supervisor):
    """A client whose supervisor answers every request with REPLY (no process, no socket)."""

    reply: dict[str, object] = {}

    def _call(self, request: dict[str, object], timeout: float = 5.0) -> dict[str, object]:
        return self.reply

    def wait_started(self, pid: int, timeout: float = 5.0) -> int:
        return pid


def _requests(tmp_path: Path, *names: str) -> list[supervisor.SpawnRequest]:
    return [supervisor.SpawnRequest("n1", n, "ns1", ["x"], str(tmp_path / f"{n}.log"), restart=True) for n in names]


@pytest.mark.parametrize(("replies", "words"), [
    ([{"ok": True, "pid": 11, "starttime": 21}, {"ok": False, "error": "already running"}],
     "cannot start b on n1: already running"),
    ([{"ok": True, "pid": 11, "starttime": 21}], "did not start every daemon"),  # the answer ends early
])
def test_spawn_all_refused_part_way_carries_the_daemons_started_before(
        tmp_path: Path, replies: list[dict[str, object]], words: str) -> None:
    client = _Answers(tmp_path)
    client.reply = {"ok": False, "replies": replies}
    with pytest.raises(supervisor.PartialStart, match=words) as raised:
        client.spawn_all(_requests(tmp_path, "a", "b", "c"))
    assert [(r.name, r.pid, r.starttime, r.restart) for r in raised.value.started] == [("a", 11, 21, True)]
    assert isinstance(raised.value, LabError)  # the CLI still prints it as one sentence


def test_a_lab_whose_daemons_start_part_way_records_those_that_run(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """`lab up`: the daemons started before the refused one are in the lab's record on disk, which is
    what `lab down` (and the cleanup of a failed `lab up`) stops."""
    from types import SimpleNamespace

    from lab_orchestrator.plan.plantypes import Process
    from lab_orchestrator.runtime.netns import NetnsBackend

    class Refusing(_Answers):
        reply = {"ok": False, "replies": [{"ok": True, "pid": 11, "starttime": 21},
                                          {"ok": True, "pid": 12, "starttime": 22},
                                          {"ok": False, "error": "exec failed"}]}

    monkeypatch.setattr(supervisor, "Supervisor", Refusing)
    plan = SimpleNamespace(state_dir=str(tmp_path), processes=[
        Process("n1", "ns1", name, ("x",)) for name in ("sshd", "healthd", "mxlb", "srdd")])
    lab = statemod.LabState("t", "f.yml", str(tmp_path), "creating", [], "br", [], "tbl", "198.19.0.0/24",
                            supervisor_pid=5)
    with pytest.raises(supervisor.PartialStart, match="cannot start mxlb on n1: exec failed"):
        NetnsBackend()._start_processes(plan, lab, routing=False)  # type: ignore[arg-type]
    recorded = statemod.LabState.load(tmp_path)
    assert [(r.name, r.pid) for r in recorded.processes] == [("sshd", 11), ("healthd", 12)]
