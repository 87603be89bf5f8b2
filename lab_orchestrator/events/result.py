"""The result of one failure event run under traffic (`lab events run`, `lab report`), typed.

`events.run.run_event` builds it (`events.verdict.analyse`), the CLI prints it, the JUnit and plot writers
and the JSON writers read it. `to_json()` gives the documented JSON form (docs/events.md: same keys, same order
as always; the optional parts `daemon_crash`, `flows_moved_on_restore`,
`flows_moved_on_restore_ideal_max`, `budgets`, `tcp`, `sessions`, `routes_changed`, `routes_unmonitored`,
`route_changes` and `bgp_log` (the last two a failed case's) only when they apply), `from_json()` reads it back
with validation. The receivers' and senders' own reports (`forward`, `reverse`, `senders`) are the
traffic generator's format (dataplane.traffic), kept as they are.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ..model import ipfamily
from ..model.diagnostics import LabError
from . import budgets as budgetsmod

DAEMON_RETURN_S = 5.0  # daemon-crash passes only if the daemon runs again within this
OPTIONAL = ("runs_not_judged", "daemon_crash", "flows_moved_on_restore",
            "flows_moved_on_restore_ideal_max", "budgets", "checks", "tcp",
            "sessions", "families", "routes_changed", "routes_unmonitored", "route_changes", "bgp_log")


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, validate_assignment=True)


class Convergence(_Model):
    max: float
    median: float


class PhaseFigures(_Model):
    """One phase (the event, its restore): flows the MX selector tables moved vs those seen moving."""

    expected_movers: int
    movers: int
    ideal: int
    unexpected_movers: int
    expected_but_stayed: int
    members: list[int]  # selector members before, after
    bucket_share_moved: float | None
    bucket_share_ideal: float
    buckets: int
    cross_mx_movers: int = 0  # of the expected movers: buckets the two MXs' tables disagree on (SRD labs)


class FlowRow(_Model):
    """One flow, both directions (same flow id)."""

    flow: int
    src: str
    carrier_before: str | None
    carrier_during: str | None
    carrier_after: str | None
    # CGNAT: the SRX whose NAT pool the flow's first binding is from, which its return traffic is routed to
    reverse_carrier_before: str | None = None
    srx_before: str | None  # older names of the first two
    srx_after: str | None
    expected_mover: dict[str, bool]
    mover: dict[str, bool | None]
    lost_forward: int
    lost_reverse: int
    convergence_ms: float
    max_gap_ms: float
    max_gap_forward_ms: float = 0.0  # each direction's longest gap (a capture compares each with its own)
    max_gap_reverse_ms: float | None = None  # None: no reverse traffic
    gap_at_s: list[float | None]  # where each direction's longest gap started, seconds from the event
    recovered: bool
    moved: bool
    moved_on_restore: bool
    bindings: list[str] | None  # CGNAT: the bindings the server saw, in order
    rebound: bool
    lost: int


class DaemonCrash(_Model):
    daemon: str
    restarts_before: int
    restarts_after: int = 0
    down_s: float | None = None
    running: bool = False
    returned: bool = False


class TcpStall(_Model):
    source: str  # the connection's client address
    gap_ms: float
    at_s: float | None  # where the gap started, seconds from the event
    outcome: str


class TcpFigures(_Model):
    """The long-lived TCP connections run beside the UDP flows (`--tcp`): per outcome how many."""

    connections: int
    completed: int  # open and answering to the end
    reset: int
    failed: int  # never established after the retries
    timed_out: int  # a request unanswered for the client's timeout
    stuck: int  # open at the end but unanswered since (after waiting for them)
    retried: int  # connection attempts after a failed one
    longest_gap_ms: float  # the longest time between two answers of one connection
    stalled: int  # connections with a gap longer than stall_ms
    stall_ms: float
    interval_ms: float  # a request on each connection this often
    carried_before: dict[str, int]  # SRX -> connections it carried before the event
    stalls: list[TcpStall]  # the longest gaps (at most 10)

    def line(self) -> str:
        """One line for the terminal."""
        carried = ", ".join(f"{srx} {n}" for srx, n in self.carried_before.items() if n) or "none seen"
        return (f"TCP {self.connections} connections: {self.completed} completed, {self.reset} reset, "
                f"{self.failed} failed, {self.timed_out} timed out, {self.stuck} stuck, {self.retried} retried; "
                f"longest gap {self.longest_gap_ms:.0f} ms, {self.stalled} over {self.stall_ms:.0f} ms "
                f"(carried before: {carried})")


class EarlySample(_Model):
    """Every STEP-th background session, sent two reverse datagrams right after the event: did they
    pass within the JVD's 2 s? (events.background: judged as the whole, `sessions_early_lost_pct`)"""

    step: int
    sampled: int
    at_s: float  # the first datagram, from the event
    sent_by_s: float  # the last one
    judged: int
    failed_over: int
    survived: int
    lost: int
    lost_pct: float
    expected_lost: int


