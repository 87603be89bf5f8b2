"""The live views' picture of a lab (pure): node states, member shares and pps, links, the top line."""

from __future__ import annotations

import os
from typing import Any

import pytest

from lab_orchestrator.live import state as livestate
from lab_orchestrator.live import top as livetop


def _raw(at: float, packets: int, down: list[str]) -> dict[str, Any]:
    daemon = {"name": "bird", "running": True, "state": "running", "restarts": 1}
    return {
        "at": at, "lab": "t3", "down_nodes": down, "down_links": [],
        "status": {"status": "ready", "ready": True, "problems": [], "nodes": [
            {"name": "mx1", "kind": "mx", "daemons": [daemon], "bgp": [{"info": "Established"}]},
            {"name": "srx1", "kind": "srx", "daemons": [daemon], "bgp": [{"info": "Established"}, {"info": "Active"}]},
            {"name": "srx2", "kind": "srx", "daemons": [], "bgp": []}]},
        "links": [["mx1", "srx1", "trust"], ["mx1", "srx2", "trust"]],
        "redundancy": {"mnha": {"srx1": {"srg1": {"role": "active"}, "srg0": {"role": "active"}}},
                       "srd": {"mx1": {"role": "master"}}},
        "selectors": {"mx1": {"mode": "chash", "buckets": 4, "members": [
            {"name": "srx1", "alive": True, "buckets": 4, "counters": {"trust": {"packets": packets}}},
            {"name": "srx2", "alive": False, "buckets": 0, "counters": {"trust": {"packets": 0}}}]}},
        "hsrp": {}, "clb": {},
    }


def test_picture_states_shares_pps_and_links() -> None:
    first = livestate.picture(_raw(10.0, 100, []))
    second = livestate.picture(_raw(10.5, 600, ["srx2"]), first)
    nodes = {n["name"]: n for n in second["nodes"]}
    assert nodes["srx2"]["state"] == "failed" and nodes["srx1"]["state"] == "up"
    assert nodes["srx1"]["srg1"] == "active" and nodes["mx1"]["srd"] == "master" and nodes["mx1"]["mode"] == "chash"
    assert (nodes["srx1"]["bgp_established"], nodes["srx1"]["bgp_sessions"], nodes["srx1"]["restarts"]) == (1, 2, 1)
    assert nodes["srx1"]["share"] == 1.0 and nodes["srx1"]["pps"] == 1000.0  # 500 packets in 0.5 s
    assert [link["up"] for link in second["links"]] == [True, False]
    assert first["members"][0]["pps"] == 0.0  # no previous picture: no rate yet
    drained = livestate.picture(_raw(11.0, 600, []), second)
    assert {n["name"]: n["state"] for n in drained["nodes"]}["srx2"] == "drained"
    assert "srx2=failed" in livetop.line(second) and "srx1:100%/1000pps" in livetop.line(second)


def test_keys_ask_a_node_then_a_confirmation_before_any_action() -> None:
    keys = livetop.Keys(["mx1", "srx1", "srx2"])
    assert keys.feed("x") is None and keys.mode == ""
    for key in "fsrx2":
        assert keys.feed(key) is None
    assert "fail which node? srx2" in keys.prompt()
    assert keys.feed("\r") is None and keys.prompt() == "power off srx2? y/N"
    assert keys.feed("y") == ("fail", "srx2")
    # anything but y at the question cancels; an unknown node is refused; Esc cancels while typing
    for key in ("r", "m", "\t", "\r"):
        assert keys.feed(key) is None
    assert keys.prompt() == "restore mx1? y/N"
    assert keys.feed("n") is None and keys.prompt() == "cancelled"
    for key in ("f", "s", "r", "x", "\x7f", "\x7f", "q", "\r"):
        assert keys.feed(key) is None
    assert keys.prompt() == "no node 'sq'"
    for key in ("f", "\x1b"):
        assert keys.feed(key) is None
    assert keys.mode == "" and keys.feed("q") == ("quit", "")
    assert keys.feed("l") == ("next-lab", "")
    for key in ("f", "l"):  # while typing a name, l is a letter
        assert keys.feed(key) is None
    assert keys.typed == "l"


def test_fail_event_is_the_kinds_power_off_else_its_reboot() -> None:
    assert livestate.fail_event("srx") == "srx-power-off"
    assert livestate.fail_event("mx") == "mx-reboot"
    assert livestate.fail_event("host") is None


class _FakeLab:
    def __init__(self, state_dir: Any):
        self.state_dir = state_dir


