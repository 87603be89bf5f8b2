"""`lab events list|run`: the JVD's failure events."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer
from rich.table import Table

from .. import api
from ..events import budgets as budgetsmod
from ..model.diagnostics import LabError, NotJudged
from ..model.ipfamily import check_spec as check_family
from ..model.ipfamily import name as family_name
from .common import JsonOption, app, err, guarded, out, print_json, progress_printer, write_file
from .lifecycle import print_down, print_up

if TYPE_CHECKING:
    from ..events.result import EventError, EventResult

events_app = typer.Typer(help="The JVD's failure events: list them, run them with traffic.", no_args_is_help=True)
app.add_typer(events_app, name="events")


@events_app.command("list")
def events_list(
    topology: Path | None = typer.Argument(None, help="Topology file (or --lab for a running lab)."),
    lab: str | None = typer.Option(None, "--lab", "-l", help="A running lab instead of a file."),
    json_out: bool = JsonOption,
) -> None:
    """Every failure event of the JVD test plan, whether it applies to this lab, and why not."""

    def run() -> None:
        rows = api.file_event_verdicts(topology) if topology is not None else api.pick(lab).events()
        if json_out:
            sys.stdout.write(json.dumps([{"name": r.event.name, "title": r.event.title, "target": r.event.target_name,
                                          "applicable": r.applicable, "reason": r.reason,
                                          "action": r.event.action, "restore": r.event.restore}
                                         for r in rows], indent=2) + "\n")
            return
        view = Table("event", "JVD test", "target", "applies", "restore")
        for r in rows:
            view.add_row(r.event.name, r.event.title, r.event.target_name,
                         "yes" if r.applicable else f"[yellow]no[/]: {r.reason}", r.event.restore)
        out.print(view)

    guarded(run, json_out)


@events_app.command("run")
def events_run(
    topology: Path | None = typer.Argument(None, help="Topology file: brought up for the run and down after "
                                                       "(or --lab for a running lab)."),
    lab: str | None = typer.Option(None, "--lab", "-l", help="A running lab instead of a file."),
    event: list[str] = typer.Option([], "--event", "-e", help="Event name (repeatable; default: every applicable)."),
    target: str | None = typer.Option(None, "--target", help="Node to hit (default: the first of the right kind)."),
    flows: int | None = typer.Option(None, "--flows", help="Flows per direction (distinct subscriber addresses; "
                                     "default: calibrated, see --rate)."),
    rate: float | None = typer.Option(None, "--rate", help="Aggregate packets/s per direction (default: calibrated "
                                      "on the lab: a quarter of the highest rate it carries loss-free and on schedule, "
                                      "printed with the result)."),
    sizes: str = typer.Option("imix", "--sizes", help="imix (the JVD test's weights: 64:8, 127:36, 255:11, 511:4, "
                                                 "1024:2, 1518:39) or a frame size in bytes."),
    duration: float = typer.Option(4.0, "--duration", help="Seconds of traffic after each event (or restore)."),
    warmup: float = typer.Option(2.0, "--warmup", help="Seconds of traffic before each event."),
    hold: float = typer.Option(3.0, "--hold", help="Lasting events (link down, power off): seconds before restore."),
    down_time: float = typer.Option(3.0, "--down-time", help="Reboot events: seconds the node stays down."),
    realtime: bool = typer.Option(True, "--realtime/--no-realtime", help="Run the senders SCHED_FIFO, so a busy "
                                  "machine does not make them late (a late packet due during an outage is not lost, "
                                  "and the convergence figure comes out short)."),
    json_out: bool = JsonOption,
    json_file: Path | None = typer.Option(None, "--json-out", help="Write the full report as JSON to this file."),
    junit_file: Path | None = typer.Option(None, "--junit-out", help="Write JUnit XML (one test case per event) "
                                                                     "to this file."),
    plot_file: Path | None = typer.Option(None, "--plot-out", help="Write a PNG timeline of pps per SRX per event "
                                                                   "to this file."),
    daemon: str | None = typer.Option(None, "--daemon", "-d", help="daemon-crash: the daemon to kill -9 on the "
                                      "target (default: the node's first daemon that is not BIRD)."),
    max_convergence_ms: float | None = typer.Option(None, "--max-convergence-ms",
                                                    help="Budget: fail (exit 1) when an event's longest "
                                                         "convergence exceeds this many ms."),
    max_unaffected_loss: int | None = typer.Option(None, "--max-unaffected-loss",
                                                   help="Budget: fail when unaffected flows lose more packets "
                                                        "(MX-target events have no unaffected flows)."),
    baseline: float = typer.Option(1.0, "--baseline", help="Seconds of the event's traffic that must arrive "
                                   "whole and on schedule before each event (0: no check); if not, the case is "
                                   "an error (exit 3), not a failed event."),
    family: str | None = typer.Option(None, "--family", help="IP families of the flows: 4, 6, 64 (NAT64: IPv6 "
                                      "clients reaching the IPv4 server), both (4 and 6) or all (default: every "
                                      "family of the lab). The flows and the rate are shared between the families, "
                                      "side by side; each family is judged on its own."),
    budget: list[str] = typer.Option([], "--budget", help="Budget [EVENT:]METRIC=LIMIT (repeatable), e.g. "
                                     "srx-power-off:convergence_ms=300; metrics: convergence_ms, unaffected_loss, "
                                     "longest_gap_ms, flows_moved_excess; with --tcp also tcp_reset_pct, tcp_reset, "
                                     "tcp_failed, tcp_stuck, tcp_longest_gap_ms; with --sessions also "
                                     "sessions_lost_pct, sessions_lost, sessions_early_lost_pct. A per-event "
                                     "budget overrides the "
                                     "global one."),
    tcp: bool = typer.Option(False, "--tcp", help="Run long-lived TCP connections beside the UDP flows (client "
                             "host to server host, a 16-byte request/answer every 100 ms each) and judge them: "
                             "under 1 % reset and none stuck for every event; none reset and none failed for "
                             "srx-power-off, srx-link-failure and srx-reboot on a lab with MNHA pairs."),
    tcp_connections: int = typer.Option(200, "--tcp-connections", min=1, max=60000,
                                        help="With --tcp: how many long-lived TCP connections."),
    sessions: int = typer.Option(0, "--sessions", min=0, max=2000000, metavar="N",
                                 help="Open N idle UDP sessions (distinct source address and port each, from the "
                                 "second quarter of the client prefix) before each event and, after it (a lasting "
                                 "event: before its restore), send each one reverse datagram from the server: an "
                                 "SRX drops one that matches no session, so the count says exactly which sessions "
                                 "survived, synced to the MNHA peer that took over. Sessions of an SRX taken out "
                                 "with its peer (or without one) are expected lost; of the rest at most 0.01 % may "
                                 "be lost for srx-power-off, srx-link-failure, srx-reboot, mnha-pair-power-off and "
                                 "nexthop-delete (the default budget sessions_lost_pct). A sample of them (up to "
                                 "5,000) gets two reverse datagrams 0.8-1.8 s after the event, judged alike "
                                 "(sessions_early_lost_pct): did they pass within 2 s? 0: none."),
    reruns: int = typer.Option(1, "--reruns", min=0, max=5, metavar="N",
                               help="Run a case again, up to N times, when its generator fell behind its schedule "
                               "during the event or in the baseline before it (a busy or paused machine: its "
                               "figures cannot be trusted, so it was not judged). The first run judged is the "
                               "verdict; the reasons of the runs before it are in the result (runs_not_judged). "
                               "0: report such a case as an error."),
) -> None:
    """Run the JVD's failure events under UDP traffic and report convergence per event: flows
    affected, loss-derived convergence (lost / per-flow rate), longest gap, losses of unaffected
    flows, flows moved between SRXs, and whether every flow recovered. Before each event the
    selectors, BGP, the MNHA pairs and a baseline of the traffic are checked: a case whose check
    failed is an error with the reason, not a verdict. With --tcp, long-lived TCP connections run
    beside the flows (checked in the baseline too) and each event reports them: completed, reset,
    failed, timed out, stuck, retried, longest gap. With --sessions N, N background sessions are
    opened before each event and each one's reverse packet is tried after it: which survived. Exit 1
    if an event fails or breaks a budget, 3 if none failed but a case is an error."""
    def run() -> None:
        from ..events import catalog as eventsmod
        from ..events.result import CaseError, EventError

        budgets = budgetsmod.collect(max_convergence_ms, max_unaffected_loss, budget, set(eventsmod.BY_NAME))
        if not tcp and any(b.metric.startswith("tcp_") for b in budgets):
            raise budgetsmod.BudgetError("a tcp_* budget needs --tcp (the TCP connections it judges)")
        if not sessions and any(b.metric.startswith("sessions_") for b in budgets):
            raise budgetsmod.BudgetError("a sessions_* budget needs --sessions (the sessions it judges)")
        check_family(family)
        if topology is not None and lab is None:  # a wrong event or node name, before the lab is brought up
            api.file_events_to_run(topology, event, target)
        started = time.monotonic()
        results: list[EventResult | EventError] = []

        def say(message: str) -> None:
            err.print(f"  {message}", highlight=False)

        with api.running(topology, lab, progress=progress_printer(started),
                         on_up=lambda up: None if json_out else print_up(up, time.monotonic() - started, False),
                         on_down=lambda name, s: None if json_out else print_down(name, s)) as running:
            names = running.event_names(event, target)
            if tcp:
                budgets = budgetsmod.with_tcp_defaults(budgets, mnha=running.has_mnha())
            if sessions:
                budgets = budgetsmod.with_session_defaults(budgets)
            fams = running.traffic_families(family, flows)  # --flows 1 over IPv4 and IPv6: exit 2
            traffic = running.traffic_choice(flows, rate, sizes, realtime, progress=say, families=fams)
            (err if json_out else out).print(traffic["line"], highlight=False, soft_wrap=True)
            spec = api.traffic_spec(flows=traffic["flows"], rate=traffic["rate"], sizes=sizes, settle=duration,
                                    warmup=warmup, hold=hold, down_time=down_time, realtime=realtime,
                                    baseline=baseline, tcp=tcp_connections if tcp else 0, sessions=sessions,
                                    reruns=reruns,
                                    family=family)
            for name in names:
                node = running.event_target(name, target)
                result: EventResult | EventError
                with err.status(f"[cyan]{name}[/] on {node} under {spec.flows} flows x 2 directions at "
                                f"{spec.rate:.0f} pps" + (f" and {spec.tcp} TCP connections" if spec.tcp else "")
                                + (f" and {spec.sessions} background sessions" if spec.sessions else "")):
                    try:
                        result = running.run_event(name, node, spec, progress=say, daemon=daemon)
                    except CaseError as exc:
                        result = exc.error
                if isinstance(result, EventError):
                    (err if json_out else out).print(f"[yellow]{name} on {node}: ERROR[/] {result.error}",
                                                     highlight=False, soft_wrap=True)
                else:
                    if budgets:
                        result.judge(budgets)
                    if not json_out:
                        print_event(result)
                results.append(result)
        doc: dict[str, Any] = {"lab": running.name, "traffic": {**traffic["json"], "families": fams},
               "events": [r.to_json() for r in results]}
        if json_file:
            write_file(json_file, json.dumps(doc, indent=2) + "\n")
        if junit_file:
            write_file(junit_file, api.events_junit(results, running.name))
        judged = [r for r in results if not isinstance(r, EventError)]
        if plot_file:
            api.events_plot(judged, plot_file)
        failed = [r.event for r in judged if not r.passed]
        errors = [r.event for r in results if isinstance(r, EventError)]
        broken = [line for r in judged for line in r.violations()]
        for line in broken:
            err.print(f"[red]budget:[/] {line}", highlight=False, soft_wrap=True)
        parts = [f"events failed: {', '.join(failed)}"] if failed else []
        if broken:
            parts.append(f"{len(broken)} budget(s) broken: " + "; ".join(broken))
        if errors:
            parts.append(f"not judged (a precondition failed): {', '.join(errors)}")
        verdict: LabError | None = LabError("; ".join(parts)) if failed or broken else \
            NotJudged("; ".join(parts)) if errors else None
        if json_out:  # one document on stdout: the report, with the error and exit code of a negative verdict
            if verdict is not None:
                doc.update(error=str(verdict), exit_code=verdict.exit_code)
            print_json(doc)
            if verdict is not None:
                raise typer.Exit(verdict.exit_code)
        if verdict is not None:
            raise verdict

    guarded(run, json_out)


def print_event(r: EventResult) -> None:
    table = Table(title=f"{r.event} on {r.target}: {r.action}", show_header=True)
    for col in ("family", "flows", "affected", "convergence max / median", "longest gap", "unaffected loss",
                "moved (ideal)", "recovered", "verdict"):
        table.add_column(col)
    conv = r.convergence_ms
    table.add_row("all" if r.families else "IPv4", str(r.flows), str(r.affected_flows),
                  f"{conv.max:.1f} / {conv.median:.1f} ms",
                  f"{r.longest_gap_ms:.1f} ms", str(r.packets_lost_by_unaffected_flows),
                  f"{r.flows_moved} ({r.flows_moved_ideal})",
                  "[green]yes[/]" if r.recovered else "[red]no[/]", "[green]pass[/]" if r.passed else "[red]FAIL[/]")
    for name, fam in (r.families or {}).items():
        c = fam.convergence_ms
        table.add_row(family_name(int(name)), str(fam.flows), str(fam.affected_flows),
                      f"{c.max:.1f} / {c.median:.1f} ms",
                      f"{fam.longest_gap_ms:.1f} ms", str(fam.packets_lost_by_unaffected_flows), str(fam.flows_moved),
                      "[green]yes[/]" if fam.recovered else "[red]no[/]",
                      "[green]pass[/]" if fam.passed else "[red]FAIL[/]")
    out.print(table)
    for line in r.phase_lines():
        out.print(line, highlight=False)
    if r.tcp:
        print_tcp(r)
    if r.sessions:
        out.print(f"  {r.sessions.line()}", highlight=False, soft_wrap=True)
        if r.sessions.lost_sessions:
            out.print(f"  lost: {', '.join(r.sessions.lost_sessions)}", highlight=False, soft_wrap=True)
    crash = r.daemon_crash
    if crash:
        back = f"back after {crash.down_s:.3f} s" if crash.down_s is not None else "not back"
        out.print(f"  {crash.daemon}: {back} ({crash.restarts_after} restarts), "
                  f"{'[green]returned[/]' if crash.returned else '[red]did not return in time[/]'}")
    for row in r.budgets or []:
        mark = "[green]within[/]" if row.ok else "[red]BROKEN[/]"
        out.print(f"  budget {row.metric} <= {row.limit:g} ({row.scope}): measured {row.measured:g}, {mark}")
    if r.checks:
        out.print("  checked: " + ", ".join(f"{c.name} {'[green]ok[/]' if c.ok else '[red]NO[/]'}" for c in r.checks),
                  highlight=False)
    if r.route_changes and r.status != "passed":
        print_route_changes(r)
    if r.bgp_log and r.status != "passed":
        print_bgp_log(r)
    for n, reason in enumerate(r.runs_not_judged or [], 1):
        out.print(f"  run {n} not judged, run again: {reason}", highlight=False, soft_wrap=True)
    out.print(f"  resolution {r.resolution_ms} ms per flow; verdict: "
              f"{'[green]pass[/]' if r.passed else '[red]FAIL[/]'}")


ROUTE_LINES = 20  # of a failed case's route changes on the terminal (the JSON has up to 80)


def print_route_changes(r: EventResult) -> None:
    """A failed case: the route changes in the lab's namespaces around it, seconds from the event."""
    changes = r.route_changes or []
    total = sum((r.routes_changed or {}).values())
    out.print(f"  route changes during the case: {total} in {len(r.routes_changed or {})} namespaces"
              + (f", the first {ROUTE_LINES}:" if len(changes) > ROUTE_LINES else ":"), highlight=False)
    for c in changes[:ROUTE_LINES]:
        out.print(f"    {c.at_s:+8.3f} s  {c.ns}: {c.change}", markup=False, highlight=False)
    if r.routes_unmonitored:
        out.print(f"  route monitor ended early (changes unknown): {', '.join(r.routes_unmonitored)}", highlight=False)


