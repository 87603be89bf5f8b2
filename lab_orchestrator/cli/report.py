"""The `lab report` command: options, progress bar and exit codes around `reportrun` (the runner)."""

from __future__ import annotations

import json
import shlex
import sys
import time
from pathlib import Path
from typing import Any

import typer
from pydantic import ValidationError
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from ..model.diagnostics import LabError
from .common import app, err, guarded


class BadOption(LabError):
    exit_code = 2


def _check_filters(loaded: Any, labs: list[str], topologies: list[str]) -> None:
    """A --lab or --topology that names no lab of the plan (nor a running one): bad input naming the
    closest name, before anything runs."""
    from ..model.diagnostics import did_you_mean
    from ..report import testplan

    every = testplan.expand(loaded)
    names = sorted({c.lab for c in every})
    for name in labs:
        if name not in names:
            raise BadOption(f"--lab {name}: the plan has no lab named '{name}' and no such lab runs"
                            f"{did_you_mean(name, names)}; the plan's labs: {', '.join(names)}")
    stems = sorted({c.topology.stem for c in every})
    for wanted in topologies:
        if not testplan.expand(loaded, topologies=[wanted]):
            raise BadOption(f"--topology {wanted}: no lab of the plan comes from that topology"
                            f"{did_you_mean(wanted, stems)}; give 1-4 or one of: {', '.join(stems)}")


@app.command("report")
def report(
    plan_file: Path | None = typer.Option(None, "--plan", help="Test plan (YAML). Default: the JVD's "
                                                                      "(`lab report --list` shows its cases)."),
    lab: list[str] = typer.Option([], "--lab", "-l",
                                  help="Only this lab (repeatable): a lab of the plan, or any running lab."),
    topology: list[str] = typer.Option([], "--topology", "-t",
                                       help="Only these topologies (repeatable): 1-4 (SFW and CGNAT), or a file name."),
    event: list[str] = typer.Option([], "--event", "-e", help="Only these events (repeatable)."),
    out_dir: Path = typer.Option(Path("lab-report"), "--out", "-o",
                                 help="Folder for report.html, report.json, report.xml (and report.md)."),
    markdown: bool = typer.Option(False, "--markdown", help="Also write report.md (the matrix, for docs)."),
    capture: bool = typer.Option(False, "--capture",
                                 help="Capture on the receiving hosts (dumpcap) during each case and check the "
                                      "generator's per-flow loss and gaps against the capture."),
    flows: int | None = typer.Option(None, "--flows", help="Override the plan: flows per direction."),
    rate_per_flow: float | None = typer.Option(None, "--rate-per-flow",
                                               help="Override the plan: pps per flow and direction "
                                                    "(resolution = 1/rate)."),
    sizes: str | None = typer.Option(None, "--sizes", help="Override the plan: imix or a frame size."),
    receiver: str | None = typer.Option(None, "--receiver",
                                        help="packet (count at the host's interface, default) or socket (count at "
                                             "a UDP socket, after the host's own firewall)."),
    baseline: float | None = typer.Option(None, "--baseline",
                                          help="Override the plan: seconds of each case's traffic that must arrive "
                                               "whole and on schedule before its event (0: not checked; default 1)."),
    list_only: bool = typer.Option(False, "--list", help="Print the cases and the estimated time; run nothing."),
    render: Path | None = typer.Option(None, "--render",
                                       help="Write HTML/JUnit/Markdown again from a report.json; run nothing."),
    json_out: bool = typer.Option(False, "--json", help="Print the summary as JSON on stdout at the end."),
    max_convergence_ms: float | None = typer.Option(None, "--max-convergence-ms",
                                                    help="Budget: a case whose longest convergence exceeds this "
                                                         "many ms fails (exit 1)."),
    max_unaffected_loss: int | None = typer.Option(None, "--max-unaffected-loss",
                                                   help="Budget: a case whose unaffected flows lose more packets "
                                                        "fails (MX-target events have no unaffected flows)."),
    budget: list[str] = typer.Option([], "--budget", help="Budget [EVENT:]METRIC=LIMIT (repeatable), as for "
                                     "`lab events run`; also applies to --render."),
    tcp: bool = typer.Option(False, "--tcp", help="Run long-lived TCP connections beside the flows of every case "
                             "and judge them with the default TCP budgets, as `lab events run --tcp`."),
    tcp_connections: int = typer.Option(200, "--tcp-connections", min=1, max=60000,
                                        help="With --tcp: how many long-lived TCP connections."),
    sessions: int | None = typer.Option(None, "--sessions", min=0, max=2000000, metavar="N",
                                        help="Idle UDP sessions opened before every case's event and each sent one "
                                        "reverse datagram after it, as `lab events run --sessions` (default: the "
                                        "plan's traffic.sessions; 0: none)."),
    reruns: int | None = typer.Option(None, "--reruns", min=0, max=5, metavar="N",
                                      help="Run a case again, up to N times, when its generator fell behind its "
                                      "schedule during the event or its baseline, as `lab events run --reruns` "
                                      "(default: the plan's traffic.reruns, 1; 0: report such a case as an error)."),
) -> None:
    """Run a test plan (default: the JVD's: topologies 1-4, SFW and CGNAT, every applicable failure
    event with its restore) under two-way traffic, and write a self-contained HTML report (matrix
    event x lab, and per case the pps timeline, convergence distribution, movers, lab graph),
    JSON (everything) and JUnit (one test case per lab x event). Exit 1 if a case fails, 2 on a
    bad plan."""
    from ..report import run as reportrun
    from ..report import testplan
    from ..runtime import hostcheck

    def run() -> None:
        from ..events import budgets as budgetsmod
        from ..events import catalog as eventsmod

        budgets = budgetsmod.collect(max_convergence_ms, max_unaffected_loss, budget, set(eventsmod.BY_NAME))
        outputs = reportrun.Outputs(out_dir, markdown)
        if render is not None:
            doc = reportrun.render_again(render, outputs)
            if budgets:
                doc = _judge_budgets(doc, budgets, outputs)
            err.print(f"wrote {outputs.html}, {outputs.junit}" + (f", {outputs.md}" if markdown else ""))
            _finish(doc, json_out, outputs)
            return
        loaded = testplan.load_plan(plan_file or testplan.DEFAULT_PLAN)
        loaded = reportrun.with_running_labs(loaded, lab)
        traffic = loaded.plan.traffic.model_copy(update={k: v for k, v in (
            ("flows", flows), ("rate_per_flow", rate_per_flow), ("sizes", sizes), ("receiver", receiver),
            ("baseline", baseline), ("tcp_connections", tcp_connections if tcp else None),
            ("sessions", sessions), ("reruns", reruns))
            if v is not None})
        try:
            traffic = testplan.TrafficParams.model_validate(traffic.model_dump())  # overrides checked too
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
            raise BadOption(f"bad option: {problems}") from None
        # neither the plan nor the options say how much traffic: measured on the first lab (`baseline`)
        calibrate = flows is None and rate_per_flow is None and not (
            {"flows", "rate_per_flow"} & loaded.plan.traffic.model_fields_set)
        _check_filters(loaded, lab, topology)
        cases = testplan.expand(loaded, labs=lab or None, topologies=topology or None, events=event or None)
        if not cases:
            raise BadOption("no case left after the filters (--lab/--topology/--event): no lab of those runs "
                            "those events (`lab report --list` shows the cases)")
        estimate = reportrun.estimate(cases, traffic)
        load = ("traffic calibrated on the first lab" if calibrate else
                f"{traffic.flows} flows x {traffic.rate_per_flow:g} pps per direction, resolution "
                f"{traffic.resolution_ms:g} ms")
        if list_only:
            for case in cases:
                err.print(f"{case.index + 1:3d}. {case.lab:<8} {case.use_case:<6} {case.event}"
                          + (f" on {case.target}" if case.target else ""), highlight=False)
            err.print(f"{len(cases)} cases on {len({c.lab for c in cases})} labs; estimated {estimate / 60:.1f} min; "
                      f"{load}", highlight=False)
            return
        hostcheck.require_root()
        command = "lab " + " ".join(shlex.quote(a) for a in sys.argv[1:])
        err.print(f"{len(cases)} cases on {len({c.lab for c in cases})} labs, about {estimate / 60:.1f} min; "
                  f"{load}; writing {outputs.folder}/", highlight=False)
        doc = _run_with_progress(loaded, cases, traffic, outputs, command, capture, calibrate)
        if budgets:
            doc = _judge_budgets(doc, budgets, outputs)
        _finish(doc, json_out, outputs)

    guarded(run)


