"""The live views' picture of a lab (pure): node states, member shares and pps, links, the top line."""

from __future__ import annotations

import os
from typing import Any

from lab_orchestrator import livestate, livetop


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
