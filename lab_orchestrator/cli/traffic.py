"""`lab traffic start|stop|stats`: background traffic on a running lab."""

from __future__ import annotations

from typing import Any

import typer
from rich.table import Table

from .. import api
from ..model.ipfamily import check_spec as check_family
from ..model.ipfamily import name as family_name
from .common import JsonOption, LabOption, app, guarded, out, print_json

REVERSE_HELP = "Also server -> client (CGNAT: to each flow's NAT binding, as the server sees it)."

traffic_app = typer.Typer(help="Traffic by hand on a running lab (the generator of `lab events run`).",
                          no_args_is_help=True)
app.add_typer(traffic_app, name="traffic")


FAMILY_HELP = ("IP families of the flows: 4, 6, 64 (NAT64: IPv6 clients reaching the IPv4 server), both (4 and 6) "
               "or all (default: every family of the lab). The flows and the rate are shared between the families, "
               "side by side, as `lab events run` sends them.")


@traffic_app.command("start")
def traffic_start(
    lab: str | None = LabOption,
    flows: int = typer.Option(100, "--flows", help="Flows per direction (distinct subscriber addresses), "
                              "all families together."),
    rate: float = typer.Option(5000, "--rate", help="Aggregate packets/s per direction, all families together."),
    sizes: str = typer.Option("imix", "--sizes", help="imix or a frame size."),
    duration: float = typer.Option(300, "--duration", help="Seconds the senders send before they stop by "
                                   "themselves (the receivers stop 13 s later, or at `lab traffic stop`)."),
    reverse: bool = typer.Option(True, "--reverse/--no-reverse", help=REVERSE_HELP),
    family: str | None = typer.Option(None, "--family", help=FAMILY_HELP),
    json_out: bool = JsonOption,
) -> None:
    """Start UDP traffic client -> server (and back) in the background. On a dual-stack lab IPv4 and
    IPv6 flows run side by side, and NAT64 ones on a lab with NAT64 (the processes named `...-ipv6`,
    `...-nat64`; --json gives each one's family)."""

    def run() -> None:
        check_family(family)
        api.require_root()
        started = api.pick(lab).traffic_start(flows, rate, sizes, duration, reverse, family)
        if json_out:
            print_json(started)
        else:
            out.print(f"traffic started: {started_line(started)}; `lab traffic stats` / `lab traffic stop`",
                      highlight=False, soft_wrap=True)

    guarded(run, json_out)


def started_line(started: dict[str, Any]) -> str:
    """Each family's flows and rate per direction and its processes, from `traffic_start`'s answer."""
    parts = []
    for fam in started["families"]:
        procs = [p for p in started["processes"] if p["family"] == fam]
        sender = next(p for p in procs if p["role"] == "send")
        parts.append(f"{family_name(fam)} {sender['flows']} flows x {sender['rate_pps']:g} pps per direction "
                     f"({', '.join(p['name'] for p in procs)})")
    return "; ".join(parts)


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
        view = Table("process", "family", "report")
        for name, report in reports.items():
            view.add_row(name, family_name(report.get('family', 4)),
                         _scalars({k: v for k, v in report.items() if k != "family"}))
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
