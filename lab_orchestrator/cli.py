"""`lab`: validate, render, bring up, inspect and tear down emulated vendor topologies."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from . import __version__, hostcheck, netnsutil
from .diagnostics import LabError, TopologyInvalid
from .state import STATE_ROOT, LabState, running_labs, state_dir

if TYPE_CHECKING:  # the model (pydantic) and templates load only for commands that read a topology
    from .plan import LabPlan
    from .validate import LoadedTopology

app = typer.Typer(
    name="lab",
    help="Real-packet network emulation: Junos-like and IOS-like topologies in Linux network namespaces.\n\n"
    "A topology file (labs/*.yml) becomes a plan (namespaces, veths, addresses, configs, daemons);\n"
    "the netns backend applies it with real BGP (BIRD) and kernel forwarding.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
out = Console()
err = Console(stderr=True)

TopologyArg = typer.Argument(..., exists=False, help="Topology file, e.g. labs/topology3.yml.")


class Backend(StrEnum):
    netns = "netns"
    containerlab = "containerlab"


BackendOption = typer.Option(Backend.netns, "--backend", "-b",
                             help="netns (this host's namespaces) or containerlab (one container per node; "
                                  "see docs/containerlab.md).")


def _fail(message: str, code: int = 1) -> NoReturn:
    err.print(f"[bold red]error:[/] {message}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _guarded(fn: Callable[[], Any]) -> Any:
    """Every LabError is one clear sentence and an exit code, never a traceback."""
    try:
        return fn()
    except TopologyInvalid as exc:
        _print_invalid(exc)
    except LabError as exc:
        _fail(str(exc), exc.exit_code)
    except (typer.Exit, typer.Abort, KeyboardInterrupt):
        raise
    except Exception as exc:  # a bug: say so plainly; the traceback is one variable away
        if os.environ.get("LAB_DEBUG"):
            raise
        _fail(f"internal error ({type(exc).__name__}: {exc}); this is a bug in lab — "
              f"rerun with LAB_DEBUG=1 for the traceback and report it", 70)


def _print_invalid(exc: TopologyInvalid) -> NoReturn:
    for diag in exc.diagnostics:
        err.print(diag.render(), highlight=False, soft_wrap=True, markup=False)
    err.print(f"[red]{len(exc.diagnostics)} error(s)[/]")
    raise typer.Exit(exc.exit_code) from None


def _load(path: Path, check_host: bool = True) -> LoadedTopology:
    routes = []
    if check_host:
        try:
            lab_name = _peek_name(path)
            own = tuple(s.bridge for s in running_labs() if s.name == lab_name)
            routes = hostcheck.root_routes(own)
        except (OSError, ImportError):
            routes = []
    from .validate import load_topology

    return load_topology(path, routes)


def _peek_name(path: Path) -> str | None:
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(path.read_text(), Loader=loader)  # noqa: S506 - a safe loader
        return str(data.get("name")) if isinstance(data, dict) else None
    except (OSError, yaml.YAMLError):
        return None


@app.command()
def validate(
    topology: Path = TopologyArg,
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    no_host_check: bool = typer.Option(False, "--no-host-check",
                                       help="Skip the check against this host's routes."),
) -> None:
    """Check a topology file: every error at once, as FILE:LINE: yaml.path: message (hint). Exit 2 if invalid."""

    def run() -> None:
        try:
            loaded = _load(topology, check_host=not no_host_check)
        except TopologyInvalid as exc:
            if json_out:
                out.print_json(json.dumps({"valid": False, "errors": [d.to_json() for d in exc.diagnostics]}))
                raise typer.Exit(2) from None
            raise
        topo = loaded.topology
        if json_out:
            out.print_json(json.dumps({"valid": True, "name": topo.name, "nodes": len(topo.nodes),
                                       "links": len(topo.links)}))
        else:
            out.print(f"{topology}: valid ({len(topo.nodes)} nodes, {len(topo.links)} links, "
                      f"{topo.services.load_balancing}, {topo.services.use_case})")

    _guarded(run)


@app.command()
def render(
    topology: Path = TopologyArg,
    out_dir: Path = typer.Option(..., "--out", "-o", help="Folder to write the plan and configs into."),
) -> None:
    """Write the complete plan (plan.json) and every rendered config to a folder. No root needed."""

    def run() -> None:
        from . import plan as planmod

        loaded = _load(topology, check_host=False)
        plan = planmod.build(loaded.topology, str(topology), str(STATE_ROOT))
        for rel, content in plan.files.items():
            target = out_dir / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
        out.print(f"wrote {len(plan.files)} files to {out_dir}")

    _guarded(run)


def _preflight_up(loaded: LoadedTopology) -> LabPlan:
    from . import plan as planmod

    hostcheck.require_root()
    hostcheck.require_kernel()
    hostcheck.require_tools()
    topo = loaded.topology
    mgmt = None
    if topo.addressing.mgmt is None and not any(n.mgmt_ip for n in topo.nodes.values()):
        try:
            mgmt = planmod.free_mgmt_subnet(topo.name, hostcheck.root_routes())
        except ValueError as exc:
            raise LabError(str(exc)) from None
    plan = planmod.build(topo, str(loaded.path), str(STATE_ROOT), python=sys.executable, mgmt_subnet=mgmt)
    existing = state_dir(plan.name)
    if (existing / "state.json").exists():
        state = LabState.load(existing)
        if any(netnsutil.exists(ns) for ns in state.namespaces):
            raise LabError(f"lab {plan.name} is already up ({state.status}, from {state.source}); "
                           f"`lab down --name {plan.name}` first")
    taken = [ns.name for ns in plan.namespaces if netnsutil.exists(ns.name)]
    if taken:
        raise LabError(f"namespaces {', '.join(taken[:5])} exist but belong to no running lab record; "
                       f"`lab down {loaded.path}` removes them")
    return plan


@app.command()
def up(
    topology: Path = TopologyArg,
    timeout: float | None = typer.Option(None, help="Seconds to wait for every BGP session and route "
                                                    "(default 30; 180 with --backend containerlab)."),
    json_out: bool = typer.Option(False, "--json", help="Print the result as JSON."),
    backend: Backend = BackendOption,
) -> None:
    """Bring a lab up: namespaces, links, addresses, daemons; exit 0 only once BGP is established
    and the expected routes are in the kernel. On any failure (or Ctrl-C) everything is removed.
    With --backend containerlab, TOPOLOGY may also be a .clab.yml written by `lab export`."""
    from .backends.netns import NetnsBackend

    started = time.monotonic()
    if backend == Backend.containerlab:
        _up_containerlab(topology, 180.0 if timeout is None else timeout, json_out, started)
        return
    wait = 30.0 if timeout is None else timeout

    def progress(step: str, detail: str) -> None:
        if not json_out:
            err.print(f"[dim]{time.monotonic() - started:6.2f}s[/] [cyan]{step:<11}[/] {detail}", highlight=False)

    def run() -> None:
        loaded = _load(topology)
        plan = _preflight_up(loaded)
        interrupts: list[int] = []

        def on_signal(signum: int, frame: object) -> NoReturn:
            interrupts.append(signum)
            raise KeyboardInterrupt

        def checked(step: str, detail: str) -> None:
            # Python drops an exception raised in some places (an at-fork hook when a signal lands
            # during fork()): a signal seen but not raised is honoured at the next step.
            if interrupts:
                raise KeyboardInterrupt
            progress(step, detail)

        backend = NetnsBackend(checked)
        signal.signal(signal.SIGTERM, on_signal)
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # not when started with Ctrl-C ignored
            signal.signal(signal.SIGINT, on_signal)
        try:
            state = backend.up(plan, ready_timeout=wait)
            if interrupts:
                raise KeyboardInterrupt
        except BaseException as exc:
            for signum in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not stop the cleanup
                signal.signal(signum, signal.SIG_IGN)
            progress("cleanup", "removing everything this attempt created")
            state = LabState.load(state_dir(plan.name))
            NetnsBackend().down(state)
            _remove_state(plan.name)
            if isinstance(exc, KeyboardInterrupt):
                raise LabError("interrupted; the lab was removed") from None
            if isinstance(exc, LabError):
                raise LabError(f"{exc} — the lab was removed") from None
            raise
        elapsed = time.monotonic() - started
        if json_out:
            out.print_json(json.dumps({"name": plan.name, "status": state.status, "seconds": round(elapsed, 3),
                                       "nodes": {n.name: n.mgmt_address for n in plan.nodes}}))
        else:
            out.print(f"[green]lab {plan.name} is up[/] in {elapsed:.2f} s: {len(plan.nodes)} nodes, "
                      f"{len(plan.sessions) // 2} BGP sessions established. Try `lab status` or "
                      f"`lab exec {plan.nodes[0].name} -- ip route`.")

    _guarded(run)


def _remove_state(name: str) -> None:
    import shutil

    shutil.rmtree(state_dir(name), ignore_errors=True)


@app.command()
def down(
    topology: Path | None = typer.Argument(None, help="Topology file of the lab to remove."),
    name: str | None = typer.Option(None, "--name", "-n", help="Lab name instead of a file."),
    all_labs: bool = typer.Option(False, "--all", help="Remove every running lab."),
    backend: Backend = BackendOption,
) -> None:
    """Tear a lab down: daemons, namespaces, links, bridge, nft table and state. Safe to repeat."""
    from .backends.netns import NetnsBackend

    if backend == Backend.containerlab:
        _down_containerlab(topology, name, all_labs)
        return

    def run() -> None:
        hostcheck.require_root()
        targets: list[LabState] = []
        if all_labs:
            targets = running_labs()
        else:
            lab = name or (_peek_name(topology) if topology else None)
            if lab is None:
                raise LabError("say which lab: a topology file, --name NAME or --all")
            if (state_dir(lab) / "state.json").exists():
                targets = [LabState.load(state_dir(lab))]
            elif topology is not None:
                targets = [_state_from_plan(topology)]
            else:
                raise LabError(f"no running lab named {lab} (see `lab status`)")
        if not targets:
            out.print("no lab is running")
        for state in targets:
            started = time.monotonic()
            problems = NetnsBackend().down(state)
            _remove_state(state.name)
            if problems:
                raise LabError(f"lab {state.name}: " + "; ".join(problems))
            out.print(f"lab {state.name} is down ({time.monotonic() - started:.2f} s)")

    _guarded(run)


def _clab_progress(started: float, json_out: bool) -> Callable[[str, str], None]:
    def progress(step: str, detail: str) -> None:
        if not json_out:
            err.print(f"[dim]{time.monotonic() - started:6.2f}s[/] [cyan]{step:<11}[/] {detail}", highlight=False)

    return progress


def _up_containerlab(topology: Path, timeout: float, json_out: bool, started: float) -> None:
    from .backends import containerlab as clab

    def run() -> None:
        backend = clab.ContainerlabBackend(_clab_progress(started, json_out))
        backend.require()
        if clab.is_clab_file(topology):
            record = clab.record_for(topology)
            clab.refuse_if_deployed(record.name)
        else:
            from . import clab_export
            from . import plan as planmod

            loaded = _load(topology, check_host=False)
            plan = planmod.build(loaded.topology, str(loaded.path))
            clab.refuse_if_deployed(plan.name)
            record = clab.record_for(clab.stage_export(clab_export.export(plan)))
        record = backend.up(record, ready_timeout=timeout)
        elapsed = time.monotonic() - started
        if json_out:
            out.print_json(json.dumps({"name": record.name, "backend": "containerlab", "status": record.status,
                                       "seconds": round(elapsed, 3), "topology_file": record.topology_file,
                                       "containers": record.containers}))
        else:
            vendor = f" ({len(record.vendor)} vendor nodes not waited for)" if record.vendor else ""
            first = next(iter(record.containers))
            out.print(f"[green]lab {record.name} is up on containerlab[/] in {elapsed:.2f} s: "
                      f"{len(record.containers)} containers{vendor}. Try `docker exec {record.containers[first]} "
                      f"ip route`.")

    _guarded(run)


def _down_containerlab(topology: Path | None, name: str | None, all_labs: bool) -> None:
    from .backends import containerlab as clab

    def run() -> None:
        backend = clab.ContainerlabBackend()
        backend.require()
        if all_labs:
            records = clab.deployed_labs()
        else:
            lab: str | None
            if topology is not None and clab.is_clab_file(topology):
                lab = clab.record_for(topology).name
            else:
                lab = name or (_peek_name(topology) if topology else None)
            if lab is None:
                raise LabError("say which lab: a topology file, --name NAME or --all")
            record = clab.ClabRecord.load(lab)
            if record is None and topology is not None and clab.is_clab_file(topology):
                record = clab.record_for(topology)  # deployed by hand: destroy what the file names
            if record is None:
                raise LabError(f"no lab named {lab} was deployed with containerlab from here "
                               f"(`containerlab destroy --name {lab}` removes one deployed by hand)")
            records = [record]
        if not records:
            out.print("no containerlab lab is recorded")
        for record in records:
            started = time.monotonic()
            problems = backend.down(record)
            if problems:
                raise LabError(f"lab {record.name}: " + "; ".join(problems))
            out.print(f"lab {record.name} is down ({time.monotonic() - started:.2f} s)")

    _guarded(run)


class ExportFormat(StrEnum):
    containerlab = "containerlab"


@app.command()
def export(
    topology: Path = TopologyArg,
    fmt: ExportFormat = typer.Option(ExportFormat.containerlab, "--format", "-f", help="Export format."),
    out_dir: Path = typer.Option(..., "--out", "-o", help="Folder to write the topology and node files into."),
    vendor: list[str] = typer.Option([], "--vendor", help="NODE=KIND: run NODE as a real vendor kind "
                                     "(juniper_vjunosrouter, juniper_vsrx, juniper_crpd, cisco_iol) with its "
                                     "rendered config as startup config. Repeatable."),
    image: list[str] = typer.Option([], "--image", help="KIND=IMAGE: the image of a kind (linux = the node "
                                    "image, default lab-node:latest; every vendor kind used needs one). Repeatable."),
    host2: str | None = typer.Option(None, "--host2", help="Comma-separated nodes for a second host: also writes "
                                     "LAB.host1.clab.yml and LAB.host2.clab.yml joined by vxlan links."),
    underlay: str | None = typer.Option(None, "--underlay", help="HOST1_IP,HOST2_IP: underlay addresses of the "
                                        "two hosts (vxlan remotes), with --host2."),
) -> None:
    """Write the lab for containerlab: LAB.clab.yml, the files each node binds and lab-export.json.
    No root and no containerlab needed; deploy with `containerlab deploy -t DIR/LAB.clab.yml` or
    `lab up --backend containerlab DIR/LAB.clab.yml`."""
    from . import clab_export
    from . import plan as planmod
    from .backends.containerlab import write_export

    def run() -> None:
        pair = None
        if underlay is not None:
            parts = [p.strip() for p in underlay.split(",")]
            if len(parts) != 2 or not all(parts):
                raise LabError(f"--underlay takes two addresses, HOST1_IP,HOST2_IP; got '{underlay}'")
            pair = (parts[0], parts[1])
        options = clab_export.ExportOptions(
            vendor=clab_export.parse_assignments(vendor, "--vendor"),
            images=clab_export.parse_assignments(image, "--image"),
            host2=tuple(n.strip() for n in (host2 or "").split(",") if n.strip()),
            underlay=pair,
        )
        loaded = _load(topology, check_host=False)
        plan = planmod.build(loaded.topology, str(topology))
        result = clab_export.export(plan, options)
        write_export(result, out_dir)
        extra = f" and {', '.join(result.host_files)}" if result.host_files else ""
        out.print(f"wrote {len(result.files)} files to {out_dir}: {result.topology_file}{extra} "
                  f"({fmt.value}; deploy: containerlab deploy -t {out_dir / result.topology_file})")

    _guarded(run)


def _state_from_plan(topology: Path) -> LabState:
    """No record (lab up killed before writing it): clean what the plan would have created."""
    from . import plan as planmod

    loaded = _load(topology, check_host=False)
    plan = planmod.build(loaded.topology, str(topology), str(STATE_ROOT))
    return LabState(plan.name, plan.source, plan.state_dir, "unknown", [ns.name for ns in plan.namespaces],
                    plan.mgmt.bridge, [p.host_port for p in plan.mgmt.ports], plan.mgmt.nft_table,
                    plan.mgmt.subnet)


@app.command()
def status(
    name: str | None = typer.Argument(None, help="Lab name (default: every running lab)."),
    json_out: bool = typer.Option(False, "--json", help="Print as JSON for automation."),
) -> None:
    """Running labs: nodes, namespaces, management addresses, daemons and BGP sessions."""
    from . import status as statusmod

    def run() -> None:
        labs = [s for s in running_labs() if name in (None, s.name)]
        if name and not labs:
            raise LabError(f"no running lab named {name}")
        reports = [statusmod.collect(s) for s in labs]
        if json_out:
            sys.stdout.write(statusmod.to_json(reports))
            return
        if not reports:
            out.print("no lab is running")
        for report in reports:
            out.print(f"[bold]{report.name}[/] ({report.source}) {report.status}, management {report.mgmt_subnet}, "
                      f"namespaces {report.namespaces_present}/{report.namespaces_expected}")
            table = Table("node", "kind", "mgmt", "namespaces", "daemons", "BGP")
            for node in report.nodes:
                daemons = ", ".join(f"{d.name}({d.pid})" if d.running else f"[red]{d.name} down[/]"
                                    for d in node.daemons)
                est = sum(1 for s in node.bgp if s.info.startswith("Established"))
                bgp = f"{est}/{len(node.bgp)} established" if node.bgp else "-"
                if node.powered_off:
                    daemons, bgp = "[red]powered off[/]", "-"
                table.add_row(node.name, node.kind, node.mgmt_address.split("/")[0],
                              "\n".join(node.namespaces), daemons or "-", bgp)
            out.print(table)

    _guarded(run)


@app.command()
def restart(
    node: str = typer.Argument(..., help="Node whose daemon restarts, e.g. mx1."),
    process: str = typer.Argument(..., help="Process name as `lab status` lists it: bird, bird-trust-vr, mxlb..."),
    lab: str | None = typer.Option(None, "--lab", "-l", help="Lab name (needed when several run)."),
    kill: bool = typer.Option(False, "--kill", help="SIGKILL instead of SIGTERM (a crash, not a stop)."),
) -> None:
    """Restart one daemon of a node (the "restart routing / TLB process" events): stop it, start the
    same command again under the lab's supervisor. Forwarding state in the kernel is left alone."""
    import signal as signals

    from . import supervisor as sup

    def run() -> None:
        hostcheck.require_root()
        state = _pick_lab(lab)
        record = state.process(node, process)
        if record is None:
            names = sorted(f"{r.node}/{r.name}" for r in state.processes)
            raise LabError(f"lab {state.name} has no process {node}/{process} (processes: {', '.join(names)})")
        client = sup.Supervisor(state.state_dir)
        if sup.alive(record):
            if kill:
                os.kill(record.pid, signals.SIGKILL)
            client.stop([record.pid])
        fresh = client.spawn(record.node, record.name, record.ns, record.argv, record.log)
        state.processes = [fresh if r is record else r for r in state.processes]
        state.save()
        out.print(f"{node}/{process} restarted: pid {record.pid} -> {fresh.pid}")

    _guarded(run)


