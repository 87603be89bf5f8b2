"""Commands that change state: restart routing, reboot, routing-engine switchover, SRD switchover.

`restart routing` restarts the node's BIRD processes through the lab's supervisor, in graceful-restart
recovery (`bird -R`, as the `restart-routing` failure event does), and records the new pids in the
lab's state.json (what `lab restart` does).

The others are the failure events of `lab_orchestrator.events.catalog`, carried out by the same
code as `lab fail NODE EVENT`: `node_event()` below is the single entry point. It checks that the
event applies to this lab and node (the event catalog's applicability, never faked), then runs
`python -m lab_orchestrator.cli fail NODE EVENT --lab LAB` (in the background for a reboot, since the
node and this very SSH session go down with it).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..plan.sshconfig import Node, ServerConfig, User
from .pipes import Output

REPO_ROOT = Path(__file__).resolve().parents[2]


@dataclass
class Context:
    config: ServerConfig
    node: Node
    user: User
    ask: Callable[[str], str | None]  # prompt -> the answer line, None at end of input


class EventNotAvailable(Exception):
    pass


@dataclass
class EventRun:
    event: str
    pid: int
    output: str = ""
    status: int = 0


def _plan(config: ServerConfig) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((Path(config.state_dir) / "plan.json").read_text())
    return data


def event_applies(config: ServerConfig, node: Node, event: str) -> str | None:
    """None if EVENT can be carried out on NODE in this lab, else why not (one sentence)."""
    from ..events import catalog as events

    kind = events.BY_NAME.get(event)
    if kind is None:
        return f"{event} is not available in this lab yet"
    verdict = next(a for a in events.applicable(_plan(config)) if a.event.name == event)
    if not verdict.applicable:
        return verdict.reason
    if kind.node_kinds and node.kind not in kind.node_kinds:
        return f"{event} applies to {kind.target_name} nodes, not to a {node.kind}"
    if kind.target == events.MNHA_PAIR and "mnha" not in node.features:
        return f"{node.name} is in no MNHA pair"
    if kind.target == events.FLEXVPN_MEMBER and "ikev2_cluster" not in node.features:
        return f"{node.name} is in no FlexVPN cluster"
    return None


def node_event(config: ServerConfig, node: Node, event: str, background: bool = False,
               timeout: float = 60.0) -> EventRun:
    """Carry out a failure event on NODE as `lab fail` does. Raises EventNotAvailable with the reason
    when the event does not apply. With BACKGROUND, returns once it started (the reboot takes the
    node, and the session that asked for it, down); else waits for it and returns its output."""
    reason = event_applies(config, node, event)
    if reason is not None:
        raise EventNotAvailable(reason)
    argv = [sys.executable, "-m", "lab_orchestrator.cli", "fail", node.name, event, "--lab", config.lab]
    log = Path(config.state_dir) / "logs" / "_lab-sshd-events.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    if background:
        with open(log, "a") as out:
            proc = subprocess.Popen(argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                    start_new_session=True)
        threading.Thread(target=proc.wait, name=f"event-{event}", daemon=True).start()  # reaped at once
        return EventRun(event, proc.pid)
    result = subprocess.run(argv, cwd=REPO_ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=timeout)
    with open(log, "a") as out:
        out.write(result.stdout + result.stderr)
    return EventRun(event, 0, (result.stdout + result.stderr).strip(), result.returncode)


def _confirm(ctx: Context, prompt: str) -> bool:
    answer = ctx.ask(prompt)
    return answer is not None and answer.strip().lower() in ("yes", "y")


def _error(ctx: Context, text: str) -> Output:
    return Output(f"% {text}\n" if ctx.node.vendor == "ios" else f"error: {text}\n", status=1)


def reboot(ctx: Context, args: dict[str, Any]) -> Output:
    from ..events import catalog as events

    # the catalog's reboot event aimed at this node's kind (an MX: mx-reboot, an SRX: srx-reboot)
    event = next((e.name for e in events.CATALOG if e.name.endswith("-reboot") and ctx.node.kind in e.node_kinds),
                 None)
    if event is None:
        return _error(ctx, f"reload of a {ctx.node.kind} is not available in this lab yet")
    reason = event_applies(ctx.config, ctx.node, event)
    if reason is not None:
        return _error(ctx, f"reboot is not available in this lab yet ({reason})")
    if ctx.node.vendor == "ios":
        answer = ctx.ask("Proceed with reload? [confirm]")
        if answer is None or answer.strip().lower() not in ("", "y", "yes"):
            return Output("")
    elif not _confirm(ctx, "Reboot the system ? [yes,no] (no) "):
        return Output("")
    try:
        run = node_event(ctx.config, ctx.node, event, background=True)
    except EventNotAvailable as exc:
        return _error(ctx, str(exc))
    if ctx.node.vendor == "ios":
        return Output(f"\n*** System going down for reload ({event}, pid {run.pid}) ***\n")
    return Output(f"\nShutdown NOW!\n[pid {run.pid}]\n")


def gres(ctx: Context, args: dict[str, Any]) -> Output:
    reason = event_applies(ctx.config, ctx.node, "gres")
    if reason is not None:
        return _error(ctx, f"Command aborted. Mastership switch is not available here: {reason}")
    if not _confirm(ctx, "Toggle mastership between routing engines ? [yes,no] (no) "):
        return Output("")
    run = node_event(ctx.config, ctx.node, "gres")
    if run.status != 0:
        return _error(ctx, f"mastership switch failed: {run.output}")
    return Output(f"\nResolving mastership...\nComplete. The other routing engine becomes the master.\n"
                  f"({run.output})\n")


def srd_switchover(ctx: Context, args: dict[str, Any]) -> Output:
    if not args.get("switchover") or not args.get("id"):
        return _error(ctx, "syntax error, expecting <id> <id> switchover")
    if "srd" not in ctx.node.features:
        return _error(ctx, f"redundancy-set {args['id']} is not configured")
    if str(args["id"]) != "1":
        return _error(ctx, f"redundancy-set {args['id']} is not configured")
    try:
        run = node_event(ctx.config, ctx.node, "srd-switchover")
    except EventNotAvailable as exc:
        return _error(ctx, f"services redundancy is not running: {exc}")
    if run.status != 0:
        return _error(ctx, f"switchover failed: {run.output}")
    return Output(f"{run.output}\n")


def restart_routing(ctx: Context, args: dict[str, Any]) -> Output:
    """Stop the node's BIRD processes and start them again under the supervisor (`bird -R`)."""
    from ..model.diagnostics import LabError
    from ..runtime import supervisor
    from ..runtime.state import LabState

    wanted = {b.process for b in ctx.node.birds}
    state = LabState.load(Path(ctx.config.state_dir))
    records = [r for r in state.processes if r.node == ctx.node.name and r.name in wanted]
    if not records:
        if ctx.node.vendor == "ios":
            return _error(ctx, "No routing process is running (no BGP configured)")
        return _error(ctx, "the routing subsystem is not configured on this node")
    client = supervisor.Supervisor(state.state_dir)
    live = [r for r in records if supervisor.alive(r)]
    if args.get("immediately"):
        for record in live:
            with contextlib.suppress(ProcessLookupError):
                os.kill(record.pid, signal.SIGKILL)
    client.stop([r.pid for r in live])
    fresh: dict[str, supervisor.ProcessRecord] = {}
    failed: str | None = None
    try:
        for record in records:
            argv, env = supervisor.recovery(record.argv)  # BIRD in graceful-restart recovery (-R)
            failed = record.name
            # supervised as before (restarted after a crash), its stale control socket removed first
            fresh[record.name] = client.spawn(record.node, record.name, record.ns, argv, record.log, env=env,
                                              restart=record.restart, stale_files=record.stale_files)
    except (LabError, OSError) as exc:
        # the BIRDs started before this one run: recorded below (finally), so `lab status` shows
        # them and `lab down` stops them; the user learns which one is missing and why
        started = ", ".join(f"{name} (pid {p.pid})" for name, p in fresh.items()) or "none"
        not_started = ", ".join(r.name for r in records if r.name not in fresh)
        return _error(ctx, f"restart routing on {ctx.node.name} stopped at {failed}: {exc}; "
                           f"started and recorded: {started}; not running: {not_started}")
    finally:
        # recorded whatever happened, an unexpected error included: nothing runs untracked
        latest = LabState.load(Path(ctx.config.state_dir))  # re-read: keep what changed meanwhile
        latest.processes = [fresh.get(r.name, r) if r.node == ctx.node.name else r for r in latest.processes]
        latest.save()
    pids = ", ".join(f"pid {p.pid}" + (f" ({b.instance})" if b.instance else "")
                     for b in ctx.node.birds for name, p in fresh.items() if name == b.process)
    if ctx.node.vendor == "ios":
        return Output(f"Routing process restarted ({pids})\n")
    return Output(f"Routing protocols process started, {pids}\n")


