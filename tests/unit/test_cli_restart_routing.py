"""`restart routing` from the node CLI: the BIRDs it starts are recorded in the lab's state even when
a later one cannot start (the supervisor is faked; the state file is real, in a temporary directory)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
from test_cli_render import mx_node

from lab_orchestrator.cli_ssh import actions
from lab_orchestrator.model.diagnostics import LabError
from lab_orchestrator.plan.sshconfig import Bird, ServerConfig, User
from lab_orchestrator.runtime import supervisor
from lab_orchestrator.runtime.state import LabState

ADMIN = User("admin", False, (), "super-user")
BIRDS = ("bird", "bird-trust-vr")


def old(name: str) -> supervisor.ProcessRecord:
    # starttime -1: never the starttime of a live process, so the action sees it as not running
    return supervisor.ProcessRecord("mx1", name, "t-mx1", 100 + BIRDS.index(name), -1, f"/x/mx1-{name}.log",
                                    ["bird", "-c", f"/x/{name}.conf"], restart=True,
                                    stale_files=[f"/x/{name}.ctl"])


class FakeSupervisor:
    """Starts each BIRD with a new pid, except those named in REFUSE (a LabError, or the given exception)."""

    refuse: dict[str, Exception] = {}
    spawned: list[tuple[str, list[str]]] = []

    def __init__(self, state_dir: str) -> None:
        self.state_dir = state_dir

    def stop(self, pids: Any = (), **_: Any) -> None:
        pass

    def spawn(self, node: str, name: str, ns: str, argv: list[str], log: str, restart: bool = False,
              stale_files: Any = (), **_: Any) -> supervisor.ProcessRecord:
        if name in self.refuse:
            raise self.refuse[name]
        self.spawned.append((name, list(argv)))
        return supervisor.ProcessRecord(node, name, ns, 200 + len(self.spawned), 7, log, list(argv),
                                        restart=restart, stale_files=list(stale_files))


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> actions.Context:
    LabState("t", "t.yml", str(tmp_path), "ready", ["t-mx1"], "br", [], "t", "198.19.0.0/24",
             processes=[old(name) for name in BIRDS]
             + [supervisor.ProcessRecord("srx1", "bird", "t-srx1", 300, -1, "/x/srx1-bird.log", ["bird"])]).save()
    monkeypatch.setattr(supervisor, "Supervisor", FakeSupervisor)
    monkeypatch.setattr(FakeSupervisor, "refuse", {})
    monkeypatch.setattr(FakeSupervisor, "spawned", [])
    node = dataclasses.replace(mx_node(), birds=(Bird("", "bird", "/x.ctl"),
                                                 Bird("TRUST-VR", "bird-trust-vr", "/y.ctl")))
    config = ServerConfig("t", str(tmp_path), "t.yml", 22, "ecmp-chash", "sfw", (ADMIN,), True,
                          "/x/id", "/x/known_hosts", (node,))
    return actions.Context(config, node, ADMIN, lambda prompt: None)


def pids(ctx: actions.Context) -> dict[tuple[str, str], int]:
    return {(r.node, r.name): r.pid for r in LabState.load(Path(ctx.config.state_dir)).processes}


def test_both_started_and_recorded(lab: actions.Context) -> None:
    result = actions.restart_routing(lab, {})
    assert result.status == 0, result.text
    assert pids(lab) == {("mx1", "bird"): 201, ("mx1", "bird-trust-vr"): 202, ("srx1", "bird"): 300}
    assert all("-R" in argv for _name, argv in FakeSupervisor.spawned), "graceful-restart recovery"
    restarted = [r for r in LabState.load(Path(lab.config.state_dir)).processes if r.node == "mx1"]
    assert all(r.restart and r.stale_files == [f"/x/{r.name}.ctl"] for r in restarted), "still supervised"


def test_a_refused_start_keeps_the_record_of_those_started_before(lab: actions.Context) -> None:
    FakeSupervisor.refuse = {"bird-trust-vr": LabError("cannot start bird-trust-vr on mx1: exec failed")}
    result = actions.restart_routing(lab, {})
    assert result.status == 1
    assert result.text == ("error: restart routing on mx1 stopped at bird-trust-vr: cannot start bird-trust-vr "
                           "on mx1: exec failed; started and recorded: bird (pid 201); not running: bird-trust-vr\n")
    # the BIRD that runs is in state.json (`lab down` stops it); the refused one keeps its old record
    assert pids(lab) == {("mx1", "bird"): 201, ("mx1", "bird-trust-vr"): 101, ("srx1", "bird"): 300}


def test_an_unreachable_supervisor_is_a_clear_error_too(lab: actions.Context) -> None:
    FakeSupervisor.refuse = {"bird-trust-vr": ConnectionRefusedError(111, "Connection refused")}
    result = actions.restart_routing(lab, {})
    assert result.status == 1 and "stopped at bird-trust-vr: [Errno 111] Connection refused" in result.text
    assert pids(lab)[("mx1", "bird")] == 201


def test_an_unexpected_error_still_records_what_started(lab: actions.Context) -> None:
    FakeSupervisor.refuse = {"bird-trust-vr": RuntimeError("a bug")}
    with pytest.raises(RuntimeError, match="a bug"):
        actions.restart_routing(lab, {})
    assert pids(lab)[("mx1", "bird")] == 201
