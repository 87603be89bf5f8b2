"""About this host and this program: doctor, version."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from .. import __version__
from .common import app, guarded, out


@app.command()
def doctor(
    json_out: bool = typer.Option(False, "--json", help="Print the checks and features as JSON."),
    labs: Path = typer.Option(Path("labs"), "--labs", help="Folder of topology files to judge (which labs "
                                                          "use a feature that will not work)."),
) -> None:
    """Check this host for every kernel and tool feature the labs use (each kernel feature probed in a
    throwaway namespace), with a one-line fix for each failure and the labs/features that will not work.
    Exit 0 when every feature works, 1 otherwise."""
    from .. import doctor as doctormod

    def run() -> None:
        checks, features = doctormod.run(labs_dir=labs)
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
