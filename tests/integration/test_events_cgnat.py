"""`lab events run` on the CGNAT labs: the server answers each flow's NAT binding (learnt from the
forward packets), the client matches the de-translated answers to their flows, a flow that moves to
another SRX re-binds from that SRX's pool, and an MNHA failover keeps the binding (TLB: the pair's one
pool, whose return traffic follows the failover to the B node)."""

from __future__ import annotations

import json
import os
import shutil
import time
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path

import pytest
from running import REPO, RunningLab, lab

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("bird") is None or shutil.which("conntrack") is None,
                       reason="needs bird2 and conntrack (make deps)"),
]

ARGS = ["--flows", "60", "--rate", "3000", "--warmup", "1.5", "--hold", "1.5", "--duration", "2.5"]


def run_events(running: RunningLab, tmp_path: Path, *events: str) -> dict[str, dict]:  # type: ignore[type-arg]
    report = tmp_path / "events.json"
    picked = [arg for event in events for arg in ("-e", event)]
    result = lab("events", "run", "--lab", running.name, *picked, *ARGS, "--json-out", str(report), check=False)
    assert report.exists(), result.stderr + result.stdout
    out = {e["event"]: e for e in json.loads(report.read_text())["events"]}
    assert result.returncode == 0, {k: (v["recovered"], v["packets_lost_by_unaffected_flows"]) for k, v in out.items()}
    return out


def pools(running: RunningLab) -> dict[str, IPv4Network]:
    plan = json.loads(Path(f"/run/lab/{running.name}/plan.json").read_text())
    return {n["name"]: IPv4Network(n["nat_pool"]) for n in plan["nodes"] if n["kind"] == "srx"}


def pool_of(binding: str, by_srx: dict[str, IPv4Network]) -> str:
    address = IPv4Address(binding.split(":")[0])
    return next(srx for srx, net in by_srx.items() if address in net)


def test_chash_power_off_reverse_answers_bindings_and_moved_flows_rebind(tmp_path: Path) -> None:
    with RunningLab("ec1n", REPO / "labs/topology1-cgnat.yml", tmp_path) as running:
        event = run_events(running, tmp_path, "srx-power-off")["srx-power-off"]
        by_srx = pools(running)
    assert event["passed"] and event["packets_lost_by_unaffected_flows"] == 0
    reverse = event["reverse"]
    assert reverse["flows_never_seen"] == 0 and reverse["received"] > 0.9 * event["forward"]["received"]
    assert reverse["lost"] < 0.01 * reverse["received"], "only the moved flows lost a few answers"
    rows = event["per_flow"]
    for row in rows:
        if row["srx_before"]:
            assert pool_of(row["bindings"][0], by_srx) == row["srx_before"], ("its first carrier's pool", row)
    moved = [r for r in rows if r["moved"]]
    assert moved and len(moved) == event["flows_moved_ideal"]
    # no MNHA: a flow that moved to another SRX got a binding from the new SRX's pool
    for row in moved:
        assert row["rebound"] and pool_of(row["bindings"][1], by_srx) == row["srx_after"], row
    untouched = [r for r in rows if r["srx_before"] != "srx1" and not r["moved_on_restore"]]
    assert untouched and not any(r["rebound"] or r["lost"] for r in untouched)
    assert event["flows_rebound"] == sum(1 for r in rows if r["rebound"]) >= len(moved)