def _probe_ns(ctx: Context, args: dict[str, Any]) -> str | Output:
    """The namespace a ping/traceroute leaves from: the node's, or its routing instance's."""
    if not args.get("host"):
        return _error(ctx, "a destination host is required")
    wanted = args.get("routing-instance") or args.get("vrf")
    if not wanted:
        return ctx.node.master_ns
    spec = next((i for i in ctx.node.instances if i.name.lower() == str(wanted).lower()), None)
    if spec is None or not spec.name:
        return _error(ctx, f"routing instance {wanted} does not exist" if ctx.node.vendor == "junos"
                      else f"VRF {wanted} does not exist")
    return spec.ns


def _number(args: dict[str, Any], key: str, default: float, low: float, high: float) -> float:
    value = args.get(key)
    return default if value is None else min(high, max(low, float(value)))


def ping(ctx: Context, args: dict[str, Any]) -> Output:
    """ICMP echo from the node (or routing instance), bounded: `count` (default 5, at most 100)."""
    from . import probe

    ns = _probe_ns(ctx, args)
    if isinstance(ns, Output):
        return ns
    ios = ctx.node.vendor == "ios"
    count = int(_number(args, "repeat" if ios else "count", 5, 1, 100))
    wait = _number(args, "timeout" if ios else "wait", 2.0 if ios else 1.0, 0.1, 10.0)
    size = int(_number(args, "size", 100 - 28 if ios else 56, 0, 1472))
    interval = 0.0 if (ios or args.get("rapid")) else 0.2
    result = probe.ping(ns, str(args["host"]), count=count, size=size, wait=wait, interval=interval,
                        source=args.get("source"), ttl=int(_number(args, "ttl", 64, 1, 255)))
    text, status = probe.ios_ping(result, wait) if ios else probe.junos_ping(result)
    return Output(text, {"ping-results": {"target-host": result.target, "probes-sent": len(result.echoes),
                                          "probe-results-summary": {"responses-received": len(result.received)},
                                          "rtt-ms": result.received}}, status=status)