events_app = typer.Typer(help="The JVD's failure events: list them, run them with traffic.", no_args_is_help=True)
app.add_typer(events_app, name="events")


@events_app.command("list")
def events_list(
    topology: Path | None = typer.Argument(None, help="Topology file (or --lab for a running lab)."),
    lab: str | None = typer.Option(None, "--lab", "-l", help="A running lab instead of a file."),
    json_out: bool = typer.Option(False, "--json", help="Print as JSON."),
) -> None:
    """Every failure event of the seed, whether it applies to this lab, and why not."""
    from . import events as eventsmod

    def run() -> None:
        if topology is not None:
            from . import plan as planmod

            plan_data = json.loads(planmod.build(_load(topology, check_host=False).topology).to_json())
        else:
            plan_data = json.loads((Path(_pick_lab(lab).state_dir) / "plan.json").read_text())
        rows = eventsmod.applicable(plan_data)
        if json_out:
            sys.stdout.write(json.dumps([{"name": r.event.name, "title": r.event.title, "target": r.event.target,
                                          "applicable": r.applicable, "reason": r.reason,
                                          "action": r.event.action, "restore": r.event.restore}
                                         for r in rows], indent=2) + "\n")
            return
        view = Table("event", "seed", "target", "applies", "restore")
        for r in rows:
            view.add_row(r.event.name, r.event.title, r.event.target,
                         "yes" if r.applicable else f"[yellow]no[/]: {r.reason}", r.event.restore)
        out.print(view)

    _guarded(run)


