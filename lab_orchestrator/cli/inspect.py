"""Looking into a running lab: redundancy, sessions, selector, ssh, exec, show, inspect, capture."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from .. import api
from ..model.diagnostics import BadInput
from .common import JsonOption, LabArg, LabOption, NodeArg, app, err, guarded, one_lab, out, print_json


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
            raise BadInput("give a command after --, e.g. `lab exec srx1 -- ip route`")
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


@app.command("inspect")
def inspect_(
    name: str | None = LabArg("Lab name, the same as --lab (default: the only running lab)."),
    lab: str | None = LabOption,
    json_out: bool = JsonOption,
) -> None:
    """One screen of a running lab: each node's kind, state, roles (SRG, SRD, HSRP, CLB), management and
    loopback addresses, interfaces (vendor name, kernel name, address, peer), BGP sessions established
    and share of the MX selectors."""

    def run() -> None:
        from ..live import state as livestate

        report = livestate.inspect(api.pick(one_lab(name, lab)))
        if json_out:
            print_json(report)
            return
        colour = "green" if report["ready"] else "red"
        out.print(f"[bold]{report['lab']}[/] ({report['source']}) [{colour}]{report['status']}[/], "
                  f"{report['load_balancing']}, {report['use_case']}", highlight=False)
        view = Table("node", "kind", "state", "roles", "mgmt / loopback", "interfaces (kernel name) address",
                     "BGP", "share")
        for n in report["nodes"]:
            state = n["state"] or "-"
            state = state if state == "up" else f"[red]{state}[/]" if state == "failed" else f"[yellow]{state}[/]"
            loopbacks = "\n".join(f"lo0 {address}" + ("" if instance == "master" else f" ({instance})")
                                  for instance, address in n["loopbacks"].items())
            ports = "\n".join(f"{p['vendor']}" + (f" ({p['kernel']})" if p["kernel"] != p["vendor"] else "")
                              + (f" {p['address']}" if p["address"] else "")
                              + (f" -> {p['peer']}" if p["peer"] else "") for p in n["interfaces"])
            bgp = n["bgp"]
            share = f"{n['share']:.0%}" if n["share"] is not None else "-"
            view.add_row(n["name"], n["kind"], state, n["roles"] or "-",
                         "\n".join(x for x in (n["mgmt"], loopbacks) if x), ports or "-",
                         f"{bgp['established']}/{bgp['sessions']}" if bgp["sessions"] else "-", share)
        out.print(view)

    guarded(run, json_out)


@app.command()
def capture(
    node: str = NodeArg("Node name, e.g. srx1."),
    interface: str = typer.Argument(..., help="Interface by its vendor name (ge-0/0/1, ae0.100, "
                                              "GigabitEthernet0/1) or its kernel name (ge-0-0-1); "
                                              "`lab inspect` lists both."),
    lab: str | None = LabOption,
    write: str | None = typer.Option(None, "--out", "-o", "-w",
                                     help="Write a pcap file (`-` for stdout: `lab capture srx1 ge-0/0/0 -w - | "
                                          "wireshark -k -i -`); without it, one line per packet (tshark)."),
    count: int | None = typer.Option(None, "--count", "-c", min=1, help="Stop after this many packets."),
    seconds: float | None = typer.Option(None, "--duration", min=0.1, help="Stop after this many seconds."),
    bpf: str | None = typer.Option(None, "--filter", help="Capture filter (pcap syntax), e.g. 'udp port 4789'."),
) -> None:
    """Capture packets on a node's interface inside its namespace (Wireshark's dumpcap and tshark):
    `lab capture srx1 ge-0/0/0`, or to a file: `lab capture mx1 ge-0/1/1 -w mx1.pcap -c 1000`. Ctrl-C stops."""

    def run() -> None:
        running = api.pick(lab)
        port = running.capture_port(node, interface)
        if write not in (None, "-"):
            target = Path(write)
            if not target.parent.is_dir():
                raise BadInput(f"cannot write {target}: no folder {target.parent}")
        if write != "-":
            err.print(f"capturing on {node} {port.vendor} (kernel name {port.kernel}, namespace {port.ns})"
                      + (f" into {write}" if write else ""), highlight=False)
        running.capture(port, write, count, seconds, bpf)

    guarded(run)
