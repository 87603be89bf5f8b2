"""Against one running lab (a copy of topology 1): `lab exec` and a second `lab up`."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator

import pytest
from labtools import (
    PlanFacts,
    assert_no_traceback,
    explain,
    flat,
    lab_exec,
    netns_names,
    run_lab,
    running_copy,
    status_of,
)

pytestmark = pytest.mark.root


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PlanFacts]:
    yield from running_copy(tmp_path_factory, "topology1.yml", "it-run")


def snapshot(name: str) -> dict[str, object]:
    report = status_of(name)
    return {
        "status": report["status"],
        "namespaces": report["namespaces_present"],
        "daemons": sorted((n["name"], d["name"], d["pid"], d["running"]) for n in report["nodes"]
                          for d in n["daemons"]),
        "bgp": sorted((n["name"], s["protocol"], s["info"].split()[0]) for n in report["nodes"]
                      for s in n["bgp"]),
    }


# --------------------------------------------------------------------------- (3) lab exec
def test_exec_in_routing_instance_sees_four_way_ecmp(lab: PlanFacts) -> None:
    result = lab_exec(lab.name, "mx1", "ip", "route", "show", "default", instance="TRUST-VR")
    assert result.returncode == 0, explain(result)
    nexthops = re.findall(r"^\s+nexthop via \S+ dev (ge-0-1-\d)", result.stdout, re.M)
    assert sorted(nexthops) == ["ge-0-1-1", "ge-0-1-2", "ge-0-1-3", "ge-0-1-4"], result.stdout


@pytest.mark.parametrize(("node", "instance"), [("client", None), ("mx1", None), ("mx1", "TRUST-VR"),
                                                ("mx1", "UNTRUST-VR"), ("srx3", None)])
def test_exec_enters_the_node_namespace(lab: PlanFacts, node: str, instance: str | None) -> None:
    namespace = f"{lab.name}-{node}" + (f"-{instance.lower()}" if instance else "")
    result = lab_exec(lab.name, node, "readlink", "/proc/self/ns/net", instance=instance)
    assert result.returncode == 0, explain(result)
    assert result.stdout.strip() == f"net:[{os.stat(f'/run/netns/{namespace}').st_ino}]"


@pytest.mark.parametrize("code", [0, 1, 7, 255])
def test_exec_exits_with_the_command_status(lab: PlanFacts, code: int) -> None:
    result = lab_exec(lab.name, "srx1", "sh", "-c", f"echo out; echo err >&2; exit {code}")
    assert result.returncode == code, explain(result)
    assert result.stdout == "out\n"
    assert result.stderr == "err\n"


def test_exec_failing_ping_returns_its_status(lab: PlanFacts) -> None:
    # No node of the lab owns 198.18.255.254 (end of the p2p pool): no reply, ping exits 1.
    # The packet never leaves the lab's namespaces.
    result = lab_exec(lab.name, "client", "ping", "-c", "1", "-W", "1", "198.18.255.254")
    assert result.returncode == 1, explain(result)


def test_exec_unknown_node_or_command_is_one_clear_error(lab: PlanFacts) -> None:
    # a node or instance the lab does not have is bad input (exit 2, with the closest name)
    result = lab_exec(lab.name, "mx9", "true")
    assert result.returncode == 2, explain(result)
    assert_no_traceback(result.stderr)
    assert "has no node/instance 'mx9'" in flat(result.stderr)
    result = lab_exec(lab.name, "srx1", "true", instance="TRUST-VR")
    assert result.returncode == 2 and "srx1/TRUST-VR" in flat(result.stderr), explain(result)
    # a command the node cannot run is the command's failure, not bad input to lab
    result = lab_exec(lab.name, "srx1", "no-such-command-xyz")
    assert result.returncode == 1, explain(result)
    assert_no_traceback(result.stderr)
    assert "command not found: no-such-command-xyz" in flat(result.stderr)


# --------------------------------------------------------------------------- (2d) second lab up
def test_second_up_is_refused_and_leaves_the_lab_alone(lab: PlanFacts) -> None:
    source = status_of(lab.name)["source"]
    before = snapshot(lab.name)
    assert before["status"] == "ready"

    result = run_lab("up", source)

    assert result.returncode == 1, explain(result)
    assert_no_traceback(result.stderr)
    assert f"lab {lab.name} is already up" in flat(result.stderr), explain(result)
    assert snapshot(lab.name) == before
    assert set(lab.namespaces) <= set(netns_names())
    ping = lab_exec(lab.name, "client", "ping", "-c", "2", "-i", "0.2", "-W", "1", "-I", "100.64.1.1",
                    "203.0.113.9")
    assert ping.returncode == 0, explain(ping)