@events_app.command("run")
def events_run(
    topology: Path | None = typer.Argument(None, help="Topology file: brought up for the run and down after "
                                                       "(or --lab for a running lab)."),
    lab: str | None = typer.Option(None, "--lab", "-l", help="A running lab instead of a file."),
    event: list[str] = typer.Option([], "--event", "-e", help="Event name (repeatable; default: every applicable)."),
    target: str | None = typer.Option(None, "--target", help="Node to hit (default: the first of the right kind)."),
    flows: int = typer.Option(200, "--flows", help="Flows per direction (distinct subscriber addresses)."),
    rate: float = typer.Option(10000, "--rate", help="Aggregate packets/s per direction."),
    sizes: str = typer.Option("imix", "--sizes", help="imix (the seed's weights) or a frame size in bytes."),
    duration: float = typer.Option(4.0, "--duration", help="Seconds of traffic after each event (or restore)."),
    warmup: float = typer.Option(2.0, "--warmup", help="Seconds of traffic before each event."),
    hold: float = typer.Option(3.0, "--hold", help="Lasting events (link down, power off): seconds before restore."),
    down_time: float = typer.Option(3.0, "--down-time", help="Reboot events: seconds the node stays down."),
    json_file: Path | None = typer.Option(None, "--json", help="Write the full report as JSON."),
    junit_file: Path | None = typer.Option(None, "--junit", help="Write JUnit XML (one test case per event)."),
    plot_file: Path | None = typer.Option(None, "--plot", help="Write a PNG timeline of pps per SRX per event."),
) -> None:
    """Run the seed's failure events under UDP traffic and report convergence per event: flows
    affected, loss-derived convergence (lost / per-flow rate), longest gap, losses of unaffected
    flows, flows moved between SRXs, and whether every flow recovered. Exit 1 if an event fails."""
    from . import eventrun, ops
    from . import events as eventsmod

    def run() -> None:
        hostcheck.require_root()
        brought_up = False
        if topology is not None and lab is None:
            name = _peek_name(topology)
            if name is None or not (state_dir(name) / "state.json").exists():
                up(topology=topology, timeout=30.0, json_out=False)
                brought_up = True
            lab_name = name
        else:
            lab_name = lab
        state = _pick_lab(lab_name)
        try:
            plan = ops.load_plan(state)
            verdicts = {a.event.name: a for a in eventsmod.applicable(json.loads(plan.to_json()))}
            names = event or [n for n, a in verdicts.items() if a.applicable]
            for name in names:
                if name not in verdicts:
                    raise LabError(f"unknown event {name}; known: {', '.join(verdicts)}")
                if not verdicts[name].applicable:
                    raise LabError(f"{name} does not apply to lab {state.name}: {verdicts[name].reason}")
            spec = eventrun.TrafficSpec(flows=flows, rate=rate, sizes=sizes, settle=duration, warmup=warmup,
                                        hold=hold, down_time=down_time)
            results = []
            for name in names:
                kind = eventsmod.BY_NAME[name]
                node = target or eventrun.default_target(plan, kind)
                with err.status(f"[cyan]{name}[/] on {node} under {flows} flows x 2 directions at {rate:.0f} pps"):
                    result = eventrun.run_event(state, plan, kind, node, spec,
                                                progress=lambda m: err.print(f"  {m}", highlight=False))
                results.append(result)
                _print_event(result)
                state = LabState.load(Path(state.state_dir))
        finally:
            if brought_up:
                down(topology=None, name=state.name, all_labs=False)
        if json_file:
            json_file.write_text(json.dumps({"lab": state.name, "events": results}, indent=2) + "\n")
        if junit_file:
            junit_file.write_text(eventrun.junit(results, state.name))
        if plot_file:
            eventrun.plot(results, plot_file)
        failed = [r["event"] for r in results if not r["passed"]]
        if failed:
            raise LabError(f"events failed: {', '.join(failed)}")

    _guarded(run)