def test_ticker_reads_again_at_once_when_the_record_changes(tmp_path: Any) -> None:
    (tmp_path / "state.json").write_text("{}")
    ticker = livestate.Ticker(_FakeLab(tmp_path), period=60.0)  # type: ignore[arg-type]
    waited: list[float] = []

    def stop(seconds: float) -> bool:
        waited.append(seconds)
        if len(waited) == 3:  # the record changes while the view waits
            (tmp_path / "state.json").write_text('{"down_nodes": ["srx2"]}')
            os.utime(tmp_path / "state.json", ns=(1, 1))
        return len(waited) > 10

    assert ticker.wait(stop) is True and len(waited) == 3
    assert all(s <= livestate.POLL_S for s in waited)
    assert ticker.wait(lambda s: True) is False  # asked to stop: no read


def test_event_log_keeps_the_last_entries_and_a_run_is_rewritten_when_judged(tmp_path: Any) -> None:
    from lab_orchestrator.events import log as eventlog

    assert eventlog.read(tmp_path) == []
    ident = eventlog.record(tmp_path, "srx-power-off", "srx2", "running", "under traffic", started=100.0)
    verdict, line = eventlog.summary({"passed": False, "recovered": True, "affected_flows": 50,
                                      "convergence_ms": {"max": 412.4}, "packets_lost_by_unaffected_flows": 3})
    assert verdict == "failed" and line == "convergence 412 ms, 50 flows affected, unaffected loss 3, recovered"
    eventlog.record(tmp_path, "srx-power-off", "srx2", verdict, line, started=100.0, ident=ident)
    entries = eventlog.read(tmp_path)
    assert len(entries) == 1 and entries[0]["verdict"] == "failed" and entries[0]["started"] == 100.0
    assert entries[0]["finished"] is not None
    for i in range(eventlog.KEEP + 3):
        eventlog.record(tmp_path, "restore", f"srx{i}", "done")
    entries = eventlog.read(tmp_path)
    assert len(entries) == eventlog.KEEP and entries[-1]["target"] == f"srx{eventlog.KEEP + 2}"
    with pytest.raises(ValueError, match="maybe"):
        eventlog.record(tmp_path, "restore", "srx1", "maybe")
    (tmp_path / eventlog.LOG_NAME).write_text("{not json")
    assert eventlog.read(tmp_path) == []


def test_picture_shows_the_recent_events_newest_first() -> None:
    raw = _raw(10.0, 0, [])
    raw["events"] = [{"id": str(i), "event": "srx-power-off", "target": f"srx{i}", "started": float(i),
                      "finished": None, "verdict": "running" if i == 9 else "passed", "detail": ""}
                     for i in range(10)]
    state = livestate.picture(raw)
    assert [e["target"] for e in state["events"]] == [f"srx{i}" for i in range(9, 9 - livestate.RECENT_EVENTS, -1)]
    assert state["events"][0]["verdict"] == "running"
    from rich.console import Console

    console = Console(width=140, record=True, file=open(os.devnull, "w"))  # noqa: SIM115
    console.print(livetop.render(state))
    text = console.export_text()
    assert "srx9" in text and "running" in text and "srx3" not in text


def test_roles_follow_the_mnha_mode_and_a_failed_node_has_none() -> None:
    raw = _raw(10.0, 0, ["srx2"])
    raw["redundancy"]["mnha"] = {
        "srx1": {"mode": "srg0", "srg0": {"role": "active"}, "srg1": {"role": "active"}},
        "srx2": {"mode": "srg0", "srg0": {"role": "active"}, "srg1": {"role": "active"}}}
    nodes = {n["name"]: n for n in livestate.picture(raw)["nodes"]}
    assert nodes["srx1"]["roles"] == "SRG0 active" and nodes["srx1"]["srg1"] is None
    assert nodes["srx2"]["roles"] == "" and nodes["srx2"]["srg0"] is None  # powered off: stale file ignored
    assert nodes["mx1"]["roles"] == "SRD master, chash"
    raw["redundancy"]["mnha"]["srx1"] = {"mode": "srg1", "srg0": {"role": "active"}, "srg1": {"role": "backup"}}
    assert {n["name"]: n for n in livestate.picture(raw)["nodes"]}["srx1"]["roles"] == "SRG1 backup"


def test_rate_holds_between_counter_readings_and_uses_their_time() -> None:
    def at(view: float, counted: float, packets: int) -> dict[str, Any]:
        raw = _raw(view, packets, [])
        raw["selectors"]["mx1"]["updated_at"] = counted
        return raw

    state = livestate.picture(at(100.0, 99.9, 1000))
    pps = []
    # the selector reads its counters once a second (at x.9), the view looks twice a second
    for view, counted, packets in ((100.5, 99.9, 1000), (101.0, 100.9, 2000), (101.5, 100.9, 2000),
                                   (102.0, 101.9, 3000), (105.5, 101.9, 3000)):
        state = livestate.picture(at(view, counted, packets), state)
        pps.append({m["name"]: m["pps"] for m in state["members"]}["srx1"])
    assert pps == [0.0, 1000.0, 1000.0, 1000.0, 0.0]  # steady, and 0 once the counters stop for long
    state = livestate.picture(at(106.0, 105.9, 10), state)  # counters reset (the selector restarted)
    assert {m["name"]: m["pps"] for m in state["members"]}["srx1"] == 0.0


