"""A lab that fails, is killed or interrupted while coming up leaves nothing behind (or `lab down`
removes it); labs do not disturb each other; a lab is refused where the host already routes."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from labtools import (
    REPO,
    LabOwner,
    assert_no_traceback,
    copy_lab,
    explain,
    flat,
    free_mgmt_subnet,
    lab_exec,
    leftovers,
    line_of,
    netns_names,
    processes_mentioning,
    run_lab,
    start_lab,
    status_of,
    stop,
    wait_for_state,
)

pytestmark = pytest.mark.root

TOPOLOGY1 = REPO / "labs" / "topology1.yml"
TOPOLOGY3 = REPO / "labs" / "topology3.yml"


SLOW_BIRD_DELAY = 1.5


def fake_bird(directory: Path, mode: str) -> dict[str, str]:
    """A `bird` first on PATH that fails at once ("fail"), never answers ("hang") or starts the real
    BIRD late ("slow"); its command line keeps BIRD's arguments (the lab's state dir), so leftovers
    are visible."""
    directory.mkdir(exist_ok=True)
    script = directory / "bird"
    body = {
        "fail": "print('bird: /etc/bird.conf:1:1 syntax error', flush=True)\nsys.exit(1)\n",
        "hang": "time.sleep(120)\n",
        "slow": f"time.sleep({SLOW_BIRD_DELAY})\nos.execv({shutil.which('bird')!r}, ['bird', *sys.argv[1:]])\n",
    }[mode]
    script.write_text(f"#!{sys.executable}\nimport os, sys, time\n"
                      f"print('fake bird ({mode}):', ' '.join(sys.argv[1:]), flush=True)\n" + body)
    script.chmod(0o755)
    return {"PATH": f"{directory}:{os.environ.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')}"}


def ping_through(name: str) -> None:
    result = lab_exec(name, "client", "ping", "-c", "2", "-i", "0.2", "-W", "1", "-I", "100.64.1.1", "203.0.113.9")
    assert result.returncode == 0, explain(result)


def daemon_pids(name: str) -> dict[tuple[str, str], int]:
    report = status_of(name)
    assert report["status"] == "ready", report
    pids = {}
    for node in report["nodes"]:
        for daemon in node["daemons"]:
            assert daemon["running"], (node["name"], daemon)
            pids[(node["name"], daemon["name"])] = daemon["pid"]
        for session in node["bgp"]:
            assert session["info"].startswith("Established"), (node["name"], session)
    assert pids, report
    return pids


# --------------------------------------------------------------------------- (a) daemons fail
@pytest.mark.parametrize("mode", ["fail", "hang"])
def test_failed_bring_up_is_removed(mode: str, owner: LabOwner, tmp_path: Path) -> None:
    topology = copy_lab(TOPOLOGY1, f"it-bird{mode[0]}", tmp_path)
    facts = owner.claim(topology)

    result = run_lab("up", str(topology), "--timeout", "3", env=fake_bird(tmp_path / "bin", mode))

    assert result.returncode == 1, explain(result)
    assert_no_traceback(result.stderr)
    message = flat(result.stderr)
    assert "error:" in message and "the lab was removed" in message, explain(result)
    if mode == "fail":
        assert "exited during start-up" in message and "syntax error" in message, explain(result)
    else:
        assert f"lab {facts.name} not ready after 3 s" in message, explain(result)
    assert leftovers(facts) == []


def test_up_returns_only_once_bgp_is_established(owner: LabOwner, tmp_path: Path) -> None:
    """With every BIRD starting late, `lab up` still exits 0 only when all sessions are up."""
    topology = copy_lab(TOPOLOGY1, "it-slow", tmp_path)
    facts = owner.claim(topology)

    started = time.monotonic()
    result = run_lab("up", str(topology), env=fake_bird(tmp_path / "bin", "slow"))

    assert result.returncode == 0, explain(result)
    assert time.monotonic() - started > SLOW_BIRD_DELAY
    assert daemon_pids(facts.name)  # ready, every daemon running, every session Established
    ping_through(facts.name)
    down = run_lab("down", str(topology), timeout=60)
    assert down.returncode == 0, explain(down)
    assert leftovers(facts) == []


# --------------------------------------------------------------------------- (b) kill -9, then lab down
STAGES: dict[str, Any] = {  # (state.json contents, state dir) -> the point of `lab up` to hit
    # state.json written, nothing else yet (or barely)
    "journal": lambda state, path: True,
    # the supervisor forked (it creates its log) but not listening yet (no record of its pid yet)
    "supervisor-starting": lambda state, path: (path / "logs" / "supervisor.log").exists()
    and not (path / "supervisor.sock").exists(),
    # supervisor up, daemons being spawned one request at a time
    "spawning": lambda state, path: state["supervisor_pid"] != 0 and not state["processes"],
    # every daemon running, BGP converging
    "daemons": lambda state, path: bool(state["processes"]),
}
SHORT = {"journal": "j", "supervisor-starting": "s", "spawning": "p", "daemons": "d"}


@pytest.mark.parametrize("stage", list(STAGES))
def test_sigkilled_up_is_removed_by_down(stage: str, owner: LabOwner, tmp_path: Path) -> None:
    topology = copy_lab(TOPOLOGY1, f"it-kill{SHORT[stage]}", tmp_path)
    facts = owner.claim(topology)

    proc = start_lab("up", str(topology))
    try:
        wait_for_state(facts.name, proc, STAGES[stage])
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        stop(proc)
    assert proc.returncode == -signal.SIGKILL
    assert (facts.state_dir / "state.json").exists()
    if stage == "daemons":  # the kill left a real mess for `lab down` to clean
        assert set(facts.namespaces) <= set(netns_names())
        assert processes_mentioning(facts.state_dir)

    down = run_lab("down", str(topology), timeout=60)

    assert down.returncode == 0, explain(down)
    assert_no_traceback(down.stderr)
    assert leftovers(facts) == []


def test_down_without_record_uses_the_plan(owner: LabOwner, tmp_path: Path) -> None:
    """`lab up` killed and its record lost: `lab down FILE` still removes what the plan names."""
    topology = copy_lab(TOPOLOGY1, "it-norec", tmp_path)
    facts = owner.claim(topology)
    proc = start_lab("up", str(topology))
    try:
        wait_for_state(facts.name, proc, STAGES["daemons"])
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        stop(proc)
    (facts.state_dir / "state.json").unlink()

    down = run_lab("down", str(topology), timeout=60)

    assert down.returncode == 0, explain(down)
    assert_no_traceback(down.stderr)
    assert leftovers(facts) == []


# --------------------------------------------------------------------------- (c) Ctrl-C / SIGTERM
@pytest.mark.parametrize("stage", list(STAGES))
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_interrupted_up_cleans_up(signum: signal.Signals, stage: str, owner: LabOwner, tmp_path: Path) -> None:
    topology = copy_lab(TOPOLOGY1, f"it-{signum.name[3:].lower()}{SHORT[stage]}", tmp_path)
    facts = owner.claim(topology)

    proc = start_lab("up", str(topology))
    try:
        wait_for_state(facts.name, proc, STAGES[stage])
        if signum == signal.SIGINT:
            os.killpg(proc.pid, signal.SIGINT)  # Ctrl-C: the whole foreground job
        else:
            os.kill(proc.pid, signal.SIGTERM)  # `kill PID`
        out, err = proc.communicate(timeout=30)
    finally:
        stop(proc)

    assert proc.returncode == 1, f"exit {proc.returncode}\n{out}\n{err}"
    assert_no_traceback(err)
    assert "interrupted; the lab was removed" in flat(err), err
    assert leftovers(facts) == []  # no `lab down` needed


def test_up_inheriting_sigint_ignored_still_cleans_up_on_sigint(owner: LabOwner, tmp_path: Path) -> None:
    """A `lab up` started with SIGINT ignored (a background job of a script, some CI runners) still
    treats a SIGINT as Ctrl-C: it removes what it created."""
    topology = copy_lab(TOPOLOGY1, "it-intign", tmp_path)
    facts = owner.claim(topology)

    proc = start_lab("up", str(topology), ignore_sigint=True)
    try:
        wait_for_state(facts.name, proc, STAGES["daemons"])
        os.killpg(proc.pid, signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        stop(proc)

    assert proc.returncode == 1, f"exit {proc.returncode}\n{out}\n{err}"
    assert "interrupted; the lab was removed" in flat(err), err
    assert leftovers(facts) == []


# --------------------------------------------------------------------------- (e) two labs side by side
def test_two_labs_coexist_and_go_down_independently(owner: LabOwner, tmp_path: Path) -> None:
    first = copy_lab(TOPOLOGY1, "it-co1", tmp_path)
    second = copy_lab(TOPOLOGY3, "it-co2", tmp_path)
    facts1, facts2 = owner.claim(first), owner.claim(second)
    for topology in (first, second):
        up = run_lab("up", str(topology))
        assert up.returncode == 0, explain(up)
    for facts in (facts1, facts2):
        daemon_pids(facts.name)
        ping_through(facts.name)
    listed = run_lab("status", "--json", timeout=30)
    assert {facts1.name, facts2.name} <= {r["name"] for r in json.loads(listed.stdout)}
    before = daemon_pids(facts2.name)

    down = run_lab("down", "--lab", facts1.name, timeout=60)
    assert down.returncode == 0, explain(down)
    assert leftovers(facts1) == []

    assert daemon_pids(facts2.name) == before
    assert set(facts2.namespaces) <= set(netns_names())
    ping_through(facts2.name)
    down = run_lab("down", str(second), timeout=60)
    assert down.returncode == 0, explain(down)
    assert leftovers(facts2) == []


# --------------------------------------------------------------------------- (f) host route overlap
def test_mgmt_subnet_overlapping_a_host_route_is_refused(owner: LabOwner, tmp_path: Path) -> None:
    subnet = free_mgmt_subnet()
    running = copy_lab(TOPOLOGY1, "it-ov1", tmp_path, mgmt=subnet)
    clashing = copy_lab(TOPOLOGY3, "it-ov2", tmp_path, mgmt=subnet)
    facts_running, facts_clash = owner.claim(running), owner.claim(clashing)
    up = run_lab("up", str(running))
    assert up.returncode == 0, explain(up)
    before = daemon_pids(facts_running.name)

    result = run_lab("up", str(clashing))

    assert result.returncode == 2, explain(result)
    assert_no_traceback(result.stderr)
    line = line_of(clashing, r"^\s+mgmt:")
    expected = f"{clashing}:{line}: addressing.mgmt: {subnet} overlaps {subnet}, a route of this machine's root"
    assert expected in flat(result.stderr), explain(result)
    assert leftovers(facts_clash) == []
    assert daemon_pids(facts_running.name) == before



# --------------------------------------------------------------------------- (d) machine-wide knobs
NETFILTER = Path("/proc/sys/net/netfilter")


def test_down_gives_back_the_conntrack_room_up_raised(owner: LabOwner, tmp_path: Path) -> None:
    """A lab sized for more sessions raises the machine's conntrack limit and hash (one for every
    namespace); once it is down they are as before, not left for every later lab to walk."""
    from lab_orchestrator import api
    from lab_orchestrator.runtime import kernel_room

    before = {name: int((NETFILTER / name).read_text()) for name in ("nf_conntrack_max", "nf_conntrack_buckets")}
    tables = kernel_room.session_tables(api.plan(TOPOLOGY1, state_root=None))
    # more than both hold now, and a hash the kernel rounds up (to whole pages of buckets)
    sessions = max(before["nf_conntrack_max"], before["nf_conntrack_buckets"] * 4 // tables) + 65536 + 4 * 100
    topology = copy_lab(TOPOLOGY1, "it-room", tmp_path)
    topology.write_text(topology.read_text().replace("services:\n", f"services:\n  max_sessions: {sessions}\n", 1))
    facts = owner.claim(topology)

    up = run_lab("up", str(topology))
    assert up.returncode == 0, explain(up)
    raised = {name: int((NETFILTER / name).read_text()) for name in before}
    wanted = kernel_room.conntrack_room(sessions, tables)
    assert raised["nf_conntrack_max"] == wanted["nf_conntrack_max"], explain(up)
    assert wanted["nf_conntrack_buckets"] <= raised["nf_conntrack_buckets"] < wanted["nf_conntrack_buckets"] + 4096
    down = run_lab("down", str(topology), timeout=60)

    assert down.returncode == 0, explain(down)
    assert {name: int((NETFILTER / name).read_text()) for name in before} == before
    assert not Path("/run/lab-kernel-room.json").exists(), "no lab needs anything from the record"
    assert leftovers(facts) == []
