"""Looking into a running lab: redundancy, sessions, selector, ssh, exec."""

from __future__ import annotations

import sys
from typing import Any

import typer
from rich.table import Table

from .. import api
from ..diagnostics import BadInput, LabError
from .common import JsonOption, LabOption, NodeArg, app, guarded, out, print_json


@app.command()
def redundancy(
    lab: str | None = LabOption,
    json_out: bool = JsonOption,
) -> None:
    """Redundancy state: SRD mastership of the MX pair, MNHA roles of the SRX pairs."""

    def run() -> None:
        running = api.pick(lab)
        report: dict[str, Any] = running.redundancy()
        if json_out:
            print_json(report)
            return
        if report["srd"]:
            view = Table("MX", "role", "priority", "healthy", "signal route", "peer", "peer alive")
            for node, s in report["srd"].items():
                view.add_row(node, s["role"], str(s["priority"]), str(s["healthy"]),
                             f"{s['signal_route']['prefix']} {'installed' if s['signal_route']['installed'] else '-'}",
                             s["peer"], str(s["heartbeat"]["peer_alive"]))
            out.print(view)
            masters = [node for node, s in report["srd"].items() if s["role"] == "master"]
            if len(masters) > 1:
                out.print(f"[yellow]both MX are master ({', '.join(masters)}): they do not hear each other over "
                          "the inter-MX link. Juniper documents no split-brain protection for SRD and the lab "
                          "adds none: both advertise without prepend (docs/fidelity.md).[/yellow]")
        if report["mnha"]:
            view = Table("SRX", "peer", "mode", "SRG0", "signal route", "SRG1", "SRG2", "ICL", "peer alive",
                         "healthy")
            for node, s in report["mnha"].items():
                signal = s["srg0"].get("signal_route") or {}
                view.add_row(node, s["peer"], s["mode"], s["srg0"]["role"],
                             f"{signal.get('prefix', '-')} {'installed' if signal.get('installed') else '-'}",
                             s["srg1"]["role"], (s.get("srg2") or {}).get("role", "-"),
                             "up" if s["icl"]["up"] else "down", str(s["heartbeat"]["peer_alive"]), str(s["healthy"]))
            out.print(view)
        if not report["srd"] and not report["mnha"]:
            out.print(f"lab {running.name} has no SRD or MNHA pair")

    guarded(run, json_out)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def ssh(
    ctx: typer.Context,
    node: str = NodeArg("Node name, e.g. mx1 (mx, srx and ios-router nodes answer SSH); after `--`, one CLI "
                        "command to run instead of a session.", metavar="NODE [-- COMMAND...]"),
    lab: str | None = LabOption,
    user: str | None = typer.Option(None, "--user", "-u", help="Login (default: the topology's first user)."),
) -> None:
    """SSH into a node's Junos-like or IOS-like CLI with the OpenSSH client and the lab's ssh_config:
    `lab ssh mx1`, or one command: `lab ssh mx1 -- show route`. See docs/ssh-cli.md."""
    guarded(lambda: api.pick(lab).ssh(node, user, list(ctx.args)))


@app.command(name="exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def exec_(
    ctx: typer.Context,
    node: str = NodeArg("Node name, e.g. srx1; after `--`, the command to run in its namespace.",
                        metavar="NODE -- COMMAND..."),
    lab: str | None = LabOption,
    instance: str | None = typer.Option(None, "--instance", "-i",
                                           help="Routing instance of an mx, e.g. TRUST-VR."),
) -> None:
    """Run a command inside a node's namespace: `lab exec srx1 -- ip route`."""

    def run() -> None:
        command = list(ctx.args)
        if not command:
            raise LabError("give a command after --, e.g. `lab exec srx1 -- ip route`")
        api.pick(lab).exec(node, command, instance)

    guarded(run)


@app.command()
def sessions(
    node: str = NodeArg("An srx node."),
    lab: str | None = LabOption,
    json_out: bool = JsonOption,
) -> None:
    """An SRX's session table (conntrack in its namespace): like `show security flow session`."""

    def run() -> None:
        api.require_root()
        table = api.pick(lab).sessions(node)
        if json_out:
            print_json([s.to_json() for s in table])
            return
        view = Table("proto", "source", "destination", "translated source", "packets", "bytes", "timeout")
        for s in table:  # the SRX's own BGP sessions (port 179) are left out: not transit sessions
            view.add_row(s.protocol, f"{s.source}/{s.source_port}", f"{s.destination}/{s.destination_port}",
                         s.reply_destination if s.translated else "-", str(s.packets), str(s.bytes),
                         str(s.timeout))
        out.print(view)
        out.print(f"Total sessions: {len(table)}")

    guarded(run, json_out)


@app.command()
def selector(
    node: str = NodeArg("An mx node."),
    lab: str | None = LabOption,
    json_out: bool = JsonOption,
) -> None:
    """The MX load-balancing selector: each SRX's state and share of the hash buckets."""

    def run() -> None:
        status = api.pick(lab).selector(node)
        if json_out:
            print_json(status)
            return
        out.print(f"{node}: mode {status['mode']}, {status['buckets']} buckets, {status['changes']} changes")
        view = Table("SRX", "mark", "alive", "carrier", "BGP next hop", "buckets")
        for m in status["members"]:
            view.add_row(m["name"], str(m["mark"]), "yes" if m["alive"] else "[red]no[/]",
                         " ".join(f"{k}:{'up' if v else 'down'}" for k, v in m["carrier"].items()),
                         " ".join(f"{k}:{'yes' if v else 'no'}" for k, v in m["routed"].items()),
                         str(m["buckets"]))
        out.print(view)

    guarded(run, json_out)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def show(
    ctx: typer.Context,
    node: str = NodeArg("Node name, e.g. router1 (mx, srx and ios-router nodes have a CLI)."),
    lab: str | None = LabOption,
    user: str | None = typer.Option(None, "--user", "-u", help="CLI user (default: the topology's first user)."),
    json_out: bool = JsonOption,
) -> None:
    """One CLI command on a node without SSH, by the same code as `lab ssh` (Junos-like or IOS-like):
    `lab show router1 'show crypto ikev2 cluster'`, `lab show mx1 route` ("show" may be left out).
    Exit 1 when the node's CLI reports an error."""

    def run() -> None:
        words = [w for arg in ctx.args for w in arg.split()]
        if not words:
            raise BadInput("give the command, e.g. `lab show mx1 'show route'`")
        line = " ".join(words if words[0] == "show" else ["show", *words])
        text, status = api.pick(lab).cli(node, line, user)
        if json_out:
            print_json({"node": node, "command": line, "output": text, "status": status})
        else:
            sys.stdout.write(text)
        if status:
            raise typer.Exit(1)

    guarded(run, json_out)