class SessionFigures(_Model):
    """The background sessions run beside the flows (`--sessions`, events.background): did the
    reverse datagram of each pass after the event?"""

    sessions: int
    opened: int  # answered before the event
    carried_before: dict[str, int]  # SRX -> sessions it carried before the event
    synced_before: dict[str, int]  # SRX -> of those, with a copy on its MNHA peer before the event
    not_seen: int  # opened sessions no SRX's table showed as carried
    taken_out: list[str]  # the SRXs the event took out
    expected_lost: int  # carried by an SRX taken out with its MNHA peer (or without one): not judged
    expected_lost_passed: int  # of those, the sessions whose reverse datagram passed all the same
    judged: int
    failed_over: int  # judged sessions whose SRX was taken out: its MNHA peer had to take them over
    survived: int  # of those, the sessions whose reverse datagram passed
    lost: int  # judged sessions whose reverse datagram did not pass
    lost_pct: float
    lost_sessions: list[str]  # the first 10 lost: "ADDR:PORT (carrier)"
    probe_at_s: float | None  # when the reverse datagrams were sent, from the event
    early: EarlySample | None = None  # the sample probed right after the event

    def line(self) -> str:
        """One line for the terminal."""
        carried = ", ".join(f"{srx} {n}" + (f" ({self.synced_before.get(srx, 0)} synced)" if self.synced_before else "")
                            for srx, n in self.carried_before.items()) or "none seen"
        out = (f"sessions {self.opened}: carried before by {carried}; "
               f"{self.survived} of {self.failed_over} failed over passed, {self.lost} of {self.judged} judged lost "
               f"({self.lost_pct:g} %)")
        if self.expected_lost:
            out += f"; {self.expected_lost} expected lost with {', '.join(self.taken_out)}"
        if self.early is not None:
            out += (f"; sample sent {self.early.at_s:g}-{self.early.sent_by_s:g} s after the event: "
                    f"{self.early.lost} of {self.early.judged} judged lost")
        return out


class BudgetVerdict(_Model):
    metric: str
    limit: float
    measured: float
    ok: bool
    scope: str


class Check(_Model):
    """One condition the runner checked around an event: before it (selectors ready, BGP settled,
    MNHA pairs synced, baseline carried) or after it (the selector tables settled)."""

    name: str
    ok: bool
    detail: str = ""
    when: Literal["before", "after"] = "before"


class FamilyVerdict(_Model):
    """One family's share of an event run with IPv4, IPv6 or NAT64 flows side by side: its own flows,
    senders and receivers, judged alone by the same rules (`verdict.analyse`)."""

    family: int
    flows: int
    affected_flows: int
    unaffected_flows: int
    convergence_ms: Convergence
    longest_gap_ms: float
    packets_lost_by_unaffected_flows: int
    flows_moved: int
    recovered: bool
    passed: bool
    received: int  # both directions
    lost: int  # both directions, affected flows included


class RouteChange(_Model):
    """A route added, replaced or deleted in one of the lab's namespaces during the case (events.routelog)."""

    at_s: float  # seconds from the event
    ns: str
    change: str  # as iproute2 prints it ("Deleted 198.51.100.0/28 via 198.18.0.11 dev ge-0-2-1 proto bird ...")


class BgpLogLine(_Model):
    """A line a BIRD of the lab logged during the case (events.bgplog)."""

    at_s: float  # seconds from the event
    log: str  # node and daemon ("mx1 bird-untrust-vr")
    level: str  # TRACE, INFO, WARN, ERR...
    text: str  # as BIRD wrote it ("core_gw_untrust: Neighbor graceful restart detected")


