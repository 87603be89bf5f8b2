"""Pictures of a topology: Mermaid text, or Graphviz DOT rendered to SVG/PNG by `dot`.

A scale-out lab (MX and SRX nodes) is drawn in the columns every JVD figure uses, left to right:
client -> trust gateway -> MX (TRUST-VR) -> SRX -> MX (UNTRUST-VR) -> untrust gateway -> server.
An MX appears twice, once per routing instance, because its trust and untrust sides are separate
routing instances (namespaces) and traffic crosses an SRX between them. MNHA pairs and the SRD pair
are boxes (an ICL is a short dashed link inside its box); zones are link colours (trust green,
untrust red); interface names are SVG tooltips on each link (hover), so no label sits on another.
Other labs (FlexVPN) are drawn left to right with the same conventions.

`layout` (which node goes in which column, which box) is pure and unit-tested.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field

from .. import kinds as K
from ..model.diagnostics import LabError
from ..model.schema import Topology

_ZONE_STYLE = {"trust": 'color="#2e7d32"', "untrust": 'color="#c62828"', "icl": 'style=dashed, color="#555555"'}
COLUMNS = ("trust hosts", "trust gateways", "MX trust side", "SRX", "MX untrust side", "untrust gateways",
           "untrust hosts")


@dataclass
class Layout:
    """Where each drawn node goes: DOT id -> (label, column); boxes: title -> DOT ids; each link's ends."""

    nodes: dict[str, tuple[str, int, str]] = field(default_factory=dict)  # id -> (label, column, kind)
    boxes: dict[str, list[str]] = field(default_factory=dict)
    edges: list[tuple[str, str, str, str]] = field(default_factory=list)  # (id a, id b, zone, tooltip)
    scale_out: bool = False


def _ends(endpoint: str) -> tuple[str, str]:
    node, _, ifname = endpoint.partition(":")
    return node, ifname


def layout(topo: Topology) -> Layout:
    kinds = {name: node.kind for name, node in topo.nodes.items()}
    facts = {name: K.get(kind) for name, kind in kinds.items()}
    out = Layout(scale_out=any(k.load_balancer for k in facts.values()) and any(k.firewall for k in facts.values()))
    side: dict[str, str] = {}
    if out.scale_out:  # which side a gateway / host is on: the zone of its link to an MX, then its neighbours
        for link in topo.links:
            names = [_ends(e)[0] for e in link.endpoints]
            if link.zone in ("trust", "untrust"):
                for a in names:
                    for b in names:
                        if facts[a].load_balancer and not (facts[b].load_balancer or facts[b].firewall):
                            side.setdefault(b, link.zone)
        for _ in range(len(kinds)):
            for link in topo.links:
                names = [_ends(e)[0] for e in link.endpoints]
                known = [side[n] for n in names if n in side]
                for n in names:
                    if n not in side and known and facts[n].graph_column is not None:
                        side[n] = known[0]

    def column(name: str) -> int:
        if facts[name].firewall:
            return 3
        offset = 0 if side.get(name, "trust") == "trust" else 6
        return abs(offset - (facts[name].graph_column or 0))

    for name, kind in kinds.items():
        if out.scale_out and facts[name].load_balancer:
            out.nodes[f"{name}__trust"] = (f"{name}\nTRUST-VR", 2, kind)
            out.nodes[f"{name}__untrust"] = (f"{name}\nUNTRUST-VR", 4, kind)
        elif out.scale_out:
            out.nodes[name] = (f"{name}\n{kind}", column(name), kind)
        else:
            out.nodes[name] = (f"{name}\n{kind}", 0, kind)

    def node_id(name: str, zone: str | None) -> str:
        if out.scale_out and facts[name].load_balancer:
            return f"{name}__{'untrust' if zone == 'untrust' else 'trust'}"
        return name

    for link in topo.links:
        ends = [_ends(e) for e in link.endpoints]
        zone = link.zone or ""
        if len(ends) == 2:
            (a, ia), (b, ib) = ends
            tip = f"{a} {ia} - {b} {ib}" + (f" ({zone})" if zone else "")
            out.edges.append((node_id(a, link.zone), node_id(b, link.zone), zone, tip))
        else:  # a LAN: a small point every member connects to
            lan = f"lan{len(out.nodes)}"
            out.nodes[lan] = ("", 1, "lan")
            for n, ifname in ends:
                out.edges.append((node_id(n, link.zone), lan, zone, f"{n} {ifname}" + (f" ({zone})" if zone else "")))
    if not out.scale_out:  # columns by distance from the hosts (clients left)
        adjacent: dict[str, set[str]] = {n: set() for n in out.nodes}
        for a, b, _, _ in out.edges:
            adjacent[a].add(b)
            adjacent[b].add(a)
        frontier = [n for n, (_, _, kind) in out.nodes.items() if kind in K.KINDS and K.get(kind).end_host] \
            or list(out.nodes)[:1]
        depth = {n: 0 for n in frontier}
        while frontier:
            following = []
            for n in frontier:
                for m in sorted(adjacent[n]):
                    if m not in depth:
                        depth[m] = depth[n] + 1
                        following.append(m)
            frontier = following
        out.nodes = {n: (label, depth.get(n, 0), kind) for n, (label, _, kind) in out.nodes.items()}
    for index, pair in enumerate(topo.mnha, 1):
        out.boxes[f"MNHA pair {index} ({pair.mode.upper()})"] = list(pair.nodes)
    if topo.srd is not None and out.scale_out:
        out.boxes["SRD pair (TRUST-VR)"] = [f"{n}__trust" for n in topo.srd.nodes]
        out.boxes["SRD pair (UNTRUST-VR)"] = [f"{n}__untrust" for n in topo.srd.nodes]
    return out


