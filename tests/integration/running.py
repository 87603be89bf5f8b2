"""A running lab driven as a user would (the `lab` CLI), with an echo server and a 1000-source probe.

Shared by the acceptance tests of the load-balancing issues: which SRX carried each flow is read
back from the SRXs' own session tables (conntrack).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from lab_orchestrator import api
from lab_orchestrator.events import sessions
from labkit.status import MxlbStatus, read_status

REPO = Path(__file__).resolve().parents[2]
LAB = [sys.executable, "-m", "lab_orchestrator.cli"]
FLOWS = 1000
SRX = ("srx1", "srx2", "srx3", "srx4")


def lab(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([*LAB, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise AssertionError(f"lab {' '.join(args)} failed: {result.stderr}")
    return result


class RunningLab:
    def __init__(self, name: str, source: Path, tmp: Path, **services: str):
        text = source.read_text().replace(f"name: {_name_of(source)}", f"name: {name}", 1)
        for key, value in services.items():
            if f"\n  {key}: " in text:
                text = text.replace(f"  {key}: ", f"  {key}: {value}  # was: ", 1)
            else:  # a services key the shipped file leaves at its default
                text = text.replace("\nservices:\n", f"\nservices:\n  {key}: {value}\n", 1)
        self.name = name
        self.file = tmp / f"{name}.yml"
        self.file.write_text(text)
        self.server: subprocess.Popen[str] | None = None
        self.echoes: list[subprocess.Popen[str]] = []
        self.lab: api.Lab | None = None

    def __enter__(self) -> RunningLab:
        lab("up", str(self.file))
        self.lab = api.pick(self.name)
        self.server = subprocess.Popen(
            [*LAB, "exec", "--lab", self.name, "server", "--", sys.executable, "-m", "dataplane.traffic.udpprobe",
             "serve", "--bind", "203.0.113.9", "--seconds", "180"], cwd=REPO,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.server.stdout is not None
        assert "serving" in self.server.stdout.readline(), "echo server did not start"
        return self

    def echo(self, bind: str, port: int, seconds: float = 170) -> None:
        """One more UDP echo server on the server node (e.g. on its IPv6 address), stopped with the lab."""
        proc = subprocess.Popen(
            [*LAB, "exec", "--lab", self.name, "server", "--", sys.executable, "-m", "dataplane.traffic.udpprobe",
             "serve", "--bind", bind, "--port", str(port), "--seconds", str(seconds)], cwd=REPO,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.echoes.append(proc)
        assert proc.stdout is not None
        assert "serving" in proc.stdout.readline(), f"echo server on {bind} did not start"

    def __exit__(self, *exc: object) -> None:
        for proc in [*self.echoes, *([self.server] if self.server else [])]:
            proc.terminate()
            proc.wait(5)
        lab("down", "--lab", self.name, check=False)

    @property
    def running(self) -> api.Lab:
        assert self.lab is not None, "the lab is not up"
        return self.lab

    def ns(self, node: str) -> str:
        return self.running.ns(node)

    def exec(self, node: str, *argv: str, check: bool = True) -> str:
        return lab("exec", "--lab", self.name, node, "--", *argv, check=check).stdout

    def probe(self, port: int, sources: str = "100.64.4.0/22") -> dict[str, object]:
        out = self.exec("client", sys.executable, "-m", "dataplane.traffic.udpprobe", "probe", "--sources", sources,
                        "--count", str(FLOWS), "--to", "203.0.113.9:7000", "--port", str(port))
        result: dict[str, object] = json.loads(out)
        return result

    def carriers(self, port: int, group: dict[str, int] | None = None) -> dict[str, str]:
        """Subscriber address -> the SRX whose session table holds its flow (source port PORT). With GROUP
        (SRX -> its MNHA pair), a flow that switched node within its pair (TLB steers a pair's real-service
        to either node; the sessions are synced) is allowed: the first node found is kept."""
        where: dict[str, str] = {}
        for srx in SRX:
            for s in sessions.read(self.ns(srx)):
                # packets == 0: a copy synchronised from the MNHA peer, not the SRX that carried it
                if s.protocol == "udp" and s.source_port == port and s.packets > 0:
                    if s.source in where and group and group[where[s.source]] == group[srx]:
                        continue
                    assert s.source not in where, f"{s.source} has a session on {where[s.source]} and {srx}"
                    where[s.source] = srx
        return where

    def flows_without_carrier(self, port: int) -> dict[str, list[tuple[str, int]]]:
        """Subscriber address -> (SRX, packets) of each session of a flow no SRX has counted a packet
        for (for a failure message: where its sessions are and what they counted)."""
        where: dict[str, list[tuple[str, int]]] = {}
        for srx in SRX:
            for s in sessions.read(self.ns(srx)):
                if s.protocol == "udp" and s.source_port == port:
                    where.setdefault(s.source, []).append((srx, s.packets))
        return {a: found for a, found in where.items() if not any(packets for _, packets in found)}

    def carriers_all(self, port: int) -> dict[str, list[str]]:
        """Subscriber address -> every SRX holding a session for it (MNHA peers hold synced copies)."""
        where: dict[str, list[str]] = {}
        for srx in SRX:
            for s in sessions.read(self.ns(srx)):
                if s.protocol == "udp" and s.source_port == port:
                    where.setdefault(s.source, []).append(srx)
        return where

    def selector(self) -> dict[str, object]:
        """mx1's selector status, read as the daemon's model (labkit.status.MxlbStatus)."""
        status = read_status(self.running.node_file("mx1", api.MXLB_STATUS), MxlbStatus)
        if status is None:
            raise FileNotFoundError("mx1's selector has not written its status yet")
        return status.to_dict()

    def selector_config(self) -> dict[str, object]:
        config: dict[str, object] = self.running.read_json("mx1", api.MXLB_CONFIG)
        return config

    def wait_members(self, alive: set[str], timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                members = self.selector()["members"]
            except (FileNotFoundError, ValueError):  # the daemon has not written its status yet
                time.sleep(0.1)
                continue
            assert isinstance(members, list)
            if {m["name"] for m in members if m["alive"] and m["buckets"]} == alive:
                return
            time.sleep(0.1)
        raise AssertionError(f"selector did not reach {sorted(alive)}: {self.selector()['members']}")


def _name_of(path: Path) -> str:
    for line in path.read_text().splitlines():
        if line.startswith("name:"):
            return line.split(":", 1)[1].strip()
    raise ValueError(path)