def _print_event(r: dict[str, Any]) -> None:
    table = Table(title=f"{r['event']} on {r['target']}: {r['action']}", show_header=True)
    for col in ("flows", "affected", "convergence max / median", "longest gap", "unaffected loss",
                "moved (ideal)", "recovered"):
        table.add_column(col)
    conv = r["convergence_ms"]
    table.add_row(str(r["flows"]), str(r["affected_flows"]), f"{conv['max']:.1f} / {conv['median']:.1f} ms",
                  f"{r['longest_gap_ms']:.1f} ms", str(r["packets_lost_by_unaffected_flows"]),
                  f"{r['flows_moved']} ({r['flows_moved_ideal']})",
                  "[green]yes[/]" if r["recovered"] else "[red]no[/]")
    out.print(table)
    out.print(f"  resolution {r['resolution_ms']} ms per flow; verdict: "
              f"{'[green]pass[/]' if r['passed'] else '[red]FAIL[/]'}")


@app.command()
def switchover(
    lab: str | None = typer.Option(None, "--lab", "-l", help="Lab name (needed when several run)."),
) -> None:
    """SRD switchover between the two MX (`request services redundancy-set id 1 switchover`)."""
    from . import ops

    def run() -> None:
        state = _pick_lab(lab)
        master = ops.switchover(state, ops.load_plan(state))
        out.print(f"switchover requested on {master} (the master); `lab redundancy` shows the result")

    _guarded(run)


