"""Convergence budgets for `lab events run`: a CI job fails when an event exceeds what the design allows.

A budget is a metric, a limit and optionally one event: `--max-convergence-ms 300` holds for every
event, `--budget srx-power-off:convergence_ms=500` for that event only (it overrides the global one
for that metric). Each event's report gets its budget verdicts; `violations` says in one line each
which event broke which budget with what it measured. Pure: no I/O, unit-tested.

Metrics (of an event's report, see `eventverdict.analyse`):
- `convergence_ms`: the longest loss-derived convergence of an affected flow (lost / per-flow rate);
- `unaffected_loss`: packets lost by flows the event should not touch. An MX-target event (mx-reboot,
  restart-routing, gres...) touches every flow, since every flow crosses that MX: all its flows count as
  affected and its unaffected loss is 0 by definition; its budget is `convergence_ms`;
- `longest_gap_ms`: the longest gap between two packets of any flow;
- `flows_moved_excess`: flows moved between SRXs beyond the ideal (the failed SRX's own flows);
- with long-lived TCP connections beside the flows (`--tcp`): `tcp_reset_pct` (the share reset, in
  %), `tcp_reset`, `tcp_failed` (never established after the retries), `tcp_stuck` (timed out, or
  open but no longer answering at the end), `tcp_longest_gap_ms`. They hold only for events run
  with TCP; `with_tcp_defaults` adds the JVD's: under 1 % reset for every event, and on a lab with MNHA
  pairs none reset, none failed and none stuck for the events MNHA is bought for (TCP_GOAL_EVENTS).
  Elsewhere a connection may well be stuck without a fault of the lab: its session was lost (no MNHA
  peer, a whole pair or the only MX down) or its retransmissions backed off past the end of the run;
- with background sessions (`--sessions`): `sessions_lost_pct` and `sessions_lost`, the judged
  sessions whose reverse datagram did not pass after the event (those of an SRX taken out with its
  MNHA peer, or without one, are expected lost and not judged). `with_session_defaults` adds the
  JVD's: at least 99.99 % pass (at most 0.01 % lost) for the events that take SRXs out
  (SESSION_GOAL_EVENTS). `sessions_early_lost_pct`: the same of the sample probed right after the
  event (its datagrams sent within 2 s of it), with the same default.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..model.diagnostics import LabError, did_you_mean

METRICS: dict[str, str] = {
    "convergence_ms": "longest convergence of an affected flow (ms)",
    "unaffected_loss": "packets lost by unaffected flows",
    "longest_gap_ms": "longest gap of any flow (ms)",
    "flows_moved_excess": "flows moved beyond the ideal",
    "tcp_reset_pct": "share of the TCP connections reset (%)",
    "tcp_reset": "TCP connections reset",
    "tcp_failed": "TCP connections never established after their retries",
    "tcp_stuck": "TCP connections timed out or no longer answering at the end",
    "tcp_longest_gap_ms": "longest gap between two answers of a TCP connection (ms)",
    "sessions_lost_pct": "share of the judged background sessions whose reverse packet did not pass (%)",
    "sessions_lost": "judged background sessions whose reverse packet did not pass",
    "sessions_early_lost_pct": "share of the judged sampled sessions whose reverse packet did not pass right "
                               "after the event (%)",
}
# the JVD: "< 1 % resets can be seen during failure-event testing", none during the basic MNHA failovers
TCP_RESET_PCT = 1.0
TCP_GOAL_EVENTS = ("srx-power-off", "srx-link-failure", "srx-reboot")
# the JVD: sessions recover after every failure event at a million per pair; the issue of a session is
# told exactly by its reverse packet, so the goal is the whole table: at most 0.01 % lost
SESSIONS_LOST_PCT = 0.01
SESSION_GOAL_EVENTS = ("srx-power-off", "srx-link-failure", "srx-reboot", "mnha-pair-power-off", "nexthop-delete")
_SPEC = re.compile(r"^(?:(?P<event>[a-z][a-z0-9-]*):)?(?P<metric>[a-z_]+)=(?P<limit>\d+(?:\.\d+)?)$")


class BudgetError(LabError):
    """A budget option that cannot be read: bad input, exit 2."""

    exit_code = 2


@dataclass(frozen=True)
class Budget:
    metric: str
    limit: float
    event: str | None = None  # None: every event

    def describe(self) -> str:
        return f"{self.metric} <= {self.limit:g}"


def measured(result: dict[str, Any], metric: str) -> float:
    if metric == "sessions_early_lost_pct":
        return float(result["sessions"]["early"]["lost_pct"])
    if metric.startswith("sessions_"):
        return float(result["sessions"]["lost_pct" if metric == "sessions_lost_pct" else "lost"])
    if metric.startswith("tcp_"):
        tcp = result["tcp"]
        if metric == "tcp_reset_pct":
            return round(100.0 * tcp["reset"] / tcp["connections"], 3) if tcp["connections"] else 0.0
        if metric == "tcp_stuck":
            return float(tcp["timed_out"] + tcp["stuck"])
        return float(tcp[metric.removeprefix("tcp_")])
    if metric == "convergence_ms":
        return float(result["convergence_ms"]["max"])
    if metric == "unaffected_loss":
        return float(result["packets_lost_by_unaffected_flows"])
    if metric == "longest_gap_ms":
        return float(result["longest_gap_ms"])
    if metric == "flows_moved_excess":
        ideal = result.get("flows_moved_ideal") or 0
        return float(max(0, result["flows_moved"] - ideal)) if ideal else 0.0
    raise KeyError(metric)


def parse(spec: str, known_events: set[str] | None = None) -> Budget:
    """`[EVENT:]METRIC=LIMIT` -> Budget; a LabError (exit 2) saying what is wrong otherwise."""
    match = _SPEC.match(spec.strip())
    if not match:
        raise BudgetError(f"--budget {spec!r}: expected [EVENT:]METRIC=LIMIT, e.g. srx-power-off:convergence_ms=300")
    metric, event = match["metric"], match["event"]
    if metric not in METRICS:
        raise BudgetError(f"--budget {spec!r}: unknown metric {metric}; known: {', '.join(METRICS)}")
    if event is not None and known_events is not None and event not in known_events:
        raise BudgetError(f"--budget {spec!r}: unknown event {event}{did_you_mean(event, known_events)}; "
                          f"known: {', '.join(sorted(known_events))}")
    return Budget(metric, float(match["limit"]), event)


def collect(max_convergence_ms: float | None, max_unaffected_loss: int | None, specs: list[str],
            known_events: set[str] | None = None) -> list[Budget]:
    budgets = []
    if max_convergence_ms is not None:
        budgets.append(Budget("convergence_ms", float(max_convergence_ms)))
    if max_unaffected_loss is not None:
        budgets.append(Budget("unaffected_loss", float(max_unaffected_loss)))
    budgets += [parse(spec, known_events) for spec in specs]
    return budgets


def with_tcp_defaults(budgets: list[Budget], mnha: bool) -> list[Budget]:
    """BUDGETS and the default TCP budgets (see the top) the user did not set: a user's budget of a
    metric, for every event or for one, replaces the defaults of that metric it covers."""
    defaults = [Budget("tcp_reset_pct", TCP_RESET_PCT)]
    if mnha:
        defaults += [Budget(metric, 0.0, event) for event in TCP_GOAL_EVENTS
                     for metric in ("tcp_reset", "tcp_failed", "tcp_stuck")]
    given = {(b.metric, b.event) for b in budgets}
    return [*budgets, *(d for d in defaults if (d.metric, None) not in given and (d.metric, d.event) not in given)]


def with_session_defaults(budgets: list[Budget]) -> list[Budget]:
    """BUDGETS and the default session budgets (see the top) the user did not set, as `with_tcp_defaults`."""
    defaults = [Budget(metric, SESSIONS_LOST_PCT, event) for event in SESSION_GOAL_EVENTS
                for metric in ("sessions_lost_pct", "sessions_early_lost_pct")]
    given = {(b.metric, b.event) for b in budgets}
    return [*budgets, *(d for d in defaults if (d.metric, None) not in given and (d.metric, d.event) not in given)]


def applicable(budgets: list[Budget], event: str, tcp: bool = True, sessions: bool = True) -> list[Budget]:
    """The budgets that hold for EVENT: per-event ones override the global one of the same metric;
    the TCP metrics only for an event run with TCP, the session metrics only with background sessions."""
    budgets = [b for b in budgets if (tcp or not b.metric.startswith("tcp_"))
               and (sessions or not b.metric.startswith("sessions_"))]
    own = {b.metric: b for b in budgets if b.event == event}
    general = {b.metric: b for b in budgets if b.event is None and b.metric not in own}
    return [*general.values(), *own.values()]


def judge(result: dict[str, Any], budgets: list[Budget]) -> list[dict[str, Any]]:
    """Verdicts of the budgets that hold for this event's report."""
    rows = []
    early = bool((result.get("sessions") or {}).get("early"))
    for budget in applicable(budgets, result["event"], tcp=bool(result.get("tcp")),
                             sessions=bool(result.get("sessions"))):
        if budget.metric == "sessions_early_lost_pct" and not early:
            continue  # a report without the sample (written before it was taken): nothing to judge
        value = measured(result, budget.metric)
        rows.append({"metric": budget.metric, "limit": budget.limit, "measured": value,
                     "ok": value <= budget.limit, "scope": budget.event or "all events"})
    return rows


