"""Verdicts from the selector's own tables, checked by an independent capture (dumpcap on both
hosts): a restore and an add lose nothing on flows that were not expected movers; with the
keep-buckets restore policy, nothing on every flow never on the failed SRX."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from capture import Capture, holes, sequences
from running import REPO, lab

from lab_orchestrator.plan.trafficsetup import REVERSE_ID_OFFSET

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("bird") is None or shutil.which("dumpcap") is None,
                       reason="needs bird2 and dumpcap (make deps)"),
]

ARGS = ["--flows", "80", "--rate", "2000", "--warmup", "1.5", "--hold", "1.5", "--duration", "2.5"]


def run_captured(name: str, tmp_path: Path, events: list[str], policy: str | None = None,  # type: ignore[type-arg]
                 source: Path = REPO / "labs/topology1.yml") -> tuple[dict, dict]:
    text = source.read_text().replace("name: t1", f"name: {name}", 1)
    if policy:
        text = text.replace("  use_case: sfw\n", f"  use_case: sfw\n  restore_policy: {policy}\n", 1)
    topo = tmp_path / f"{name}.yml"
    topo.write_text(text)
    lab("up", str(topo))
    try:
        fwd, rev, report = tmp_path / "fwd.pcap", tmp_path / "rev.pcap", tmp_path / "events.json"
        with Capture(f"{name}-server", "eth1", fwd, "udp and dst host 203.0.113.10"), \
                Capture(f"{name}-client", "eth1", rev, "udp and dst net 100.64.0.0/16"):
            picked = [arg for event in events for arg in ("-e", event)]
            result = lab("events", "run", "--lab", name, *picked, *ARGS, "--json-out", str(report), check=False)
        assert report.exists(), result.stderr + result.stdout
        results = {e["event"]: e for e in json.loads(report.read_text())["events"]}
        forward, reverse = sequences(fwd), sequences(rev)
    finally:
        lab("down", "--lab", name, check=False)
    # one capture for all events: flow ids repeat per event, so keep one event per captured run
    assert len(events) == 1
    row_loss = {}
    for flow in results[events[0]]["per_flow"]:
        fid = flow["flow"]
        row_loss[fid] = holes(forward.get(fid, set())) + holes(reverse.get(fid + REVERSE_ID_OFFSET, set()))
        assert forward.get(fid) and reverse.get(fid + REVERSE_ID_OFFSET), f"flow {fid} captured both ways"
    return results[events[0]], row_loss


def test_restore_under_the_default_policy_loses_nothing_on_flows_the_tables_did_not_move(tmp_path: Path) -> None:
    event, loss = run_captured("vr1", tmp_path, ["srx-power-off"])
    assert event["verdict_from"] == "selector tables" and event["passed"], event["phases"]
    phases = event["phases"]
    # the tables say: the failure moves srx1's flows, the restore moves about 1/N of all flows back to srx1
    assert phases["event"]["expected_movers"] == phases["event"]["movers"] > 0
    assert phases["event"]["unexpected_movers"] == 0 and phases["event"]["expected_but_stayed"] == 0
    assert phases["restore"]["expected_movers"] > 0 and phases["restore"]["unexpected_movers"] == 0
    rows = event["per_flow"]
    for row in rows:
        if row["carrier_before"]:
            # the carriers observed on the SRXs agree with the buckets computed from the tables
            assert row["mover"]["event"] == row["expected_mover"]["event"], row
    quiet = [r for r in rows if not any(r["expected_mover"].values()) and r["carrier_before"] != "srx1"]
    assert quiet, "some flows neither on srx1 nor moved by a table change"
    assert sum(loss[r["flow"]] for r in quiet) == 0, {r["flow"]: loss[r["flow"]] for r in quiet if loss[r["flow"]]}
    assert event["packets_lost_by_unaffected_flows"] == 0


def test_add_loses_nothing_on_flows_that_were_not_expected_movers(tmp_path: Path) -> None:
    event, loss = run_captured("va1", tmp_path, ["nexthop-add"])
    assert event["passed"], event["phases"]
    add = event["phases"]["add"]
    flows = event["flows"]
    # the newcomer takes one share of the table: 1/(N+1) of the buckets within 1 % + one bucket
    assert abs(add["bucket_share_moved"] - add["bucket_share_ideal"]) <= 0.01 + 1 / add["buckets"], add
    assert add["members"] == [3, 4] and add["bucket_share_ideal"] == 0.25
    # and exactly the flows of those buckets moved
    assert 0 < add["expected_movers"] == add["movers"] < flows and add["unexpected_movers"] == 0
    quiet = [r for r in event["per_flow"] if not any(r["expected_mover"].values())]
    assert quiet and sum(loss[r["flow"]] for r in quiet) == 0


def test_keep_buckets_restore_loses_nothing_on_flows_never_on_the_failed_srx(tmp_path: Path) -> None:
    event, loss = run_captured("vk1", tmp_path, ["srx-power-off"], policy="keep-buckets")
    assert event["passed"], event["phases"]
    rows = event["per_flow"]
    on_srx1 = {r["flow"] for r in rows if r["carrier_before"] == "srx1"}
    assert on_srx1
    # the restore moves back exactly the flows that moved away, nothing else
    back = {r["flow"] for r in rows if r["expected_mover"]["restore"]}
    assert back == {r["flow"] for r in rows if r["expected_mover"]["event"]} == on_srx1
    never = [r for r in rows if r["carrier_before"] not in (None, "srx1")]
    assert never and sum(loss[r["flow"]] for r in never) == 0, \
        {r["flow"]: loss[r["flow"]] for r in never if loss[r["flow"]]}
    assert not any(r["mover"].get("restore") for r in never)


def test_nexthop_add_of_a_never_seen_srx_moves_one_share_of_the_table(tmp_path: Path) -> None:
    """topology1 with a fifth SRX built but not in service: `nexthop-add` brings it in for the first
    time; it takes 1/5 of the buckets (within 1 % + one bucket), only their flows move, none lose."""
    from tests.unit.test_spares import spare_topology

    event, loss = run_captured("vn1", tmp_path, ["nexthop-add"], source=spare_topology(tmp_path))
    assert event["target"] == "srx5" and event["passed"], event["phases"]
    add = event["phases"]["add"]
    assert add["members"] == [4, 5] and add["bucket_share_ideal"] == 0.2
    assert abs(add["bucket_share_moved"] - 0.2) <= 0.01 + 1 / add["buckets"], add
    assert 0 < add["expected_movers"] == add["movers"] and add["unexpected_movers"] == 0
    rows = event["per_flow"]
    assert all(r["carrier_before"] != "srx5" for r in rows), "no flow was ever on the new SRX before"
    assert {r["flow"] for r in rows if r["carrier_during"] == "srx5"} == \
        {r["flow"] for r in rows if r["expected_mover"]["add"]}
    quiet = [r for r in rows if not r["expected_mover"]["add"]]
    assert quiet and sum(loss[r["flow"]] for r in quiet) == 0


@pytest.mark.parametrize(("name", "load_balancing", "members"), [("vq3", "ecmp-chash", [4, 6]), ("vt3", None, [2, 3])],
                         ids=["chash", "tlb"])
def test_nexthop_add_of_a_never_seen_mnha_pair(tmp_path: Path, name: str, load_balancing: str | None,
                                               members: list[int]) -> None:
    """topology3 with a third MNHA pair built but not in service: `nexthop-add` brings both nodes in for
    the first time. TLB (one real-service per pair): the pair takes 1/(N+1) of the table; ECMP CHASH
    (one next hop per SRX): its two SRXs take 2/(N+2). Within 1 % + one bucket; only those flows move,
    none lose a packet in the capture. (Every flow the tables move is seen on the new pair: the runner
    reads the carriers once both nodes are in the table, and looks again for a flow one reading missed.)"""
    from tests.unit.test_spares import spare_pair_topology

    source = spare_pair_topology(tmp_path, load_balancing, name=name)
    event, loss = run_captured(name, tmp_path, ["nexthop-add"], source=source)
    lossy = [(r["flow"], r["carrier_before"], r["carrier_during"], r["expected_mover"], r["lost_forward"],
              r["lost_reverse"], r["gap_at_s"], r["recovered"])
             for r in event["per_flow"] if r["lost"] or not r["recovered"]]
    assert event["target"] == "srx5" and event["passed"], (event["phases"], event["recovered"], lossy)
    assert "srx5/srx6 in service" in event["action"]
    add = event["phases"]["add"]
    share = (members[1] - members[0]) / members[1]
    assert add["members"] == members and add["bucket_share_ideal"] == round(share, 5)
    assert abs(add["bucket_share_moved"] - share) <= 0.01 + 1 / add["buckets"], add
    assert 0 < add["expected_movers"] == add["movers"] and add["unexpected_movers"] == 0
    rows = event["per_flow"]
    assert all(r["carrier_before"] not in ("srx5", "srx6") for r in rows), "no flow was ever on the new pair"
    assert {r["flow"] for r in rows if r["carrier_during"] in ("srx5", "srx6")} == \
        {r["flow"] for r in rows if r["expected_mover"]["add"]}
    quiet = [r for r in rows if not r["expected_mover"]["add"]]
    assert quiet and sum(loss[r["flow"]] for r in quiet) == 0


def test_nexthop_delete_takes_a_whole_mnha_pair_out_and_spares_the_other_pair(tmp_path: Path) -> None:
    """topology3 (TLB, two MNHA pairs): `nexthop-delete` of srx1 takes its whole pair out of service, as
    the JVD's "deleting a scale-out SRX MNHA pair": the table loses the pair's real-service (2 members
    to 1), every flow of the pair moves to the other pair, and the other pair's flows lose nothing in
    the capture. The restore (`nexthop-add`) puts both nodes back."""
    source = tmp_path / "t3.yml"
    source.write_text((REPO / "labs/topology3.yml").read_text().replace("name: t3", "name: vd3", 1))
    event, loss = run_captured("vd3", tmp_path, ["nexthop-delete"], source=source)
    assert event["target"] == "srx1" and event["passed"], (event["phases"], event["recovered"])
    assert "MNHA pair srx1/srx2 out of service" in event["action"], event["action"]
    assert "srx1 powered on" in event["action"] and "srx2 powered on" in event["action"], event["action"]
    delete = event["phases"]["delete"]
    assert delete["members"] == [2, 1] and delete["unexpected_movers"] == 0, delete
    rows = event["per_flow"]
    pair = [r for r in rows if r["carrier_before"] in ("srx1", "srx2")]
    # the other pair's flows that no table change moved (the restore gives the returning pair a share of
    # the table, and the flows of those buckets move to it: expected movers, which may lose in flight)
    other = [r for r in rows if r["carrier_before"] in ("srx3", "srx4") and not any(r["expected_mover"].values())]
    assert pair and other, "both pairs carried flows before the deletion"
    assert all(r["carrier_during"] in ("srx3", "srx4") for r in pair), "the pair's flows moved to the other pair"
    assert {r["flow"] for r in pair} == {r["flow"] for r in rows if r["expected_mover"]["delete"]}
    assert sum(loss[r["flow"]] for r in other) == 0, {r["flow"]: loss[r["flow"]] for r in other if loss[r["flow"]]}