class EventResult(_Model):
    event: str
    title: str
    target: str
    action: str
    flows: int
    rate_per_flow_pps: float
    resolution_ms: float
    affected_flows: int
    unaffected_flows: int
    convergence_ms: Convergence
    longest_gap_ms: float
    packets_lost_by_unaffected_flows: int
    flows_moved: int
    flows_rebound: int
    phases: dict[str, PhaseFigures]
    tables_missed: int | None
    verdict_from: Literal["selector tables", "observed carriers"]
    flows_moved_ideal: int
    recovered: bool
    passed: bool
    forward: dict[str, Any]  # the forward receiver's report (dataplane.traffic)
    reverse: dict[str, Any]  # the reverse receiver's ({} without reverse traffic)
    # event, restore, settled; traffic (the senders started), readings (the carriers read before the event):
    # CLOCK_MONOTONIC seconds
    marks: dict[str, float]
    timeline: list[tuple[float, dict[str, float]]]  # (time, pps per SRX from the MX counters)
    per_flow: list[FlowRow]
    daemon_crash: DaemonCrash | None = None
    senders: dict[str, dict[str, Any]] = {}
    flows_moved_on_restore: int | None = None
    flows_moved_on_restore_ideal_max: int | None = None
    budgets: list[BudgetVerdict] | None = None
    checks: list[Check] | None = None  # what the runner checked before (and after) the event
    tcp: TcpFigures | None = None  # with --tcp: the long-lived TCP connections beside the flows
    sessions: SessionFigures | None = None  # with --sessions: the background sessions beside the flows
    families: dict[str, FamilyVerdict] | None = None  # "4", "6", "64": each family's verdict (IPv6 or NAT64 in the run)
    routes_changed: dict[str, int] | None = None  # namespace -> route changes during the case
    routes_unmonitored: list[str] | None = None  # namespaces whose route monitor had ended by itself
    route_changes: list[RouteChange] | None = None  # the changes themselves (the first 80 from 1 s before
    # the event); in the JSON of a failed case only
    bgp_log: list[BgpLogLine] | None = None  # the BIRDs' log lines (the first 120 from 1 s before the
    # event); in the JSON of a failed case only
    runs_not_judged: list[str] | None = None  # earlier runs of this case the generator could not keep on
    # schedule (`TrafficSpec.reruns`), each one's reason; this run is the verdict

    @property
    def status(self) -> Literal["passed", "failed"]:
        return "passed" if self.passed and all(b.ok for b in self.budgets or []) else "failed"

    def to_json(self) -> dict[str, Any]:
        data = self.model_dump(mode="json")
        for key in OPTIONAL:
            if data[key] is None:
                del data[key]
        data["status"] = self.status
        if data["status"] == "passed":
            data.pop("route_changes", None)
            data.pop("bgp_log", None)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> EventResult:
        return cls.model_validate_json(json.dumps({k: v for k, v in data.items() if k != "status"}))

    def judge(self, budgets: list[budgetsmod.Budget]) -> None:
        """Record the verdicts of the budgets that hold for this event."""
        self.budgets = [BudgetVerdict(**row) for row in budgetsmod.judge(self.to_json(), budgets)]

    def violations(self) -> list[str]:
        """One sentence per budget this event broke."""
        return budgetsmod.violations(self.to_json())

    def phase_lines(self) -> list[str]:
        """Per phase of the selector-table verdict, one line: flows moved (seen on the SRXs) against
        the tables' expected movers and the ideal share, and the share of the table that moved."""
        lines = []
        for name, ph in self.phases.items():
            share = "" if ph.bucket_share_moved is None else (
                f"; table: {ph.bucket_share_moved:.1%} of {ph.buckets} buckets moved "
                f"(ideal {ph.bucket_share_ideal:.1%}, members {ph.members[0]} -> {ph.members[1]})")
            extra = [f"{ph.unexpected_movers} unexpected"] if ph.unexpected_movers else []
            if ph.expected_but_stayed:
                extra.append(f"{ph.expected_but_stayed} expected but stayed")
            lines.append(f"  {name}: {ph.movers} flows moved, {ph.expected_movers} expected from the tables, "
                         f"ideal {ph.ideal}" + (f" ({', '.join(extra)})" if extra else "") + share)
        return lines

    def failure_reasons(self) -> list[str]:
        """Why the event failed (empty when it passed and kept its budgets)."""
        why = self.violations()
        if self.passed and not why:
            return []
        if not self.recovered:
            why.append("not every flow recovered after the event")
        if self.packets_lost_by_unaffected_flows:
            why.append(f"unaffected flows lost {self.packets_lost_by_unaffected_flows} packets")
        for name, fam in (self.families or {}).items():
            if not fam.passed:
                lost = fam.packets_lost_by_unaffected_flows
                why.append(f"{ipfamily.name(int(name))}: " + (f"{lost} packets lost by unaffected flows" if lost else
                                                              "not every flow recovered" if not fam.recovered
                                                              else "failed"))
        why += [c.detail for c in self.checks or [] if not c.ok]
        if self.daemon_crash and not self.daemon_crash.returned:
            why.append(f"{self.daemon_crash.daemon} was not running again within {DAEMON_RETURN_S:.0f} s")
        return why or ["the event's verdict failed"]


class EventError(_Model):
    """A case the runner could not judge: a precondition failed, the lab could not be read, or the
    senders fell behind their schedule during the event, so no verdict on the event is given.
    `lab events run` exits 3 when a case is an error and none failed."""

    event: str
    title: str
    target: str
    status: Literal["error"] = "error"
    error: str  # the reason, one sentence
    flows: int
    rate: float  # aggregate packets/s per direction
    checks: list[Check] = []
    result: EventResult | None = None  # the figures, when the event ran but cannot be trusted
    # the cause is the machine, not the lab (the generator fell behind): a run again may be judged
    again: bool = False
    runs_not_judged: list[str] = []  # earlier runs of this case that could not be judged, each's reason

    def to_json(self) -> dict[str, Any]:
        data = self.model_dump(mode="json", exclude={"result"})
        if self.result is not None:
            data["result"] = self.result.to_json()
        return data


class CaseError(LabError):
    """Raised by the runner when a case cannot be judged; carries its `EventError`."""

    def __init__(self, error: EventError):
        super().__init__(error.error)
        self.error = error
