"""Every shipped topology comes up with BGP established, forwards real packets, and goes down clean."""

from __future__ import annotations

import json
import re
from ipaddress import IPv4Network
from pathlib import Path

import pytest
import yaml
from labtools import (
    LABS,
    LabOwner,
    PlanFacts,
    assert_no_traceback,
    copy_lab,
    explain,
    flat,
    lab_exec,
    lab_name,
    leftovers,
    run_lab,
    status_of,
)

pytestmark = pytest.mark.root

# client -> gw-trust -> MX TRUST-VR -> SRX -> MX UNTRUST-VR -> gw-untrust -> server: five routers,
# so an echo reply that crossed an SRX arrives with TTL 64 - 5.
THROUGH_SRX_TTL = 59


def ping(name: str, node: str, target: str, source: str | None = None) -> str:
    argv = ["ping", "-c", "2", "-i", "0.2", "-W", "1"] + (["-I", source] if source else []) + [target]
    result = lab_exec(name, node, *argv)
    assert result.returncode == 0, f"{node} -> {target} in lab {name}: {explain(result)}"
    assert " 2 received" in result.stdout, result.stdout
    return result.stdout


def assert_ready(facts: PlanFacts) -> None:
    report = status_of(facts.name)
    assert report["status"] == "ready", report
    assert report["namespaces_present"] == report["namespaces_expected"] == len(facts.namespaces), report
    # lab-wide daemons (SSH server, health-check responder) are listed under a pseudo-node of their own
    assert [n["name"] for n in report["nodes"] if n["kind"] != "lab-wide"] == facts.nodes
    established = set()
    for node in report["nodes"]:
        daemons = {d["name"]: d["running"] for d in node["daemons"]}
        assert sorted(daemons) == sorted(facts.processes.get(node["name"], [])), node
        assert all(daemons.values()), f"{node['name']}: a daemon is not running: {node['daemons']}"
        for session in node["bgp"]:
            assert session["info"].startswith("Established"), f"{node['name']}: {session}"
            established.add((node["name"], session["protocol"]))
    assert established == facts.sessions
    # Lab-wide daemons (not under a node in `lab status`, e.g. the SSH front end) run too.
    state = json.loads((facts.state_dir / "state.json").read_text())
    assert sorted((p["node"], p["name"]) for p in state["processes"]) == sorted(
        (node, name) for node, names in facts.processes.items() for name in names)
    dead = [p for p in state["processes"] if proc_starttime(p["pid"]) != p["starttime"]]
    assert not dead, f"daemons not running: {dead}"


def _nat_sources(topology: Path) -> list[str]:
    services = yaml.safe_load(topology.read_text()).get("services") or {}
    return [str(p) for p in services.get("nat_sources", [])] if services.get("use_case") == "mixed" else []


def proc_starttime(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


@pytest.mark.parametrize("shipped", LABS, ids=[p.stem for p in LABS])
def test_lab_up_forwards_and_down_leaves_nothing(shipped: Path, owner: LabOwner, tmp_path: Path) -> None:
    # The shipped file as is, but named it-NAME with a management subnet of its own: other engineers
    # bring up the shipped labs under their own names on this machine meanwhile.
    topology = copy_lab(shipped, "it-" + lab_name(shipped), tmp_path)
    facts = owner.claim(topology)

    up = run_lab("up", str(topology))
    assert up.returncode == 0, explain(up)
    assert f"lab {facts.name} is up" in flat(up.stdout)
    assert_ready(facts)

    if {"client", "server"} <= set(facts.nodes):  # the JVD topologies (SFW and CGNAT)
        assert facts.sessions, "a JVD topology without BGP sessions"
        # a mixed lab (SFW and NAPT44 by source prefix): a client of its NAT prefix as well, translated
        sources = ["100.64.1.1"] + [str(next(IPv4Network(p).hosts())) for p in _nat_sources(shipped)]
        for source in sources:
            output = ping(facts.name, "client", "203.0.113.9", source=source)
            ttls = {int(t) for t in re.findall(r"ttl=(\d+)", output)}
            assert ttls == {THROUGH_SRX_TTL}, f"replies to {source} did not cross MX -> SRX -> MX: {output}"
    else:  # flexvpn: remote-access client across the WAN router to the cluster's LAN
        assert shipped.stem in ("flexvpn", "flexvpn-branch"), f"no traffic check for {shipped}"
        ping(facts.name, "client1", "10.10.10.3")
        ping(facts.name, "client1", "10.10.10.1")  # router1's Ethernet0/1

    down = run_lab("down", str(topology), timeout=60)
    assert down.returncode == 0, explain(down)
    assert_no_traceback(down.stderr)
    assert f"lab {facts.name} is down" in flat(down.stdout)
    assert leftovers(facts) == []
