"""`lab events run` end to end on topology1: traffic, event, restore, reports (JSON, JUnit, PNG).
Topology3's run of every event comes first, with no other lab up. The topology1 tests then share
one lab, each leaving it as it found it (every event is restored); the one that runs six events in a
row comes last."""

from __future__ import annotations

import json
import os
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from running import REPO, RunningLab, lab

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("bird") is None or shutil.which("conntrack") is None,
                       reason="needs bird2 and conntrack (make deps)"),
]


@pytest.fixture(scope="module")
def t1(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningLab]:
    with RunningLab("er1", REPO / "labs/topology1.yml", tmp_path_factory.mktemp("er1")) as running:
        yield running


def since(log: Path, offset: int) -> str:
    """What LOG got after its first OFFSET bytes (all of it if it was started again, shorter)."""
    data = log.read_bytes()
    return data[offset if len(data) >= offset else 0:].decode(errors="replace")


# topology1's events that no other test runs under `lab events run` on topology1 (srx-power-off and
# restart-tlb run below, srx-link-failure in test_events_rerun.py, nexthop-add in test_events_verdicts.py)
ONLY_HERE_ON_TOPOLOGY1 = ["srx-reboot", "mx-reboot", "restart-routing", "gres", "daemon-crash", "nexthop-delete"]
BOTH = {"srx-link-failure", "srx-power-off", "srx-reboot", "restart-routing", "restart-tlb", "gres", "mx-reboot",
        "nexthop-delete", "nexthop-add", "daemon-crash"}
ONLY_ON_TOPOLOGY3 = {"mnha-pair-power-off", "restart-tlb-selector", "restart-tlb-monitor"}


def test_every_applicable_event_runs_and_recovers_on_topology3(tmp_path: Path) -> None:
    """Every event that applies to topology3 (`lab events run` without -e: all of them), end to end.
    First in this file: no other lab is up meanwhile."""
    with RunningLab("ea3", REPO / "labs/topology3.yml", tmp_path) as running:
        run_and_judge(running, BOTH | ONLY_ON_TOPOLOGY3, [], tmp_path)


def run_and_judge(running: RunningLab, applicable: set[str], picked: list[str], tmp_path: Path) -> None:
    """`lab events run` of PICKED (all without one) on RUNNING, whose applicable events must be
    APPLICABLE: every case that ran passed."""
    listed = json.loads(lab("events", "list", "--lab", running.name, "--json").stdout)
    assert {e["name"] for e in listed if e["applicable"]} == applicable, listed
    report = tmp_path / "all.json"
    result = lab("events", "run", "--lab", running.name, *[a for name in picked for a in ("-e", name)],
                 "--flows", "60", "--rate", "3000", "--warmup", "1.5", "--hold", "1.5", "--duration", "3",
                 "--down-time", "1", "--json-out", str(report), check=False, timeout=300)
    events = {e["event"]: e for e in json.loads(report.read_text())["events"]} if report.exists() else {}
    assert set(events) == (set(picked) or applicable), result.stderr
    failed = {name: (e["recovered"], e["packets_lost_by_unaffected_flows"]) for name, e in events.items()
              if not e["passed"]}
    assert failed == {}, f"{failed}\n" + "\n".join(why_failed(events[name]) for name in failed)
    assert result.returncode == 0


def test_events_run_reports_convergence_and_recovery(t1: RunningLab, tmp_path: Path) -> None:
    logs = t1.running.state_dir / "logs"
    seen = {log: log.stat().st_size for log in logs.glob("*bird*.log")}  # what earlier tests left there
    report, junit, png = tmp_path / "r.json", tmp_path / "r.xml", tmp_path / "r.png"
    result = lab("events", "run", "--lab", t1.name, "-e", "srx-power-off", "-e", "restart-tlb",
                 "--flows", "100", "--rate", "5000", "--duration", "3",
                 "--json-out", str(report), "--junit-out", str(junit), "--plot-out", str(png), check=False)
    assert result.returncode == 0, result.stderr + result.stdout
    events = {e["event"]: e for e in json.loads(report.read_text())["events"]}
    power = events["srx-power-off"]
    assert power["recovered"] and power["passed"]
    assert power["packets_lost_by_unaffected_flows"] == 0, "CHASH: flows on other SRXs lost nothing"
    assert power["flows_moved"] == power["flows_moved_ideal"] > 0, "exactly the flows of the failed SRX moved"
    assert all(r["srx_after"] != "srx1" for r in power["per_flow"] if r["srx_after"])
    assert power["convergence_ms"]["max"] < 1000
    assert power["resolution_ms"] == 20.0
    assert power["timeline"], "pps per SRX sampled around the event"
    assert any(ns.endswith("mx1-trust-vr") and n > 0 for ns, n in power["routes_changed"].items()), \
        "the MX's ECMP route lost srx1 and got it back: seen by the case's route log"
    assert "route_changes" not in power, "a passing case keeps counts only"
    # srx1's sessions went down with its links: they start again at once, not after BIRD's error wait
    delayed = [f"{log.name}: {line}" for log in sorted(logs.glob("*bird*.log"))
               for line in since(log, seen.get(log, 0)).splitlines() if "Startup delayed" in line]
    assert delayed == [], delayed
    tlb = events["restart-tlb"]
    assert tlb["passed"] and tlb["forward"]["lost"] == 0, "restarting the selector daemon loses no packet"
    suite = ET.parse(junit).getroot()
    assert suite.get("tests") == "2" and suite.get("failures") == "0"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # CI gating: a budget the lab cannot meet (no flow at 50 pps has a gap under 1 ms) exits 1 and says
    # which event broke which budget; a budget the lab meets does not fail the run.
    gated = tmp_path / "gated.json"
    result = lab("events", "run", "--lab", t1.name, "-e", "srx-power-off",
                 "--flows", "50", "--rate", "2500", "--warmup", "1", "--duration", "2",
                 "--max-convergence-ms", "100000", "--budget", "restart-tlb:longest_gap_ms=1",
                 "--budget", "srx-power-off:longest_gap_ms=1", "--json-out", str(gated), check=False)
    assert result.returncode == 1, result.stderr + result.stdout
    assert "srx-power-off on srx1 broke the budget longest_gap_ms <= 1 (srx-power-off): measured" \
        in result.stderr
    assert "restart-tlb" not in result.stderr, "the budget of an event not run is not judged"
    [case] = json.loads(gated.read_text())["events"]
    rows = sorted((r["metric"], r["ok"], r["scope"]) for r in case["budgets"])
    assert rows == [("convergence_ms", True, "all events"), ("longest_gap_ms", False, "srx-power-off")], rows
    # a failed case keeps what the BIRDs said: the MX's sessions to the powered-off SRX went down
    power_log = case["bgp_log"]
    assert any(x["log"].startswith("mx1 bird") and x["text"].startswith("fw_srx1:") and x["at_s"] >= 0
               for x in power_log), power_log
    assert "BGP log during the case" in result.stdout + result.stderr
    bad = lab("events", "run", "--lab", t1.name, "--budget", "convergence<3", check=False)
    assert bad.returncode == 2 and "expected [EVENT:]METRIC=LIMIT" in bad.stderr


