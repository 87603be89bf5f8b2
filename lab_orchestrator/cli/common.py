"""What every `lab` command shares: the Typer app, the consoles, error printing and common options."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from enum import StrEnum
from typing import Any, NoReturn

import typer
from rich.console import Console

from ..diagnostics import LabError, TopologyInvalid

app = typer.Typer(
    name="lab",
    help="Real-packet network emulation: Junos-like and IOS-like topologies in Linux network namespaces.\n\n"
    "A topology file (labs/*.yml, or a shipped lab by name: see `lab labs`) becomes a plan\n"
    "(namespaces, veths, addresses, configs, daemons);\n"
    "the netns backend applies it with real BGP (BIRD) and kernel forwarding.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)

TopologyArg = typer.Argument(..., exists=False, help="Topology file (e.g. labs/topology3.yml) or the name of a "
                                                     "shipped lab (e.g. topology3; see `lab labs`).")
LabOption = typer.Option(None, "--lab", "-l", help="Lab name (needed when several run).")


class Backend(StrEnum):
    netns = "netns"
    containerlab = "containerlab"


BackendOption = typer.Option(Backend.netns, "--backend", "-b",
                             help="netns (this host's namespaces) or containerlab (one container per node; "
                                  "see docs/containerlab.md).")


def fail(message: str, code: int = 1) -> NoReturn:
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def guarded(fn: Callable[[], Any]) -> Any:
    """Every LabError is one clear sentence and an exit code, never a traceback."""
    try:
        return fn()
    except TopologyInvalid as exc:
        print_invalid(exc)
    except LabError as exc:
        fail(str(exc), exc.exit_code)
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except Exception as exc:  # a bug: say so plainly; the traceback is one variable away
        if os.environ.get("LAB_DEBUG"):
            raise
        fail(f"internal error ({type(exc).__name__}: {exc}); this is a bug in lab — "
             f"rerun with LAB_DEBUG=1 for the traceback and report it", 70)


def print_invalid(exc: TopologyInvalid) -> NoReturn:
    for diag in exc.diagnostics:
        err.print(diag.render(), highlight=False, soft_wrap=True, markup=False)
    err.print(f"[red]{len(exc.diagnostics)} error(s)[/]")
    raise typer.Exit(exc.exit_code) from None


def progress_printer(started: float, quiet: bool = False) -> Callable[[str, str], None]:
    """Progress of a long step on stderr: seconds since start, step, detail."""

    def progress(step: str, detail: str) -> None:
        if not quiet:
            err.print(f"[dim]{time.monotonic() - started:6.2f}s[/] [cyan]{step:<11}[/] {detail}", highlight=False)

    return progress
