"""The containerlab node agent on the real kernel, in STAND-IN containers (root).

No Docker and no containerlab here: each "container" is a process in a network namespace and a
private mount namespace of its own (a fresh tmpfs on /run/netns and /run/lab, as a container has its
own /run), running exactly the command the exported .clab.yml gives the node image:
`python3 -m lab_orchestrator.clab.agent run CONFIG`, with CONFIG the node's exported folder. The links
are then added the way containerlab adds them: one veth pair per exported link, each end created in
its container's namespace with the exported interface name. What this checks is the agent: that the
exported node slices, applied in separate namespaces, make the lab (BGP established, routes in,
client reaches server), and that power off / on through `clab_node power-off|power-on` works.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from lab_orchestrator.clab import export as clab_export
from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod
from labkit import netnsutil

REPO = Path(__file__).resolve().parents[2]
CONTAINER = ("mount --make-rprivate / && mkdir -p /run/netns /run/lab && mount -t tmpfs lab-netns /run/netns && "
             "mount -t tmpfs lab-run /run/lab && exec {python} -m lab_orchestrator.clab.agent run {config}")


class StandInContainers:
    def __init__(self, folder: Path):
        self.folder = folder
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self.inodes: set[int] = set()

    def start(self, node: str) -> None:
        config = self.folder / "nodes" / node / clab_export.NODE_CONFIG_FILE
        log = open(self.folder / f"{node}.agent.log", "wb")  # noqa: SIM115 - closed with the process
        self.procs[node] = subprocess.Popen(
            ["unshare", "--net", "--mount", "sh", "-c", CONTAINER.format(python=sys.executable, config=config)],
            stdout=log, stderr=subprocess.STDOUT, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)})

    def pid(self, node: str) -> int:
        return self.procs[node].pid

    def link(self, a: str, b: str, mtu: int) -> None:
        (na, ia), (nb, ib) = a.split(":"), b.split(":")
        subprocess.run(["ip", "link", "add", ia, "netns", str(self.pid(na)), "mtu", str(mtu), "type", "veth",
                        "peer", "name", ib, "netns", str(self.pid(nb)), "mtu", str(mtu)], check=True)

    def agent(self, node: str, *args: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
        config = self.folder / "nodes" / node / clab_export.NODE_CONFIG_FILE
        # -r: the container's root directory too (the one it was started in: differs from the mount
        # namespace's own root when the tests run in a chroot)
        return subprocess.run(["nsenter", "-t", str(self.pid(node)), "-n", "-m", "-r", "--wd=" + str(REPO),
                               sys.executable, "-m", "lab_orchestrator.clab.agent", *args, str(config)],
                              capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "PYTHONPATH": str(REPO)})

    def status(self, node: str) -> dict[str, object]:
        result = self.agent(node, "status")
        assert result.returncode == 0, result.stderr
        data: dict[str, object] = json.loads(result.stdout)
        return data

    def run(self, node: str, *argv: str) -> subprocess.CompletedProcess[str]:
        """ARGV in the container's network and mount namespaces (as `docker exec` would run it)."""
        return subprocess.run(["nsenter", "-t", str(self.pid(node)), "-n", "-m", "-r", *argv], capture_output=True,
                              text=True, timeout=10)

    def stop(self) -> None:
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                self.inodes.add(os.stat(f"/proc/{proc.pid}/ns/net").st_ino)
        for proc in self.procs.values():
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for pid in netnsutil.pids_in(self.inodes):  # anything an agent left behind
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name}\n{p.read_text(errors='replace')[-1500:]}"
                         for p in sorted(self.folder.glob("*.agent.log")))


@pytest.fixture
def t3(tmp_path: Path) -> Iterator[tuple[StandInContainers, dict[str, object]]]:
    plan = planmod.build(load_topology(REPO / "labs" / "topology3.yml").topology, "labs/topology3.yml")
    result = clab_export.export(plan)
    for rel, content in result.files.items():
        target = tmp_path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    topology = yaml.safe_load(result.files[result.topology_file])
    containers = StandInContainers(tmp_path)
    try:
        for node in topology["topology"]["nodes"]:
            containers.start(node)
        time.sleep(0.5)  # the agents adopt their namespaces, then wait for their interfaces
        for link in topology["topology"]["links"]:
            containers.link(*link["endpoints"], mtu=link["mtu"])
        yield containers, topology
    finally:
        containers.stop()


def _wait_ready(containers: StandInContainers, nodes: list[str], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    pending: list[str] = []
    while time.monotonic() < deadline:
        pending = []
        for node in nodes:
            status = containers.status(node)
            assert status["phase"] != "failed", f"{node}: {status['error']}\n{containers.logs()}"
            pending += [str(p) for p in status["pending"]]  # type: ignore[attr-defined]
        if not pending:
            return
        time.sleep(1.0)
    pytest.fail(f"not ready in {timeout:.0f} s: {pending[:6]}\n{containers.logs()}")


@pytest.mark.root
def test_exported_nodes_build_the_lab_in_stand_in_containers(
        t3: tuple[StandInContainers, dict[str, object]]) -> None:
    containers, topology = t3
    nodes = list(topology["topology"]["nodes"])  # type: ignore[index]
    _wait_ready(containers, nodes)
    instances = containers.run("mx1", "ip", "netns", "list").stdout
    assert "t3-mx1-trust-vr" in instances and "t3-mx1-untrust-vr" in instances
    routes = containers.run("mx1", "ip", "netns", "exec", "t3-mx1-trust-vr", "ip", "-o", "link", "show", "ge-0-0-0")
    assert "alias ge-0/0/0" in routes.stdout
    deadline = time.monotonic() + 20  # TLB: the MX steers once its health checks see the SRXs
    while True:
        ping = containers.run("client", "ping", "-c", "1", "-W", "1", "-I", "100.64.0.10", "203.0.113.10")
        if ping.returncode == 0 or time.monotonic() > deadline:
            break
    assert ping.returncode == 0, ping.stdout + ping.stderr + containers.logs()
    alias = containers.run("srx1", "ip", "-o", "link", "show", "ge-0-0-0")
    assert "alias ge-0/0/0" in alias.stdout

    off = containers.agent("srx1", "power-off")
    assert off.returncode == 0 and "srx1 powered off" in off.stdout, off.stdout + off.stderr
    assert containers.status("srx1")["phase"] == "powered-off"
    assert "state DOWN" in containers.run("srx1", "ip", "-o", "link", "show", "ge-0-0-0").stdout
    on = containers.agent("srx1", "power-on")
    assert on.returncode == 0, on.stdout + on.stderr
    _wait_ready(containers, ["srx1", "mx1"])
    down = containers.agent("srx2", "link", "ge-0/0/0", "down")
    assert down.returncode == 0 and "srx2 ge-0/0/0 down" in down.stdout