@app.command()
def redundancy(
    lab: str | None = typer.Option(None, "--lab", "-l", help="Lab name (needed when several run)."),
    json_out: bool = typer.Option(False, "--json", help="Print as JSON."),
) -> None:
    """Redundancy state: SRD mastership of the MX pair, MNHA roles of the SRX pairs."""

    def run() -> None:
        state = _pick_lab(lab)
        nodes = Path(state.state_dir) / "nodes"
        report: dict[str, Any] = {"srd": {}, "mnha": {}}
        for kind, name in (("srd", "srd-status.json"), ("mnha", "mnha-status.json")):
            for path in sorted(nodes.glob(f"*/{name}")):
                report[kind][path.parent.name] = json.loads(path.read_text())
        if json_out:
            sys.stdout.write(json.dumps(report, indent=2) + "\n")
            return
        if report["srd"]:
            view = Table("MX", "role", "priority", "healthy", "signal route", "peer", "peer alive")
            for node, s in report["srd"].items():
                view.add_row(node, s["role"], str(s["priority"]), str(s["healthy"]),
                             f"{s['signal_route']['prefix']} {'installed' if s['signal_route']['installed'] else '-'}",
                             s["peer"], str(s["heartbeat"]["peer_alive"]))
            out.print(view)
        if report["mnha"]:
            view = Table("SRX", "peer", "mode", "SRG0", "SRG1", "ICL", "peer alive", "healthy")
            for node, s in report["mnha"].items():
                view.add_row(node, s["peer"], s["mode"], s["srg0"]["role"], s["srg1"]["role"],
                             "up" if s["icl"]["up"] else "down", str(s["heartbeat"]["peer_alive"]), str(s["healthy"]))
            out.print(view)
        if not report["srd"] and not report["mnha"]:
            out.print(f"lab {state.name} has no SRD or MNHA pair")

    _guarded(run)


