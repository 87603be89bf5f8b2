"""On real namespaces: SRD between two MX in topology2 (CHASH) and, as the option a user adds, topology4 (TLB;
the shipped topology4 runs both MXs without SRD, as the JVD)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from labtools import STATE_ROOT
from running import LAB, REPO, SRX, RunningLab, lab
from test_mnha import PEER, PushFlow

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(any(shutil.which(t) is None for t in ("bird", "conntrack", "conntrackd")),
                       reason="needs bird2, conntrack and conntrackd (make deps)"),
]


def roles(running: RunningLab) -> dict[str, str]:
    report = json.loads(lab("redundancy", "--lab", running.name, "--json").stdout)
    return {node: status["role"] for node, status in report["srd"].items()}


def wait_master(running: RunningLab, node: str, timeout: float = 8.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if roles(running).get(node) == "master":
            return
        time.sleep(0.1)
    raise AssertionError(f"{node} did not become master: {roles(running)}")


def gateway_next_hop_mx(running: RunningLab) -> str:
    """Which MX the trust gateway sends the default route to (by the next hop's interface)."""
    routes = lab("exec", "--lab", running.name, "gw-trust", "--", "ip", "route", "show", "default").stdout
    return "mx1" if "Gi0-1" in routes else "mx2" if "Gi0-2" in routes else routes


def advertised(running: RunningLab, node: str) -> tuple[int, list[str]]:
    """(local AS, route lines) of `show route advertising-protocol bgp GATEWAY` on NODE over SSH: what the
    MX sends the trust gateway."""
    sshd = json.loads((STATE_ROOT / running.name / "ssh" / "sshd.json").read_text())
    peer = next(p for n in sshd["nodes"] if n["name"] == node for p in n["peers"] if p["peer_node"] == "gw-trust")
    out = lab("ssh", "--lab", running.name, node, "--", "show", "route", "advertising-protocol", "bgp",
              peer["peer_address"]).stdout
    return int(peer["local_as"]), [line for line in out.splitlines() if line.startswith("* ")]


def wait_prepended(running: RunningLab, standby: str, master: str, timeout: float = 10.0) -> None:
    """The standby's advertisements carry its AS three times more than the eBGP one; the master's not."""
    deadline = time.monotonic() + timeout
    while True:  # BIRD is reconfigured a moment after the role change
        (s_as, s_lines), (m_as, m_lines) = advertised(running, standby), advertised(running, master)
        ok = bool(s_lines) and bool(m_lines) and \
            all(f"[{s_as}] {s_as} {s_as} {s_as} " in line for line in s_lines) and \
            all(f"[{m_as}] " in line and f"[{m_as}] {m_as} " not in line for line in m_lines)
        if ok:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"prepend not where expected: {standby}: {s_lines}; {master}: {m_lines}")
        time.sleep(0.5)


def same_pair(before: dict[str, str], after: dict[str, str]) -> list[str]:
    return [a for a in before if after.get(a) not in (before[a], PEER[before[a]])]


def with_srd(tmp_path: Path, name: str) -> Path:
    """The shipped lab NAME with SRD added as docs/topology.md says (the inter-MX link and `srd:`)."""
    text = (REPO / f"labs/{name}.yml").read_text()
    text = text.replace("\nmnha:\n", "\n  - {endpoints: [mx1:ge-0/0/9, mx2:ge-0/0/9], zone: icl}\n\nmnha:\n", 1)
    path = tmp_path / f"{name}-srd.yml"
    path.write_text(text + "\nsrd: {nodes: [mx1, mx2], master: mx1}\n")
    return path


