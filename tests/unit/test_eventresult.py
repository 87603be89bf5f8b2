"""The typed result of one event run: the JSON form stays the documented one, bad data is refused,
JUnit and the budget verdicts read the model."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import ValidationError
from statusdata import mnha_status, mxlb_member, mxlb_status

from lab_orchestrator.events import budgets
from lab_orchestrator.events import verdict as eventverdict
from lab_orchestrator.events import watch as eventwatch
from lab_orchestrator.events.result import EventResult
from lab_orchestrator.plan.trafficsetup import REVERSE_ID_OFFSET
from labkit.contracts import MNHA_STATUS
from labkit.status import MxlbStatus

KEYS = ["event", "title", "target", "action", "flows", "rate_per_flow_pps", "resolution_ms", "affected_flows",
        "unaffected_flows", "convergence_ms", "longest_gap_ms", "packets_lost_by_unaffected_flows", "flows_moved",
        "flows_rebound", "phases", "tables_missed", "verdict_from", "flows_moved_ideal", "recovered", "passed",
        "forward", "reverse", "marks", "timeline", "per_flow"]


def row(flow: int, before: str = "srx1", after: str = "srx2", lost: int = 3) -> dict[str, Any]:
    return {"flow": flow, "src": f"100.64.0.{flow + 1}", "carrier_before": before, "carrier_during": after,
            "carrier_after": before, "reverse_carrier_before": before, "srx_before": before, "srx_after": after,
            "expected_mover": {"event": True, "restore": True}, "mover": {"event": True, "restore": None},
            "lost_forward": lost, "lost_reverse": 0, "convergence_ms": lost * 20.0, "max_gap_ms": 61.5,
            "max_gap_forward_ms": 61.5, "max_gap_reverse_ms": 0.0,
            "gap_at_s": [0.05, None], "recovered": True, "moved": before != after, "moved_on_restore": False,
            "bindings": ["198.51.100.1:40000", "198.51.100.17:1024"], "rebound": True, "lost": lost}


def sample(**over: Any) -> dict[str, Any]:
    """An event result as `lab events run --json` writes it (one flow per SRX pool)."""
    data: dict[str, Any] = {
        "event": "srx-power-off", "title": "SRX Series Firewall power off", "target": "srx1",
        "action": "srx1 powered off; restored: srx1 powered on", "flows": 2, "rate_per_flow_pps": 50.0,
        "resolution_ms": 20.0, "affected_flows": 1, "unaffected_flows": 1,
        "convergence_ms": {"max": 60.0, "median": 60.0},
        "longest_gap_ms": 61.5, "packets_lost_by_unaffected_flows": 0, "flows_moved": 1, "flows_rebound": 1,
        "phases": {"event": {"expected_movers": 1, "movers": 1, "ideal": 1, "unexpected_movers": 0,
                             "expected_but_stayed": 0, "members": [2, 1], "bucket_share_moved": 0.5,
                             "bucket_share_ideal": 0.5, "buckets": 6400, "cross_mx_movers": 0}},
        "tables_missed": 0, "verdict_from": "selector tables", "flows_moved_ideal": 1, "recovered": True,
        "passed": True, "forward": {"role": "receive", "received": 990, "lost": 3},
        "reverse": {"role": "receive", "received": 1000, "lost": 0},
        "marks": {"event": 100.5, "restore": 102.0, "settled": 104.0},
        "timeline": [[100.6, {"srx1": 50.0, "srx2": 48.5}]],
        "per_flow": [row(0), row(1, "srx2", "srx2", 0)],
        "senders": {"forward": {"role": "send", "sent": 1000}},
    }
    data.update(over)
    return data


def test_json_form_round_trips_in_the_documented_order() -> None:
    data = sample()
    result = EventResult.from_json(data)
    assert result.per_flow[0].bindings == ["198.51.100.1:40000", "198.51.100.17:1024"]
    assert result.timeline == [(100.6, {"srx1": 50.0, "srx2": 48.5})]
    out = result.to_json()
    assert list(out) == [*KEYS, "senders", "status"], "the optional parts are absent when they do not apply"
    assert json.loads(json.dumps(out)) == {**data, "status": "passed"}
    assert EventResult.from_json(out) == result


def test_optional_parts_appear_when_they_apply() -> None:
    crash = {"daemon": "mxlb", "restarts_before": 0, "restarts_after": 1, "down_s": 0.12, "running": True,
             "returned": True}
    result = EventResult.from_json(sample(event="daemon-crash", daemon_crash=crash, flows_moved_on_restore=1,
                                          flows_moved_on_restore_ideal_max=1))
    assert list(result.to_json())[len(KEYS):] == ["daemon_crash", "senders", "flows_moved_on_restore",
                                                  "flows_moved_on_restore_ideal_max", "status"]
    assert result.daemon_crash is not None and result.daemon_crash.down_s == 0.12


@pytest.mark.parametrize("bad", [{"flows": "2"}, {"passed": 1}, {"verdict_from": "guesswork"},
                                 {"surprise": True}, {"per_flow": [{**row(0), "lost": "3"}]},
                                 {"convergence_ms": {"max": 1.0}}])
def test_bad_results_are_refused(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        EventResult.from_json(sample(**bad))
    result = EventResult.from_json(sample())
    with pytest.raises(ValidationError):
        result.passed = "yes"  # type: ignore[assignment]


def test_budgets_and_junit_read_the_model() -> None:
    fine = EventResult.from_json(sample())
    slow = EventResult.from_json(sample(event="gres", target="mx1", convergence_ms={"max": 812.5, "median": 400.0}))
    lossy = EventResult.from_json(sample(event="nexthop-delete", passed=False, recovered=False,
                                         packets_lost_by_unaffected_flows=7))
    rules = budgets.collect(300, None, [])
    for result in (fine, slow, lossy):
        result.judge(rules)
    assert fine.budgets is not None and fine.budgets[0].ok and fine.failure_reasons() == []
    assert slow.violations() == ["gres on mx1 broke the budget convergence_ms <= 300 (all events): measured 812.5"]
    assert lossy.failure_reasons() == ["not every flow recovered after the event", "unaffected flows lost 7 packets"]
    assert slow.to_json()["budgets"] == [{"metric": "convergence_ms", "limit": 300.0, "measured": 812.5, "ok": False,
                                          "scope": "all events"}]
    xml = eventverdict.junit([fine, slow, lossy], "t1")
    assert 'tests="3" failures="2"' in xml
    assert "broke the budget convergence_ms &lt;= 300 (all events): measured 812.5" in xml
    assert "not every flow recovered after the event; unaffected flows lost 7 packets" in xml
    assert '<testcase classname="lab.t1" name="srx-power-off on srx1" time="0.060"><system-out>' in xml


def test_the_runner_s_own_analysis_is_a_valid_result() -> None:
    """What `analyse` builds from receiver reports validates against the model (every per-flow key known)."""
    from dataplane.traffic import make_flows
    from lab_orchestrator.events.catalog import BY_NAME

    flows = make_flows(2, "100.64.0.0/16", "203.0.113.10")
    keys = [(f.src, f.sport) for f in flows]
    report_f = {"per_flow": [{"flow": f.flow_id, "lost": 2 * i, "max_gap_ms": 40.0 * i, "last_seen_ns": 10**9}
                             for i, f in enumerate(flows)]}
    report_r = {"per_flow": [{"flow": f.flow_id + REVERSE_ID_OFFSET, "lost": 0, "max_gap_ms": 20.0,
                              "last_seen_ns": 10**9} for f in flows]}
    result = eventverdict.analyse(BY_NAME["srx-power-off"], "srx1", "srx1 powered off", flows,
                              {keys[0]: "srx2", keys[1]: "srx1"}, {keys[0]: "srx2", keys[1]: "srx2"}, report_f,
                              report_r, {"end_ns": 10**9}, 50.0, {"event": 0.5}, eventwatch.Sampler([], []),
                              sent_r={"end_ns": 10**9})
    rows = result.model_dump()["per_flow"]
    assert [r["max_gap_forward_ms"] for r in rows] == [0.0, 40.0] and rows[1]["max_gap_reverse_ms"] == 20.0
    assert result.flows_moved == 1 and result.packets_lost_by_unaffected_flows == 0


def test_cgnat_return_traffic_is_carried_by_the_owner_of_the_binding_s_pool() -> None:
    """CGNAT with MNHA: srx2 forwards a flow on a session srx1 opened (synced), so the flow's binding is
    from srx1's pool and its answers are routed to srx1. When srx1 goes, the flow loses the answers in
    flight while the pool's route moves to srx2: srx1 carried it (return way), its loss is not
    unaffected. A loss of srx3's flow, whose both ways srx1 never carried, still is."""
    from dataplane.traffic import make_flows
    from lab_orchestrator.events.catalog import BY_NAME

    pools = {"198.51.100.0/28": "srx1", "198.51.100.16/28": "srx2", "198.51.100.32/28": "srx3"}
    flows = make_flows(3, "100.64.0.0/16", "203.0.113.10")
    keys = [(f.src, f.sport) for f in flows]
    bindings = ["198.51.100.12:1415", "198.51.100.40:40000", "198.51.100.20:40000"]
    lost_reverse = [1, 1, 0]
    report_f = {"per_flow": [{"flow": f.flow_id, "lost": 0, "max_gap_ms": 20.0, "last_seen_ns": 10**9,
                              "bindings": [bindings[i]]} for i, f in enumerate(flows)]}
    report_r = {"per_flow": [{"flow": f.flow_id + REVERSE_ID_OFFSET, "lost": lost_reverse[i], "max_gap_ms": 40.0,
                              "last_seen_ns": 10**9} for i, f in enumerate(flows)]}
    carried = {keys[0]: "srx2", keys[1]: "srx3", keys[2]: "srx2"}
    phase = {"movers": set(), "ideal": 0, "members": [3, 2], "bucket_share_moved": 0.0,
             "bucket_share_ideal": 0.0, "buckets": 6400}
    judged = {}
    for with_pools in (False, True):
        judged[with_pools] = eventverdict.analyse(
            BY_NAME["nexthop-delete"], "srx1", "srx1 powered off", flows, carried, carried, report_f, report_r,
            {"end_ns": 10**9}, 50.0, {"event": 0.5}, eventwatch.Sampler([], []), sent_r={"end_ns": 10**9},
            nat=True, expected={"phases": {"delete": phase}}, pools=pools if with_pools else None)
    rows = judged[True].model_dump()["per_flow"]
    assert [r["reverse_carrier_before"] for r in rows] == ["srx1", "srx3", "srx2"]
    assert judged[True].packets_lost_by_unaffected_flows == 1, "srx3's flow: neither way through srx1"
    assert judged[True].affected_flows == 2 and not judged[True].passed
    # judged by the forward carrier alone, srx2's flow would count as unaffected
    assert judged[False].packets_lost_by_unaffected_flows == 2


