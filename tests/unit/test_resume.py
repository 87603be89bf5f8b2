"""Daemons restarted by the supervisor after a crash resume from their published state (LAB_RESUME=1):
MNHA roles, SRD mastership and priority, the TLB monitor's health and the selector's view of it, an
HSRP Active router. On a fresh start (no LAB_RESUME) they start afresh."""

from __future__ import annotations

import json
from pathlib import Path
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
    daemon.sync_hold = mnhad.SyncHold("10.0.0.1")
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
                             "members": [{"name": "srx1", "loopback": "198.18.128.1"},
                                         {"name": "srx2", "loopback": "198.18.128.2"}]}]}
    monkeypatch.delenv(daemonkit.RESUME_ENV, raising=False)
    first = healthd.Monitor(config)
    assert all(h.up for h in first.health.values())  # a fresh start: every real-service up
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


def test_mnhad_cold_syncs_a_returning_peer_then_refreshes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The peer comes back (power on, reboot): this node sends it its whole session table, a few
    times over its first seconds (its session daemon may start slowly), then once every refresh
    period while the peer stays (its copies age with the sessions here); nothing while it is away."""
    from types import SimpleNamespace

    from dataplane.core.mnha import SessionSync

    pushed: list[tuple[str, str]] = []
    monkeypatch.setattr(mnhad, "cold_sync", lambda config, kind="cold", hold=None: pushed.append((config, kind)))
    monkeypatch.setattr("threading.Thread", lambda target, args, daemon: SimpleNamespace(
        start=lambda: target(*args), is_alive=lambda: False))
    daemon = _mnhad("srg0")
    daemon.c = MnhaConfig.model_construct(mode="srg0", sync_config="/run/lab/x/nodes/srx2/conntrackd.conf")
    daemon.sync = SessionSync(mnhad.COLD_SYNC_DELAYS, mnhad.SESSION_REFRESH_S, mnhad.SESSION_FLUSH_S)
    daemon.sync_thread = None
    daemon.cold_syncs = daemon.session_refreshes = daemon.cache_flushes = 0
    daemon.cold_waiting = False
    view = SimpleNamespace(alive=False)
    daemon.link = SimpleNamespace(view=view)  # type: ignore[assignment]
    daemon.schedule_cold_sync(10.0)
    assert pushed == []
    view.alive = True  # heartbeats again
    for now in (10.1, 10.3, 10.6, 11.0, 12.1, 13.0, 20.0):
        daemon.schedule_cold_sync(now)
    pushes = len(mnhad.COLD_SYNC_DELAYS)
    assert pushes >= 2 and pushed == [(daemon.c.sync_config, "cold")] * pushes and daemon.cold_syncs == pushes
    last_cold = 10.1 + max(mnhad.COLD_SYNC_DELAYS)
    period, flush = mnhad.SESSION_REFRESH_S, mnhad.SESSION_FLUSH_S
    assert 0 < flush < 30 < period < 120, "the flush beats a one-way UDP session, the refresh a replied one"
    t = 20.0
    while t < last_cold + 3 * period + 0.5:  # a tick every 0.25 s for three refresh periods
        t += 0.25
        daemon.schedule_cold_sync(t)
    kinds = [kind for _, kind in pushed[pushes:]]
    assert daemon.session_refreshes == kinds.count("refresh") == 3
    assert daemon.cache_flushes == kinds.count("flush") == 3 * (round(period / flush) - 1)
    before = len(pushed)
    view.alive = False  # gone before the second push: nothing pending
    daemon.schedule_cold_sync(t + 1)
    view.alive = True
    daemon.schedule_cold_sync(t + 2)
    view.alive = False
    for later in (t + 2.2, t + 30, t + 300):
        daemon.schedule_cold_sync(later)
    assert len(pushed) == before, "gone again before the first push: nothing"
    daemon.c = MnhaConfig.model_construct(mode="srg0", sync_config=None)  # no session sync: nothing to push
    view.alive = True
    for now in (t + 400, t + 500, t + 600, t + 700):
        daemon.schedule_cold_sync(now)
    assert len(pushed) == before


def test_mnhad_skips_a_push_while_the_previous_one_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from dataplane.core.mnha import SessionSync

    started: list[float] = []
    running = SimpleNamespace(is_alive=lambda: True)
    monkeypatch.setattr("threading.Thread", lambda target, args, daemon: SimpleNamespace(
        start=lambda: started.append(1), is_alive=lambda: True))
    daemon = _mnhad("srg0")
    daemon.c = MnhaConfig.model_construct(mode="srg0", sync_config="/run/lab/x/nodes/srx2/conntrackd.conf")
    daemon.sync, daemon.sync_thread = SessionSync((0.0,), 10.0), None
    daemon.cold_syncs = daemon.session_refreshes = daemon.cache_flushes = 0
    daemon.cold_waiting = False
    daemon.link = SimpleNamespace(view=SimpleNamespace(alive=True))  # type: ignore[assignment]
    daemon.schedule_cold_sync(1.0)
    assert len(started) == 1
    daemon.sync_thread = running  # type: ignore[assignment]
    daemon.schedule_cold_sync(11.5)  # a refresh is due, but the cold sync still runs: skipped
    assert len(started) == 1 and daemon.session_refreshes == 0
    # the peer goes and comes back while a push runs: its cold push is not dropped, it runs as soon
    # as the running one ends (one push at a time: see mnhad.PUSH; BGP brings the returning peer
    # return traffic within about a second, it needs the sessions before)
    daemon.link.view.alive = False  # type: ignore[attr-defined]
    daemon.schedule_cold_sync(12.0)
    daemon.link.view.alive = True  # type: ignore[attr-defined]
    daemon.schedule_cold_sync(13.0)
    assert len(started) == 1 and daemon.cold_waiting
    daemon.sync_thread = SimpleNamespace(is_alive=lambda: False)  # type: ignore[assignment]
    daemon.schedule_cold_sync(13.1)
    assert len(started) == 2 and daemon.cold_syncs == 2 and not daemon.cold_waiting


def test_mnhad_makes_no_cold_push_to_a_peer_it_finds_while_starting(monkeypatch: pytest.MonkeyPatch) -> None:
    """This node powered on (or the lab started, or this daemon was restarted): the peer it hears in
    its first seconds did not come back, it was there, and may carry the sessions a push would send
    it. No cold push then (the periodic refresh runs as usual); a later return of the peer is pushed to."""
    from types import SimpleNamespace

    from dataplane.core.mnha import SessionSync

    pushed: list[str] = []
    monkeypatch.setattr(mnhad, "cold_sync", lambda config, kind="cold", hold=None: pushed.append(kind))
    monkeypatch.setattr("threading.Thread", lambda target, args, daemon: SimpleNamespace(
        start=lambda: target(*args), is_alive=lambda: False))
    daemon = _mnhad("srg0")
    daemon.c = MnhaConfig.model_construct(mode="srg0", sync_config="/run/lab/x/nodes/srx1/conntrackd.conf")
    daemon.sync, daemon.sync_thread = SessionSync(mnhad.COLD_SYNC_DELAYS, 60.0, 10.0), None
    daemon.cold_syncs = daemon.session_refreshes = daemon.cache_flushes = 0
    daemon.cold_waiting = False
    daemon.started = 100.0
    view = SimpleNamespace(alive=False)
    daemon.link = SimpleNamespace(view=view)  # type: ignore[assignment]
    daemon.schedule_cold_sync(100.1)
    view.alive = True  # the peer's first heartbeat, 1.5 s after this daemon started
    t = 101.5
    while t < 180:
        daemon.schedule_cold_sync(t)
        t += 0.25
    assert "cold" not in pushed and daemon.cold_syncs == 0
    assert pushed.count("refresh") == 1, "the periodic refresh is not affected"
    view.alive = False  # the peer goes away and comes back: it lost its sessions, it gets ours
    daemon.schedule_cold_sync(200.0)
    view.alive = True
    for now in (210.0, 210.3, 210.6, 211.0, 213.0):
        daemon.schedule_cold_sync(now)
    assert daemon.cold_syncs == len(mnhad.COLD_SYNC_DELAYS) == pushed.count("cold")