def _run_with_progress(loaded: Any, cases: list[Any], traffic: Any, outputs: Any, command: str,
                       capture: bool, calibrate: bool = False) -> dict[str, Any]:
    from ..report import run as reportrun

    started = time.monotonic()
    spent: list[float] = []
    remaining_estimate = {c.index: reportrun.expected_case_seconds(c.event, traffic) for c in cases}
    columns = (TextColumn("[cyan]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("ETA {task.fields[eta]}"))
    with Progress(*columns, console=err, transient=False) as progress:
        task = progress.add_task("starting", total=len(cases), eta="?")

        def eta(done: int) -> str:
            left = cases[done:]
            guess = sum(remaining_estimate[c.index] for c in left)
            if spent:  # scale the guess by how this machine has done so far
                ratio = sum(spent) / sum(remaining_estimate[c.index] for c in cases[:len(spent)])
                guess *= ratio
            labs_left = len({c.lab for c in left})
            return f"{(guess + labs_left * reportrun.LAB_CYCLE_S) / 60:.1f} min"

        def on_case(done: int, total: int, case: Any, _: str) -> None:
            progress.update(task, description=f"{case.lab} {case.event} ({total - done - 1} left after this)",
                            eta=eta(done))

        def on_done(record: dict[str, Any]) -> None:
            spent.append(record["duration_s"])
            colour = {"passed": "green", "failed": "red"}.get(record["status"], "yellow")
            progress.console.print(f"[{colour}]{reportrun.describe(record)}[/]", highlight=False)
            progress.advance(task)

        def on_step(message: str) -> None:
            progress.console.print(f"  [dim]{time.monotonic() - started:6.1f}s {message}[/]", highlight=False)

        return reportrun.run_plan(loaded, cases, traffic, outputs, command, capture, on_case, on_done, on_step,
                                  calibrate=calibrate)


def _judge_budgets(doc: dict[str, Any], budgets: list[Any], outputs: Any) -> dict[str, Any]:
    from ..report import run as reportrun

    doc, broken = reportrun.judge_budgets(doc, budgets, outputs)
    for line in broken:
        err.print(f"[red]budget:[/] {line}", highlight=False, soft_wrap=True)
    return doc


def _finish(doc: dict[str, Any], json_out: bool, outputs: Any) -> None:
    from ..report import document as reportgen

    s = reportgen.summary(doc)
    if json_out:
        sys.stdout.write(json.dumps({"summary": s, "html": str(outputs.html), "json": str(outputs.json),
                                     "junit": str(outputs.junit), "duration_s": doc.get("duration_s")}) + "\n")
    err.print(f"{s['passed']} passed, {s['failed']} failed, {s['errors']} errors of {s['cases']} cases in "
              f"{(doc.get('duration_s') or 0) / 60:.1f} min: {outputs.html}")
    if s["failed"] or s["errors"]:
        raise typer.Exit(1)