def mermaid(topo: Topology) -> str:
    plan = layout(topo)
    lines = ["graph LR"]
    boxed = {n for members in plan.boxes.values() for n in members}
    for index, (title, members) in enumerate(plan.boxes.items()):
        lines.append(f'  subgraph box{index}["{title}"]')
        lines += [f'    {m.replace("-", "_")}["{plan.nodes[m][0].replace(chr(10), "<br/>")}"]' for m in members]
        lines.append("  end")
    for ident, (label, _, kind) in plan.nodes.items():
        if ident not in boxed:
            shown = label.replace("\n", "<br/>") if kind != "lan" else "LAN"
            lines.append(f'  {ident.replace("-", "_")}["{shown}"]')
    for a, b, zone, tip in plan.edges:
        label = tip.replace(f" ({zone})", "") if zone else tip
        lines.append(f'  {a.replace("-", "_")} ---|"{label}"| {b.replace("-", "_")}')
    return "\n".join(lines) + "\n"


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def dot(topo: Topology) -> str:
    plan = layout(topo)
    legend = ("links: green trust, red untrust, dashed ICL; " if plan.scale_out else "") + \
        "hover a link (SVG) for its interfaces"
    lines = [f"graph {_quote(topo.name)} {{", "  rankdir=LR; newrank=true; nodesep=0.25; ranksep=0.9;",
             f"  label={_quote((topo.description or topo.name) + chr(10) + legend)}; labelloc=t;",
             '  fontname="Helvetica"; fontsize=11;',
             '  node [fontname="Helvetica", fontsize=10, margin="0.08,0.04"];',
             '  edge [penwidth=1.2];']
    boxed = {n for members in plan.boxes.values() for n in members}

    def node_line(ident: str) -> str:
        label, _, kind = plan.nodes[ident]
        if kind == "lan":
            return f"  {_quote(ident)} [shape=point, width=0.12, tooltip=\"LAN\"];"
        return f"  {_quote(ident)} [shape={K.get(kind).graph_shape}, label={_quote(label)}, tooltip={_quote(label)}];"

    for index, (title, members) in enumerate(plan.boxes.items()):
        lines += [f"  subgraph cluster_{index} {{", f"    label={_quote(title)}; fontsize=9; style=rounded;",
                  '    color="#888888";']
        lines += ["  " + node_line(m) for m in members]
        lines.append("  }")
    for ident in plan.nodes:
        if ident not in boxed:
            lines.append(node_line(ident))
    for col in sorted({c for _, c, _ in plan.nodes.values()}):  # one rank per column, in the design's order
        members = [i for i, (_, c, _) in plan.nodes.items() if c == col]
        lines.append(f"  {{ rank=same; {' '.join(_quote(m) for m in members)} }}")
        for upper, lower in zip(members, members[1:], strict=False):  # keeps the topology's order in a column
            lines.append(f"  {_quote(lower)} -- {_quote(upper)} [style=invis];")
    for a, b, zone, tip in plan.edges:
        if plan.nodes[a][1] > plan.nodes[b][1]:  # DOT ranks an edge's tail left of its head: keep the columns
            a, b = b, a
        style = _ZONE_STYLE.get(zone, 'color="#666666"')
        lines.append(f"  {_quote(a)} -- {_quote(b)} [{style}, tooltip={_quote(tip)}, edgetooltip={_quote(tip)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def render_image(topo: Topology, fmt: str) -> bytes:
    if shutil.which("dot") is None:
        raise LabError("`dot` (Graphviz) is not installed: apt-get install -y graphviz, or use --format mermaid")
    result = subprocess.run(["dot", f"-T{fmt}"], input=dot(topo).encode(), capture_output=True)
    if result.returncode != 0:
        raise LabError(f"dot failed: {result.stderr.decode().strip()}")
    return result.stdout