traffic_app = typer.Typer(help="Traffic by hand on a running lab (the generator of `lab events run`).",
                          no_args_is_help=True)
app.add_typer(traffic_app, name="traffic")


@traffic_app.command("start")
def traffic_start(
    lab: str | None = typer.Option(None, "--lab", "-l", help="Lab name (needed when several run)."),
    flows: int = typer.Option(100, "--flows", help="Flows per direction (distinct subscriber addresses)."),
    rate: float = typer.Option(5000, "--rate", help="Aggregate packets/s per direction."),
    sizes: str = typer.Option("imix", "--sizes", help="imix or a frame size."),
    duration: float = typer.Option(300, "--duration", help="Seconds before it stops by itself."),
    reverse: bool = typer.Option(True, "--reverse/--no-reverse", help="Also server -> client."),
) -> None:
    """Start UDP traffic client -> server (and back) in the background."""
    from . import traffic_cli

    def run() -> None:
        hostcheck.require_root()
        started = traffic_cli.start(_pick_lab(lab), flows, rate, sizes, duration, reverse)
        out.print(f"traffic started ({', '.join(started)}); `lab traffic stats` / `lab traffic stop`")

    _guarded(run)


@traffic_app.command("stop")
def traffic_stop(
    lab: str | None = typer.Option(None, "--lab", "-l", help="Lab name (needed when several run)."),
) -> None:
    """Stop the traffic and print each sender's and receiver's report (JSON)."""
    from . import traffic_cli

    def run() -> None:
        hostcheck.require_root()
        sys.stdout.write(json.dumps(traffic_cli.stop(_pick_lab(lab)), indent=2) + "\n")

    _guarded(run)


@traffic_app.command("stats")
def traffic_stats(
    lab: str | None = typer.Option(None, "--lab", "-l", help="Lab name (needed when several run)."),
) -> None:
    """Delivered packets/s per SRX now (MX counters) and whether the traffic daemons run (JSON)."""
    from . import traffic_cli

    def run() -> None:
        hostcheck.require_root()
        sys.stdout.write(json.dumps(traffic_cli.stats(_pick_lab(lab)), indent=2) + "\n")

    _guarded(run)


