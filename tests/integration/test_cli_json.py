"""On one running lab (topology2: dual MX with SRD, MNHA pairs): every reporting command's --json output
parses and says what was done, `lab traffic stats` prints a table, and `lab show` runs a CLI command
without SSH by the SSH CLI's own code."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from labtools import REPO, LabOwner, assert_no_traceback, copy_lab, explain, leftovers, run_lab

pytestmark = pytest.mark.root


def as_json(*args: str, expect: int = 0) -> Any:
    result = run_lab(*args, timeout=120)
    assert result.returncode == expect, explain(result)
    assert_no_traceback(result.stderr)
    return json.loads(result.stdout)


def test_reporting_commands_json_and_one_shot_cli(owner: LabOwner, tmp_path: Path) -> None:
    topology = copy_lab(REPO / "labs" / "topology2.yml", "it-json", tmp_path)
    facts = owner.claim(topology)
    name = facts.name

    up = as_json("up", str(topology), "--json")
    assert up["name"] == name and up["status"] == "ready" and "mx1" in up["nodes"]

    shown = as_json("show", "mx1", "--lab", name, "show route", "--json")
    assert shown["status"] == 0 and shown["command"] == "show route" and "inet.0" in shown["output"], shown
    text = run_lab("show", "mx1", "--lab", name, "bgp", "summary")  # "show" may be left out
    assert text.returncode == 0 and "Peer" in text.stdout, explain(text)
    wrong = run_lab("show", "mx1", "--lab", name, "show nonsense")
    assert wrong.returncode == 1 and "syntax error" in wrong.stdout + wrong.stderr, explain(wrong)
    missing = as_json("show", "nosuch", "--lab", name, "show route", "--json", expect=2)
    assert "no node 'nosuch'" in missing["error"]

    restarted = as_json("restart", "mx1", "mxlb", "--lab", name, "--json")
    assert restarted["process"] == "mxlb" and restarted["old_pid"] != restarted["new_pid"]

    failed = as_json("fail", "srx1", "srx-link-failure", "--lab", name, "--json")
    assert failed["event"] == "srx-link-failure" and failed["node"] == "srx1" and failed["done"]
    restored = as_json("restore", "srx1", "--lab", name, "--json")
    assert restored["node"] == "srx1" and restored["done"], restored

    switched = as_json("switchover", "--lab", name, "--json")
    assert switched["requested_on"] in ("mx1", "mx2")

    started = as_json("traffic", "start", "--lab", name, "--flows", "10", "--rate", "200", "--duration", "20",
                      "--json")
    assert started["started"]
    stats = as_json("traffic", "stats", "--lab", name, "--json")
    assert set(stats) == {"pps_per_srx", "daemons"} and stats["daemons"]
    table = run_lab("traffic", "stats", "--lab", name)
    assert table.returncode == 0 and "delivered pps" in table.stdout and "total" in table.stdout, explain(table)
    # while the traffic runs: one screen of the lab, and a capture on an SRX by the interface's vendor name
    inspected = as_json("inspect", name, "--json")
    nodes = {n["name"]: n for n in inspected["nodes"]}
    assert "_lab" not in nodes and set(nodes) == set(up["nodes"])
    assert all(n["bgp"]["established"] == n["bgp"]["sessions"] for n in nodes.values()), nodes
    ports = {p["vendor"]: p for p in nodes["srx1"]["interfaces"]}
    assert ports["ge-0/0/0"]["kernel"] == "ge-0-0-0" and ports["ge-0/0/0"]["peer"] in ("mx1", "mx2")
    assert "SRG" in nodes["srx1"]["roles"] and "SRD" in nodes["mx1"]["roles"], nodes["srx1"]
    assert abs(sum(m["share"] for m in inspected["members"]) - 1) < 0.01, inspected["members"]
    pcap = tmp_path / "srx1.pcap"
    captured = run_lab("capture", "srx1", "ge-0/0/0", "--lab", name, "-w", str(pcap), "-c", "5", "--duration", "10")
    assert captured.returncode == 0, explain(captured)
    assert pcap.read_bytes()[:4] == bytes.fromhex("d4c3b2a1"), "not a pcap file (little-endian, microseconds)"
    assert "Packets captured: 5" in captured.stderr, explain(captured)
    wrong = run_lab("capture", "srx1", "ge-0/0/7", "--lab", name)
    assert wrong.returncode == 2 and "ge-0/0/0 (ge-0-0-0)" in wrong.stderr, explain(wrong)
    no_neighbor = run_lab("show", "mx1", "--lab", name, "route", "advertising-protocol", "bgp")
    assert no_neighbor.returncode == 1 and "syntax error, expecting <neighbor>." in no_neighbor.stdout, \
        explain(no_neighbor)

    stopped = as_json("traffic", "stop", "--lab", name, "--json")
    assert set(stopped) == set(stats["daemons"])

    down = as_json("down", "--lab", name, "--json")
    assert [entry["name"] for entry in down["down"]] == [name]
    assert leftovers(facts) == []


def test_down_alone_takes_the_only_running_lab(owner: LabOwner, tmp_path: Path) -> None:
    """With one lab in its state folder, `lab down` needs no name; with none it says so."""
    topology = copy_lab(REPO / "labs" / "topology1.yml", "it-one", tmp_path)
    facts = owner.claim(topology)
    alone = {"LAB_STATE_ROOT": str(tmp_path / "state")}
    up = run_lab("up", str(topology), env=alone)
    assert up.returncode == 0, explain(up)
    waited = re.search(r"waiting for (\d+) BGP sessions", up.stderr)
    established = re.search(r"(\d+) BGP sessions established", up.stdout)
    assert waited and established and waited.group(1) == established.group(1), explain(up)  # one count
    down = run_lab("down", "--json", env=alone)
    assert down.returncode == 0, explain(down)
    assert [entry["name"] for entry in json.loads(down.stdout)["down"]] == [facts.name]
    assert leftovers(facts) == []
    again = run_lab("down", env=alone)  # safe to repeat
    assert again.returncode == 0 and "no lab is running" in again.stdout, explain(again)
