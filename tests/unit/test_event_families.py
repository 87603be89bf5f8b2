"""IPv4 and IPv6 flows side by side in one event: the families a run sends, how the load is shared, the
merged reports, and each family's verdict deciding the event's (a loss confined to IPv6 fails it)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from dataplane.traffic import make_flows
from lab_orchestrator.events import families
from lab_orchestrator.events import verdict as eventverdict
from lab_orchestrator.events import watch as eventwatch
from lab_orchestrator.events.catalog import BY_NAME
from lab_orchestrator.model.diagnostics import BadInput, LabError
from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod
from lab_orchestrator.plan import trafficsetup
from lab_orchestrator.plan.trafficsetup import REVERSE_ID_OFFSET, V6_ID_OFFSET

REPO = Path(__file__).resolve().parents[2]


def _plan(name: str) -> Any:
    return planmod.build(load_topology(REPO / "labs" / f"{name}.yml").topology, f"labs/{name}.yml", "/run/lab")


def test_families_default_to_every_family_of_the_lab() -> None:
    dual, v4 = _plan("topology3-dualstack"), _plan("topology3")
    assert trafficsetup.families(dual) == [4, 6, 64] == trafficsetup.families(dual, "all")
    assert trafficsetup.families(dual, "both") == [4, 6] and trafficsetup.families(dual, "6") == [6]
    assert trafficsetup.families(dual, "64") == [64]
    assert trafficsetup.families(v4) == [4] == trafficsetup.families(v4, "all")
    with pytest.raises(LabError, match="IPv4 only"):
        trafficsetup.families(v4, "both")
    with pytest.raises(LabError, match="no NAT64"):
        trafficsetup.families(v4, "64")
    with pytest.raises(BadInput, match="4, 6, 64, both or all"):
        trafficsetup.families(dual, "7")


def test_both_families_share_the_flows_and_the_rate_at_the_same_per_flow_rate(tmp_path: Path) -> None:
    setups = trafficsetup.by_family(_plan("topology3-dualstack"), [4, 6], 100, 10000.0, "imix", 5.0,
                                    fifo_dir=tmp_path)
    v4, v6 = setups[4], setups[6]
    assert len(v4.flows) == len(v6.flows) == 50
    assert v4.tx_forward.rate == v6.tx_forward.rate == 5000.0  # 100 pps per flow, as with one family
    assert v6.flows[0].flow_id == V6_ID_OFFSET and v6.flows[0].src.startswith("2001:db8:172:80::")
    assert v6.flows[0].dst == "2001:db8:203::a" and v4.flows[0].dst == "203.0.113.10"
    assert v6.rx_forward.family == 6 and v6.rx_reverse is not None and v6.rx_reverse.family == 6
    assert v6.tx_reverse is not None and v6.tx_reverse.flows[0].flow_id == V6_ID_OFFSET + REVERSE_ID_OFFSET


def test_an_odd_flow_count_is_shared_without_losing_a_flow(tmp_path: Path) -> None:
    setups = trafficsetup.by_family(_plan("topology3-dualstack"), [4, 6], 7, 700.0, "imix", 5.0, fifo_dir=tmp_path)
    assert {f: len(s.flows) for f, s in setups.items()} == {4: 4, 6: 3}
    assert {f: s.tx_forward.rate for f, s in setups.items()} == {4: 400.0, 6: 300.0}  # 100 pps per flow each
    assert trafficsetup.shares(101, [4, 6]) == {4: 51, 6: 50} and trafficsetup.shares(5, [6]) == {6: 5}
    assert trafficsetup.shares(2, [4, 6]) == {4: 1, 6: 1}


@pytest.mark.parametrize(("flows", "fams", "words"), [
    (1, [4, 6], "--flows 1: IPv4 and IPv6 need at least one flow each; give --flows 2 or more, or one family"),
    (0, [4], "--flows 0: give at least one flow"),
])
def test_fewer_flows_than_families_is_a_wrong_argument(flows: int, fams: list[int], words: str) -> None:
    with pytest.raises(BadInput, match=re.escape(words)):
        trafficsetup.by_family(_plan("topology3-dualstack"), fams, flows, 100.0, "imix", 5.0)


def test_events_run_with_fewer_flows_than_families_exits_2(monkeypatch: pytest.MonkeyPatch) -> None:
    """`lab events run --flows 1` on a dual-stack lab: a wrong argument (exit 2) before any traffic."""
    import contextlib

    from typer.testing import CliRunner

    from lab_orchestrator import api
    from lab_orchestrator.api.running import Lab
    from lab_orchestrator.cli import app

    plan = _plan("topology3-dualstack")
    lab = Lab.__new__(Lab)
    monkeypatch.setattr(Lab, "plan", lambda self: plan)
    monkeypatch.setattr(Lab, "event_names", lambda self, wanted, target=None: wanted)
    monkeypatch.setattr(Lab, "traffic_choice", lambda *a, **k: pytest.fail("no traffic with a wrong --flows"))
    monkeypatch.setattr(api, "running", lambda *a, **k: contextlib.nullcontext(lab))
    result = CliRunner().invoke(app, ["events", "run", "--lab", "t3d", "-e", "srx-power-off", "--flows", "1"])
    assert result.exit_code == 2, result.output
    assert "IPv4 and IPv6 and NAT64 need at least one flow each" in result.output


def _reports(flows: list[Any], lost: dict[int, int]) -> tuple[dict[str, Any], dict[str, Any]]:
    forward = {"role": "receive", "flows": len(flows), "received": 100 * len(flows) - sum(lost.values()),
               "lost": sum(lost.values()), "max_gap_ms": 10.0, "first_seen_ns": 1, "last_seen_ns": 10**9,
               "per_flow": [{"flow": f.flow_id, "lost": lost.get(f.flow_id, 0), "max_gap_ms": 10.0,
                             "last_seen_ns": 10**9} for f in flows]}
    reverse = {"role": "receive", "flows": len(flows), "received": 100 * len(flows), "lost": 0,
               "per_flow": [{"flow": f.flow_id + REVERSE_ID_OFFSET, "lost": 0, "max_gap_ms": 10.0,
                             "last_seen_ns": 10**9} for f in flows]}
    return forward, reverse


def test_a_loss_of_unaffected_ipv6_flows_fails_the_event_and_is_named() -> None:
    v4 = make_flows(2, "100.64.0.0/16", "203.0.113.10")
    v6 = make_flows(2, "2001:db8:172:80::/96", "2001:db8:203::a", first_id=V6_ID_OFFSET)
    on = {(f.src, f.sport): "srx3" for f in v4 + v6}  # nobody on the SRX the event hits
    fwd4, rev4 = _reports(v4, {})
    fwd6, rev6 = _reports(v6, {V6_ID_OFFSET + 1: 4})
    sent = {"end_ns": 10**9}

    def judge(flows: list[Any], fwd: dict[str, Any] | None, rev: dict[str, Any] | None) -> Any:
        return eventverdict.analyse(BY_NAME["srx-power-off"], "srx1", "srx1 powered off", flows, on, on,
                                    fwd or {}, rev, sent, 100.0, {"event": 0.5}, eventwatch.Sampler([], []),
                                    sent_r=sent)

    merged_f = families.merge_reports([fwd4, fwd6])
    assert merged_f is not None and merged_f["flows"] == 4 and merged_f["lost"] == 4
    assert len(merged_f["per_flow"]) == 4 and families.merge_reports([None]) is None
    result = judge(v4 + v6, merged_f, families.merge_reports([rev4, rev6]))
    families.attach(result, {4: judge(v4, fwd4, rev4), 6: judge(v6, fwd6, rev6)})
    assert result.families is not None and set(result.families) == {"4", "6"}
    assert result.families["4"].passed and not result.families["6"].passed
    assert result.families["6"].packets_lost_by_unaffected_flows == 4 and result.families["6"].lost == 4
    assert not result.passed and "IPv6: 4 packets lost by unaffected flows" in result.failure_reasons()
    data = result.to_json()
    assert data["families"]["6"]["flows"] == 2 and data["status"] == "failed"
    assert type(result).from_json(data) == result
    xml = eventverdict.junit([result], "t3d")
    assert 'failures="1"' in xml and "IPv6: 4 packets lost by unaffected flows" in xml
    assert "\"families\": {\"4\"" in xml


def test_an_ipv4_only_result_has_no_families_key() -> None:
    v4 = make_flows(2, "100.64.0.0/16", "203.0.113.10")
    fwd, rev = _reports(v4, {})
    on = {(f.src, f.sport): "srx3" for f in v4}
    result = eventverdict.analyse(BY_NAME["srx-power-off"], "srx1", "x", v4, on, on, fwd, rev, {"end_ns": 10**9},
                                  100.0, {"event": 0.5}, eventwatch.Sampler([], []))
    assert "families" not in result.to_json() and result.passed


def test_each_flow_recovered_against_its_own_family_s_senders() -> None:
    """The families' senders stop one after the other: a flow is judged against its own sender's end,
    not the last one's (the IPv6 sender stopping 2 s after the IPv4 one does not make IPv4 flows late)."""
    v4 = make_flows(2, "100.64.0.0/16", "203.0.113.10")
    v6 = make_flows(2, "2001:db8:172:80::/96", "2001:db8:203::a", first_id=V6_ID_OFFSET)
    on = {(f.src, f.sport): "srx3" for f in v4 + v6}
    fwd4, rev4 = _reports(v4, {})
    fwd6, rev6 = _reports(v6, {})
    for row in fwd6["per_flow"] + rev6["per_flow"]:
        row["last_seen_ns"] = 3 * 10**9
    end4, end6 = {"end_ns": 10**9}, {"end_ns": 3 * 10**9}

    def judge(flows: list[Any], fwd: Any, rev: Any, sent: dict[str, Any]) -> Any:
        return eventverdict.analyse(BY_NAME["srx-power-off"], "srx1", "x", flows, on, on, fwd, rev, sent, 100.0,
                                    {"event": 0.5}, eventwatch.Sampler([], []), sent_r=sent)

    merged = families.merge_sent([end4, end6])
    assert merged is not None and merged["end_ns"] == 3 * 10**9
    result = judge(v4 + v6, families.merge_reports([fwd4, fwd6]), families.merge_reports([rev4, rev6]), merged)
    assert not result.recovered  # against the last sender's end the IPv4 flows look silent
    families.attach(result, {4: judge(v4, fwd4, rev4, end4), 6: judge(v6, fwd6, rev6, end6)})
    assert result.recovered and result.passed and all(row.recovered for row in result.per_flow)


