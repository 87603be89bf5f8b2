"""MNHA (SRG0 active/active and session sync) on topology3 and its CGNAT variant."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from running import LAB, REPO, SRX, RunningLab, lab

from lab_orchestrator.events import sessions

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(any(shutil.which(t) is None for t in ("bird", "conntrack", "conntrackd")),
                       reason="needs bird2, conntrack and conntrackd (make deps)"),
]

PEER = {"srx1": "srx2", "srx2": "srx1", "srx3": "srx4", "srx4": "srx3"}


class PushFlow:
    """A server-push UDP flow: the client sends one datagram, then only the server sends."""

    def __init__(self, running: RunningLab, client: str, port: int, seconds: float, rate: int = 200):
        self.running, self.client, self.port = running, client, port
        self.server = subprocess.Popen(
            [*LAB, "exec", "--lab", running.name, "server", "--", sys.executable, "-m", "dataplane.traffic.udpprobe",
             "push", "--bind", "203.0.113.9", "--port", str(port), "--rate", str(rate), "--seconds", str(seconds)],
            cwd=REPO, stdout=subprocess.PIPE, text=True)
        assert self.server.stdout is not None and "serving" in self.server.stdout.readline()
        self.puller = subprocess.Popen(
            [*LAB, "exec", "--lab", running.name, "client", "--", sys.executable, "-m", "dataplane.traffic.udpprobe",
             "pull", "--source", client, "--port", str(port + 1000), "--to", f"203.0.113.9:{port}",
             "--seconds", str(seconds)], cwd=REPO, stdout=subprocess.PIPE, text=True)

    def carrier(self) -> str:
        """The SRX whose session counts the pushed packets (its peer only holds the synced copy)."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            for srx in SRX:
                for s in sessions.read(self.running.ns(srx)):
                    if s.destination_port == self.port and s.packets > 20:
                        return srx
            time.sleep(0.1)
        raise AssertionError("no SRX carries the pushed flow")

    def result(self) -> dict[str, float]:
        out, _ = self.puller.communicate(timeout=60)
        self.server.wait(timeout=10)
        data: dict[str, float] = json.loads(out)
        return data


REAL_SERVICES = {"MNHA_SRX1", "MNHA_SRX3"}  # topology3's TLB: one real-service per pair


def deny_count(running: RunningLab, srx: str) -> int:
    text = running.exec(srx, "nft", "list", "chain", "inet", "srx", "forward")
    line = next(line for line in text.splitlines() if "default-policy deny-all" in line)
    return int(line.split("packets")[1].split()[0])


@pytest.fixture(scope="module")
def srg0(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningLab]:
    with RunningLab("mn3", REPO / "labs/topology3.yml", tmp_path_factory.mktemp("mnha")) as running:
        yield running


def test_sessions_are_synced_within_the_pair(srg0: RunningLab) -> None:
    assert srg0.probe(43000)["missing"] == []
    time.sleep(0.5)
    where = srg0.carriers_all(43000)
    for address, holders in where.items():
        assert len(holders) == 2 and PEER[holders[0]] == holders[1], f"{address} held by {holders}"


def test_server_push_flow_survives_power_off_of_its_srx(srg0: RunningLab) -> None:
    flow = PushFlow(srg0, "100.64.9.9", 7101, seconds=6)
    carrier = flow.carrier()
    peer = PEER[carrier]
    denied = deny_count(srg0, peer)
    lab("fail", "--lab", srg0.name, carrier, "srx-power-off")
    try:
        result = flow.result()
        assert deny_count(srg0, peer) == denied, "the peer's firewall dropped nothing: it had the session"
        assert result["received"] >= 0.97 * (result["highest_seq"] + 1)
        assert result["longest_gap_s"] < 0.5, f"the flow kept going: {result}"
        assert result["highest_seq"] > 6 * 200 * 0.9, "it flowed until the end"
    finally:
        lab("restore", "--lab", srg0.name, carrier)
        srg0.wait_members(REAL_SERVICES)