def test_a_pool_an_mnha_pair_shares_is_returned_to_its_a_node() -> None:
    """TLB SRG0 (the JVD): srx1 and srx2 share one pool; the MX routes it to the A node (srx1, 1x against
    srx2's 2x) while the pair is healthy, whatever order the plan lists them in. A flow srx1 carries
    loses packets when srx1 fails (it is hit); srx2 failing hits none of them."""
    from dataplane.traffic import make_flows
    from lab_orchestrator.events.catalog import BY_NAME

    plan_order = {"srx2": "198.51.100.0/28", "srx1": "198.51.100.0/28", "srx3": "198.51.100.16/28",
                  "srx4": "198.51.100.16/28", "srx5": None}
    nat64 = [("srx2", "198.51.100.32/28"), ("srx1", "198.51.100.32/28")]  # a second pool of the same nodes
    pools = eventverdict.nat_pools(list(plan_order.items()) + nat64, [["srx1", "srx2"], ["srx3", "srx4"]])
    assert pools == {"198.51.100.0/28": "srx1", "198.51.100.16/28": "srx3", "198.51.100.32/28": "srx1"}
    assert eventverdict.pool_owner("198.51.100.7:2000", pools) == "srx1"
    assert eventverdict.pool_owner("198.51.100.20:2000", pools) == "srx3"
    assert eventverdict.pool_owner("198.51.100.40:2000", pools) == "srx1"
    assert eventverdict.pool_owner("192.0.2.1:2000", pools) is None
    flows = make_flows(1, "100.64.0.0/16", "203.0.113.10")
    keys = [(f.src, f.sport) for f in flows]
    report_f = {"per_flow": [{"flow": flows[0].flow_id, "lost": 0, "max_gap_ms": 20.0, "last_seen_ns": 10**9,
                              "bindings": ["198.51.100.7:2000"]}]}
    report_r = {"per_flow": [{"flow": flows[0].flow_id + REVERSE_ID_OFFSET, "lost": 3, "max_gap_ms": 60.0,
                              "last_seen_ns": 10**9}]}
    before, during = {keys[0]: "srx1"}, {keys[0]: "srx2"}
    for target, unaffected_loss in (("srx1", 0), ("srx2", 3)):
        result = eventverdict.analyse(
            BY_NAME["srx-power-off"], target, f"{target} powered off", flows, before,
            during if target == "srx1" else before, report_f, report_r, {"end_ns": 10**9}, 50.0, {"event": 0.5},
            eventwatch.Sampler([], []), sent_r={"end_ns": 10**9}, nat=True, pools=pools)
        assert result.model_dump()["per_flow"][0]["reverse_carrier_before"] == "srx1"
        assert result.packets_lost_by_unaffected_flows == unaffected_loss, target


