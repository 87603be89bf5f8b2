"""`services.selector`: the eBPF backend plans the same marks, rules and tables without the nft rule."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab_orchestrator.model.diagnostics import LabError
from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod
from lab_orchestrator.runtime import hostcheck

REPO = Path(__file__).resolve().parents[2]


def _lab(tmp_path: Path, source: str, selector: str | None) -> Path:
    text = (REPO / "labs" / source).read_text()
    if selector is not None:
        text = text.replace("\nservices:\n", f"\nservices:\n  selector: {selector}\n", 1)
    path = tmp_path / f"{selector}-{source}"
    path.write_text(text)
    return path


@pytest.mark.parametrize("source", ["topology1.yml", "topology3.yml", "topology1-cgnat.yml",
                                    "topology3-dualstack.yml"])
def test_ebpf_plans_the_same_kernel_side_minus_the_nft_selector(tmp_path: Path, source: str) -> None:
    plans = {}
    for selector in ("nftables", "ebpf"):
        loaded = load_topology(_lab(tmp_path, source, selector))
        plans[selector] = planmod.build(loaded.topology, source, "/run/lab")
    nft, ebpf = plans["nftables"], plans["ebpf"]
    selector_files = [f for f in nft.files if "/selector-" in f]
    assert selector_files, "the nftables lab has its selector rulesets"
    assert not [f for f in ebpf.files if "/selector-" in f]
    assert [r for r in nft.rulesets if r.file not in selector_files] == ebpf.rulesets, "the SRX rulesets stay"
    assert nft.rules == ebpf.rules and nft.routes == ebpf.routes, "same marks, policy rules and tables"
    configs = {name: json.loads(plan.files["nodes/mx1/mxlb.json"]) for name, plan in plans.items()}
    assert configs["nftables"]["backend"] == "nftables" and configs["ebpf"]["backend"] == "ebpf"
    assert {k: v for k, v in configs["nftables"].items() if k != "backend"} == \
        {k: v for k, v in configs["ebpf"].items() if k != "backend"}


def test_unknown_selector_is_a_located_error(tmp_path: Path) -> None:
    with pytest.raises(LabError) as exc:
        load_topology(_lab(tmp_path, "topology1.yml", "xdp"))
    assert "services.selector" in str(exc.value) and ":6:" in str(exc.value)


def test_kernel_refusing_the_program_refuses_the_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from dataplane.kernel import tcsel

    monkeypatch.setattr(tcsel, "probe", lambda: "this kernel refuses the eBPF selector program (bpf: no)")
    topo = load_topology(_lab(tmp_path, "topology1.yml", "ebpf")).topology
    with pytest.raises(LabError, match=r"services.selector: ebpf: this kernel refuses .* `services.selector: "
                                       r"nftables` \(the default\)"):
        hostcheck.require_selector(topo)
    hostcheck.require_selector(load_topology(_lab(tmp_path, "topology1.yml", None)).topology)  # nftables: no probe