@app.command()
def fail(
    node: str = typer.Argument(..., help="Target node (srx1, mx1...)."),
    event: str = typer.Argument(..., help="Event name from `lab events list`, e.g. srx-power-off."),
    lab: str | None = typer.Option(None, "--lab", "-l", help="Lab name (needed when several run)."),
    peer: str | None = typer.Option(None, "--peer", help="srx-link-failure: the MX (default: the SRX's first)."),
    down_time: float = typer.Option(5.0, "--down-time", help="Reboot events: seconds the node stays down."),
) -> None:
    """Inject one failure event by hand on a running lab; `lab restore NODE` undoes what lasts."""
    from . import events as eventsmod
    from . import ops

    def run() -> None:
        hostcheck.require_root()
        state = _pick_lab(lab)
        if event not in eventsmod.BY_NAME:
            raise LabError(f"unknown event {event}; known: {', '.join(eventsmod.BY_NAME)}")
        plan = ops.load_plan(state)
        verdict = next(a for a in eventsmod.applicable(json.loads(plan.to_json())) if a.event.name == event)
        if not verdict.applicable:
            raise LabError(f"{event} does not apply to lab {state.name}: {verdict.reason}")
        out.print(ops.inject(state, plan, event, node, down_time=down_time, peer=peer))

    _guarded(run)


@app.command()
def restore(
    node: str = typer.Argument(..., help="Node to restore."),
    lab: str | None = typer.Option(None, "--lab", "-l", help="Lab name (needed when several run)."),
) -> None:
    """Undo lasting failure events on a node: power it on, bring its failed links back up."""
    from . import ops

    def run() -> None:
        hostcheck.require_root()
        state = _pick_lab(lab)
        done = ops.restore(state, ops.load_plan(state), node)
        out.print("; ".join(done) if done else f"nothing to restore on {node}")

    _guarded(run)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def ssh(
    ctx: typer.Context,
    node: str = typer.Argument(..., help="Node name, e.g. mx1 (mx, srx and ios-router nodes answer SSH)."),
    lab: str | None = typer.Option(None, "--lab", "-l", help="Lab name (needed when several run)."),
    user: str | None = typer.Option(None, "--user", "-u", help="Login (default: the topology's first user)."),
) -> None:
    """SSH into a node's Junos-like or IOS-like CLI with the OpenSSH client and the lab's ssh_config:
    `lab ssh mx1`, or one command: `lab ssh mx1 -- show route`. See docs/ssh-cli.md."""

    def run() -> None:
        state = _pick_lab(lab)
        config = Path(state.state_dir) / "ssh_config"
        host = f"{state.name}-{node}"
        if not config.exists():
            raise LabError(f"lab {state.name} has no SSH access (ssh.enabled is false in its topology)")
        if f"Host {host}\n" not in config.read_text():
            raise LabError(f"{node} of lab {state.name} does not answer SSH (only mx, srx and ios-router nodes "
                           f"do; `lab exec {node} -- ...` runs a command on a host)")
        ready = Path(state.state_dir) / "ssh" / "ready"  # the server writes it once keys and listeners are up
        deadline = time.monotonic() + 10.0
        while not ready.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        argv = ["ssh", "-F", str(config)] + (["-l", user] if user else []) + [host] + list(ctx.args)
        sys.stdout.flush()
        try:
            os.execvp("ssh", argv)
        except FileNotFoundError:
            raise LabError("the OpenSSH client (ssh) is not installed (make deps)") from None

    _guarded(run)


