"""The live views' picture of a lab (pure): node states, member shares and pps, links, the top line."""

from __future__ import annotations

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
