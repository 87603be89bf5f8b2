"""TCP through the SRXs of topology3 (MNHA pairs, TLB): SYN check, and long-lived connections kept
across failures of the SRX carrying them (kernel TCP stacks in the client and server hosts)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

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
REAL_SERVICES = {"MNHA_SRX1", "MNHA_SRX3"}
SERVER = "203.0.113.9"


@pytest.fixture(scope="module")
def t3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningLab]:
    with RunningLab("tcp3", REPO / "labs/topology3.yml", tmp_path_factory.mktemp("tcp")) as running:
        yield running


class TcpServer:
    def __init__(self, running: RunningLab, port: int, seconds: float = 60):
        self.proc = subprocess.Popen(
            [*LAB, "exec", "--lab", running.name, "server", "--", sys.executable, "-m", "dataplane.traffic.tcpload",
             "serve", "--bind", SERVER, "--port", str(port), "--seconds", str(seconds)],
            cwd=REPO, stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout is not None and "serving" in self.proc.stdout.readline()

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


class LongLived:
    """tcpload's long-lived profile from the client host, in the background."""

    def __init__(self, running: RunningLab, port: int, count: int, seconds: float, sources: str,
                 timeout: float = 20, stall: float = 3):
        self.running, self.port = running, port
        self.proc = subprocess.Popen(
            [*LAB, "exec", "--lab", running.name, "client", "--", sys.executable, "-m", "dataplane.traffic.tcpload",
             "long", "--sources", sources, "--count", str(count), "--to", f"{SERVER}:{port}", "--interval", "0.1",
             "--seconds", str(seconds), "--timeout", str(timeout), "--stall", str(stall)],
            cwd=REPO, stdout=subprocess.PIPE, text=True)

    def carried(self) -> dict[str, int]:
        """SRX -> how many of these connections it has forwarded packets for."""
        return {srx: sum(1 for s in sessions.read(self.running.ns(srx))
                         if s.protocol == "tcp" and s.destination_port == self.port and s.packets > 0)
                for srx in SRX}

    def packets(self, srx: str) -> int:
        return sum(s.packets for s in sessions.read(self.running.ns(srx))
                   if s.protocol == "tcp" and s.destination_port == self.port)

    def wait_carried(self, count: int, timeout: float = 15) -> dict[str, int]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            carried = self.carried()
            if sum(carried.values()) >= count:
                return carried
            time.sleep(0.2)
        raise AssertionError(f"the SRXs carry {self.carried()} of {count} connections")

    def result(self) -> dict[str, Any]:
        out, _ = self.proc.communicate(timeout=120)
        data: dict[str, Any] = json.loads(out)
        return data


def counter(running: RunningLab, srx: str, comment: str) -> int:
    text = running.exec(srx, "nft", "list", "chain", "inet", "srx", "forward")
    line = next(line for line in text.splitlines() if f'comment "{comment}"' in line)
    return int(line.split("packets")[1].split()[0])


def test_mid_stream_segment_without_session_is_dropped(t3: RunningLab) -> None:
    server = TcpServer(t3, 8101)
    try:
        flow = LongLived(t3, 8101, count=8, seconds=12, sources="100.64.20.0/24", timeout=3, stall=2)
        flow.wait_carried(8)
        syn_check = {srx: counter(t3, srx, "tcp-session syn-check") for srx in SRX}
        for srx in SRX:  # the sessions vanish from both nodes of each pair
            t3.exec(srx, "conntrack", "-D", "-p", "tcp", "--dport", "8101", check=False)
        result = flow.result()
    finally:
        server.stop()
    # none answering at the end: timed out, or open but unanswered since (a run ending before its timeout)
    assert result["completed"] == result["silent_at_end"], f"a segment without a session opened one: {result}"
    assert result["reset"] == 0 and result["timed_out"] + result["silent_at_end"] == 8, result
    assert sum(counter(t3, srx, "tcp-session syn-check") - syn_check[srx] for srx in SRX) > 0
    assert not any(s.destination_port == 8101 for srx in SRX for s in sessions.read(t3.ns(srx))
                   if s.protocol == "tcp" and s.packets > 0), "no SRX opened a session for them"


def test_long_lived_connections_continue_on_the_peer_after_power_off(t3: RunningLab) -> None:
    server = TcpServer(t3, 8102)
    try:
        flow = LongLived(t3, 8102, count=40, seconds=14, sources="100.64.21.0/24")
        carried = flow.wait_carried(40)
        carrier = max(carried, key=lambda srx: carried[srx])
        peer = PEER[carrier]
        before = flow.packets(peer)
        lab("fail", "--lab", t3.name, carrier, "srx-power-off")
        try:
            result = flow.result()
            assert flow.packets(peer) > before, "the peer carried the connections on"
        finally:
            lab("restore", "--lab", t3.name, carrier)
            t3.wait_members(REAL_SERVICES)
    finally:
        server.stop()
    outcome = {k: result[k] for k in ("completed", "reset", "timed_out", "failed", "silent_at_end")}
    assert outcome == {"completed": 40, "reset": 0, "timed_out": 0, "failed": 0, "silent_at_end": 0}, result


def test_long_lived_connections_come_back_after_srx_link_failure(t3: RunningLab) -> None:
    # While the SRX's links are down its peer carries its connections; after the restore they come back
    # to it (an A node: the MX prefers it again), whose own copy of each session was not updated
    # meanwhile: it must still accept their segments.
    server = TcpServer(t3, 8103)
    try:
        flow = LongLived(t3, 8103, count=40, seconds=20, sources="100.64.22.0/24")
        carried = flow.wait_carried(40)
        carrier = max(("srx1", "srx3"), key=lambda srx: carried[srx])
        assert carried[carrier] > 0, carried
        lab("fail", "--lab", t3.name, carrier, "srx-link-failure")
        try:
            time.sleep(4)  # the failure lasts this long
        finally:
            lab("restore", "--lab", t3.name, carrier)
        dropped = counter(t3, carrier, "not a session")
        packets = flow.packets(carrier)
        deadline = time.monotonic() + 10
        while flow.packets(carrier) <= packets and time.monotonic() < deadline:
            time.sleep(0.2)
        came_back = flow.packets(carrier) > packets
        invalid = counter(t3, carrier, "not a session") - dropped
        result = flow.result()
        assert came_back, "the connections came back to the restored SRX"
        t3.wait_members(REAL_SERVICES)
    finally:
        server.stop()
    outcome = {k: result[k] for k in ("completed", "reset", "timed_out", "failed", "silent_at_end")}
    assert outcome == {"completed": 40, "reset": 0, "timed_out": 0, "failed": 0, "silent_at_end": 0}, \
        f"{result} (segments {carrier} dropped as no session after the restore: {invalid})"