@app.command(name="exec", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def exec_(
    ctx: typer.Context,
    node: str = typer.Argument(..., help="Node name, e.g. srx1."),
    lab: str | None = typer.Option(None, "--lab", "-l", help="Lab name (needed when several run)."),
    instance: str | None = typer.Option(None, "--instance", "-i",
                                           help="Routing instance of an mx, e.g. TRUST-VR."),
) -> None:
    """Run a command inside a node's namespace: `lab exec srx1 -- ip route`."""

    def run() -> None:
        command = list(ctx.args)
        if not command:
            raise LabError("give a command after --, e.g. `lab exec srx1 -- ip route`")
        state = _pick_lab(lab)
        ns = f"{state.name}-{node}" + (f"-{instance.lower()}" if instance else "")
        if ns not in state.namespaces:
            nodes = sorted({n[len(state.name) + 1:] for n in state.namespaces})
            raise LabError(f"lab {state.name} has no node/instance '{node}{'/' + instance if instance else ''}' "
                           f"(namespaces: {', '.join(nodes)})")
        hostcheck.require_root()
        fd = os.open(netnsutil.path(ns), os.O_RDONLY)
        if netnsutil._libc.setns(fd, netnsutil.CLONE_NEWNET) != 0:
            raise LabError(f"cannot enter namespace {ns}")
        sys.stdout.flush()
        try:
            os.execvp(command[0], command)
        except FileNotFoundError:
            raise LabError(f"command not found: {command[0]}") from None

    _guarded(run)


def _pick_lab(name: str | None) -> LabState:
    labs = running_labs()
    if name:
        for state in labs:
            if state.name == name:
                return state
        raise LabError(f"no running lab named {name}")
    if len(labs) == 1:
        return labs[0]
    if not labs:
        raise LabError("no lab is running (`lab up labs/topology3.yml`)")
    raise LabError(f"several labs run ({', '.join(s.name for s in labs)}): pick one with --lab")


@app.command()
def sessions(
    node: str = typer.Argument(..., help="An srx node."),
    lab: str | None = typer.Option(None, "--lab", "-l", help="Lab name (needed when several run)."),
    json_out: bool = typer.Option(False, "--json", help="Print as JSON."),
) -> None:
    """An SRX's session table (conntrack in its namespace): like `show security flow session`."""
    from . import sessions as sessionsmod

    def run() -> None:
        hostcheck.require_root()
        state = _pick_lab(lab)
        ns = f"{state.name}-{node}"
        if ns not in state.namespaces:
            raise LabError(f"lab {state.name} has no node {node}")
        table = [s for s in sessionsmod.read(ns) if 179 not in (s.source_port, s.destination_port)]
        if json_out:
            sys.stdout.write(json.dumps([s.to_json() for s in table], indent=2) + "\n")
            return
        view = Table("proto", "source", "destination", "translated source", "packets", "bytes", "timeout")
        for s in table:  # the SRX's own BGP sessions (port 179) are left out: not transit sessions
            view.add_row(s.protocol, f"{s.source}/{s.source_port}", f"{s.destination}/{s.destination_port}",
                         s.reply_destination if s.translated else "-", str(s.packets), str(s.bytes),
                         str(s.timeout))
        out.print(view)
        out.print(f"Total sessions: {len(table)}")

    _guarded(run)


@app.command()
def selector(
    node: str = typer.Argument(..., help="An mx node."),
    lab: str | None = typer.Option(None, "--lab", "-l", help="Lab name (needed when several run)."),
    json_out: bool = typer.Option(False, "--json", help="Print as JSON."),
) -> None:
    """The MX load-balancing selector: each SRX's state and share of the hash buckets."""

    def run() -> None:
        state = _pick_lab(lab)
        path = Path(state.state_dir) / "nodes" / node / "mxlb-status.json"
        if not path.exists():
            raise LabError(f"{node} in lab {state.name} runs no selector (mx with ecmp-chash or ecmp only)")
        status = json.loads(path.read_text())
        if json_out:
            sys.stdout.write(json.dumps(status, indent=2) + "\n")
            return
        out.print(f"{node}: mode {status['mode']}, {status['buckets']} buckets, {status['changes']} changes")
        view = Table("SRX", "mark", "alive", "carrier", "BGP next hop", "buckets")
        for m in status["members"]:
            view.add_row(m["name"], str(m["mark"]), "yes" if m["alive"] else "[red]no[/]",
                         " ".join(f"{k}:{'up' if v else 'down'}" for k, v in m["carrier"].items()),
                         " ".join(f"{k}:{'yes' if v else 'no'}" for k, v in m["routed"].items()),
                         str(m["buckets"]))
        out.print(view)

    _guarded(run)


class GraphFormat(StrEnum):
    svg = "svg"
    png = "png"
    mermaid = "mermaid"
    dot = "dot"


@app.command()
def graph(
    topology: Path = TopologyArg,
    fmt: GraphFormat = typer.Option(GraphFormat.mermaid, "--format", "-f", help="Output format."),
    output: Path | None = typer.Option(None, "--out", "-o", help="File to write (default: stdout for text)."),
) -> None:
    """Draw the topology: Mermaid or DOT text, or SVG/PNG through Graphviz."""
    from . import graph as graphmod

    def run() -> None:
        topo = _load(topology, check_host=False).topology
        if fmt in (GraphFormat.mermaid, GraphFormat.dot):
            text = graphmod.mermaid(topo) if fmt == GraphFormat.mermaid else graphmod.dot(topo)
            if output:
                output.write_text(text)
            else:
                sys.stdout.write(text)
            return
        data = graphmod.render_image(topo, fmt.value)
        target = output or Path(f"{topo.name}.{fmt.value}")
        target.write_bytes(data)
        out.print(f"wrote {target}")

    _guarded(run)


@app.command()
def doctor(
    json_out: bool = typer.Option(False, "--json", help="Print the checks and features as JSON."),
    labs: Path = typer.Option(Path("labs"), "--labs", help="Folder of topology files to judge (which labs "
                                                          "use a feature that will not work)."),
) -> None:
    """Check this host for every kernel and tool feature the labs use (each kernel feature probed in a
    throwaway namespace), with a one-line fix for each failure and the labs/features that will not work.
    Exit 0 when every feature works, 1 otherwise."""
    from . import doctor as doctormod

    def run() -> None:
        checks, features = doctormod.run(labs_dir=labs)
        if json_out:
            sys.stdout.write(json.dumps(doctormod.to_json(checks, features), indent=2) + "\n")
        else:
            for line in doctormod.lines(checks, features):
                style = "red" if line.startswith(("FAIL", "will not")) else "yellow" if line.startswith("--") else None
                out.print(f"[{style}]{line}[/]" if style and "[" not in line else line, highlight=False,
                          markup=bool(style and "[" not in line), soft_wrap=True)
        if not all(f.ok for f in features):
            raise typer.Exit(1)

    _guarded(run)


@app.command()
def version() -> None:
    """Print the version."""
    out.print(__version__)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
