"""About this host and this program: doctor, version, the shipped labs, shell completion."""

from __future__ import annotations

import json
import sys
from enum import StrEnum
from pathlib import Path

import typer
from rich.table import Table

from .. import __version__, api
from ..model.diagnostics import LabError
from .common import app, guarded, out
from .completion import topology_names


@app.command()
def doctor(
    topology: Path | None = typer.Argument(None, help="Topology file or shipped lab name whose "
                                                      "services.max_sessions the kernel's conntrack limit must "
                                                      "hold (without one: the default max_sessions).",
                                           autocompletion=topology_names),
    json_out: bool = typer.Option(False, "--json", help="Print the checks and features as JSON."),
    labs: Path | None = typer.Option(None, "--labs", help="Folder of topology files to judge (which labs "
                                                          "use a feature that will not work); default: the "
                                                          "shipped labs."),
) -> None:
    """Check this host for every kernel and tool feature the labs use (each kernel feature probed in a
    throwaway namespace), with a one-line fix for each failure and the labs/features that will not work.
    With a topology, the kernel's conntrack limit is checked against that lab's session table. Exit 0 when
    every feature works, 1 otherwise."""
    from ..runtime import doctor as doctormod

    def run() -> None:
        from ..model.shipped import labs_dir

        need = doctormod.need_of(api.plan(topology, state_root=None)) if topology is not None else None
        checks, features = doctormod.run(labs_dir=labs or labs_dir(), need=need)
        if json_out:
            sys.stdout.write(json.dumps(doctormod.to_json(checks, features), indent=2) + "\n")
        else:
            for line in doctormod.lines(checks, features):
                style = "red" if line.startswith(("FAIL", "will not")) else "yellow" if line.startswith("--") else None
                out.print(f"[{style}]{line}[/]" if style and "[" not in line else line, highlight=False,
                          markup=bool(style and "[" not in line), soft_wrap=True)
        if not all(f.ok for f in features):
            raise typer.Exit(1)

    guarded(run)


@app.command()
def version() -> None:
    """Print the version."""
    out.print(__version__)


def _print_version(value: bool) -> None:
    if value:
        out.print(f"lab {__version__}", highlight=False)
        raise typer.Exit()


@app.callback()
def _root(
    _version: bool = typer.Option(False, "--version", "-V", callback=_print_version, is_eager=True,
                                  help="Print the version and exit."),
) -> None:
    """lab: the command's own options (the help text is the Typer app's)."""


@app.command("labs")
def labs_cmd(
    json_out: bool = typer.Option(False, "--json", help="Print the list as JSON."),
) -> None:
    """List the labs shipped with lab: `lab up NAME` (or validate/render/graph/export NAME) takes these
    names from any directory."""
    from ..model.shipped import shipped_labs

    def run() -> None:
        labs = shipped_labs()
        if json_out:
            sys.stdout.write(json.dumps([lab.__dict__ for lab in labs], indent=2) + "\n")
            return
        table = Table("shipped lab", "lab name", "nodes", "description", box=None, pad_edge=False)
        for lab in labs:
            table.add_row(lab.stem, lab.name, str(lab.nodes), lab.description)
        out.print(table)

    guarded(run)


class Shell(StrEnum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"
    powershell = "powershell"


@app.command()
def completion(shell: Shell = typer.Argument(..., help="The shell to write the completion script for.")) -> None:
    """Print the shell completion script (commands, options, running labs, their nodes, event names and
    shipped labs): `eval "$(lab completion bash)"` in ~/.bashrc, or save it where the shell looks, e.g.
    `lab completion bash > /etc/bash_completion.d/lab`. (`lab --install-completion` does that for the
    current shell.)"""

    def run() -> None:
        try:
            from typer._completion_shared import get_completion_script
        except ImportError:  # typer moved it: the built-in options still work
            raise LabError("this typer version has no completion script writer: use `lab --show-completion`") from None
        sys.stdout.write(get_completion_script(prog_name="lab", complete_var="_LAB_COMPLETE", shell=shell.value))

    guarded(run)