@pytest.mark.parametrize("topology", ["topology2", "topology4"])
def test_switchover_moves_traffic_keeps_srx_and_sessions(topology: str, tmp_path: Path) -> None:
    source = REPO / f"labs/{topology}.yml" if topology == "topology2" else with_srd(tmp_path, topology)
    with RunningLab(f"sd{topology[-1]}", source, tmp_path) as running:
        wait_master(running, "mx1")
        assert roles(running) == {"mx1": "master", "mx2": "standby"}
        assert gateway_next_hop_mx(running) == "mx1"
        if topology == "topology2":  # what an engineer checks over SSH: the standby's prepend
            wait_prepended(running, "mx2", "mx1")
        # topology4 (with SRD added) balances with TLB over one real-service per MNHA pair
        running.wait_members(set(SRX) if topology == "topology2" else {"MNHA_SRX1", "MNHA_SRX3"})
        assert running.probe(44000)["missing"] == []
        before = running.carriers(44000)
        flow = PushFlow(running, "100.64.9.9", 7201, seconds=5)
        carrier = flow.carrier()
        lab("switchover", "--lab", running.name)
        wait_master(running, "mx2")
        deadline = time.monotonic() + 5
        while gateway_next_hop_mx(running) != "mx2" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert gateway_next_hop_mx(running) == "mx2", "the gateways now prefer mx2"
        result = flow.result()
        if topology == "topology2":
            wait_prepended(running, "mx1", "mx2")
        assert result["highest_seq"] > 5 * 200 * 0.9 and result["longest_gap_s"] < 1.0, \
            f"the session on {carrier} survived the switchover: {result}"
        assert running.probe(44001)["missing"] == []
        after = running.carriers(44001)
        assert same_pair(before, after) == [], "every flow on the same SRX pair as before"
        lab("switchover", "--lab", running.name)
        wait_master(running, "mx1")
        time.sleep(1.0)
        assert running.probe(44002)["missing"] == []
        assert same_pair(before, running.carriers(44002)) == [], "and back"


def test_monitored_link_failure_and_master_reboot(tmp_path: Path) -> None:
    with RunningLab("sd2b", REPO / "labs/topology2.yml", tmp_path) as running:
        wait_master(running, "mx1")
        running.wait_members(set(SRX))
        # The gateway-facing link of the master (a monitored link) goes down: automatic switchover.
        lab("exec", "--lab", running.name, "mx1", "--instance", "TRUST-VR", "--", "ip", "link", "set",
            "ge-0-0-0", "down")
        wait_master(running, "mx2")
        lab("exec", "--lab", running.name, "mx1", "--instance", "TRUST-VR", "--", "ip", "link", "set",
            "ge-0-0-0", "up")
        time.sleep(2)
        assert roles(running)["mx2"] == "master", "no preemption by default: mx2 keeps it"
        lab("switchover", "--lab", running.name)
        wait_master(running, "mx1")
        lab("fail", "--lab", running.name, "mx1", "mx-reboot", "--down-time", "1")
        wait_master(running, "mx2")
        time.sleep(3)
        assert roles(running) == {"mx1": "standby", "mx2": "master"}, "mx1 came back as standby (no preempt)"
        assert running.probe(44010)["missing"] == []
        # The ICL of each MNHA pair runs through both MXs' MNHA-VR: while mx1 is down, srx1 reaches
        # srx2's lo0.0 through mx2 and never stops hearing it.
        status = json.loads(Path(f"{STATE_ROOT}/{running.name}/nodes/srx1/mnha-status.json").read_text())
        peer_ip = status["icl"]["peer_ip"]
        reboot = subprocess.Popen([*LAB, "fail", "--lab", running.name, "mx1", "mx-reboot", "--down-time", "4"],
                                  cwd=REPO, stdout=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 10
            while "dev ge-0-0-5" not in running.exec("srx1", "ip", "route", "get", peer_ip):
                assert time.monotonic() < deadline, "srx1's route to srx2's lo0.0 did not move to mx2"
                time.sleep(0.1)
            while reboot.poll() is None:
                heard = json.loads(Path(f"{STATE_ROOT}/{running.name}/nodes/srx1/mnha-status.json").read_text())
                assert heard["heartbeat"]["peer_alive"], "srx1 lost srx2 while only mx1 was down"
                time.sleep(0.2)
        finally:
            assert reboot.wait(timeout=30) == 0