def traceroute(ctx: Context, args: dict[str, Any]) -> Output:
    """UDP probes with a rising TTL from the node (or routing instance), at most `ttl` hops (default 30)."""
    from . import probe

    ns = _probe_ns(ctx, args)
    if isinstance(ns, Output):
        return ns
    result = probe.traceroute(ns, str(args["host"]), max_ttl=int(_number(args, "ttl", 30, 1, 64)),
                              wait=_number(args, "wait", 1.0, 0.1, 5.0), source=args.get("source"))
    text, status = probe.ios_traceroute(result) if ctx.node.vendor == "ios" else probe.junos_traceroute(result)
    data = {"traceroute-results": {"target-host": result.target,
                                   "hops": [{"ttl": h.ttl, "probes": [{"ip-address": who, "rtt-ms": rtt}
                                                                       for who, rtt in h.probes]}
                                            for h in result.hops]}}
    return Output(text, data, status=status)


READ_ONLY_ACTIONS = frozenset({"ping", "traceroute"})  # they send probes but change nothing: any user may
ACTIONS: dict[str, Callable[[Context, dict[str, Any]], Output]] = {
    "ping": ping,
    "traceroute": traceroute,
    "reboot": reboot,
    "restart-routing": restart_routing,
    "gres": gres,
    "srd-switchover": srd_switchover,
}
