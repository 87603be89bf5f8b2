"""A lab's life: up, down, status, restart (one daemon)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from .. import api
from . import completion
from .common import (
    Backend,
    BackendOption,
    JsonOption,
    LabArg,
    LabOption,
    NodeArg,
    TopologyArg,
    app,
    guarded,
    one_lab,
    out,
    print_json,
    progress_printer,
)

if TYPE_CHECKING:
    from ..runtime.status import DaemonStatus


def print_up(lab: api.Lab, seconds: float, json_out: bool) -> None:
    built = lab.plan()
    if json_out:
        print_json({"name": built.name, "status": lab.state.status, "seconds": round(seconds, 3),
                    "ready_for": lab.state.ready_for, "nodes": {n.name: n.mgmt_address for n in built.nodes}})
    else:
        waited = "; ".join(lab.state.ready_for) or "nothing to wait for"
        out.print(f"[green]lab {built.name} is up[/] in {seconds:.2f} s: {len(built.nodes)} nodes, ready for "
                  f"traffic ({waited}). Try `lab status` or `lab exec {built.nodes[0].name} -- ip route`.")


def print_down(name: str, seconds: float) -> None:
    out.print(f"lab {name} is down ({seconds:.2f} s)")


@app.command()
def up(
    topology: Path = TopologyArg,
    timeout: float | None = typer.Option(None, help="Seconds to wait for every BGP session and route "
                                                    "(default 30; 180 with --backend containerlab)."),
    json_out: bool = JsonOption,
    backend: Backend = BackendOption,
) -> None:
    """Bring a lab up: namespaces, links, addresses, daemons; exit 0 only once it is ready for
    traffic: BGP established, the expected routes in the kernel, every SRX in service in every
    selector table, MNHA pairs in step and synced, HSRP and the IKEv2 cluster elected (it says
    what it waited for). On any failure (or Ctrl-C) everything is removed.
    With --backend containerlab, TOPOLOGY may also be a .clab.yml written by `lab export`."""
    started = time.monotonic()
    progress = progress_printer(started, quiet=json_out)

    def run() -> None:
        lab = api.up(topology, timeout=api.UP_TIMEOUT if timeout is None else timeout, progress=progress)
        print_up(lab, time.monotonic() - started, json_out)

    def run_clab() -> None:
        record = api.up_containerlab(topology, api.CLAB_UP_TIMEOUT if timeout is None else timeout, progress)
        elapsed = time.monotonic() - started
        if json_out:
            print_json({"name": record.name, "backend": "containerlab", "status": record.status,
                        "seconds": round(elapsed, 3), "topology_file": record.topology_file,
                        "containers": record.containers})
        else:
            vendor = f" ({len(record.vendor)} vendor nodes not waited for)" if record.vendor else ""
            first = next(iter(record.containers))
            out.print(f"[green]lab {record.name} is up on containerlab[/] in {elapsed:.2f} s: "
                      f"{len(record.containers)} containers{vendor}. Try `docker exec {record.containers[first]} "
                      f"ip route`.")

    guarded(run_clab if backend == Backend.containerlab else run, json_out)


@app.command()
def down(
    topology: Path | None = typer.Argument(None, help="Topology file, shipped lab name or running lab name of "
                                                      "the lab to remove (default: the only running lab).",
                                           autocompletion=completion.topology_names),
    lab: str | None = typer.Option(None, "--lab", "-l", help="Lab name instead of a file.",
                                   autocompletion=completion.lab_names),
    all_labs: bool = typer.Option(False, "--all", help="Remove every running lab."),
    backend: Backend = BackendOption,
    json_out: bool = JsonOption,
) -> None:
    """Tear a lab down: daemons, namespaces, links, bridge, nft table and state. Safe to repeat."""
    removed: list[dict[str, object]] = []

    def report(lab_name: str, seconds: float) -> None:
        removed.append({"name": lab_name, "seconds": round(seconds, 3)})
        if not json_out:
            print_down(lab_name, seconds)

    def run() -> None:
        targets = api.down_targets(topology, lab, all_labs)
        if not targets and not json_out:
            out.print("no lab is running")
        for target in targets:
            report(target.name, target.down())
        if json_out:
            print_json({"down": removed})

    def run_clab() -> None:
        clab = api.containerlab()
        records = api.containerlab_targets(topology, lab, all_labs)
        if not records and not json_out:
            out.print("no containerlab lab is recorded")
        for record in records:
            report(record.name, api.down_containerlab(clab, record))
        if json_out:
            print_json({"down": removed, "backend": "containerlab"})

    guarded(run_clab if backend == Backend.containerlab else run, json_out)


@app.command()
def status(
    name: str | None = LabArg("Lab name, the same as --lab (default: every running lab)."),
    lab: str | None = LabOption,
    json_out: bool = JsonOption,
) -> None:
    """Running labs: nodes, namespaces, management addresses, daemons and BGP sessions."""
    from ..runtime import status as statusmod

    def run() -> None:
        running = api.labs(one_lab(name, lab))
        reports = [each.status() for each in running]
        if json_out:
            sys.stdout.write(statusmod.to_json(reports))
            return
        if not reports:
            out.print("no lab is running")
        for report in reports:
            colour = "green" if report.ready else "red"
            out.print(f"[bold]{report.name}[/] ({report.source}) [{colour}]{report.status}[/], management "
                      f"{report.mgmt_subnet}, namespaces {report.namespaces_present}/{report.namespaces_expected}")
            for problem in report.problems:
                out.print(f"  [red]not ready:[/] {problem}", highlight=False)
            table = Table("node", "kind", "mgmt", "namespaces", "daemons (restarts)", "BGP")
            for node in report.nodes:
                daemons = ", ".join(_daemon_cell(d) for d in node.daemons)
                est = sum(1 for s in node.bgp if s.info.startswith("Established"))
                bgp = f"{est}/{len(node.bgp)} established" if node.bgp else "-"
                if node.powered_off:
                    daemons, bgp = "[red]powered off[/]", "-"
                table.add_row(node.name, node.kind, node.mgmt_address.split("/")[0],
                              "\n".join(node.namespaces), daemons or "-", bgp)
            out.print(table)
            _session_sync(report.nodes)
            _ssh_logins(next(each for each in running if each.name == report.name))

    guarded(run, json_out)


def _session_sync(nodes: list[Any]) -> None:
    """One line per SRX with MNHA session sync: sessions held, synced to and received from the peer."""
    for node in nodes:
        sync = node.session_sync
        if not sync or node.powered_off:
            continue
        problems = sync.get("problems") or []
        state = f"[red]{'; '.join(problems)}[/]" if problems else "[green]ok[/]"
        out.print(f"  session sync {node.name}: {sync.get('sessions')} sessions, {sync.get('cache')} opened or "
                  f"carried here (synced to the peer), {sync.get('injected')} received, {sync.get('removed')} "
                  f"removed by the peer, {sync.get('resend_queue')} unacknowledged: {state}", highlight=False)


def _ssh_logins(lab: api.Lab) -> None:
    """The lab's SSH passwords (`lab ssh NODE` logs in with the lab's key of the user, no password)."""
    logins = lab.ssh_logins()
    if logins is None:
        out.print(f"  SSH passwords: in {lab.state_dir}/ssh/passwords.secret.json (readable by its owner only)",
                  highlight=False)
    elif logins:
        shown = ", ".join(f"{user} / {password}" for user, password in logins.items())
        out.print(f"  SSH logins (user / password): {shown}", highlight=False, markup=False)


def _daemon_cell(d: DaemonStatus) -> str:
    restarts = f" [yellow]{d.restarts} restarts[/]" if d.restarts else ""
    if d.running:
        return f"{d.name}({d.pid}){restarts}"
    if d.state == "backoff":
        return f"[red]{d.name} restarting in {d.restart_in_s:.1f} s[/]{restarts}"
    if d.state == "stopped":
        return f"[yellow]{d.name} stopped[/]{restarts}"
    return f"[red]{d.name} down[/]{restarts}"


@app.command()
def restart(
    node: str = NodeArg("Node whose daemon restarts, e.g. mx1."),
    process: str = typer.Argument(..., help="Process name as `lab status` lists it: bird, bird-trust-vr, mxlb..."),
    lab: str | None = LabOption,
    kill: bool = typer.Option(False, "--kill", help="SIGKILL instead of SIGTERM (a crash, not a stop)."),
    json_out: bool = JsonOption,
) -> None:
    """Restart one daemon of a node (the "restart routing / TLB process" events): stop it, start the
    same command again under the lab's supervisor. Forwarding state in the kernel is left alone."""

    def run() -> None:
        done = api.pick(lab).restart(node, process, kill=kill)
        if json_out:
            print_json({"node": done.node, "process": done.process, "old_pid": done.old_pid,
                        "new_pid": done.new_pid, "signal": "SIGKILL" if kill else "SIGTERM"})
        else:
            out.print(f"{node}/{process} restarted: pid {done.old_pid} -> {done.new_pid}")

    guarded(run, json_out)
