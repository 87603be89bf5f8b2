"""`lab events run --tcp` on topology3: long-lived TCP connections beside the UDP flows through an
SRX power-off, with their outcomes in the JSON, the JUnit and the printed table."""

from __future__ import annotations

import json
import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from running import REPO, RunningLab, lab

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(any(shutil.which(t) is None for t in ("bird", "conntrack", "conntrackd")),
                       reason="needs bird2, conntrack and conntrackd (make deps)"),
]


def test_srx_power_off_keeps_every_long_lived_tcp_connection(tmp_path: Path) -> None:
    with RunningLab("et3", REPO / "labs/topology3.yml", tmp_path) as running:
        report, junit = tmp_path / "r.json", tmp_path / "r.xml"
        result = lab("events", "run", "--lab", running.name, "-e", "srx-power-off", "--tcp", "--tcp-connections", "50",
                     "--flows", "100", "--rate", "5000", "--duration", "3", "--json-out", str(report),
                     "--junit-out", str(junit), check=False, timeout=300)
        assert result.returncode == 0, result.stderr + result.stdout
        [event] = json.loads(report.read_text())["events"]
        tcp = event["tcp"]
        outcome = {k: tcp[k] for k in ("connections", "completed", "reset", "failed", "timed_out", "stuck")}
        assert outcome == {"connections": 50, "completed": 50, "reset": 0, "failed": 0, "timed_out": 0, "stuck": 0}, tcp
        # the connections crossed the SRXs, and the powered-off one carried some of them
        assert sum(tcp["carried_before"].values()) == 50 and tcp["carried_before"][event["target"]] > 0, tcp
        assert ("TCP baseline answered", True) in [(c["name"], c["ok"]) for c in event["checks"]]
        # topology3 has MNHA pairs: srx-power-off must reset, fail and leave stuck none, on top of the JVD's 1 %
        assert sorted((b["metric"], b["scope"], b["ok"]) for b in event["budgets"]) == [
            ("tcp_failed", "srx-power-off", True), ("tcp_reset", "srx-power-off", True),
            ("tcp_reset_pct", "all events", True), ("tcp_stuck", "srx-power-off", True)]
        out = ET.parse(junit).getroot().find("testcase/system-out")
        assert out is not None and json.loads(out.text or "{}")["tcp"]["completed"] == 50
        assert "TCP beside the flows: 50 connections" in result.stdout