def test_event_log_summary_reads_an_event_runs_typed_result() -> None:
    from test_eventresult import sample

    from lab_orchestrator.events import log as eventlog
    from lab_orchestrator.events.result import EventResult

    result = EventResult.from_json(sample())
    assert eventlog.summary(result.to_json()) == (
        "passed" if result.passed else "failed",
        "convergence 60 ms, 1 flows affected, unaffected loss 0, recovered")


def test_actions_per_node_kind_and_role() -> None:
    assert livestate.actions({"kind": "srx"}) == ["fail", "restore"]
    assert livestate.actions({"kind": "host"}) == []
    assert livestate.actions({"kind": "mx", "srd": "master"}) == ["fail", "restore", "switchover"]
    assert livestate.actions({"kind": "mx", "srd": "standby"}) == ["fail", "restore"]
    nodes = {n["name"]: n for n in livestate.picture(_raw(10.0, 0, []))["nodes"]}
    assert nodes["mx1"]["actions"] == ["fail", "restore", "switchover"]  # _raw's mx1 is the SRD master


def test_sessions_per_srx_are_shown_when_read() -> None:
    raw = _raw(10.0, 0, ["srx2"])
    raw["sessions"] = {"srx1": 42}
    nodes = {n["name"]: n for n in livestate.picture(raw)["nodes"]}
    assert nodes["srx1"]["sessions"] == 42 and nodes["srx2"]["sessions"] is None


def test_the_lab_wide_processes_are_not_a_node_of_the_views() -> None:
    raw = _raw(10.0, 100, [])
    raw["status"]["nodes"].append({"name": "_lab", "kind": "", "daemons": [], "bgp": []})
    assert "_lab" not in [n["name"] for n in livestate.picture(raw)["nodes"]]


def test_session_sync_shows_messages_and_icl_bytes_per_second_and_is_judged_as_lab_status() -> None:
    def at(view: float, counted: float, packets: int, sent_bytes: int, **more: Any) -> dict[str, Any]:
        raw = _raw(view, 0, [])
        sync = {"sessions": 10, "cache": 6, "injected": 4, "resend_queue": 0, "daemon_answering": True,
                "sent_packets": packets, "received_packets": packets, "sent_bytes": sent_bytes,
                "received_bytes": 0, **more}
        raw["redundancy"]["mnha"]["srx1"].update(updated_at=counted, sync=sync)
        return raw

    state = livestate.picture(at(10.0, 9.9, 100, 5000))
    state = livestate.picture(at(10.5, 10.9, 150, 9000), state)  # 100 messages, 4000 bytes in 1 s
    srx1 = {n["name"]: n for n in state["nodes"]}["srx1"]
    assert (srx1["sync"]["msgs_per_s"], srx1["sync"]["icl_bytes_per_s"], srx1["sync"]["ok"]) == (100.0, 4000.0, True)
    assert "sync ok 10 sessions (6 to peer, 4 from it, 100 msg/s, ICL 4 kB/s)" in srx1["roles"]
    # counters that stop moving: the last rate is held for a while (HOLD_RATE_S), then 0
    state = livestate.picture(at(14.5, 14.4, 150, 9000, resend_queue=20000, stale=3), state)
    srx1 = {n["name"]: n for n in state["nodes"]}["srx1"]
    assert srx1["sync"]["msgs_per_s"] == 0.0 and not srx1["sync"]["ok"]
    assert srx1["sync"]["problems"] == [
        "3 sync messages from the peer dropped as older than the last accepted",
        "20000 sync messages not acknowledged by the peer"]
    assert "sync BROKEN (3 sync messages" in srx1["roles"]


def test_a_session_sync_whose_status_is_not_rewritten_is_broken() -> None:
    raw = _raw(100.0, 0, [])
    sync = {"sessions": 1, "cache": 1, "injected": 0, "resend_queue": 0, "daemon_answering": True}
    raw["redundancy"]["mnha"]["srx1"].update(updated_at=80.0, sync=sync)  # 20 s old: a hung mnhad
    srx1 = {n["name"]: n for n in livestate.picture(raw)["nodes"]}["srx1"]
    assert not srx1["sync"]["ok"] and srx1["sync"]["problems"] == ["MNHA status not updated for 20 s"]
