"""The verdict of one failure event run under traffic, and the run's JUnit and plot outputs.

`analyse` (pure) turns what the receivers counted per flow, which SRX carried each flow before,
during and after the event, and the flows the MX selectors' tables say must move into an
`EventResult`: affected flows and their convergence, losses of unaffected flows, moves per phase.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping
from ipaddress import IPv4Address, IPv4Network
from pathlib import Path
from typing import Any

from ..plan.trafficsetup import REVERSE_ID_OFFSET
from . import catalog as eventsmod
from .result import EventError, EventResult
from .watch import Sampler


def _since(ns: int | None, marks: dict[str, float]) -> float | None:
    return round(ns / 1e9 - marks["event"], 3) if ns and "event" in marks else None



def nat_pools(pools: Iterable[tuple[str, str | None]], mnha: list[list[str]]) -> dict[str, str]:
    """Translated flows: each pool (POOLS: (SRX, pool or None), an SRX may have a NAPT44 pool and a
    NAT64 one) -> the SRX whose pool it is. A pool an MNHA pair shares is its A node's (the pair's
    first): its return traffic is routed to the A node while the pair is healthy (the B node
    announces the pool with the longer AS path)."""
    b_nodes = {pair[1] for pair in mnha if len(pair) == 2}
    out: dict[str, str] = {}
    for srx, pool in sorted(pools, key=lambda item: item[0] in b_nodes):  # stable: otherwise in plan order
        if pool:
            out.setdefault(str(pool), srx)
    return out


def pool_owner(binding: str | None, pools: Mapping[str, str]) -> str | None:
    """The SRX whose pool (POOLS of `nat_pools`) holds BINDING ("address:port"), None if no pool does."""
    if not binding:
        return None
    address = IPv4Address(binding.rsplit(":", 1)[0])
    return next((srx for pool, srx in pools.items() if address in IPv4Network(pool)), None)


def analyse(event: eventsmod.EventKind, target: str, summary: str, flows: list[Any],  # noqa: PLR0913
            before: dict[tuple[str, int], str], after: dict[tuple[str, int], str], report_f: dict[str, Any],
            report_r: dict[str, Any] | None, sent_f: dict[str, Any], per_flow: float, marks: dict[str, float],
            sampler: Sampler, pair: list[str] | None = None,
            moved_back: set[tuple[str, int]] | None = None, sent_r: dict[str, Any] | None = None,
            involved: set[str] | None = None, nat: bool = False, expected: dict[str, Any] | None = None,
            carriers_after: dict[tuple[str, int], str] | None = None,
            pools: Mapping[str, str] | None = None) -> EventResult:
    """Per-event verdict: affected flows and their convergence, losses of unaffected flows, moves.
    INVOLVED (daemon-crash) names the SRXs whose flows the event may touch (None: as the event's
    target kind says; an empty set: none, so any loss fails it). EXPECTED (`expected_movers`): the
    flows each phase must move, from the MX selectors' tables; with it, a flow may lose packets only
    if it is an expected mover of some phase or was carried by an SRX the event hits. AFTER is the
    carrier during a lasting event (before its restore), CARRIERS_AFTER the carrier after the restore.
    POOLS (CGNAT: SRX -> its NAT pool): the return traffic of a flow is routed to the owner of its
    binding's pool, which is not always the SRX that carries its forward packets (an MNHA pair's
    synced session carries its peer's binding), so that owner carries the flow too."""
    strict = involved is not None
    phases: dict[str, Any] = (expected or {}).get("phases", {})
    phase_names = list(phases)
    by_id = {f["flow"]: f for f in report_f["per_flow"]}
    rev = {f["flow"] - REVERSE_ID_OFFSET: f for f in (report_r or {}).get("per_flow", [])}
    end_ns = sent_f.get("end_ns") or 0
    end_r_ns = (sent_r or {}).get("end_ns") or 0
    rows = []
    for flow in flows:
        key = (flow.src, flow.sport)
        fwd, back = by_id.get(flow.flow_id, {}), rev.get(flow.flow_id, {})
        lost = int(fwd.get("lost", 0)) + int(back.get("lost", 0))
        # Recovered: each direction still delivered in its last second (against its own sender's end).
        ends_seen = [(fwd.get("last_seen_ns"), end_ns)]
        if report_r is not None:
            ends_seen.append((back.get("last_seen_ns"), end_r_ns or end_ns))
        during_srx = after.get(key)
        bindings = fwd.get("bindings") if nat else None
        returned_by = pool_owner(bindings[0], pools) if bindings and pools else None
        after_srx = carriers_after.get(key) if carriers_after is not None else during_srx
        actual = {}
        if phase_names:
            actual[phase_names[0]] = None if None in (before.get(key), during_srx) else before.get(key) != during_srx
        if len(phase_names) > 1:
            actual[phase_names[1]] = None if None in (during_srx, after_srx) else during_srx != after_srx
        rows.append({
            "flow": flow.flow_id, "src": flow.src,
            "carrier_before": before.get(key), "carrier_during": during_srx, "carrier_after": after_srx,
            "reverse_carrier_before": returned_by,
            "srx_before": before.get(key), "srx_after": during_srx,  # older names of the first two
            "expected_mover": {name: flow.flow_id in ph["movers"] for name, ph in phases.items()},
            "mover": actual,
            "lost_forward": int(fwd.get("lost", 0)), "lost_reverse": int(back.get("lost", 0)),
            "convergence_ms": round(max(int(fwd.get("lost", 0)), int(back.get("lost", 0))) / per_flow * 1000, 3),
            "max_gap_ms": max(float(fwd.get("max_gap_ms") or 0), float(back.get("max_gap_ms") or 0)),
            # each direction's own longest gap (a capture of one direction is compared with its own)
            "max_gap_forward_ms": float(fwd.get("max_gap_ms") or 0),
            "max_gap_reverse_ms": float(back.get("max_gap_ms") or 0) if report_r is not None else None,
            # where each direction's longest gap started, in seconds from the event
            "gap_at_s": [_since(d.get("max_gap_start_ns"), marks) for d in (fwd, back)],
            "recovered": all(last and end - last < max(1e9, 5e9 / per_flow) for last, end in ends_seen),
            "moved": before.get(key) is not None and after.get(key) is not None and before.get(key) != after.get(key),
            "moved_on_restore": key in (moved_back or set()),
            # CGNAT: the binding (pool address:port) the server saw; more than one: the flow re-bound
            "bindings": bindings,
            "rebound": bool(nat and fwd.get("binding_changes")),
            "lost": lost,
        })
    # The SRXs an event touches: the target, or its whole MNHA pair. An MX event touches every flow.
    if involved is None:
        every_flow = event.target in (eventsmod.LOAD_BALANCER, eventsmod.ANY_NODE)
        involved = {r["srx_before"] for r in rows} if every_flow else {target, *(pair or [])}

    def hit(r: dict[str, Any]) -> bool:
        """Was the flow carried, either way, by an SRX the event hits?"""
        return r["srx_before"] in involved or r["reverse_carrier_before"] in involved

    if phases:
        # The selector's tables say which flows may move; the SRXs the event hits say which flows
        # may lose packets without moving. Everything else must be loss-free.
        def may_lose(r: dict[str, Any]) -> bool:
            return any(r["expected_mover"].values()) or hit(r)
    else:  # no table readable: the carriers observed decide (older verdict)
        def may_lose(r: dict[str, Any]) -> bool:
            return bool(r["moved"] or r["moved_on_restore"] or r["rebound"] or hit(r))
    affected = [r for r in rows if r["lost"] or may_lose(r) or r["moved"] or r["rebound"]]
    unaffected = [r for r in rows if r not in affected]
    conv = [r["convergence_ms"] for r in affected if r["lost"]]
    unaffected_loss = sum(r["lost"] for r in rows if not may_lose(r))
    phase_figures = {}
    for name, ph in phases.items():
        movers_actual = {r["flow"] for r in rows if r["mover"].get(name)}
        phase_figures[name] = {
            "expected_movers": len(ph["movers"]), "movers": len(movers_actual), "ideal": ph["ideal"],
            "unexpected_movers": len(movers_actual - ph["movers"]),
            # of the expected movers: flows whose buckets the MXs' tables disagree on (SRD labs)
            "cross_mx_movers": len(ph.get("cross_mx", ())),
            # (a flow the MXs disagree on moves only if its gateway switches MX: not counted here)
            "expected_but_stayed": sum(1 for r in rows if r["flow"] in ph["movers"] - ph.get("cross_mx", set())
                                       and r["mover"].get(name) is False),
            "members": ph["members"], "bucket_share_moved": ph["bucket_share_moved"],
            "bucket_share_ideal": ph["bucket_share_ideal"], "buckets": ph["buckets"],
        }
    moved = sum(1 for r in rows if r["moved"])
    recovered = all(r["recovered"] for r in rows)
    passed = recovered and (unaffected_loss == 0 or (event.target == eventsmod.LOAD_BALANCER and not strict))
    return EventResult.model_validate({
        "event": event.name, "title": event.title, "target": target, "action": summary,
        "flows": len(rows), "rate_per_flow_pps": per_flow, "resolution_ms": round(1000 / per_flow, 3),
        "affected_flows": len(affected), "unaffected_flows": len(unaffected),
        "convergence_ms": {"max": max(conv), "median": statistics.median(conv)} if conv else {"max": 0, "median": 0},
        "longest_gap_ms": max((r["max_gap_ms"] for r in rows), default=0),
        "packets_lost_by_unaffected_flows": unaffected_loss,
        "flows_moved": moved,
        "flows_rebound": sum(1 for r in rows if r["rebound"]),
        "phases": phase_figures, "tables_missed": (expected or {}).get("missed_tables"),
        "verdict_from": "selector tables" if phases else "observed carriers",
        "flows_moved_ideal": sum(1 for r in rows if r["srx_before"] in involved)
        if event.target in (eventsmod.FIREWALL, eventsmod.MNHA_PAIR) else 0,
        "recovered": recovered, "passed": passed,
        "forward": {k: v for k, v in report_f.items() if k != "per_flow"},
        "reverse": {k: v for k, v in (report_r or {}).items() if k != "per_flow"},
        "marks": marks, "timeline": sampler.rates(),
        "per_flow": rows,
    })



