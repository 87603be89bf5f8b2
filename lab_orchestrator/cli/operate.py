"""Failure events by hand on a running lab: fail, restore, switchover."""

from __future__ import annotations

import typer

from .. import api
from .common import LabOption, app, guarded, out


@app.command()
def switchover(lab: str | None = LabOption) -> None:
    """SRD switchover between the two MX (`request services redundancy-set id 1 switchover`)."""

    def run() -> None:
        master = api.pick(lab).switchover()
        out.print(f"switchover requested on {master} (the master); `lab redundancy` shows the result")

    guarded(run)


@app.command()
def fail(
    node: str = typer.Argument(..., help="Target node (srx1, mx1...)."),
    event: str = typer.Argument(..., help="Event name from `lab events list`, e.g. srx-power-off."),
    lab: str | None = LabOption,
    peer: str | None = typer.Option(None, "--peer", help="srx-link-failure: the MX (default: the SRX's first)."),
    down_time: float = typer.Option(3.0, "--down-time", help="Reboot events: seconds the node stays down."),
    daemon: str | None = typer.Option(None, "--daemon", "-d",
                                      help="daemon-crash: the daemon to kill -9, as `lab status` names it "
                                           "(bird-trust-vr, mxlb, healthd, mnhad, conntrackd, srdd, flexvpn; "
                                           "node _lab: sshd). Default: the node's first daemon that is not BIRD."),
) -> None:
    """Inject one failure event by hand on a running lab; `lab restore NODE` undoes what lasts."""

    def run() -> None:
        api.require_root()
        out.print(api.pick(lab).fail(event, node, down_time=down_time, peer=peer, daemon=daemon))

    guarded(run)


@app.command()
def restore(
    node: str = typer.Argument(..., help="Node to restore."),
    lab: str | None = LabOption,
) -> None:
    """Undo lasting failure events on a node: power it on, bring its failed links back up."""

    def run() -> None:
        api.require_root()
        done = api.pick(lab).restore(node)
        out.print("; ".join(done) if done else f"nothing to restore on {node}")

    guarded(run)