def test_each_familys_flow_ids_bound_its_flow_count() -> None:
    """A family's flows take ids from its own range (IPv4 50,000 wide, IPv6 and NAT64 25,000): a wider
    --flows is a wrong argument before anything starts, not ids that run into another family's."""
    assert trafficsetup.shares(75000, [4, 6, 64]) == {4: 25000, 6: 25000, 64: 25000}
    with pytest.raises(BadInput, match="25001 IPv6 flows; at most 25000"):
        trafficsetup.shares(50002, [4, 6])
    with pytest.raises(BadInput, match="at most 50000"):
        trafficsetup.shares(50001, [4])


def test_the_nat64_forward_receiver_reads_frames_even_in_socket_mode(tmp_path: Path) -> None:
    """With `receiver: socket` and no reverse traffic the IPv4 family's forward receiver is a socket on
    the server's port; the NAT64 one, arriving at the same port, reads frames so neither takes the other's."""
    setups = trafficsetup.by_family(_plan("topology3-dualstack"), [4, 64], 10, 1000.0, "imix", 5.0,
                                    fifo_dir=tmp_path, reverse=False, socket_mode=True)
    assert setups[4].rx_forward.port == 7000 and setups[4].rx_forward.iface is None
    assert setups[64].rx_forward.port is None and setups[64].rx_forward.iface == "eth1"