def test_a_rate_the_path_cannot_carry_is_an_error_not_a_failed_event(t1: RunningLab, tmp_path: Path) -> None:
    """No generator of this kind sends a million packets/s each way: the baseline before the event
    says so, the case is an error with the reason (exit 3), and the event is never injected."""
    report, junit = tmp_path / "r.json", tmp_path / "r.xml"
    result = lab("events", "run", "--lab", t1.name, "-e", "srx-power-off", "--rate", "1000000",
                 "--json-out", str(report), "--junit-out", str(junit), check=False)
    assert result.returncode == 3, result.stderr + result.stdout
    assert "not judged (a precondition failed): srx-power-off" in result.stderr
    doc = json.loads(report.read_text())
    assert doc["traffic"] == {"chosen_by": "options", "flows": 200, "rate": 1000000.0, "resolution_ms": 0.2,
                              "families": [4]}
    event = doc["events"][0]
    assert event["status"] == "error" and "cannot carry 200 flows x 2 directions at 1000000 pps" in event["error"]
    assert [(c["name"], c["ok"]) for c in event["checks"]] == [
        ("selectors ready", True), ("BGP settled", True), ("baseline carried", False)]
    suite = ET.parse(junit).getroot()
    assert (suite.get("errors"), suite.get("failures")) == ("1", "0")
    [status] = json.loads(lab("status", t1.name, "--json").stdout)
    assert not any(node["powered_off"] for node in status["nodes"]), "the event was not injected"


def test_traffic_by_hand_start_stats_stop(t1: RunningLab) -> None:
    """Before the events of the next test: the lab as the two cases above left it, every check of the
    last one (selectors ready, BGP settled) passed and no event injected."""
    lab("traffic", "start", "--lab", t1.name, "--flows", "40", "--rate", "2000", "--duration", "30")
    stats = json.loads(lab("traffic", "stats", "--lab", t1.name, "--json").stdout)
    assert all(stats["daemons"].values()) and len(stats["daemons"]) == 4
    assert sum(stats["pps_per_srx"].values()) > 1000, stats
    reports = json.loads(lab("traffic", "stop", "--lab", t1.name, "--json").stdout)
    assert reports["tx-forward"]["sent"] < 2000 * 30, "stopped before its duration"
    assert reports["rx-forward"]["received"] == reports["tx-forward"]["sent"]
    assert reports["rx-reverse"]["lost"] == 0


def test_topology1s_events_run_nowhere_else_run_and_recover(t1: RunningLab, tmp_path: Path) -> None:
    """On topology1 the events that no other test runs there, on the lab the tests above used."""
    run_and_judge(t1, BOTH, ONLY_HERE_ON_TOPOLOGY1, tmp_path)


def why_failed(case: dict[str, Any]) -> str:
    """What a failed case kept, for the assertion message: its checks, the route changes and the BIRDs'
    log lines around the event (the CLI's table only shows the last cases)."""
    lines = [f"== {case['event']} on {case['target']}: {case['action']}",
             f"   convergence {case['convergence_ms']}, longest gap {case['longest_gap_ms']} ms, "
             f"forward lost {case['forward'].get('lost')}, reverse lost {case['reverse'].get('lost')}",
             "   checks: " + ", ".join(f"{c['name']} {'ok' if c['ok'] else 'NO'}" for c in case.get("checks") or [])]
    lines += [f"   {r['at_s']:+.3f} s {r['ns']}: {r['change']}" for r in case.get("route_changes") or []]
    lines += [f"   {x['at_s']:+.3f} s {x['log']}: {x['level']} {x['text']}" for x in case.get("bgp_log") or []]
    return "\n".join(lines)