def test_pair_power_off_moves_only_its_flows(srg0: RunningLab) -> None:
    # Per real-service (the pair): only pair 1's flows change pair; pair 2's stay on pair 2 (on either
    # of its nodes: TLB may steer the pair's real-service to the other node, with the sessions synced).
    pair = {"srx1": 1, "srx2": 1, "srx3": 2, "srx4": 2}
    srg0.probe(43010)
    before = srg0.carriers(43010, pair)
    lab("fail", "--lab", srg0.name, "srx1", "mnha-pair-power-off")
    try:
        srg0.wait_members({"MNHA_SRX3"})
        assert srg0.probe(43011)["missing"] == []
        after = srg0.carriers(43011, pair)
        moved = {a for a in before if pair[before[a]] != pair[after[a]]}
        assert moved == {a for a in before if pair[before[a]] == 1}
    finally:
        lab("restore", "--lab", srg0.name, "srx1")
    srg0.wait_members(REAL_SERVICES)


def _heartbeat(running: RunningLab, srx: str) -> dict[str, object]:
    status = mnha_status(running, srx)
    beat = status["heartbeat"]
    assert isinstance(beat, dict)
    sync = status["sync"]
    assert isinstance(sync, dict)
    return {**beat, "cold_syncs": sync["cold_syncs"]}


