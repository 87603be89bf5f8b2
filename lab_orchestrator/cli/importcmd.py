"""`lab import`: a topology file from device configurations, and a report of every statement."""

from __future__ import annotations

import re
from ipaddress import IPv4Network
from pathlib import Path

import typer

from .. import api
from ..model.diagnostics import BadInput, TopologyInvalid
from .common import JsonOption, app, guarded, out, print_json


def _lab_name(output: Path, given: str | None) -> str:
    if given:
        return given
    name = re.sub(r"[^a-z0-9-]+", "-", output.stem.lower()).strip("-")
    if not name or not name[0].isalpha():
        name = "imported"
    return name[:10].rstrip("-")


@app.command(name="import")
def import_(
    configs: list[Path] = typer.Argument(..., help="Configuration files: Junos (braces or set lines) or IOS; "
                                                   "one file per device."),
    output: Path = typer.Option(..., "--out", "-o", help="Topology file to write (an existing file is an "
                                                            "error unless --force)."),
    report_file: Path | None = typer.Option(None, "--report-out", help="Write the import report (every statement "
                                                                   "with file:line and what the lab does with it) "
                                                                   "to this file; else it is printed."),
    lab_name: str | None = typer.Option(None, "--lab-name", help="Name of the new lab (default: from the output "
                                                                 "file name)."),
    client_lan: str | None = typer.Option(None, "--client-lan", help="FlexVPN: the LAN of the added "
                                                                     "remote-access clients (default: from the "
                                                                     "gateways' routes)."),
    force: bool = typer.Option(False, "--force", help="Overwrite the output and report files."),
    json_out: bool = JsonOption,
) -> None:
    """Build a lab from device configurations: nodes, links (from shared subnets), BGP, MNHA, TLB, NAT;
    hosts the configurations imply are added. The report maps every statement (file:line) to emulated,
    approximated (how), ignored (why) or unsupported. The topology is checked as `lab validate` does."""

    def run() -> None:
        for path in configs:
            if not path.is_file():
                raise BadInput(f"{path}: no such configuration file")
        for target in (output, report_file):
            if target is not None and target.exists() and not force:
                raise BadInput(f"{target} exists (use --force to overwrite)")
        lan = None
        if client_lan:
            try:
                lan = IPv4Network(client_lan)
            except ValueError as exc:
                raise BadInput(f"--client-lan {client_lan}: {exc}") from None
        imported = api.import_configs(configs, _lab_name(output, lab_name), lan)  # ParseError: a located BadInput
        output.write_text(imported.yaml(), encoding="utf-8")
        if report_file is not None:
            report_file.write_text(imported.report_text(str(output)) + "\n", encoding="utf-8")
        errors: list[str] = []
        try:
            api.load(output, check_host=False)
        except TopologyInvalid as exc:
            errors = [d.render() for d in exc.diagnostics]
        if json_out:
            data = imported.report_json()
            data.update({"output": str(output), "valid": not errors, "errors": errors})
            print_json(data)
        else:
            if report_file is None:
                out.print(imported.report_text(str(output)), highlight=False, markup=False, soft_wrap=True)
            else:
                counts = imported.report_json()["counts"]
                out.print(f"wrote {output} ({len(imported.topology['nodes'])} nodes, "
                          f"{len(imported.topology['links'])} links) and {report_file}: "
                          + ", ".join(f"{v} {k}" for k, v in counts.items()), highlight=False)
            if errors:
                for line in errors:
                    out.print(line, highlight=False, markup=False, soft_wrap=True)
                out.print(f"{output}: {len(errors)} error(s): the lab cannot run it as imported", highlight=False)
            else:
                out.print(f"{output}: valid", highlight=False)
        if errors:
            raise typer.Exit(2)

    guarded(run, json_out)
