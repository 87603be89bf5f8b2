"""What every `lab` command shares: the Typer app, the consoles, error printing and common options."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Callable
from enum import IntEnum, StrEnum
from pathlib import Path
from typing import Any, NoReturn

import typer
import typer.core
from rich.console import Console

from ..model.diagnostics import LabError, TopologyInvalid
from . import completion


def _flag_type(self: Any, ctx: Any) -> str | None:
    """A flag takes no value: --help shows no type for it (typer writes `<bool>`)."""
    return None if self.is_flag else _option_type(self, ctx)


_option_type = typer.core.TyperOption.display_type_rich
typer.core.TyperOption.display_type_rich = _flag_type  # type: ignore[method-assign]

app = typer.Typer(
    name="lab",
    help="Real-packet network emulation: Junos-like and IOS-like topologies in Linux network namespaces.\n\n"
    "A topology file (labs/*.yml, or a shipped lab by name: see `lab labs`) becomes a plan "
    "(namespaces, veths, addresses, configs, daemons); "
    "the netns backend applies it with real BGP (BIRD) and kernel forwarding.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion; node and lab names: completion.py
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class ExitCode(IntEnum):
    """The exit codes of every `lab` command (docs/cli.md)."""

    OK = 0
    FAILED = 1  # the command ran and its verdict is negative (lab not up in time, an event failed, ...)
    BAD_INPUT = 2  # bad input or usage: invalid topology, unknown option, unknown node, existing output file
    NOT_JUDGED = 3  # no verdict: a test's precondition failed (`lab events run`: a case is `error`, none failed)
    INTERNAL = 70  # a bug in lab (EX_SOFTWARE)


def _console(stderr: bool = False) -> Console:
    """Rich wraps and cuts table cells to the terminal width, and to 80 columns when the output is not a
    terminal: in CI logs and pipes nothing is cut (no width limit) unless COLUMNS asks for one."""
    stream = sys.stderr if stderr else sys.stdout
    wide = not stream.isatty() and not os.environ.get("COLUMNS")
    return Console(stderr=stderr, width=100_000 if wide else None)


out = _console()
err = _console(stderr=True)

TopologyArg = typer.Argument(..., exists=False, help="Topology file (e.g. labs/topology3.yml) or the name of a "
                                                     "shipped lab (e.g. topology3; see `lab labs`).",
                             autocompletion=completion.topology_names)
LabOption = typer.Option(None, "--lab", "-l", help="Lab name (needed when several run).",
                         autocompletion=completion.lab_names)


def LabArg(help: str = "Lab name, the same as --lab.") -> Any:  # noqa: N802 - reads like typer.Argument
    """A lab name given as the command's only positional argument (`lab status t3`)."""
    return typer.Argument(None, help=help, metavar="[LAB]", autocompletion=completion.lab_names)


def one_lab(positional: str | None, option: str | None) -> str | None:
    """The lab of a command that takes it as a positional name or --lab (both: they must agree)."""
    from ..model.diagnostics import BadInput

    if positional and option and positional != option:
        raise BadInput(f"two labs named: {positional} and --lab {option}; give one")
    return positional or option


def NodeArg(help: str, metavar: str | None = None) -> Any:  # noqa: N802 - reads like typer.Argument
    """A node of the running lab, completed from its plan."""
    return typer.Argument(..., help=help, metavar=metavar, autocompletion=completion.node_names)


class Backend(StrEnum):
    netns = "netns"
    containerlab = "containerlab"


BackendOption = typer.Option(Backend.netns, "--backend", "-b",
                             help="netns (this host's namespaces) or containerlab (one container per node; "
                                  "see docs/containerlab.md).")


def json_error(message: str, code: int, diagnostics: list[dict[str, object]] | None = None) -> NoReturn:
    """A failed command run with --json: one JSON object on stdout (what the automation reads), the exit
    code as without --json."""
    body: dict[str, object] = {"error": message, "exit_code": code}
    if diagnostics is not None:
        body["diagnostics"] = diagnostics
    sys.stdout.write(json.dumps(body) + "\n")
    sys.stdout.flush()
    raise typer.Exit(code)


def fail(message: str, code: int = ExitCode.FAILED, json_out: bool = False) -> NoReturn:
    if json_out:
        json_error(message, code)
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def guarded(fn: Callable[[], Any], json_out: bool = False) -> Any:
    """Every LabError is one clear sentence and an exit code, never a traceback (with JSON_OUT: a JSON
    object {"error", "exit_code"[, "diagnostics"]} on stdout)."""
    try:
        return fn()
    except TopologyInvalid as exc:
        print_invalid(exc, json_out)
    except LabError as exc:
        fail(str(exc), exc.exit_code, json_out)
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except Exception as exc:  # a bug: say so plainly; the traceback is one variable away
        if os.environ.get("LAB_DEBUG"):
            raise
        fail(f"internal error ({type(exc).__name__}: {exc}); this is a bug in lab — "
             f"rerun with LAB_DEBUG=1 for the traceback and report it", ExitCode.INTERNAL, json_out)


def print_invalid(exc: TopologyInvalid, json_out: bool = False) -> NoReturn:
    if json_out:
        json_error(f"{len(exc.diagnostics)} error(s) in the topology", exc.exit_code,
                   [d.to_json() for d in exc.diagnostics])
    for diag in exc.diagnostics:
        err.print(diag.render(), highlight=False, soft_wrap=True, markup=False)
    err.print(f"[red]{len(exc.diagnostics)} error(s)[/]")
    raise typer.Exit(exc.exit_code) from None


def write_file(path: Path, data: str | bytes) -> None:
    """Write an output file the user named; a path that cannot be written is bad input, not a bug."""
    from ..model.diagnostics import BadInput

    try:
        if isinstance(data, bytes):
            path.write_bytes(data)
        else:
            path.write_text(data)
    except OSError as exc:
        raise BadInput(f"cannot write {path}: {exc.strerror or exc}") from None


def print_json(data: object) -> None:
    """A command's --json result: plain JSON on stdout (no colour codes, whatever the terminal)."""
    sys.stdout.write(json.dumps(data, indent=2) + "\n")


JsonOption = typer.Option(False, "--json", help="Print the result as JSON (errors too: {\"error\", \"exit_code\"}).")


def progress_printer(started: float, quiet: bool = False) -> Callable[[str, str], None]:
    """Progress of a long step on stderr: seconds since start, step, detail."""

    def progress(step: str, detail: str) -> None:
        if not quiet:
            err.print(f"[dim]{time.monotonic() - started:6.2f}s[/] [cyan]{step:<11}[/] {detail}", highlight=False)

    return progress
