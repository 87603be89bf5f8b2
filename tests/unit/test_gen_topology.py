"""bench/gen_topology.py writes topologies the lab's own loader accepts, in each use case; its mixed
topology 3 is the shipped labs/topology3-mixed.yml."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from benchmod import load

from lab_orchestrator.model import usecase
from lab_orchestrator.model.schema import Topology
from lab_orchestrator.model.validate import load_topology

REPO = Path(__file__).resolve().parents[2]
gen = load("gen_topology")


def _load(tmp_path: Path, text: str) -> Topology:
    path = tmp_path / "gen.yml"
    path.write_text(text)
    return load_topology(path).topology


@pytest.mark.parametrize("use_case", ["sfw", "cgnat", "mixed"])
@pytest.mark.parametrize("shape", [
    {"n_srx": 2, "dual_mx": False, "mnha": False, "lb": "ecmp-chash"},
    {"n_srx": 4, "dual_mx": True, "mnha": True, "lb": "ecmp-chash"},
    {"n_srx": 4, "dual_mx": False, "mnha": True, "lb": "tlb"},
    {"n_srx": 4, "dual_mx": True, "mnha": True, "lb": "tlb"},
], ids=["t1", "t2", "t3", "t4"])
def test_every_use_case_gives_a_valid_topology(tmp_path: Path, use_case: str, shape: dict[str, Any]) -> None:
    text = gen.generate("g", "generated", use_case=use_case, **shape)
    topo = _load(tmp_path, text)
    assert topo.services.use_case == use_case
    if use_case == "mixed":
        assert [str(p) for p in usecase.nat_sources(topo)] == ["100.64.128.0/17"]
        assert [str(p) for p in usecase.sfw_prefixes(topo)] == ["100.64.0.0/17"]
    else:
        assert topo.services.nat_sources == [] and [str(p) for p in topo.nodes["client"].prefixes] == ["100.64.0.0/16"]


def test_mixed_topology_3_is_the_shipped_one(tmp_path: Path) -> None:
    shipped = load_topology(REPO / "labs" / "topology3-mixed.yml").topology
    made = _load(tmp_path, gen.generate(shipped.name, shipped.description, 4, False, True, "tlb", "mixed"))
    assert made.model_dump() == shipped.model_dump()


def test_command_line_offers_mixed_and_refuses_others() -> None:
    script = str(REPO / "bench" / "gen_topology.py")
    out = subprocess.run([sys.executable, script, "--name", "m", "--use-case", "mixed"], capture_output=True,
                         text=True, check=True).stdout
    assert "  use_case: mixed\n  nat_sources: [100.64.128.0/17]\n" in out
    bad = subprocess.run([sys.executable, script, "--name", "m", "--use-case", "nat64"], capture_output=True, text=True)
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
    with pytest.raises(ValueError, match="use case 'nat64'"):
        gen.generate("m", "d", 2, False, False, "ecmp", "nat64")
