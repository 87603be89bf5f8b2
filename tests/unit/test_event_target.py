"""The node an event hits when none is named: in an SRD lab, the MX events hit the current master."""

from __future__ import annotations

from pathlib import Path

from lab_orchestrator import api
from lab_orchestrator.api.running import Lab
from lab_orchestrator.runtime.state import LabState
from labkit.status import SrdHeartbeat, SrdSignalRoute, SrdStatus, write_status

REPO = Path(__file__).resolve().parents[2]


def lab_with_master(tmp_path: Path, master: str | None) -> Lab:
    plan = api.plan(REPO / "labs/topology2.yml", state_root=str(tmp_path))
    state = LabState(plan.name, plan.source, str(tmp_path), "ready", [], "", [], "", "")
    lab = Lab(state)
    lab._plan = plan
    for mx in ("mx1", "mx2"):
        (tmp_path / "nodes" / mx).mkdir(parents=True, exist_ok=True)
        role = "master" if mx == master else "standby"
        write_status(tmp_path / "nodes" / mx / "srd-status.json", SrdStatus(
            node=mx, peer="mx2" if mx == "mx1" else "mx1", pid=1, updated_at=0.0, role=role, priority=100,
            preempt=False, healthy=True, signal_route=SrdSignalRoute(prefix="198.18.255.1/32", installed=False),
            peer_role="unknown", heartbeat=SrdHeartbeat(sent=0, received=0, errors=0, peer_alive=False),
            resumed=None, transitions=[]))
    return lab


def test_mx_events_hit_the_srd_master(tmp_path: Path) -> None:
    lab = lab_with_master(tmp_path, "mx2")  # e.g. after mx1 rebooted: no preemption, mx2 stays master
    assert lab.event_target("restart-routing") == "mx2"
    assert lab.event_target("gres") == "mx2" and lab.event_target("mx-reboot") == "mx2"
    assert lab.event_target("restart-routing", "mx1") == "mx1", "a named target is kept"
    assert lab.event_target("srx-power-off") == "srx1"


def test_without_a_master_the_first_mx(tmp_path: Path) -> None:
    lab = lab_with_master(tmp_path, None)
    assert lab.event_target("restart-routing") == "mx1"
