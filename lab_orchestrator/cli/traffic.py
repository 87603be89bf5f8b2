"""`lab traffic start|stop|stats`: background traffic on a running lab."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from .. import api
from .common import JsonOption, LabOption, app, guarded, out, print_json

REVERSE_HELP = "Also server -> client (CGNAT: to each flow's NAT binding, as the server sees it)."

traffic_app = typer.Typer(help="Traffic by hand on a running lab (the generator of `lab events run`).",
                          no_args_is_help=True)
app.add_typer(traffic_app, name="traffic")


@traffic_app.command("start")
def traffic_start(
    lab: str | None = LabOption,
    flows: int = typer.Option(100, "--flows", help="Flows per direction (distinct subscriber addresses)."),
    rate: float = typer.Option(5000, "--rate", help="Aggregate packets/s per direction."),
    sizes: str = typer.Option("imix", "--sizes", help="imix or a frame size."),
    duration: float = typer.Option(300, "--duration", help="Seconds before it stops by itself."),
    reverse: bool = typer.Option(True, "--reverse/--no-reverse", help=REVERSE_HELP),
    json_out: bool = JsonOption,
) -> None:
    """Start UDP traffic client -> server (and back) in the background."""

    def run() -> None:
        api.require_root()
        started = api.pick(lab).traffic_start(flows, rate, sizes, duration, reverse)
        if json_out:
            print_json({"started": started})
        else:
            out.print(f"traffic started ({', '.join(started)}); `lab traffic stats` / `lab traffic stop`")

    guarded(run, json_out)


def _scalars(report: Any) -> str:
    if not isinstance(report, dict):
        return str(report)
    return "  ".join(f"{k} {v}" for k, v in report.items() if isinstance(v, str | int | float | bool))


@traffic_app.command("stop")
def traffic_stop(lab: str | None = LabOption, json_out: bool = JsonOption) -> None:
    """Stop the traffic and print each sender's and receiver's report (a table; --json: the full reports)."""

    def run() -> None:
        api.require_root()
        reports = api.pick(lab).traffic_stop()
        if json_out:
            print_json(reports)
            return
        view = Table("process", "report")
        for name, report in reports.items():
            view.add_row(name, _scalars(report))
        out.print(view)

    guarded(run, json_out)


@traffic_app.command("stats")
def traffic_stats(lab: str | None = LabOption, json_out: bool = JsonOption) -> None:
    """Delivered packets/s per SRX now (MX counters) and whether the traffic daemons run."""

    def run() -> None:
        api.require_root()
        stats = api.pick(lab).traffic_stats()
        if json_out:
            print_json(stats)
            return
        view = Table("SRX", "delivered pps")
        for srx, pps in stats["pps_per_srx"].items():
            view.add_row(srx, str(pps))
        view.add_row("[bold]total[/]", f"[bold]{sum(stats['pps_per_srx'].values())}[/]")
        out.print(view)
        daemons = ", ".join(f"{name} {'running' if alive else '[red]stopped[/]'}"
                            for name, alive in stats["daemons"].items())
        out.print(f"traffic daemons: {daemons or 'none'}")

    guarded(run, json_out)