def test_traffic_waits_for_selector_members_with_an_srx_in_service() -> None:
    """A TLB lab just up may still be passing its health checks: the events runner waits for every
    member that has an SRX in service (a pair counts while one of its nodes is)."""
    def member(name: str, *nodes: str) -> dict[str, Any]:
        return {"name": name, "hops": [{"node": n} for n in nodes]}

    config = {"selectors": [{"members": [member("MNHA_SRX1", "srx1", "srx2"), member("MNHA_SRX3", "srx3", "srx4")]},
                            {"members": [member("MNHA_SRX1", "srx1", "srx2")]}]}
    status = selector([mxlb_member("MNHA_SRX1", alive=True, buckets=3200),
                       mxlb_member("MNHA_SRX3", alive=False, buckets=0)])
    assert eventwatch.members_pending(config, status, set()) == ["MNHA_SRX3"]
    assert eventwatch.members_pending(config, status, {"srx3"}) == ["MNHA_SRX3"], "srx4 still in service"
    assert eventwatch.members_pending(config, status, {"srx3", "srx4"}) == [], "the whole pair is down"
    chash = {"selectors": [{"members": [{"name": "srx1"}, {"name": "srx2"}]}]}
    assert eventwatch.members_pending(chash, selector([mxlb_member("srx1", alive=True, buckets=1)]),
                                    set()) == ["srx2"]
    assert eventwatch.members_pending(chash, selector([]), {"srx1", "srx2"}) == []


