"""Supervision on topology4 (dual MX, both forwarding, TLB with its health monitor, two MNHA pairs, SSH):
kill -9 of each daemon kind under two-way traffic (`lab events run -e daemon-crash`): it is running
again within a few seconds, and flows its node does not carry lose nothing; a daemon stopped on
purpose (power off) stays down; `lab status` says not ready while a daemon waits out its backoff."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from running import REPO, RunningLab, lab

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("bird") is None or shutil.which("conntrackd") is None,
                       reason="needs bird2 and conntrackd (make deps)"),
]

NAME = "sv4"


@pytest.fixture(scope="module")
def t4(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningLab]:
    with RunningLab(NAME, REPO / "labs/topology4.yml", tmp_path_factory.mktemp("sv4")) as running:
        yield running


def status() -> dict[str, object]:
    reports = json.loads(lab("status", NAME, "--json").stdout)
    assert len(reports) == 1
    report: dict[str, object] = reports[0]
    return report


def daemon(report: dict[str, object], node: str, name: str) -> dict[str, object]:
    nodes = report["nodes"]
    assert isinstance(nodes, list)
    found: dict[str, object] = next(d for n in nodes if n["name"] == node for d in n["daemons"] if d["name"] == name)
    return found


def wait_ready(timeout: float = 20.0) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while True:
        report = status()
        if report["ready"] or time.monotonic() > deadline:
            return report
        time.sleep(0.2)


# (node, daemon): every daemon kind of the lab. Flows an SRX does not carry must lose nothing; a crash on
# an MX (both forward: the gateways spread flows over them) or a gateway carries every flow (judged by
# recovery); the lab-wide SSH server carries none.
# (Not the lab-wide health-check responder: it answers the TLB probes of every SRX at once, so its crash
# fails every real-service's probes together and the monitor may take them all down: a lab artifact.)
CRASHES = [
    ("srx1", "bird"), ("srx1", "mnhad"), ("srx1", "conntrackd"),
    ("mx1", "bird-trust-vr"), ("mx1", "mxlb"), ("mx1", "healthd"),
    ("mx2", "bird-untrust-vr"), ("gw-trust", "bird"), ("_lab", "sshd"),
]


@pytest.mark.parametrize(("node", "name"), CRASHES, ids=[f"{n}-{d}" for n, d in CRASHES])
def test_kill_9_of_each_daemon_kind_is_back_in_seconds_without_unaffected_loss(
        t4: RunningLab, node: str, name: str, tmp_path: Path) -> None:
    assert wait_ready()["ready"], status()["problems"]
    before = int(daemon(status(), node, name)["restarts"])  # type: ignore[call-overload]
    report = tmp_path / "r.json"
    result = lab("events", "run", "--lab", NAME, "-e", "daemon-crash", "--target", node, "--daemon", name,
                 "--flows", "60", "--rate", "3000", "--warmup", "1.5", "--duration", "2",
                 "--json-out", str(report), check=False)
    event = json.loads(report.read_text())["events"][0]
    # the exit code first: a case that was not judged (an error, no crash record) shows its reason
    assert result.returncode == 0, f"{result.stderr}\n{json.dumps({k: event[k] for k in event if k != 'per_flow'})}"
    crash = event["daemon_crash"]
    assert crash["daemon"] == name and crash["returned"] and crash["down_s"] < 2.0
    assert crash["restarts_after"] == before + 1
    assert event["recovered"] and event["passed"]
    assert event["packets_lost_by_unaffected_flows"] == 0
    if node == "srx1" or node == "mx2" or node == "_lab":  # none of those carries flows of others
        other = [r for r in event["per_flow"] if r["srx_before"] != node]
        assert other and sum(r["lost"] for r in other) == 0, "flows the node does not carry lost packets"
    after = status()
    assert int(daemon(after, node, name)["restarts"]) == before + 1  # type: ignore[call-overload]
    assert daemon(after, node, name)["running"]


def test_a_daemon_in_backoff_makes_the_lab_not_ready(t4: RunningLab) -> None:
    """healthd whose configuration vanished crashes at each start: backoff, lab degraded; back once fixed."""
    assert wait_ready()["ready"]
    config = Path(f"/run/lab/{NAME}/nodes/mx2/mxlb.json")
    aside = config.with_suffix(".aside")
    config.rename(aside)
    try:
        lab("fail", "--lab", NAME, "mx2", "daemon-crash", "--daemon", "healthd", check=False)
        # each `lab status` is a Python start (a second or more on a loaded host): poll with margins
        deadline = time.monotonic() + 15
        seen = status()
        while time.monotonic() < deadline and daemon(seen, "mx2", "healthd")["state"] != "backoff":
            time.sleep(0.05)
            seen = status()
        assert seen["status"] == "degraded" and not seen["ready"]
        assert any(p.startswith("mx2/healthd down (exit status") for p in seen["problems"]), seen["problems"]
        # between two crashes the restarted daemon runs for a moment: read the text until it shows it down
        deadline = time.monotonic() + 15
        text = lab("status", NAME).stdout
        while "not ready: mx2/healthd down" not in text and time.monotonic() < deadline:
            time.sleep(0.1)
            text = lab("status", NAME).stdout
        assert "degraded" in text and "not ready: mx2/healthd down" in text
    finally:
        aside.rename(config)
    report = wait_ready(60)  # the backoff has grown meanwhile (doubling, at most 30 s)
    assert report["ready"] and report["status"] == "ready", report["problems"]
    assert int(daemon(report, "mx2", "healthd")["restarts"]) >= 2  # type: ignore[call-overload]


def test_power_off_stops_on_purpose_and_the_supervisor_leaves_it_down(t4: RunningLab) -> None:
    assert wait_ready()["ready"]
    lab("fail", "--lab", NAME, "srx4", "srx-power-off")
    try:
        time.sleep(1.0)  # several backoff periods: nothing may restart
        report = status()
        assert report["ready"], report["problems"]  # intentionally down is not a fault
        states = {d["name"]: d["state"] for n in report["nodes"] if n["name"] == "srx4"  # type: ignore[union-attr]
                  for d in n["daemons"]}
        assert states and set(states.values()) == {"stopped"}, states
    finally:
        lab("restore", "--lab", NAME, "srx4")
    report = wait_ready()
    assert report["ready"], report["problems"]
    assert all(d["running"] for n in report["nodes"] if n["name"] == "srx4"  # type: ignore[union-attr]
               for d in n["daemons"])


def test_the_new_events_are_listed_with_their_meaning(t4: RunningLab) -> None:
    rows = {r["name"]: r for r in json.loads(lab("events", "list", "--lab", NAME, "--json").stdout)}
    assert rows["daemon-crash"]["applicable"]
    assert rows["restart-tlb-selector"]["applicable"] and rows["restart-tlb-monitor"]["applicable"]
    assert "no second routing engine" in rows["gres"]["action"]
    assert "forwarding state" in rows["gres"]["action"]
    assert "Network-monitor" in rows["restart-tlb-monitor"]["title"]
    assert "traffic-dird" in rows["restart-tlb-selector"]["title"]


def test_tlb_selector_and_monitor_restart_on_their_own_without_loss(t4: RunningLab, tmp_path: Path) -> None:
    """The JVD's "restart traffic-dird / sdk-process" and "restart Network-monitor" as events of their own."""
    assert wait_ready()["ready"]
    report = tmp_path / "r.json"
    result = lab("events", "run", "--lab", NAME, "-e", "restart-tlb-selector", "-e", "restart-tlb-monitor",
                 "--flows", "60", "--rate", "3000", "--warmup", "1.5", "--duration", "2", "--json-out", str(report),
                 check=False)
    events = {e["event"]: e for e in json.loads(report.read_text())["events"]}
    assert result.returncode == 0, result.stderr
    assert events["restart-tlb-selector"]["action"] == "mx1: mxlb restarted"
    assert events["restart-tlb-monitor"]["action"] == "mx1: healthd restarted"
    for event in events.values():
        assert event["passed"] and event["flows_moved"] == 0
        assert event["forward"]["lost"] == 0 and event["reverse"]["lost"] == 0, "a restart loses no packet"
    selector = json.loads(Path(f"/run/lab/{NAME}/nodes/mx1/mxlb-status.json").read_text())
    assert selector["health_monitor"]["reports"] > 0
    assert all(m["alive"] for m in selector["members"])