def test_tlb_mnha_failover_keeps_the_binding(tmp_path: Path) -> None:
    with RunningLab("et3n", REPO / "labs/topology3-cgnat.yml", tmp_path) as running:
        events = run_events(running, tmp_path, "srx-link-failure", "srx-power-off")
        by_srx = pools(running)
    # the JVD: each pair's two nodes translate into one pool, the pair's (srx_nat_pool1 on srx1a and srx1b)
    assert by_srx["srx1"] == by_srx["srx2"] != by_srx["srx3"] == by_srx["srx4"], by_srx
    for event in events.values():
        assert event["passed"] and event["reverse"]["flows_never_seen"] == 0
        assert event["recovered"], "every flow recovered"
    # The server answered the bindings throughout, in both events: the restore of srx1's links hands
    # the pair back to it only once it is routed on both sides (no direction dropped meanwhile).
    for event in events.values():
        assert event["reverse"]["received"] > 0.9 * event["forward"]["received"], (event["event"], event["reverse"])
    # TLB steers pair 1's real-service to either of its nodes (sessions synced): the flows srx1 carried
    # when an event hit it go to its MNHA peer and keep their bindings; pair 1 carried flows.
    assert any(r["carrier_before"] in ("srx1", "srx2") for e in events.values() for r in e["per_flow"])
    for event in events.values():
        on_srx1 = [r for r in event["per_flow"] if r["carrier_before"] == "srx1"]
        assert all(r["carrier_during"] == "srx2" for r in on_srx1), "srx1's flows went to its MNHA peer"
        assert not any(r["rebound"] for r in on_srx1), "the synced session kept its binding: not re-bound"
        # the pair's pool is routed to srx1 (A, 1x) while it is healthy, to srx2 (B) once srx1 fails: the
        # answers to the kept bindings reached srx2, which de-translated them, to the end of the run
        assert all(r["bindings"] and IPv4Address(r["bindings"][0].rsplit(":", 1)[0]) in by_srx["srx1"]
                   and r["reverse_carrier_before"] == "srx1" and r["recovered"] for r in on_srx1), on_srx1


def test_dual_mx_chash_pool_owner_returns_with_the_sessions_of_its_peer(tmp_path: Path) -> None:
    """Topology 2 (dual MX, SRD, MNHA pairs, CHASH), CGNAT. After a pair power-off the pair comes back
    with new buckets; then one SRX powers off and on again: its flows fail over to its MNHA peer
    (keeping their bindings), and some stay there after it returns. It announces its pool again and
    draws their return traffic: it must have their sessions (MNHA cold sync), or they never recover.
    By hand, `lab traffic start` answers the bindings the same way."""
    with RunningLab("e2n", REPO / "labs/topology2-cgnat.yml", tmp_path) as running:
        events = run_events(running, tmp_path, "mnha-pair-power-off", "srx-power-off")
        by_srx = pools(running)
        lab("traffic", "start", "--lab", running.name, "--flows", "20", "--rate", "1000", "--duration", "20")
        time.sleep(2)
        reports = json.loads(lab("traffic", "stop", "--lab", running.name, "--json").stdout)
    for event in events.values():
        assert event["passed"] and event["recovered"], event["event"]
        assert event["reverse"]["flows_never_seen"] == 0
    power_off = events["srx-power-off"]
    failed_over = [r for r in power_off["per_flow"] if r["carrier_before"] == "srx1"]
    assert failed_over and all(r["carrier_during"] == "srx2" for r in failed_over), "srx1's flows to its peer"
    # the synced sessions kept their bindings while srx2 carried them (from the pair's pools: a flow
    # may run on a session its peer opened)
    assert all(pool_of(r["bindings"][0], by_srx) in ("srx1", "srx2") for r in failed_over), failed_over
    assert reports["tx-reverse"]["learned_before_start"] == 20, reports["tx-reverse"]
    # every answer reached its flow (the reverse sender starts a moment after the forward one)
    assert reports["rx-reverse"]["received"] > 0.5 * reports["rx-forward"]["received"] > 0, reports
    assert reports["rx-reverse"]["lost"] == 0 and reports["rx-reverse"]["flows_never_seen"] == 0, reports


def test_dual_mx_tlb_pair_power_off_spares_the_other_pair(tmp_path: Path) -> None:
    """Topology 4 (dual MX without SRD, TLB per MNHA pair, keep-buckets restores), CGNAT: a whole pair powers
    off; the other pair's flows stay where they are and lose nothing, in both directions, across the event
    and its restore (the restore hands the pair back only its own flows)."""
    with RunningLab("e4n", REPO / "labs/topology4-cgnat.yml", tmp_path) as running:
        events = run_events(running, tmp_path, "srx-power-off", "mnha-pair-power-off")
    pair = events["mnha-pair-power-off"]
    assert pair["passed"] and pair["reverse"]["flows_never_seen"] == 0
    other = [r for r in pair["per_flow"] if r["carrier_before"] in ("srx3", "srx4")]
    assert other, "the other pair carried flows"
    assert [(r["flow"], r["lost_forward"], r["lost_reverse"]) for r in other if r["lost"]] == []
    # (the restore may move some of them to the returning pair, with a new binding from its pool)
    stayed = [r for r in other if r["carrier_after"] in ("srx3", "srx4")]
    assert stayed and not any(r["rebound"] for r in stayed)