def selector(members: list[dict[str, Any]]) -> MxlbStatus:
    return MxlbStatus.model_validate(mxlb_status(members))


def test_each_phase_prints_its_movers_against_the_tables_and_the_ideal() -> None:
    add = {"expected_movers": 21, "movers": 19, "ideal": 27, "unexpected_movers": 1, "expected_but_stayed": 3,
           "members": [4, 6], "bucket_share_moved": 0.33313, "bucket_share_ideal": 0.33333, "buckets": 6400,
           "cross_mx_movers": 0}
    result = EventResult.from_json(sample(event="nexthop-add", phases={"add": add}))
    assert result.phase_lines() == [
        "  add: 19 flows moved, 21 expected from the tables, ideal 27 (1 unexpected, 3 expected but stayed); "
        "table: 33.3% of 6400 buckets moved (ideal 33.3%, members 4 -> 6)"]
    assert EventResult.from_json(sample(phases={})).phase_lines() == []


def test_srg1_backups_and_powered_off_nodes_are_out_of_the_selection(tmp_path: Path) -> None:
    """A CHASH SRG1 backup is never in the table: the runner must not wait for it (before the traffic,
    and after an event until every member in service is back)."""
    def role(node: str, srg1: str, srg0: str = "active") -> None:
        (tmp_path / "nodes" / node).mkdir(parents=True, exist_ok=True)
        (tmp_path / "nodes" / node / MNHA_STATUS).write_text(json.dumps(mnha_status(srg1={"role": srg1},
                                                                                    srg0={"role": srg0})))

    role("srx1", "active")
    role("srx2", "backup")
    role("srx3", "active", srg0="ineligible")
    state = SimpleNamespace(state_dir=str(tmp_path), down_nodes=["srx5"])
    plan = SimpleNamespace(mnha=[["srx1", "srx2"], ["srx3", "srx4"], ["srx5", "srx6"]])
    # srx4, srx6: no status yet (just powered on) count as in service
    assert eventwatch.out_of_selection(state, plan) == {"srx2", "srx3", "srx5"}  # type: ignore[arg-type]
