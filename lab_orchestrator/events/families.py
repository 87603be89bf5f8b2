"""IPv4, IPv6 and NAT64 flows side by side in one event (`lab events run --family`).

Each family has its own senders and receivers (`trafficsetup.by_family`); the event is judged on all
flows together (`verdict.analyse` on the merged reports: the figures of the run) and on each family's
flows alone (its `FamilyVerdict`). The event passes only if every family passes on its own, so a
loss confined to the IPv6 flows fails it even when it is small beside the IPv4 figures.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..model.ipfamily import name as family_name
from .result import EventResult, FamilyVerdict

SUMMED = ("flows", "received", "lost", "duplicates", "reordered", "foreign", "flows_with_loss", "flows_never_seen",
          "flows_rebound", "socket_drops")


def merge_reports(reports: Sequence[dict[str, Any] | None]) -> dict[str, Any] | None:
    """One receiver report for several receivers of one direction (each family's): per-flow rows
    together, counts summed, the longest gap and the span over all; None when there is none."""
    given = [r for r in reports if r is not None]
    if not given:
        return None
    if len(given) == 1:
        return given[0]
    out = dict(given[0])
    out["per_flow"] = [row for r in given for row in r.get("per_flow", [])]
    for key in SUMMED:
        out[key] = sum(int(r.get(key) or 0) for r in given)
    gaps = [r["max_gap_ms"] for r in given if r.get("max_gap_ms") is not None]
    out["max_gap_ms"] = max(gaps) if gaps else None
    firsts = [r["first_seen_ns"] for r in given if r.get("first_seen_ns")]
    lasts = [r["last_seen_ns"] for r in given if r.get("last_seen_ns")]
    out["first_seen_ns"] = min(firsts) if firsts else None
    out["last_seen_ns"] = max(lasts) if lasts else None
    out["pps"] = sum(float(r.get("pps") or 0.0) for r in given)
    out["convergence_ms"] = None  # per flow in the verdict's rows; each family's in its own report
    return out


def merge_sent(sent: Sequence[dict[str, Any] | None]) -> dict[str, Any] | None:
    """One sender report for several (each family's): per-flow counts together, the last end."""
    given = [s for s in sent if s is not None]
    if not given:
        return None
    if len(given) == 1:
        return given[0]
    out = dict(given[0])
    out["per_flow_sent"] = {k: v for s in given for k, v in s.get("per_flow_sent", {}).items()}
    out["sent"] = sum(int(s.get("sent") or 0) for s in given)
    out["end_ns"] = max(int(s.get("end_ns") or 0) for s in given)
    return out


def verdict_of(family: int, result: EventResult) -> FamilyVerdict:
    """FAMILY's verdict from the `analyse` of its own flows."""
    return FamilyVerdict(
        family=family, flows=result.flows, affected_flows=result.affected_flows,
        unaffected_flows=result.unaffected_flows, convergence_ms=result.convergence_ms,
        longest_gap_ms=result.longest_gap_ms,
        packets_lost_by_unaffected_flows=result.packets_lost_by_unaffected_flows, flows_moved=result.flows_moved,
        recovered=result.recovered, passed=result.passed,
        received=int(result.forward.get("received") or 0) + int(result.reverse.get("received") or 0),
        lost=int(result.forward.get("lost") or 0) + int(result.reverse.get("lost") or 0))


def attach(result: EventResult, per_family: Mapping[int, EventResult]) -> EventResult:
    """RESULT (all flows) with each family's verdict. Whether a flow recovered is judged against its
    own family's senders (they stop one after the other, not at one instant), so each row takes it
    from its family's analysis; the event passes only if every family passes."""
    result.families = {str(f): verdict_of(f, r) for f, r in sorted(per_family.items())}
    recovered = {row.flow: row.recovered for r in per_family.values() for row in r.per_flow}
    for row in result.per_flow:
        row.recovered = recovered.get(row.flow, row.recovered)
    result.recovered = all(row.recovered for row in result.per_flow)
    result.passed = all(v.passed for v in result.families.values())
    return result


def label(families: Sequence[int]) -> str:
    return " and ".join(family_name(f) for f in families)
