"""The HA benchmark's document (docs/benchmarks-ha.md): machine, table rows, markdown."""

from __future__ import annotations

import contextlib
import os
import platform
import statistics
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

from common import (  # noqa: E402
    summary,
)
from ha_observe import PUSH_RATE  # noqa: E402

from lab_orchestrator import api  # noqa: E402

PARTS = ("failover", "sync", "srd")

DOC = ROOT / "docs" / "benchmarks-ha.md"


# Goals: the bounds the acceptance tests hold these to (tests/integration/test_mnha.py, test_srd.py).
GOAL_FAILOVER_MS = 500.0


GOAL_SWITCHOVER_MS = 1000.0


# ---------------------------------------------------------------- report
def machine() -> dict[str, Any]:
    model = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    labs = [lab_.name for lab_ in api.labs()]
    return {"nproc": os.cpu_count(), "model": model, "kernel": platform.release(),
            "python": platform.python_version(), "loadavg": round(os.getloadavg()[0], 2), "other_labs": labs}


def _fmt(value: float | None, unit: str = "ms", digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:.{digits}f} {unit}".rstrip()


def rows(results: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(metric, median, max, runs, goal) rows of the markdown table."""
    out: list[tuple[str, str, str, str, str]] = []

    def add(metric: str, values: list[float], goal: str = "", unit: str = "ms", digits: int = 0) -> None:
        values = [v for v in values if v is not None]
        if not values:
            out.append((metric, "n/a", "n/a", "0", goal))
            return
        out.append((metric, _fmt(statistics.median(values), unit, digits), _fmt(max(values), unit, digits),
                    str(len(values)), goal))

    f = results.get("failover")
    if f and f.get("runs"):
        r = f["runs"]
        goal = f"< {GOAL_FAILOVER_MS:.0f} ms"
        add("MNHA SRG1 failover (power-off): worst affected flow, loss-derived", [x["worst_ms"] for x in r], goal)
        add("  same, median affected flow", [x["median_ms"] for x in r])
        add("  same, longest gap of an affected flow", [x["longest_gap_ms"] for x in r], goal)
        add("  server-push flow through the failed SRX: longest gap (receive times)", [x["push_gap_ms"] for x in r],
            goal)
        add(f"  server-push flow through the failed SRX: loss-derived ({PUSH_RATE} pps)",
            [x["push_loss_ms"] for x in r])
        add("  selector moved the SRX's buckets to its peer, after the carrier loss", [x["selector_moved_after_ms"]
                                                                                      for x in r])
        add("  backup became SRG1 active, after the carrier loss", [x["peer_active_after_ms"] for x in r])
        add("  baseline (no event): worst flow, loss-derived", [x["worst_ms"] for x in f["baseline"]])
        add("  baseline (no event): longest gap", [x["longest_gap_ms"] for x in f["baseline"]])
        add("  baseline (no event): server-push flow, longest gap", [x["push_gap_ms"] for x in f["baseline"]])
        add("MNHA SRG1 failback (restore + preemption): worst affected flow", [x["failback_worst_ms"] for x in r])
        add("  restore -> preempted back (roles + selector)", [x["preempted_after_s"] for x in r], unit="s",
            digits=2)
    s = results.get("sync")
    if s and s.get("runs"):
        lag = summary(s["all_lags_ms"], 3)
        out.append(("MNHA session sync lag (created on carrier -> copy created on peer), all sessions",
                    f"{lag['median']:.3f} ms (p99 {lag['p99']:.3f} ms)", f"{lag['max']:.3f} ms",
                    f"{len(s['runs'])} x {s['sessions_per_run']}", ""))
        add("  per-run p99 of the sync lag", [x["lag_ms"].get("p99") for x in s["runs"]], digits=3)
        add("  sessions missing on the peer (per run)", [x["missing_on_peer"] for x in s["runs"]], unit="")
        add("  sessions gone from the carrier 1.5 s after (per run)",
            [x["sessions"] - x["seen_on_carrier"] for x in s["runs"]], unit="")
        over = s.get("conntrackd_overruns")
        if over:
            out.append(("  conntrackd netlink overruns during these runs (buffer doublings / at max growth)",
                        f"{over['buffer_doubled']} / {over['max_growth_reached']}", "", "4 SRX", "0"))
        for step in s.get("stress", []):
            if step.get("runs"):
                lag = summary(step["lags_ms"], 3)
                lag_text = f"{lag['median']:.3f} ms (p99 {lag['p99']:.3f} ms)" if lag["n"] else "n/a"
                missing = sum(x["missing_on_peer"] for x in step["runs"])
                seen = sum(x["seen_on_carrier"] for x in step["runs"])
                sent = sum(x["sessions"] for x in step["runs"])
                over = step.get("conntrackd_overruns_so_far", {})
                out.append((f"  stress: {step['rate_per_s']:.0f} new sessions/s for 1 s: sync lag (sessions gone "
                            f"from the carrier 1.5 s later: {sent - seen} of {sent}; no copy on the peer: {missing}; "
                            f"conntrackd overruns so far: {over.get('buffer_doubled', '?')} buffer doublings, "
                            f"{over.get('max_growth_reached', '?')} at max growth)", lag_text,
                            f"{lag['max']:.3f} ms" if lag["n"] else "n/a", str(len(step["runs"])), ""))
        c = summary(s["all_send_to_carrier_ms"], 3)
        out.append(("  baseline: send -> entry created on the carrier", f"{c['median']:.3f} ms "
                    f"(p99 {c['p99']:.3f} ms)", f"{c['max']:.3f} ms", str(c["n"]), ""))
    d = results.get("srd")

    def add_flows(event: str, runs: list[dict[str, Any]], goal: str) -> None:
        """An SRD event's flow figures: worst and median flow (loss-derived), longest gap, every flow."""
        add(f"{event}: worst flow, loss-derived", [x["worst_ms"] for x in runs], goal)
        add("  same, median flow", [x["median_ms"] for x in runs])
        add("  same, longest gap", [x["longest_gap_ms"] for x in runs], goal)
        add("  per flow, all flows of all runs", [v for x in runs for v in x["per_flow_ms"]])

    if d and d.get("cli"):
        goal = f"< {GOAL_SWITCHOVER_MS:.0f} ms"
        add_flows("SRD CLI switchover", d["cli"], goal)
        add("  `lab switchover` command (CLI start-up included)", [x["cli_ms"] for x in d["cli"]])
        add("  no MX master: old master released -> new master took over", [x["no_master_ms"] for x in d["cli"]])
        add("  both gateways route via the new master, after it took over",
            [x["gateways_after_master_ms"] for x in d["cli"]])
        add_flows("SRD monitored link down", d["link"], goal)
        add("  new master after `ip link set ... down` returned", [x["new_master_after_ms"] for x in d["link"]])
        add("  no MX master: old master ineligible -> new master took over", [x["no_master_ms"] for x in d["link"]])
        add("  both gateways route via the new master, after it took over",
            [x["gateways_after_master_ms"] for x in d["link"]])
        add("  baseline (no event): worst flow, loss-derived", [x["worst_ms"] for x in d["baseline"]])
        add("  baseline (no event): longest gap", [x["longest_gap_ms"] for x in d["baseline"]])
    return out


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = ["# HA benchmark: MNHA failover, session sync, SRD switchover", "",
             f"Measured {results['date']} by `bench/ha.py {results['args']}`.", "",
             f"Machine: {m['nproc']} CPUs ({m['model']}), kernel {m['kernel']}, Python {m['python']}; load "
             f"average {m['loadavg']} at start, {results.get('loadavg_end', '?')} at end; other labs up at start: "
             f"{', '.join(x for x in m['other_labs'] if not x.startswith('bh')) or 'none'} (shared machine: "
             "compare against the baselines of the same run).", ""]
    f, d = results.get("failover"), results.get("srd")
    for name, x in (("MNHA failover", f), ("SRD", d)):
        if x and x.get("resolution_ms"):
            lines.append(f"Traffic, {name}: {x['flows']} two-way UDP flows ({results['sizes']}) at {x['rate']:.0f} pps "
                         f"per direction, {x['rate'] / x['flows']:.0f} pps per flow: **resolution "
                         f"{x['resolution_ms']:g} ms**.")
            lines.append("")
    if (f and f.get("runs")) or (d and d.get("cli")):
        lines.append("Loss-derived outage of a flow = packets lost / per-flow rate (RFC 6412), the worse direction "
                     "of the flow; a whole number of resolutions. Longest gap = the longest silence between two "
                     "packets of a flow (send times), so it includes one packet interval. \"worst\" = the flow with "
                     "the longest outage in a run; median and max are over the runs.")
        lines.append("")
    lines += ["| metric | median | max | runs | goal |", "|---|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {n} | {g} |" for a, b, c, n, g in rows(results)]
    lines.append("")
    if f and f.get("runs"):
        hb = f["heartbeat"]
        lines.append(f"MNHA heartbeat: {hb['interval_ms']} ms x {hb['threshold']} "
                     f"(silence threshold {hb['interval_ms'] * hb['threshold']} ms; an ICL carrier loss is acted on "
                     f"at once). Goals are the integration tests' limits (test_mnha.py: gap < 0.5 s; test_srd.py: gap "
                     "< 1 s).")
        lines.append("")
        lines.append("Per-run samples, MNHA SRG1 failover (ms; target, worst, median, longest gap, push gap, "
                     "failback worst, preempted after s):")
        lines.append("")
        for i, x in enumerate(f["runs"], 1):
            lines.append(f"- {i}: {x['target']}->{x['peer']} worst {x['worst_ms']:.0f}, median {x['median_ms']:.0f}, "
                         f"gap {x['longest_gap_ms']:.0f}, push gap {x['push_gap_ms']:.0f}, flows with loss "
                         f"{x['flows_with_loss']}/{x['flows']}, unaffected loss {x['unaffected_loss']}; failback "
                         f"worst {x['failback_worst_ms']:.0f} (all flows {x['failback_all_loss_ms']:.0f}), "
                         f"preempted after {x['preempted_after_s']} s; baseline worst "
                         f"{f['baseline'][i - 1]['worst_ms']:.0f}")
        lines.append("")
    s = results.get("sync")
    if s and s.get("runs"):
        lines.append(f"Per-run samples, session sync lag ({s['sessions_per_run']} new sessions at "
                     f"{s['rate_per_s']:.0f}/s; ms: median / p99 / max, missing on the peer):")
        lines.append("")
        for i, x in enumerate(s["runs"], 1):
            lag = x["lag_ms"]
            lines.append(f"- {i}: {lag.get('median')} / {lag.get('p99')} / {lag.get('max')}, missing "
                         f"{x['missing_on_peer']}, seen on a carrier {x['seen_on_carrier']}, sent in {x['send_s']} s "
                         f"(sender late by up to {x['sender_max_lag_ms']} ms), by carrier {x['by_carrier']}")
        lines.append("")
    if d and d.get("cli"):
        lines.append("Per-run samples, SRD (ms; worst / median flow / longest gap, flows with loss):")
        lines.append("")
        for i, (lk, b) in enumerate(zip(d["link"], d["baseline"], strict=False), 1):
            cli = "; ".join(f"CLI {c['direction']} {c['worst_ms']:.0f} / {c['median_ms']:.0f} / "
                            f"{c['longest_gap_ms']:.0f}, {c['flows_with_loss']}" for c in d["cli"][2 * i - 2:2 * i])
            lines.append(f"- {i}: {cli}; link down {lk['worst_ms']:.0f} / "
                         f"{lk['median_ms']:.0f} / {lk['longest_gap_ms']:.0f}, {lk['flows_with_loss']}; baseline "
                         f"{b['worst_ms']:.0f} / {b['median_ms']:.0f} / {b['longest_gap_ms']:.0f}")
        lines.append("")
    for part in PARTS:
        for error in (results.get(part) or {}).get("errors", []):
            lines.append(f"- error in {part}: {error}")
    for error in results.get("errors", []):
        lines.append(f"- error: {error}")
    return "\n".join(lines).rstrip() + "\n"
