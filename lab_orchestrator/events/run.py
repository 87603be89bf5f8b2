"""Run failure events under traffic and measure convergence the way the JVD's IxNetwork does.

For each event: UDP flows (distinct subscriber addresses, IMIX by default) run client -> server and,
on the same 5-tuples, server -> client (so both hash directions are exercised); after a warm-up the
event is injected, restored when it is a lasting one, and the traffic runs on until every flow has
had time to recover. Per flow: packets lost, loss-derived convergence (lost / per-flow rate, RFC
6412's packet-loss duration), longest gap. Which SRX carried each flow comes from the SRXs
themselves (conntrack packet counters, before and after the event); the delivered rate per SRX over
time comes from the MX's per-SRX counters. With `--tcp`, long-lived TCP connections run beside the
flows through the same path (`tcp`), and their outcomes join the verdict through budgets; with
`--sessions N`, N idle UDP sessions opened before the event are asked after it whether their reverse
packet still passes (`background`).
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from ..model import ipfamily
from ..model.diagnostics import LabError
from ..plan import trafficsetup
from ..plan.pipeline import LabPlan
from ..runtime import bgpready, ops
from ..runtime.state import LabState
from . import background, baseline, bgplog, cpus, cpuwait, families, keptup, routelog, sessions
from . import budgets as budgetsmod
from . import catalog as eventsmod
from . import tcp as tcpmod
from .result import (
    DAEMON_RETURN_S,
    BgpLogLine,
    CaseError,
    Check,
    DaemonCrash,
    EventError,
    EventResult,
    RouteChange,
    SessionFigures,
    TcpFigures,
)
from .verdict import analyse, nat_pools
from .watch import (
    Sampler,
    TableWatcher,
    carried_by,
    carriers,
    expected_movers,
    load_balancers,
    selector_configs,
    selector_status_files,
    wait_mnha_synced,
    wait_selectors_ready,
    wait_settled,
)

MAX_EXTRA_S = 30.0
# the senders' bound also allows this long for the readings between the warm-up and the event (which
# SRX carries each flow and each TCP connection): they are quick on a quiet machine and have taken 30 s
# on a loaded one. A case whose traffic ran out before the runner stopped it is not judged (`keptup.COVERED`).
READINGS_S = 90.0
BASELINE_CARRIED = "baseline carried"  # the check before the event; failed by a late sender alone, the case runs again
READY_S = 10.0  # before an event: selector members in their tables, MNHA pairs in step
BGP_WHOLE_S = 20.0  # before an event: every BGP session up and no BIRD still in graceful-restart recovery
TCP_SERVER_S = 600.0  # the TCP echo server's and the session processes' own bound, beyond the case's length
LASTING = {"srx-link-failure", "srx-link-blackhole", "srx-power-off", "mnha-pair-power-off", "nexthop-delete",
           "srd-link-failure"}

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Injector:
    """How an event is carried out on the lab and undone: the netns backend's operations (ops) unless
    a caller drives the nodes another way (containers, through each node's agent). INJECT takes
    (state, plan, event, target, down_time=..., daemon=...) and returns a summary; RESTORE takes
    (state, plan, target) and returns what it undid. Both keep state.down_nodes current."""

    inject: Callable[..., str] = ops.inject
    restore: Callable[[LabState, LabPlan, str], list[str]] = ops.restore


@dataclass
class TrafficSpec:
    flows: int = 100
    # aggregate packets/s in each direction: 100 flows x 100 pps, a 10 ms resolution (what a 2-CPU
    # machine is calibrated to; `lab events run` and `lab report` give the load they chose)
    rate: float = 10000.0
    sizes: str = "imix"
    reverse: bool = True
    warmup: float = 2.0  # seconds of traffic before the event
    hold: float = 3.0  # lasting events: seconds before the restore step
    settle: float = 4.0  # seconds after the event (or its restore) before traffic stops
    down_time: float = 3.0  # reboot events
    # packet: count frames reaching the receiving host's interface (AF_PACKET, before its netfilter);
    # socket: count what a UDP socket of the receiving host gets (after its netfilter)
    receiver: str = "packet"
    realtime: bool = True  # senders SCHED_FIFO (keeps their schedule when the machine is busy)
    sender_cpu: int | None = None  # pin both senders to this CPU (with realtime: the other CPUs stay free)
    baseline: float = baseline.BASELINE_S  # seconds of the traffic judged before the event (0: none)
    tcp: int = 0  # long-lived TCP connections beside the flows (0: none; `lab events run --tcp`)
    sessions: int = 0  # idle UDP sessions opened before the event, probed after it (0: none; `--sessions`)
    # families: "4", "6", "64" (NAT64), "both" (4 and 6) or "all" (the flows and the rate shared, see
    # `trafficsetup.by_family`); None: every family of the lab
    family: str | None = None
    # runs again of a case the generator could not keep on schedule (its figures cannot be trusted:
    # a busy or paused machine, not the lab): the first run judged is the verdict, the earlier
    # attempts' reasons are kept in the result (`runs_not_judged`)
    reruns: int = 1


def default_target(plan: LabPlan, event: eventsmod.EventKind) -> str:
    if event.target == eventsmod.ANY_NODE:  # daemon-crash: the first MX, else the first node running a daemon
        nodes = [n.name for n in load_balancers(plan)] + [p.node for p in plan.processes]
        return nodes[0]
    if event.target == eventsmod.FLEXVPN_MEMBER:  # the last FlexVPN router: the lowest HSRP priority, a member
        return [p.node for p in plan.processes if p.name == "flexvpn"][-1]
    if event.name == "nexthop-add" and plan.spares:  # a never-seen SRX (or pair) when the lab has one
        return plan.spares[0]
    # a node of the targeted role; an MNHA pair: its first firewall
    wanted = eventsmod.role_kinds(eventsmod.FIREWALL) if event.target == eventsmod.MNHA_PAIR else event.node_kinds
    return next(n.name for n in plan.nodes if n.kind in wanted and n.name not in plan.spares)





def _slot(state: LabState, node: str, name: str) -> Any:
    from ..runtime import supervisor

    return next((s for s in supervisor.Supervisor(state.state_dir).table() if s.key == (node, name)), None)



def run_event(state: LabState, plan: LabPlan, event: eventsmod.EventKind, target: str, spec: TrafficSpec,
              progress: Progress = lambda _: None, daemon: str | None = None,
              injector: Injector | None = None,
              before_traffic: Callable[[], None] | None = None) -> EventResult:
    """Check the preconditions, run EVENT on TARGET under the traffic of SPEC and judge it. A case
    whose preconditions failed, or whose session tables could not be read, raises `CaseError`.
    BEFORE_TRAFFIC is called once the preconditions hold, just before the event's traffic starts
    (a capture started earlier would record the baseline's packets too). With SPEC.tcp, that many
    long-lived TCP connections run beside the flows (`tcp`), in the baseline too, and the result
    carries their figures, judged against the default TCP budgets (`budgets.with_tcp_defaults`). With
    SPEC.sessions, that many idle UDP sessions are opened before the event and probed after it
    (`background`), judged against the default session budgets (`budgets.with_session_defaults`)."""
    def cannot(what: str, exc: Exception) -> CaseError:
        return CaseError(EventError(event=event.name, title=event.title, target=target, flows=spec.flows,
                                    rate=spec.rate, error=f"{what} cannot run: {exc}"))

    # the helpers' own time bound (each is stopped with the case): the case's traffic, and as long as
    # the background sessions' opening, probes and table reads take at their rates
    bound = (TCP_SERVER_S + spec.warmup + spec.hold + spec.settle + spec.down_time + spec.baseline
             + background.work_s(spec.sessions))
    # big session tables: the senders on a CPU of their own for the case (`cpus`)
    with cpus.apart(state, cpus.wanted(spec.sessions, spec.realtime, spec.sender_cpu)) as cpu:
        if cpu is not None:
            spec = replace(spec, sender_cpu=cpu)
        try:
            load = tcpmod.TcpLoad(plan, spec.tcp).serve(bound) if spec.tcp else None
        except LabError as exc:
            raise cannot("the TCP connections", exc) from None
        held: background.SessionLoad | None = None
        try:
            try:
                held = background.SessionLoad(plan, spec.sessions).start(bound) if spec.sessions else None
            except LabError as exc:
                raise cannot("the background sessions", exc) from None
            result = _checked_run(state, plan, event, target, spec, progress, daemon, injector, before_traffic,
                                  load, held)
        finally:
            for running in (load, held):
                if running is not None:
                    running.close()
    defaults: list[budgetsmod.Budget] = []
    if spec.tcp:
        defaults = budgetsmod.with_tcp_defaults(defaults, mnha=bool(plan.mnha))
    if spec.sessions:
        defaults = budgetsmod.with_session_defaults(defaults)
    if defaults:
        result.judge(defaults)
    return result


def _checked_run(state: LabState, plan: LabPlan, event: eventsmod.EventKind, target: str, spec: TrafficSpec,
                 progress: Progress, daemon: str | None, injector: Injector | None,
                 before_traffic: Callable[[], None] | None, tcp: tcpmod.TcpLoad | None,
                 held: background.SessionLoad | None = None) -> EventResult:
    # nexthop-add of an SRX (an MNHA pair) in service: out of service first, the event puts it back in
    taken_out = [n for n in ops.service_group(plan, target) if n not in state.down_nodes] \
        if event.name == "nexthop-add" and target not in state.down_nodes else []
    if taken_out:
        ops.power_off(state, plan, *taken_out)
        time.sleep(1.0)
    checks, behind = preconditions(state, plan, spec, progress, tcp)
    failed = [c for c in checks if not c.ok]
    if failed:
        for node in taken_out:
            ops.power_on(state, plan, node)  # as it was: the event did not run
        # a baseline whose only fault is a sender behind its schedule says nothing of the lab: run again
        raise CaseError(EventError(event=event.name, title=event.title, target=target, flows=spec.flows,
                                   rate=spec.rate, checks=checks,
                                   again=behind and all(c.name == BASELINE_CARRIED for c in failed),
                                   error="; ".join(c.detail for c in failed)))
    if before_traffic is not None:
        before_traffic()
    try:
        try:
            result = _run(state, plan, event, target, spec, progress, daemon, injector or Injector(), tcp, held)
        except BaseException:  # a case that broke before its event put the nodes back leaves them as it found them
            for node in taken_out:
                if node in state.down_nodes:
                    with contextlib.suppress(LabError):
                        ops.power_on(state, plan, node)
            raise
    except (background.NotOpened, background.Ended, baseline.NotStarted) as exc:
        raise CaseError(EventError(event=event.name, title=event.title, target=target, flows=spec.flows,
                                   rate=spec.rate, checks=checks, error=str(exc))) from None
    except sessions.ReadError as exc:
        raise CaseError(EventError(event=event.name, title=event.title, target=target, flows=spec.flows,
                                   rate=spec.rate, checks=checks, error=f"cannot judge the event: {exc}")) from None
    result.checks = checks + (result.checks or []) + keptup.after(result)
    why = keptup.not_judged(result.checks)
    if why:  # the machine, not the lab, decided the figures: no verdict, the case runs again
        raise CaseError(EventError(event=event.name, title=event.title, target=target, flows=spec.flows,
                                   rate=spec.rate, checks=result.checks, result=result, again=True, error=why))
    if not all(c.ok for c in result.checks):
        result.passed = False
    return result


def senders_bound(spec: TrafficSpec, event: str) -> float:
    """The senders' own time bound for EVENT's case (the runner stops them before it): the case's
    phases, MAX_EXTRA_S for the selectors to settle, READINGS_S for the readings before the event, and
    for a lasting event with background sessions, their probe while it lasts (before the restore) and
    the table reads around it (`background.work_s`)."""
    lasting = event in LASTING
    return (spec.warmup + (spec.hold if lasting else 0) + spec.settle
            + (spec.down_time if event.endswith("reboot") else 0) + MAX_EXTRA_S + READINGS_S
            + (background.work_s(spec.sessions) if lasting and spec.sessions else 0.0))


def preconditions(state: LabState, plan: LabPlan, spec: TrafficSpec, progress: Progress,
                  tcp: tcpmod.TcpLoad | None = None) -> tuple[list[Check], bool]:
    """What must hold before an event is injected, each checked and recorded: every selector member
    with an SRX in service in every MX's table, BGP whole, the MNHA pairs in step, and the event's
    traffic carried loss-free and on schedule for a baseline period (only once the rest holds); with
    TCP, its connections established and answering during that baseline. Also whether the baseline
    failed only because a sender fell behind (`baseline.only_behind`)."""
    checks = []
    behind = False
    waiting = wait_selectors_ready(state, plan, timeout=READY_S)
    checks.append(Check(name="selectors ready", ok=not waiting,
                        detail=f"selector members not in their tables after {READY_S:.0f} s: "
                               f"{', '.join(waiting[:6])}" if waiting else "every member in service in every table"))
    unsettled = bgpready.wait_whole(plan, set(state.down_nodes), timeout=BGP_WHOLE_S)
    checks.append(Check(name="BGP settled", ok=not unsettled,
                        detail=f"BGP not settled after {BGP_WHOLE_S:.0f} s: {', '.join(unsettled[:4])}"
                        if unsettled else "every session established, no graceful-restart recovery left"))
    if plan.mnha:
        unsynced = wait_mnha_synced(state, plan, timeout=READY_S)
        checks.append(Check(name="MNHA synced", ok=not unsynced,
                            detail=f"MNHA pairs not in step after {READY_S:.0f} s: {'; '.join(unsynced[:4])}"
                            if unsynced else "every pair in service hears its peer, roles settled"))
    if spec.baseline > 0 and all(c.ok for c in checks):
        tcp_seconds = max(spec.baseline, tcpmod.BASELINE_MIN_S)
        if tcp is not None:
            tcp.start(tcp_seconds)
        try:
            carried = baseline.measure(plan, spec.flows, spec.rate, spec.sizes, spec.baseline, spec.realtime,
                                       spec.sender_cpu, spec.reverse, trafficsetup.families(plan, spec.family))
        except baseline.NotStarted as exc:  # no baseline to judge (the TCP load is closed with the case)
            checks.append(Check(name=BASELINE_CARRIED, ok=False, detail=f"no baseline: {exc}"))
            return checks, False
        why = baseline.judge(carried)
        behind = bool(why) and baseline.only_behind(carried)
        checks.append(Check(name=BASELINE_CARRIED, ok=not why,
                            detail=baseline.cannot_carry(carried, why) if why else
                            f"{spec.baseline:g} s of the event's traffic delivered whole and on schedule"))
        if why:
            progress(f"baseline: {'; '.join(why)}")
        if tcp is not None:
            checks.append(_tcp_baseline(tcp, tcp_seconds, progress))
    return checks, behind


def _tcp_baseline(tcp: tcpmod.TcpLoad, seconds: float, progress: Progress) -> Check:
    """The baseline's TCP connections: every one established and answering to its end."""
    try:
        report = tcp.wait(tcp.opening_s + seconds + 30)
    except LabError as exc:
        return Check(name="TCP baseline answered", ok=False, detail=str(exc))
    why = tcpmod.judge_baseline(report)
    if why:
        progress(f"TCP baseline: {'; '.join(why)}")
    return Check(name="TCP baseline answered", ok=not why, detail=tcpmod.baseline_detail(report, why))


def _run(state: LabState, plan: LabPlan, event: eventsmod.EventKind, target: str, spec: TrafficSpec,
         progress: Progress, daemon: str | None, injector: Injector, tcp: tcpmod.TcpLoad | None,
         held: background.SessionLoad | None = None) -> EventResult:
    fams = trafficsetup.families(plan, spec.family)
    per_flow = spec.rate / spec.flows
    lasting = event.name in LASTING
    # The senders run until stopped (bounded by MAX_EXTRA_S and READINGS_S): the traffic goes on until the
    # selectors have settled after the event (and its restore), then for spec.settle more seconds.
    total = senders_bound(spec, event.name)
    mx_ns = [ns for n in load_balancers(plan) for ns in n.namespaces if ns.endswith("-trust-vr")]
    # CGNAT: the server sees each flow's NAT binding, not the subscriber; the forward receiver
    # publishes the bindings on a FIFO and the reverse sender answers them (and follows a re-bind).
    scratch = tempfile.mkdtemp(prefix="lab-events-") if trafficsetup.needs_bindings(plan, fams, spec.reverse) \
        else None
    setups = trafficsetup.by_family(plan, fams, spec.flows, spec.rate, spec.sizes, total, reverse=spec.reverse,
                                    fifo_dir=scratch, socket_mode=spec.receiver == "socket", realtime=spec.realtime,
                                    cpu=spec.sender_cpu)
    flows = [f for setup in setups.values() for f in setup.flows]
    sampler = Sampler(mx_ns, selector_configs(plan)).start()
    watcher = TableWatcher(selector_status_files(state, plan)).start()
    routes = routelog.RouteLog([ns.name for ns in plan.namespaces]).start()
    bgp = bgplog.BgpLog({f"{r.node} {r.name}": r.log for r in state.processes
                         if r.name.startswith("bird") and r.log}).start()
    children: dict[tuple[int, str], Any] = {}  # (family, job name) -> the spawned process
    marks: dict[str, float] = {}
    tcp_report: dict[str, Any] | None = None
    tcp_before: dict[str, int] = {}
    got: dict[tuple[int, str], dict[str, Any] | None] = {}  # (family, tx-/rx- forward/reverse) -> its report
    opened: list[tuple[str, int]] = []
    held_before: tuple[dict[tuple[str, int], str], dict[tuple[str, int], set[str]]] = ({}, {})
    unanswered: set[tuple[str, int]] = set()
    probe_at: float | None = None

    sampler_early = background.EarlySampler(held) if held is not None else None
    early: background.Early | None = None

    def probe() -> None:
        nonlocal unanswered, probe_at, early
        if held is not None and sampler_early is not None:
            early = sampler_early.result()  # its datagrams and answers are done before the whole's
            probe_at = round(time.monotonic_ns() / 1e9 - marks["event"], 3)
            unanswered = held.probe()

    if held is not None:  # opened before the flows start: their burst does not load the measured traffic
        opened = background.open_all(held, progress)
        held_before = background.wait_synced(plan, opened)
        held.prepare_sample()
    cpu_probe = cpuwait.CpuWait().start()
    waits: list[list[float]] | None = None
    try:
        if tcp is not None:  # opened first: every connection is established before the event
            tcp_open = time.monotonic() + tcp.opening_s + 1.0
            tcp.start(total)
        for step in trafficsetup.start_steps(setups):
            for fam, name, _, job in step:
                children[(fam, name)] = job.spawn()  # in CHILDREN at once: stopped if it never starts
                baseline.started(children[(fam, name)], fam, name)
            if step[0][1] == "tx-forward":
                time.sleep(0.3)  # the forward packets open the sessions the reverse flows need
        marks["traffic"] = time.monotonic_ns() / 1e9
        time.sleep(max(0.0, spec.warmup - 0.8))
        before = carriers(plan, flows=flows)
        if tcp is not None:
            time.sleep(max(0.0, tcp_open - time.monotonic()))
            tcp_before = tcpmod.carried(plan, tcp.port)
        marks["readings"] = time.monotonic_ns() / 1e9
        crash: dict[str, Any] = {}
        involved: set[str] | None = None
        if event.name == "daemon-crash":
            daemon = daemon or ops.default_daemon(state, target)
            involved = carried_by(plan, target)
            crash = {"daemon": daemon, "restarts_before": getattr(_slot(state, target, daemon), "restarts", 0)}
        progress(f"{event.name} on {target}" + (f" ({daemon})" if crash else "")
                 + (f", {families.label(fams)} flows" if fams != [4] else ""))
        marks["event"] = time.monotonic_ns() / 1e9
        if sampler_early is not None:  # a sample of the sessions asked right after the event
            sampler_early.start(marks["event"])
        summary = injector.inject(state, plan, event.name, target, down_time=spec.down_time, daemon=daemon)
        during: dict[tuple[str, int], str] = {}
        if lasting:
            time.sleep(max(0.0, spec.hold - 0.5))
            try:
                during = carriers(plan, flows=flows)
                probe()  # the sessions asked while the event lasts: the node that took over answers
            except LabError:  # a case not judged still leaves the lab as it found it: restored
                injector.restore(state, plan, target)
                raise
            marks["restore"] = time.monotonic_ns() / 1e9
            restored = injector.restore(state, plan, target)
            summary += "; restored: " + ("; ".join(restored) or "nothing")
            progress("restored")
        marks["settled"], settled = wait_settled(state, plan, timeout=MAX_EXTRA_S - 5)
        time.sleep(max(0.0, spec.settle - 0.4))
        after = carriers(plan, flows=flows)
        for (fam, name), child in children.items():
            if name.startswith("tx-"):
                got[(fam, name)] = child.stop(timeout=30)
        time.sleep(0.3)
        for (fam, name), child in children.items():
            if name.startswith("rx-"):
                got[(fam, name)] = child.stop(sent=got.get((fam, name.replace("rx-", "tx-"))))
        if tcp is not None:
            tcp_report = tcp.stop()
        marks["stopped"] = time.monotonic_ns() / 1e9
        waits = cpu_probe.stop()
        if not lasting:  # once the measured traffic has stopped: the probe's burst does not delay its senders
            probe()
    except BaseException:
        for child in children.values():
            child.kill()
        raise
    finally:
        cpu_probe.stop(timeout=2)  # already stopped on the way through (then a no-op)
        sampler.stop()
        watcher.stop()
        with contextlib.suppress(Exception):  # the route log is a clue: it never hides the case's own error
            routes.stop()
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)
    # the events that take a whole MNHA pair out (or put it in): every flow of the pair is involved
    pair = next((p for p in plan.mnha if target in p), None) \
        if event.name in ("mnha-pair-power-off", "nexthop-delete", "nexthop-add") else None
    # A lasting event's restore step moves flows too (the returning SRX takes its share back, and
    # those flows' first return packets may reach it before their forward ones open a session):
    # they are affected by the restore, not "unaffected".
    moved_back = {key for key, srx in after.items() if during.get(key) not in (None, srx)} if during else set()
    if involved is None and event.target == eventsmod.LOAD_BALANCER and event.name != "mx-reboot" and watcher.samples:
        involved = set()  # the MX's tables say which flows may move: any other loss is unaffected
    expected = expected_movers(state, plan, watcher.samples, flows, marks, event.name)

    def judge(fams_judged: list[int]) -> EventResult:
        def merged(name: str) -> dict[str, Any] | None:
            merge = families.merge_sent if name.startswith("tx-") else families.merge_reports
            return merge([got.get((f, name)) for f in fams_judged])

        return analyse(event, target, summary, [f for fam in fams_judged for f in setups[fam].flows], before,
                       during or after, merged("rx-forward") or {}, merged("rx-reverse"), merged("tx-forward") or {},
                       per_flow, marks, sampler, pair, moved_back, merged("tx-reverse"), involved=involved,
                       nat=any(trafficsetup.translated(plan, f) for f in fams_judged), expected=expected,
                       carriers_after=after if during else None,
                       pools=nat_pools([(n.name, n.nat_pool) for n in plan.nodes]
                                       + [(n.name, n.nat64_pool) for n in plan.nodes], plan.mnha))

    result = judge(fams)
    if fams != [4]:  # IPv6 or NAT64 in the run: each family judged on its own flows too
        families.attach(result, {fam: judge([fam]) for fam in fams})
    if crash:
        # The supervisor's own account: how long the daemon was down before it ran again.
        slot = _slot(state, target, crash["daemon"])
        from ..runtime import supervisor

        crash["restarts_after"] = getattr(slot, "restarts", 0)
        crash["down_s"] = getattr(slot, "last_down_s", None)
        crash["running"] = slot is not None and supervisor.slot_alive(slot)
        crash["returned"] = bool(crash["running"] and crash["restarts_after"] > crash["restarts_before"]
                                 and crash["down_s"] is not None and crash["down_s"] <= DAEMON_RETURN_S)
        result.daemon_crash = DaemonCrash(**crash)
        result.passed = result.passed and bool(crash["returned"])
    # how well the senders kept their schedule (a late packet due during an outage is not lost)
    result.senders = {name + ("" if fam == 4 else f" {ipfamily.name(fam)}"):
                      {k: v for k, v in sent.items() if k != "per_flow_sent"}
                      for fam in fams for name in ("forward", "reverse")
                      if (sent := got.get((fam, f"tx-{name}"))) is not None}
    result.checks = [Check(name="settled after the event", ok=settled, when="after",
                           detail="every member in service back in every selector table, no change for 2 s"
                           if settled else f"the selector tables did not settle within {MAX_EXTRA_S - 5:.0f} s "
                           "after the event: the carriers after it were read on an unsettled lab"),
                     keptup.cpu_left(waits, marks)]
    if early is not None:
        result.checks.append(keptup.sample_in_time(early.sent_by_s, background.SAMPLE_BY_S))
    changes = routes.changes()
    result.routes_changed = routelog.counts(changes)
    result.routes_unmonitored = routes.unmonitored or None
    # what the routers did from a second before the event: written out only for a case that fails
    # (here, or later by a check or a budget: EventResult.to_json decides on the final status)
    result.route_changes = [RouteChange(at_s=round(c.at - marks["event"], 3), ns=c.ns, change=c.change)
                            for c in routelog.kept(changes, since=marks["event"] - 1.0)]
    # ...and what their BIRDs said about it (why a session went down, how a graceful restart went)
    result.bgp_log = [BgpLogLine(at_s=round(x.at - marks["event"], 3), log=x.log, level=x.level, text=x.text)
                      for x in bgplog.kept(bgp.lines(), since=marks["event"] - 1.0)]
    if tcp_report is not None:
        result.tcp = TcpFigures.model_validate(tcpmod.figures(tcp_report, tcp_before, marks.get("event")))
    if held is not None:
        result.sessions = SessionFigures.model_validate(background.figures(
            held.count, opened, *held_before, background.peer_of(plan), background.taken_out(plan, event.name, target),
            unanswered, probe_at, early))
    if during:
        result.flows_moved_on_restore = len(moved_back)
        result.flows_moved_on_restore_ideal_max = round(len(flows) / max(1, len(set(after.values()))))
    return result

