"""`lab graph` draws every shipped lab in every format through the CLI (LAN links included)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner
from wheelkit import REPO

from lab_orchestrator.cli import app
from lab_orchestrator.model.validate import load_topology

LABS = REPO / "labs"
SHIPPED = sorted(LABS.glob("*.yml"))
MAGIC = {"svg": b"<svg", "png": b"\x89PNG\r\n\x1a\n"}


@pytest.mark.parametrize("fmt", ["mermaid", "dot", "svg", "png"])
@pytest.mark.parametrize("lab", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_graph_every_shipped_lab_every_format(lab: Path, fmt: str, tmp_path: Path) -> None:
    if fmt in MAGIC and shutil.which("dot") is None:
        pytest.skip("Graphviz `dot` is not installed (make deps installs it)")
    target = tmp_path / f"g.{fmt}"
    result = CliRunner().invoke(app, ["graph", str(lab), "--format", fmt, "--out", str(target)])
    assert result.exit_code == 0, result.output
    data = target.read_bytes()
    topo = load_topology(lab).topology
    if fmt in MAGIC:
        assert MAGIC[fmt] in data[:400]
        return
    text = data.decode()
    for name in topo.nodes:
        assert name in text, name
    if fmt == "mermaid":  # one edge per point-to-point link, one per LAN member
        lans = [link for link in topo.links if len(link.endpoints) > 2]
        members = sum(len(link.endpoints) for link in lans)
        assert text.count("---|") == len(topo.links) - len(lans) + members
    if fmt == "dot":  # Graphviz accepts it
        if shutil.which("dot") is None:
            pytest.skip("Graphviz `dot` is not installed")
        checked = subprocess.run(["dot", "-Tcanon"], input=text, capture_output=True, text=True, timeout=30)
        assert checked.returncode == 0, checked.stderr


def test_graph_of_a_shipped_lab_by_name_to_stdout() -> None:
    result = CliRunner().invoke(app, ["graph", "topology3", "--format", "mermaid"])
    assert result.exit_code == 0 and result.output.startswith("graph LR")