def violations(result: dict[str, Any]) -> list[str]:
    """One sentence per broken budget of a judged report (its "budgets" rows)."""
    return [f"{result['event']} on {result['target']} broke the budget {row['metric']} <= {row['limit']:g} "
            f"({row['scope']}): measured {row['measured']:g}"
            for row in result.get("budgets", []) if not row["ok"]]


def apply_to_report(doc: dict[str, Any], budgets: list[Budget]) -> list[str]:
    """`lab report`: judge every case's event result against BUDGETS; a case that broke one fails.
    Returns the sentences of every broken budget. A case run with TCP keeps the default TCP budgets
    the options do not replace (its lab's `mnha` says whether the goal of no reset holds)."""
    broken: list[str] = []
    for case in doc.get("cases", []):
        result = case.get("result")
        if not result:
            continue
        mnha = bool(doc.get("labs", {}).get(case.get("lab"), {}).get("mnha"))
        held = with_tcp_defaults(budgets, mnha) if result.get("tcp") else budgets
        result["budgets"] = judge(result, with_session_defaults(held) if result.get("sessions") else held)
        lines = violations(result)
        if lines and case.get("status") == "passed":
            case["status"] = "failed"
        broken += [f"{case.get('lab', '?')}: {line}" for line in lines]
    return broken
