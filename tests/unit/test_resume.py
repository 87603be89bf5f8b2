"""Daemons restarted by the supervisor after a crash resume from their published state (LAB_RESUME=1):
MNHA roles, SRD mastership and priority, the TLB monitor's health and the selector's view of it, an
HSRP Active router. On a fresh start (no LAB_RESUME) they start afresh."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from statusdata import mnha_status

from dataplane.core.health import HealthState, ProfileHealth
from dataplane.core.hsrp import GroupConfig, HsrpMachine, State
from dataplane.core.mnha import Role, Srg1
from dataplane.core.srd import Mastership
from dataplane.daemons import daemonkit, healthd, mnhad, mxlb, srdd
from labkit.configs import MnhaConfig
from labkit.status import MnhaStatus, SrdStatus


def _status(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "status.json"
    path.write_text(json.dumps(data))
    return path


def test_resumed_status_only_with_the_supervisor_flag(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _status(tmp_path, SRD_MASTER)
    monkeypatch.delenv(daemonkit.RESUME_ENV, raising=False)
    assert daemonkit.resumed(path, SrdStatus) is None  # a boot (power on): start afresh
    monkeypatch.setenv(daemonkit.RESUME_ENV, "1")
    assert daemonkit.resumed(path, SrdStatus) == SrdStatus.model_validate(SRD_MASTER)
    assert daemonkit.resumed(tmp_path / "missing.json", SrdStatus) is None
    path.write_text("{half")
    assert daemonkit.resumed(path, SrdStatus) is None


def _mnhad(mode: str) -> mnhad.Daemon:
    daemon = mnhad.Daemon.__new__(mnhad.Daemon)
    daemon.c = MnhaConfig.model_construct(mode=mode)
    daemon.srg1 = Srg1("srx2", "srx1", 100, True)
    daemon.srg2 = Srg1("srx2", "srx1", 200, True)
    daemon.srg0_failed = False
    daemon.resumed = None
    daemon.started, daemon.interval, daemon.threshold = -1000.0, 1.0, 3  # up for long
    return daemon


def test_mnhad_takes_up_its_roles(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    daemon = _mnhad("srg1+srg2")
    transitions = [{"at": 1.0, "role": "active", "why": "peer lost"}]
    srg2 = {"role": "backup", "priority": 200, "peer_role": "active", "transitions": []}
    daemon.resume(MnhaStatus.model_validate(mnha_status(mode="srg1+srg2", srg1={"transitions": transitions},
                                                        srg2=srg2, srg0={"role": "ineligible"})))
    assert daemon.srg1.role is Role.ACTIVE and daemon.srg1.transitions == [(1.0, Role.ACTIVE, "peer lost")]
    assert daemon.srg2.role is Role.BACKUP and daemon.srg0_failed and daemon.resumed == "active/backup"
    fresh = _mnhad("srg1")
    fresh.resume(None)
    assert fresh.srg1.role is Role.INIT and fresh.resumed is None
    garbled = tmp_path / "mnha-status.json"  # not an MnhaStatus: a fresh start
    foreign = mnha_status()
    garbled.write_text(json.dumps({**foreign, "srg1": {**foreign["srg1"], "role": "chief"}}))
    monkeypatch.setenv(daemonkit.RESUME_ENV, "1")
    assert daemonkit.resumed(garbled, MnhaStatus) is None


SRD_MASTER = {"node": "mx2", "peer": "mx1", "pid": 4242, "updated_at": 2.5, "role": "master", "priority": 201,
              "preempt": True, "healthy": True, "signal_route": {"prefix": "198.18.255.1/32", "installed": True},
              "peer_role": "standby", "heartbeat": {"sent": 9, "received": 8, "errors": 0, "peer_alive": True},
              "resumed": None,
              "transitions": [{"at": 2.0, "role": "active", "why": "CLI switchover: mastership acquired"}]}


def test_srdd_takes_up_mastership_priority_and_signal_route(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    daemon = srdd.Daemon.__new__(srdd.Daemon)
    daemon.state = Mastership("mx2", "mx1", 100, True)
    daemon.signal_installed, daemon.resumed = None, None
    monkeypatch.setenv(daemonkit.RESUME_ENV, "1")
    # after a CLI switchover mx2 is master with a raised priority: a restart must not undo it
    daemon.resume(daemonkit.resumed(_status(tmp_path, SRD_MASTER), SrdStatus))
    assert daemon.state.role is Role.ACTIVE and daemon.state.priority == 201
    assert daemon.signal_installed is True and daemon.resumed == "master"
    assert daemon.state.transitions == [(2.0, Role.ACTIVE, "CLI switchover: mastership acquired")]


def test_srdd_elects_anew_without_a_usable_status(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(daemonkit.RESUME_ENV, "1")
    for previous in ({**SRD_MASTER, "role": "init"}, {"role": "master"}, {**SRD_MASTER, "extra": 1}):
        daemon = srdd.Daemon.__new__(srdd.Daemon)
        daemon.state = Mastership("mx2", "mx1", 100, True)
        daemon.signal_installed, daemon.resumed = None, None
        daemon.resume(daemonkit.resumed(_status(tmp_path, previous), SrdStatus))
        assert daemon.state.role is Role.INIT and daemon.state.priority == 100 and daemon.resumed is None


def test_healthd_resumes_each_profile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    profiles = [{"name": "icmp", "type": "icmp", "interval_ms": 1000, "timeout_ms": 500, "failures": 3,
                 "recoveries": 2, "port": None, "http_path": "/"}]
    config = {"node": "mx1", "health": {"profiles": profiles}, "health_socket": str(tmp_path / "none.sock"),
              "health_status_file": str(tmp_path / "health.json"),
              "selectors": [{"side": "trust", "ns": "t-mx1-trust-vr",
                             "members": [{"name": "srx1", "loopback": "198.18.128.1", "mark": 0x101},
                                         {"name": "srx2", "loopback": "198.18.128.2", "mark": 0x102}]}]}
    monkeypatch.delenv(daemonkit.RESUME_ENV, raising=False)
    first = healthd.Monitor(config)
    assert all(h.up for h in first.health.values())  # a fresh start: every real-service up
    assert first.marks == {"srx1": 0x101, "srx2": 0x102}, "probes leave with the trust selector's marks"
    first.health["srx2"].record("icmp", False, "timeout")
    for _ in range(2):
        first.health["srx2"].record("icmp", False, "timeout")
    assert not first.health["srx2"].up
    first.publish()
    monkeypatch.setenv(daemonkit.RESUME_ENV, "1")
    second = healthd.Monitor(config)
    assert second.resumed and not second.health["srx2"].up and second.health["srx1"].up
    assert second.health["srx2"].states["icmp"].fail_streak == 3
    assert second.seq == first.seq


def _selector_member() -> mxlb.MemberState:
    state = mxlb.MemberState("srx1", 0x101, carrier={"trust": True})
    state.health = ProfileHealth({"icmp": HealthState(1, 2)})
    return state


def _report(up: bool, probes: int, ok_streak: int) -> dict[str, Any]:
    return {"at": 10.0, "members": {"srx1": {"profiles": {"icmp": {
        "up": up, "last_result": "ok" if up else "no reply", "probes": probes, "fail_streak": 0 if up else 1,
        "ok_streak": ok_streak, "last_change": 1.0}}}}}


def test_selector_follows_the_monitor_but_a_lost_carrier_must_be_proven_again() -> None:
    daemon = mxlb.Daemon.__new__(mxlb.Daemon)
    daemon.members = {"srx1": _selector_member()}
    daemon.health_reports, daemon.health_report_at = 0, 0.0
    state = daemon.members["srx1"]
    daemon.health_report(_report(False, 5, 0))
    assert not state.alive()
    daemon.health_report(_report(True, 7, 2))
    assert state.alive() and daemon.health_reports == 2
    # carrier lost and back before the monitor noticed: its "up" is not enough, 2 new probes are
    state.lost_carrier()
    state.carrier["trust"] = True
    daemon.health_report(_report(True, 8, 3))
    assert not state.alive()
    daemon.health_report(_report(True, 9, 4))
    assert state.alive()


def test_hsrp_active_resumes_active_with_a_hello() -> None:
    machine = HsrpMachine(GroupConfig(1, "10.10.10.100", priority=150), "10.10.10.1")
    out = machine.resume_active(100.0)
    assert machine.state is State.ACTIVE
    assert out.transitions == [(State.INIT, State.ACTIVE, "resumed after a restart")]
    assert [p.state for p in out.packets] == [State.ACTIVE]
    assert machine.resume_active(101.0).transitions == []  # only from Init


def test_a_daemon_ends_with_its_output_flushed_and_its_exit_code() -> None:
    """daemonkit.exit_now skips the interpreter's teardown, not the daemon's last log lines."""
    import subprocess
    import sys

    code = ("import sys; from dataplane.daemons.daemonkit import exit_now; "
            "print('last line', end=''); print('to the log', end='', file=sys.stderr); exit_now(3)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=30)
    assert (done.returncode, done.stdout, done.stderr) == (3, "last line", "to the log")


def test_srdd_rewrites_a_role_file_that_defines_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty role file (cut short by a power cut) is not read as "standby": a standby mx2 writes
    it anew, whole, so that its BIRDs can start on it; a complete file is left as it is."""
    assert srdd.role_in("") is None and srdd.role_in("define SRD_MASTER = 1;\n") is True
    assert srdd.role_in("define SRD_MASTER = 0;\n") is False
    role = tmp_path / "srd-role.conf"
    for before, written in (("", "define SRD_MASTER = 0;\n"), ("define SRD_MASTER = 0;\n", None)):
        role.write_text(before)
        daemon = srdd.Daemon.__new__(srdd.Daemon)
        daemon.c = SimpleNamespace(role_file=str(role), bird_sockets=[])  # type: ignore[assignment]
        daemon.signal_installed = False
        daemon.bird_master = srdd.role_in(role.read_text())
        monkeypatch.setattr(srdd.Daemon, "signal", lambda self, master: None)
        stamp = role.stat().st_mtime_ns
        daemon.apply(False)
        if written is None:
            assert role.stat().st_mtime_ns == stamp, "a complete file is not rewritten"
        else:
            assert role.read_text() == written
