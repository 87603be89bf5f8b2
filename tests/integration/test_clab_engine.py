"""Exported labs in REAL containers: the node image in the Docker engine, deployed as containerlab
deploys an export (clab_engine.EngineLab: a test harness, not a backend).

topology1 (ECMP + CHASH) and topology3 (TLB): every container built by its node agent, BGP
Established, and `srx-power-off` run by the event runner under two-way UDP traffic through the MX
(CHASH / TLB) and the SRXs, the SRX powered off and on through its agent: the event passes (flows on
the other SRXs lose nothing, every flow recovers).

Needs root, dockerd (Debian's docker.io) and the node image (`make image`); skipped otherwise. The
engine is started if none answers (images/node/engine: --iptables=false --ip6tables=false
--ip-forward=false --ip-masq=false --bridge=none, so it changes nothing in the host's firewall or
forwarding) and stopped again; the host's nftables ruleset, legacy iptables tables and forwarding
sysctls are compared before and after.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from clab_engine import (
    AgentInjector,
    EngineLab,
    HarnessError,
    agent_status,
    docker,
    dockerd_installed,
    engine,
    firewall_state,
    image_present,
)

from lab_orchestrator.clab import export as clab_export
from lab_orchestrator.clab.backend import ContainerlabBackend, record_for
from lab_orchestrator.events import catalog as eventsmod
from lab_orchestrator.events import run as eventrun
from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod

REPO = Path(__file__).resolve().parents[2]
IMAGE = clab_export.DEFAULT_NODE_IMAGE

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root (containers, veths between their namespaces)"),
    pytest.mark.skipif(shutil.which("docker") is None or not dockerd_installed(),
                       reason="no Docker engine here (dockerd: `make image` installs docker.io and builds the image)"),
]


@pytest.fixture(scope="module")
def docker_engine() -> Iterator[None]:
    before = firewall_state()
    started = engine("start")
    try:
        if not image_present(IMAGE):
            pytest.skip(f"no {IMAGE} image in the Docker engine: build it with `make image`")
        built_from = docker("image", "inspect", "-f", '{{index .Config.Labels "lab.source-digest"}}', IMAGE).stdout
        if built_from.strip() != source_digest():
            pytest.skip(f"{IMAGE} was built from other sources than this checkout's: `make image` rebuilds it")
        yield
    finally:
        if started == "started":
            engine("stop")
    after = firewall_state()
    assert after == before, "the host's firewall or forwarding changed: " + ", ".join(
        k for k in before if before[k] != after.get(k))


def source_digest() -> str:
    return subprocess.run([str(REPO / "images" / "node" / "source-digest")], capture_output=True, text=True,
                          check=True).stdout.strip()


def _export(topology: str, name: str, folder: Path) -> tuple[planmod.LabPlan, EngineLab]:
    source = REPO / "labs" / f"{topology}.yml"
    text = source.read_text()
    original = next(line for line in text.splitlines() if line.startswith("name:"))
    renamed = folder / f"{name}.yml"
    renamed.write_text(text.replace(original, f"name: {name}", 1))
    plan = planmod.build(load_topology(renamed).topology, str(renamed))
    result = clab_export.export(plan)
    for rel, content in result.files.items():
        target = folder / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
    return plan, EngineLab(folder, result.topology_file)


@pytest.mark.parametrize(("topology", "name", "balancing"), [("topology1", "ce1", "ecmp-chash"),
                                                             ("topology3", "ce3", "tlb")])
def test_exported_lab_in_real_containers(docker_engine: None, tmp_path: Path, topology: str, name: str,
                                         balancing: str) -> None:
    plan, lab = _export(topology, name, tmp_path)
    assert plan.load_balancing == balancing
    backend = ContainerlabBackend()
    record = record_for(tmp_path / lab.topology_file)
    try:
        lab.deploy()
        try:
            backend.wait_ready(record, timeout=90)
        except Exception as exc:
            pytest.fail(f"{exc}\n{lab.logs()}")
        # every node built in its container, every BGP session of the plan Established
        protocols = {}
        for node in lab.nodes:
            status = agent_status(lab, node)
            assert status["phase"] == "ready", status
            protocols[node] = status["bgp"]
        sessions = {f"{s.node}:{s.protocol}": protocols[s.node].get(s.protocol, "missing") for s in plan.sessions}
        assert sessions and all(info.startswith("Established") for info in sessions.values()), sessions
        assert len(sessions) >= 2 * len([n for n in plan.nodes if n.kind == "srx"])
        instances = clab_engine_exec(lab, "mx1", "ip", "netns", "list")
        assert f"{name}-mx1-trust-vr" in instances and f"{name}-mx1-untrust-vr" in instances
        assert "default" not in clab_engine_exec(lab, "srx1", "ip", "route", "show", "dev", "eth0"), \
            "the agent removed Docker's default route through the management port"

        state = lab.expose(plan)
        event = eventsmod.BY_NAME["srx-power-off"]
        spec = eventrun.TrafficSpec(flows=100, rate=5000.0, warmup=2.0, hold=2.0, settle=3.0)
        injector = AgentInjector(backend, record).injector()
        result = eventrun.run_event(state, plan, event, "srx1", spec, injector=injector)
        summary = (f"{result.action}: passed={result.passed} recovered={result.recovered} "
                   f"affected={result.affected_flows} moved={result.flows_moved}/{result.flows_moved_ideal} "
                   f"unaffected lost={result.packets_lost_by_unaffected_flows} "
                   f"convergence={result.convergence_ms}")
        print(f"{topology} in containers: {summary}")
        assert result.passed and result.recovered, summary
        assert result.packets_lost_by_unaffected_flows == 0, summary
        srxs = {row.srx_before for row in result.per_flow if row.srx_before}
        assert len(srxs) >= 2, f"the load balancer spread the flows over {srxs} only"
        assert 0 < result.affected_flows < result.flows, summary
        assert agent_status(lab, "srx1")["phase"] == "ready"
    finally:
        lab.destroy()


def clab_engine_exec(lab: EngineLab, node: str, *argv: str) -> str:
    try:
        return docker("exec", lab.container(node), *argv).stdout
    except HarnessError as exc:
        pytest.fail(str(exc))
