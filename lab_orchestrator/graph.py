"""Pictures of a topology: Mermaid text, or Graphviz DOT rendered to SVG/PNG by `dot`."""

from __future__ import annotations

import shutil
import subprocess

from .diagnostics import LabError
from .model import Topology

_SHAPES = {"mx": "box3d", "srx": "octagon", "ios-router": "box", "host": "ellipse"}


def mermaid(topo: Topology) -> str:
    lines = ["graph LR"]
    for name, node in topo.nodes.items():
        ident = name.replace("-", "_")
        lines.append(f'  {ident}["{name}<br/>{node.kind}"]')
    for link in topo.links:
        (a, _, ia), (b, _, ib) = (e.partition(":") for e in link.endpoints)
        label = f"{ia} – {ib}" + (f" ({link.zone})" if link.zone else "")
        lines.append(f'  {a.replace("-", "_")} ---|"{label}"| {b.replace("-", "_")}')
    return "\n".join(lines) + "\n"


def dot(topo: Topology) -> str:
    lines = [f'graph "{topo.name}" {{', "  rankdir=LR;", '  node [fontname="Helvetica"];']
    for name, node in topo.nodes.items():
        lines.append(f'  "{name}" [shape={_SHAPES[node.kind]}, label="{name}\\n{node.kind}"];')
    for link in topo.links:
        (a, _, ia), (b, _, ib) = (e.partition(":") for e in link.endpoints)
        style = {"trust": "color=darkgreen", "untrust": "color=firebrick", "icl": "style=dashed"}.get(
            link.zone or "", "color=gray30")
        lines.append(f'  "{a}" -- "{b}" [taillabel="{ia}", headlabel="{ib}", fontsize=8, {style}];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_image(topo: Topology, fmt: str) -> bytes:
    if shutil.which("dot") is None:
        raise LabError("`dot` (Graphviz) is not installed: apt-get install -y graphviz, or use --format mermaid")
    result = subprocess.run(["dot", f"-T{fmt}"], input=dot(topo).encode(), capture_output=True)
    if result.returncode != 0:
        raise LabError(f"dot failed: {result.stderr.decode().strip()}")
    return result.stdout
