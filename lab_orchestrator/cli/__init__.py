"""`lab`: validate, render, bring up, inspect and tear down emulated vendor topologies.

Printing and argument parsing only; everything a command does goes through `lab_orchestrator.api`.
One module per verb group registers its commands on the shared Typer app; the import order below is
the order of `lab --help`.
"""

from __future__ import annotations

# isort: off
from . import topology  # noqa: F401  validate, render, export, graph
from . import importcmd  # noqa: F401  import (a topology from device configurations)
from . import lifecycle  # noqa: F401  up, down, status, restart
from . import operate  # noqa: F401  fail, restore, switchover
from . import inspect  # noqa: F401  redundancy, sessions, selector, ssh, exec, show, inspect, capture
from . import events  # noqa: F401  events list|run
from . import report  # noqa: F401  report (a test plan)
from . import traffic  # noqa: F401  traffic start|stop|stats
from . import live  # noqa: F401  top, web
from . import meta  # noqa: F401  doctor, version, labs, completion
# isort: on
import json
import sys
from inspect import getdoc
from typing import NoReturn

import typer
import typer.main

from .common import app, err
from .grammar import rewrite_deprecated

__all__ = ["app", "main"]


def _one_line_summaries(group: typer.Typer) -> None:
    """Each command's summary in `lab --help` (its help's first paragraph) as one reflowed line: in rich
    mode typer keeps the docstring's own line breaks there, which cut the sentences of the listing."""
    for info in group.registered_commands:
        text = info.help or getdoc(info.callback) or ""
        if info.short_help is None and text:
            info.short_help = " ".join(text.split("\n\n")[0].split())
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            _one_line_summaries(sub.typer_instance)


_one_line_summaries(app)


def main(argv: list[str] | None = None) -> NoReturn:
    """The `lab` command. Like `app()`, and a usage error (unknown option, missing argument) of a command
    run with --json is a JSON object on stdout too; exit codes: common.ExitCode (docs/cli.md)."""
    args = sys.argv[1:] if argv is None else argv
    args, notes = rewrite_deprecated(args)
    for note in notes:
        err.print(f"[yellow]deprecated:[/] {note}", highlight=False, soft_wrap=True)
    wants_json = "--json" in (args[:args.index("--")] if "--" in args else args)
    command = typer.main.get_command(app)
    try:
        code = command.main(args, prog_name="lab", standalone_mode=False)
    except Exception as exc:
        if type(exc).__name__ == "Abort":  # Ctrl-C outside a command's own handling
            sys.stderr.write("Aborted.\n")
            sys.exit(130)
        if not (hasattr(exc, "exit_code") and hasattr(exc, "format_message")):
            raise
        # a usage error of click (which typer runs on): unknown option, missing argument, bad value
        exit_code = int(exc.exit_code)
        if wants_json:
            sys.stdout.write(json.dumps({"error": exc.format_message(), "exit_code": exit_code}) + "\n")
        else:
            exc.show()  # type: ignore[attr-defined]  # click's ClickException.show
        sys.exit(exit_code)
    sys.exit(code if isinstance(code, int) else 0)