def _wait_for(what: str, check: Callable[[], bool], timeout: float = 15.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {timeout} s: {what}")
        time.sleep(0.1)


def test_the_icl_is_routed_through_the_mx(srg0: RunningLab) -> None:
    """As the JVD: srx1 reaches srx2's lo0.0 over its ICL link to mx1, whose MNHA-VR (its master
    namespace) routes it; cutting srx1's links to mx1 (the JVD's ae1, ICL unit included) cuts the ICL,
    and the sessions are pushed again once it is back."""
    peer_ip = str(mnha_status(srg0, "srx1")["icl"]["peer_ip"])  # type: ignore[index]
    own_ip = str(mnha_status(srg0, "srx2")["icl"]["peer_ip"])  # type: ignore[index]
    assert "dev ge-0-0-4" in srg0.exec("srx1", "ip", "route", "get", peer_ip), "over the ICL link to mx1"
    assert "via" in srg0.exec("mx1", "ip", "route", "show", f"{own_ip}/32"), "mx1's MNHA-VR has srx1's lo0.0"
    _wait_for("srx2 hears srx1", lambda: bool(_heartbeat(srg0, "srx2")["peer_alive"]))
    pushes = int(str(_heartbeat(srg0, "srx2")["cold_syncs"]))
    lab("fail", "--lab", srg0.name, "srx1", "srx-link-failure")
    try:
        _wait_for("srx2 no longer hears srx1", lambda: not _heartbeat(srg0, "srx2")["peer_alive"])
    finally:
        lab("restore", "--lab", srg0.name, "srx1")
    _wait_for("srx2 hears srx1 again", lambda: bool(_heartbeat(srg0, "srx2")["peer_alive"]))
    _wait_for("srx2 pushed its sessions to srx1",
              lambda: int(str(_heartbeat(srg0, "srx2")["cold_syncs"])) > pushes)
    srg0.wait_members(REAL_SERVICES)


def test_without_sync_the_moved_flow_is_dropped(tmp_path: Path) -> None:
    source = (REPO / "labs/topology3.yml").read_text()
    source = source.replace("{nodes: [srx1, srx2]}", "{nodes: [srx1, srx2], sync: false}")
    source = source.replace("{nodes: [srx3, srx4]}", "{nodes: [srx3, srx4], sync: false}")
    assert source.count("sync: false") == 2
    file = tmp_path / "nosync.yml"
    file.write_text(source)
    with RunningLab("mn3x", file, tmp_path) as running:
        flow = PushFlow(running, "100.64.9.9", 7102, seconds=5)
        carrier = flow.carrier()
        peer = PEER[carrier]
        denied = deny_count(running, peer)
        lab("fail", "--lab", running.name, carrier, "srx-power-off")
        result = flow.result()
        assert deny_count(running, peer) > denied + 50, "the peer had no session and dropped the flow"
        assert result["received"] < 0.8 * (result["highest_seq"] + 1) or result["highest_seq"] < 5 * 200 * 0.8


def test_cgnat_binding_survives_failover(tmp_path: Path) -> None:
    with RunningLab("mn3n", REPO / "labs/topology3-cgnat.yml", tmp_path) as running:
        flow = PushFlow(running, "100.64.9.9", 7103, seconds=6)
        carrier = flow.carrier()
        binding = next(s for s in sessions.read(running.ns(carrier)) if s.destination_port == 7103)
        lab("fail", "--lab", running.name, carrier, "srx-power-off")
        result = flow.result()
        assert result["longest_gap_s"] < 0.5 and result["highest_seq"] > 6 * 200 * 0.9, result
        survivor = next(s for s in sessions.read(running.ns(PEER[carrier])) if s.destination_port == 7103)
        assert (survivor.reply_destination, survivor.source_port) == (binding.reply_destination, binding.source_port)
        assert survivor.packets > 100, "the peer carried the rest of the flow with the same NAT binding"


def mnha_status(running: RunningLab, srx: str) -> dict[str, object]:
    status: dict[str, object] = json.loads(Path(f"/run/lab/{running.name}/nodes/{srx}/mnha-status.json").read_text())
    return status


def srg1_role(running: RunningLab, srx: str) -> str:
    srg1 = mnha_status(running, srx)["srg1"]
    assert isinstance(srg1, dict)
    return str(srg1["role"])


def mx_default_nexthops(running: RunningLab) -> str:
    return lab("exec", "--lab", running.name, "mx1", "--instance", "TRUST-VR", "--", "ip", "route", "show",
               "default").stdout


def test_srg1_active_backup_failover_and_preemption(tmp_path: Path) -> None:
    import subprocess as sp

    text = sp.run([sys.executable, str(REPO / "bench/gen_topology.py"), "--name", "mn1", "--srx", "4", "--mnha"],
                  capture_output=True, text=True, check=True).stdout
    text = text.replace("{nodes: [srx1, srx2]}", "{nodes: [srx1, srx2], mode: srg1, srg1_active: srx1}")
    text = text.replace("{nodes: [srx3, srx4]}", "{nodes: [srx3, srx4], mode: srg1, srg1_active: srx3}")
    file = tmp_path / "mn1.yml"
    file.write_text(text)
    with RunningLab("mn1", file, tmp_path) as running:
        running.wait_members({"srx1", "srx3"})
        deadline = time.monotonic() + 15  # the election waits for the peer's heartbeats first
        while "init" in [srg1_role(running, s) for s in SRX] and time.monotonic() < deadline:
            time.sleep(0.1)
        assert [srg1_role(running, s) for s in SRX] == ["active", "backup", "active", "backup"]
        routes = mx_default_nexthops(running)
        assert routes.count("nexthop via") == 2, f"only the actives are ECMP next hops: {routes}"
        assert running.probe(43100)["missing"] == []
        assert set(running.carriers(43100).values()) == {"srx1", "srx3"}, "traffic only through the actives"

        flow = PushFlow(running, "100.64.9.9", 7104, seconds=6)
        carrier = flow.carrier()
        lab("fail", "--lab", running.name, carrier, "srx-power-off")
        deadline = time.monotonic() + 3
        while srg1_role(running, PEER[carrier]) != "active" and time.monotonic() < deadline:
            time.sleep(0.05)
        assert srg1_role(running, PEER[carrier]) == "active", "the backup took over"
        result = flow.result()
        assert result["highest_seq"] > 6 * 200 * 0.9 and result["received"] > 0.8 * (result["highest_seq"] + 1), \
            f"the established session survived the failover: {result}"
        running.wait_members({PEER[carrier], "srx3" if carrier in ("srx1", "srx2") else "srx1"})
        lab("restore", "--lab", running.name, carrier)
        deadline = time.monotonic() + 15
        while (srg1_role(running, carrier), srg1_role(running, PEER[carrier])) != ("active", "backup") \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        assert srg1_role(running, carrier) == "active" and srg1_role(running, PEER[carrier]) == "backup", "preempted"