BGP_LINES = 30  # of a failed case's BIRD log lines on the terminal (the JSON has up to 120)


def print_bgp_log(r: EventResult) -> None:
    """A failed case: what the BIRDs logged around it (sessions down and up, graceful restarts)."""
    lines = r.bgp_log or []
    out.print(f"  BGP log during the case: {len(lines)} lines"
              + (f", the first {BGP_LINES}:" if len(lines) > BGP_LINES else ":"), highlight=False)
    for x in lines[:BGP_LINES]:
        out.print(f"    {x.at_s:+8.3f} s  {x.log}: {x.text}", markup=False, highlight=False)


def print_tcp(r: EventResult) -> None:
    """The long-lived TCP connections of an event run with --tcp."""
    assert r.tcp is not None
    t = r.tcp
    table = Table(title=f"TCP beside the flows: {t.connections} connections, a request every "
                        f"{t.interval_ms:.0f} ms", show_header=True)
    for col in ("completed", "reset", "failed", "timed out", "stuck", "retried", "longest gap",
                f"gaps > {t.stall_ms:.0f} ms", "target carried"):
        table.add_column(col)
    table.add_row(str(t.completed), _red(t.reset), _red(t.failed), _red(t.timed_out), _red(t.stuck), str(t.retried),
                  f"{t.longest_gap_ms:.0f} ms", str(t.stalled), str(t.carried_before.get(r.target, 0)))
    out.print(table)


def _red(count: int) -> str:
    return f"[red]{count}[/]" if count else "0"
