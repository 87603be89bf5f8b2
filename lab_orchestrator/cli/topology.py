"""Commands on a topology file, no root needed: validate, render, export, graph."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path

import typer

from .. import api
from ..model.diagnostics import BadInput, TopologyInvalid
from .common import JsonOption, TopologyArg, app, guarded, out, print_json, write_file


@app.command()
def validate(
    topology: Path = TopologyArg,
    json_out: bool = JsonOption,
    no_host_check: bool = typer.Option(False, "--no-host-check",
                                       help="Skip the check against this host's routes."),
) -> None:
    """Check a topology file: every error at once, as FILE:LINE: yaml.path: message (hint). Exit 2 if invalid."""

    def run() -> None:
        try:
            loaded = api.load(topology, check_host=not no_host_check)
        except TopologyInvalid as exc:
            if json_out:
                print_json({"valid": False, "errors": [d.to_json() for d in exc.diagnostics]})
                raise typer.Exit(2) from None
            raise
        topo = loaded.topology
        if json_out:
            print_json({"valid": True, "name": topo.name, "nodes": len(topo.nodes), "links": len(topo.links)})
        else:
            out.print(f"{topology}: valid ({len(topo.nodes)} nodes, {len(topo.links)} links, "
                      f"{topo.services.load_balancing}, {topo.services.use_case})")

    guarded(run, json_out)


@app.command()
def render(
    topology: Path = TopologyArg,
    out_dir: Path = typer.Option(..., "--out", "-o", help="Folder to write the plan and configs into (created "
                                                          "if missing; an existing file there is an error)."),
    json_out: bool = JsonOption,
) -> None:
    """Write the complete plan (plan.json) and every rendered config to a folder. No root needed."""

    def run() -> None:
        count = api.render(topology, out_dir)
        if json_out:
            print_json({"out": str(out_dir), "files": count})
        else:
            out.print(f"wrote {count} files to {out_dir}")

    guarded(run, json_out)


class ExportFormat(StrEnum):
    containerlab = "containerlab"


@app.command()
def export(
    topology: Path = TopologyArg,
    fmt: ExportFormat = typer.Option(ExportFormat.containerlab, "--format", "-f", help="Export format."),
    out_dir: Path = typer.Option(..., "--out", "-o", help="Folder to write the topology and node files into."),
    vendor: list[str] = typer.Option([], "--vendor", help="NODE=KIND: run NODE as a real vendor kind "
                                     "(juniper_vjunosrouter, juniper_vsrx, juniper_crpd, cisco_iol) with its "
                                     "rendered config as startup config. Repeatable."),
    image: list[str] = typer.Option([], "--image", help="KIND=IMAGE: the image of a kind (linux = the node "
                                    "image, default lab-node:latest; every vendor kind used needs one). Repeatable."),
    host2: str | None = typer.Option(None, "--host2", help="Comma-separated nodes for a second host: also writes "
                                     "LAB.host1.clab.yml and LAB.host2.clab.yml joined by vxlan links."),
    underlay: str | None = typer.Option(None, "--underlay", help="HOST1_IP,HOST2_IP: underlay addresses of the "
                                        "two hosts (vxlan remotes), with --host2."),
    json_out: bool = JsonOption,
) -> None:
    """Write the lab for containerlab: LAB.clab.yml, the files each node binds and lab-export.json.
    No root and no containerlab needed; deploy with `containerlab deploy -t DIR/LAB.clab.yml` or
    `lab up --backend containerlab DIR/LAB.clab.yml`."""
    from ..clab import export as clab_export

    def run() -> None:
        pair = None
        if underlay is not None:
            parts = [p.strip() for p in underlay.split(",")]
            if len(parts) != 2 or not all(parts):
                raise BadInput(f"--underlay takes two addresses, HOST1_IP,HOST2_IP; got '{underlay}'")
            pair = (parts[0], parts[1])
        options = clab_export.ExportOptions(
            vendor=clab_export.parse_assignments(vendor, "--vendor"),
            images=clab_export.parse_assignments(image, "--image"),
            host2=tuple(n.strip() for n in (host2 or "").split(",") if n.strip()),
            underlay=pair,
        )
        result = api.export(topology, out_dir, options)
        if json_out:
            print_json({"out": str(out_dir), "format": fmt.value, "files": len(result.files),
                        "topology_file": str(out_dir / result.topology_file),
                        "host_files": [str(out_dir / f) for f in result.host_files]})
            return
        extra = f" and {', '.join(result.host_files)}" if result.host_files else ""
        out.print(f"wrote {len(result.files)} files to {out_dir}: {result.topology_file}{extra} "
                  f"({fmt.value}; deploy: containerlab deploy -t {out_dir / result.topology_file})")

    guarded(run, json_out)


class GraphFormat(StrEnum):
    svg = "svg"
    png = "png"
    mermaid = "mermaid"
    dot = "dot"


@app.command()
def graph(
    topology: Path = TopologyArg,
    fmt_given: GraphFormat | None = typer.Option(None, "--format", "-f",
                                                 help="Output format (default: from the --out file's suffix, "
                                                      ".svg, .png or .dot; else mermaid)."),
    output: Path | None = typer.Option(None, "--out", "-o", help="File to write (default: stdout for text)."),
) -> None:
    """Draw the topology: Mermaid or DOT text, or SVG/PNG through Graphviz."""
    from ..report import graph as graphmod

    suffix = output.suffix.lstrip(".").lower() if output else ""
    fmt = fmt_given or (GraphFormat(suffix) if suffix in ("svg", "png", "dot") else GraphFormat.mermaid)

    def run() -> None:
        topo = api.load(topology, check_host=False).topology
        if fmt in (GraphFormat.mermaid, GraphFormat.dot):
            text = graphmod.mermaid(topo) if fmt == GraphFormat.mermaid else graphmod.dot(topo)
            if output:
                write_file(output, text)
            else:
                sys.stdout.write(text)
            return
        data = graphmod.render_image(topo, fmt.value)
        target = output or Path(f"{topo.name}.{fmt.value}")
        write_file(target, data)
        out.print(f"wrote {target}")

    guarded(run)
