"""`lab traffic start|stop|stats`: background traffic on a running lab."""

from __future__ import annotations

import json
import sys

import typer

from .. import api
from .common import LabOption, app, guarded, out

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
    reverse: bool = typer.Option(True, "--reverse/--no-reverse", help="Also server -> client."),
) -> None:
    """Start UDP traffic client -> server (and back) in the background."""

    def run() -> None:
        api.require_root()
        started = api.pick(lab).traffic_start(flows, rate, sizes, duration, reverse)
        out.print(f"traffic started ({', '.join(started)}); `lab traffic stats` / `lab traffic stop`")

    guarded(run)


@traffic_app.command("stop")
def traffic_stop(lab: str | None = LabOption) -> None:
    """Stop the traffic and print each sender's and receiver's report (JSON)."""

    def run() -> None:
        api.require_root()
        sys.stdout.write(json.dumps(api.pick(lab).traffic_stop(), indent=2) + "\n")

    guarded(run)


@traffic_app.command("stats")
def traffic_stats(lab: str | None = LabOption) -> None:
    """Delivered packets/s per SRX now (MX counters) and whether the traffic daemons run (JSON)."""

    def run() -> None:
        api.require_root()
        sys.stdout.write(json.dumps(api.pick(lab).traffic_stats(), indent=2) + "\n")

    guarded(run)