def junit(results: list[EventResult | EventError], lab: str) -> str:
    """One test case per event: a failure when its verdict (or a budget) failed, an error (with the
    reason) when a precondition failed and it was not judged. With IPv6 in the run the case's output
    holds each family's verdict, and a family that failed is named in the failure message."""
    from xml.sax.saxutils import escape, quoteattr

    failures = errors = 0
    cases = []
    for r in results:
        name = quoteattr(f"{r.event} on {r.target}")
        checks = [c.model_dump() for c in r.checks or []]
        if isinstance(r, EventError):
            errors += 1
            body = f'<error message={quoteattr(r.error)} type="precondition"/>'
            out = escape(json.dumps({"checks": checks}))
            cases.append(f'  <testcase classname="lab.{lab}" name={name} time="0.000">'
                         f"{body}<system-out>{out}</system-out></testcase>")
            continue
        why = r.failure_reasons()
        failures += bool(why)
        body = f'<failure message={quoteattr("; ".join(why))}/>' if why else ""
        figures = {"convergence_ms": r.convergence_ms.model_dump(), "affected_flows": r.affected_flows,
                   "flows_moved": r.flows_moved, "flows_moved_ideal": r.flows_moved_ideal,
                   "longest_gap_ms": r.longest_gap_ms, "checks": checks,
                   **({"tcp": r.tcp.model_dump(exclude={"stalls"})} if r.tcp else {})}
        if r.families:  # each family's verdict (its failure is named in the message too)
            figures["families"] = {k: v.model_dump() for k, v in r.families.items()}
        out = escape(json.dumps(figures))
        cases.append(f'  <testcase classname="lab.{lab}" name={name} time="{r.convergence_ms.max / 1000:.3f}">'
                     f"{body}<system-out>{out}</system-out></testcase>")
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<testsuite name="lab events {lab}" tests="{len(results)}" '
            f'failures="{failures}" errors="{errors}">\n' + "\n".join(cases) + "\n</testsuite>\n")


def plot(results: list[EventResult], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(results), 1, figsize=(10, 3 * len(results)), squeeze=False)
    for ax, r in zip(axes[:, 0], results, strict=True):
        timeline = r.timeline
        if not timeline:
            continue
        t0 = r.marks.get("event", timeline[0][0])
        names = sorted({k for _, rates in timeline for k in rates})
        for name in names:
            ax.plot([t - t0 for t, _ in timeline], [rates.get(name, 0) for _, rates in timeline], label=name)
        ax.axvline(0, color="red", linestyle="--", label="event")
        if "restore" in r.marks:
            ax.axvline(r.marks["restore"] - t0, color="green", linestyle="--", label="restore")
        ax.set_title(f"{r.event} on {r.target}: convergence max {r.convergence_ms.max:.0f} ms")
        ax.set_xlabel("seconds from the event")
        ax.set_ylabel("pps via SRX (MX counters)")
        ax.legend(loc="upper right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
