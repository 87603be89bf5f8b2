"""Failure events by hand on a running lab: fail, restore, switchover."""

from __future__ import annotations

import typer

from .. import api
from . import completion
from .common import JsonOption, LabOption, NodeArg, app, guarded, out, print_json


@app.command()
def switchover(lab: str | None = LabOption, json_out: bool = JsonOption) -> None:
    """SRD switchover between the two MX (`request services redundancy-set id 1 switchover`)."""

    def run() -> None:
        running = api.pick(lab)
        master = running.switchover()
        if json_out:
            print_json({"lab": running.name, "requested_on": master})
        else:
            out.print(f"switchover requested on {master} (the master); `lab redundancy` shows the result")

    guarded(run, json_out)


@app.command()
def fail(
    node: str = NodeArg("Target node (srx1, mx1...)."),
    event: str = typer.Argument(..., help="Event name from `lab events list`, e.g. srx-power-off.",
                                autocompletion=completion.event_names),
    lab: str | None = LabOption,
    peer: str | None = typer.Option(None, "--peer", help="srx-link-failure: the MX (default: the SRX's first)."),
    down_time: float = typer.Option(3.0, "--down-time", help="Reboot events: seconds the node stays down."),
    daemon: str | None = typer.Option(None, "--daemon", "-d",
                                      help="daemon-crash: the daemon to kill -9, as `lab status` names it "
                                           "(bird-trust-vr, mxlb, healthd, mnhad, conntrackd, srdd, flexvpn; "
                                           "node _lab: sshd). Default: the node's first daemon that is not BIRD."),
    json_out: bool = JsonOption,
) -> None:
    """Inject one failure event by hand on a running lab; `lab restore NODE` undoes what lasts."""

    def run() -> None:
        api.require_root()
        running = api.pick(lab)
        done = running.fail(event, node, down_time=down_time, peer=peer, daemon=daemon)
        if json_out:
            print_json({"lab": running.name, "event": event, "node": node, "done": done})
        else:
            out.print(done)

    guarded(run, json_out)


@app.command()
def restore(
    node: str = NodeArg("Node to restore."),
    lab: str | None = LabOption,
    no_wait: bool = typer.Option(False, "--no-wait", help="Return as soon as the node is restored, without "
                                 "waiting for the lab to be ready for traffic again."),
    timeout: float = typer.Option(30.0, "--timeout", metavar="<float>",
                                  help="Seconds to wait for the lab to be ready again (default 30)."),
    json_out: bool = JsonOption,
) -> None:
    """Undo lasting failure events on a node: power it on, bring its failed links back up; then wait
    until the lab is ready for traffic again (BGP re-established, routes back, every SRX in service
    in the selectors, MNHA pairs in step), as `lab up` does."""

    def run() -> None:
        api.require_root()
        running = api.pick(lab)
        done = running.restore(node, wait=not no_wait, timeout=timeout)
        if json_out:
            print_json({"lab": running.name, "node": node, "done": done})
        else:
            out.print("; ".join(done) if done else f"nothing to restore on {node}")

    guarded(run, json_out)
