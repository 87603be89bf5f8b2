#!/usr/bin/env python3
"""Which per-flow rate the generator sustains during a `lab report` case on this machine.

The finest convergence resolution a case can claim is one per-flow interval (1 / per-flow rate),
but only while the senders keep their schedule: a packet due during an outage and sent late, after
it, is not lost, so a lagging sender under-reports convergence. This runs `restart-tlb` (an event
that loses no packet: the selector daemon restarts and adopts the programmed table) on topology1
(renamed rr1) under two-way IMIX traffic of 200 flows at several per-flow rates, with and without
SCHED_FIFO senders and with and without the dumpcap captures of `lab report --capture`, and
reports per configuration: sent pps against the target (the baseline: the schedule itself), the
senders' worst lateness and share of packets more than 1 ms late, and the receivers' longest gap
against one interval.

Writes docs/benchmarks-report.md (notes below the marker line are kept). Needs root; only touches
the lab rr1, brought down at the end (also on errors and Ctrl-C).

  sudo python3 bench/report_rate.py                # rates 100 150 200
  sudo python3 bench/report_rate.py --rates 200 --runs 2
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from lab_orchestrator.report import run as reportrun  # noqa: E402
from lab_orchestrator.report import testplan  # noqa: E402

LAB = "rr1"
MARKER = "<!-- notes below this line are kept when the benchmark rewrites this file -->"


def one(case: testplan.Case, flows: int, rate: float, realtime: bool, capture: bool, pinned: bool,
        tmp: Path) -> dict[str, Any]:
    traffic = testplan.TrafficParams(flows=flows, rate_per_flow=rate)
    record = reportrun.run_case(case, traffic, capture, tmp, lambda _: None, realtime=realtime,
                                cpu=0 if pinned else None)
    if record["result"] is None:
        raise RuntimeError(record["error"])
    r = record["result"]
    senders = r.get("senders", {})
    target = traffic.rate
    sent_pps = [s["pps"] for s in senders.values()]
    return {
        "flows": flows, "rate_per_flow": rate, "realtime": realtime, "pinned": pinned, "capture": capture,
        "sent_ratio": min(sent_pps) / target if sent_pps else 0.0,
        "max_lag_ms": max(s["max_lag_ms"] for s in senders.values()),
        "late_share": max(s["late_1ms"] / max(1, s["sent"]) for s in senders.values()),
        "longest_gap_ms": r["longest_gap_ms"], "interval_ms": 1000 / rate,
        "lost": r["forward"].get("lost", 0) + r["reverse"].get("lost", 0),
        "capture_flagged": (record.get("capture") or {}).get("flagged"),
        "case_s": record["duration_s"], "at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--loads", nargs="+", default=["200x100", "200x150", "200x200", "100x200"],
                        help="FLOWSxPPS per flow")
    parser.add_argument("--modes", nargs="+", default=["plain", "fifo", "plain+capture", "fifo+capture"])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--rows", type=Path, help="render the rows (JSON lines) of an earlier run; run nothing")
    args = parser.parse_args()
    started = dt.datetime.now(dt.UTC)
    rows: list[dict[str, Any]] = []
    if args.rows:
        rows = [json.loads(line) for line in args.rows.read_text().splitlines() if line.startswith("{")]
        started = dt.datetime.fromisoformat(rows[0]["at"]) if rows and "at" in rows[0] else started
    with tempfile.TemporaryDirectory() as tmp:
        topo = Path(tmp) / f"{LAB}.yml"
        topo.write_text((REPO / "labs/topology1.yml").read_text().replace("name: t1", f"name: {LAB}", 1))
        case = testplan.Case(0, topo, LAB, "sfw", "ecmp-chash", "restart-tlb", None)
        if args.rows:
            args.runs = 0
        else:
            reportrun.lab_up(topo)
        try:
            for _ in range(args.runs):
                for load in args.loads:
                    flows, rate = load.split("x")
                    for mode in args.modes:
                        realtime, capture, pinned = "fifo" in mode, "capture" in mode, "cpu0" in mode
                        row = one(case, int(flows), float(rate), realtime, capture, pinned, Path(tmp))
                        rows.append(row)
                        print(json.dumps(row), file=sys.stderr)
        finally:
            if not args.rows:
                reportrun.lab_down(LAB)
    if args.json:
        print(json.dumps(rows, indent=1))
    text = render(rows, started)
    print(text)
    if not args.no_write:
        path = REPO / "docs/benchmarks-report.md"
        notes = ""
        if path.exists() and MARKER in path.read_text():
            notes = path.read_text().split(MARKER, 1)[1]
        path.write_text(text + "\n" + MARKER + notes)
    return 0


def render(rows: list[dict[str, Any]], started: dt.datetime) -> str:
    m = reportrun.machine()
    lines = ["# `lab report` traffic: the rate the generator sustains", "",
             f"Measured {started:%Y-%m-%d %H:%M} UTC by `bench/report_rate.py` (restart-tlb on topology1, "
             "two-way IMIX, one case per row; medians when several runs).", "",
             f"Machine: {m.get('cpus')} CPUs ({m.get('cpu', '?')}), kernel {m.get('kernel')}, "
             f"{m.get('memory_gib')} GiB, Python {m.get('python')}; load average at start "
             f"{m.get('load_average_at_start')}.", "",
             "Baseline: the senders' own schedule (flows × rate per direction). `sent / target` below 1 "
             "means the sender fell behind; a packet sent late is not lost, so convergence below the "
             "lateness is not measured. Longest gap: the longest time between two packets of any flow, "
             "on their send timestamps (one interval when the schedule is kept).", "",
             "| flows × pps per flow (resolution) | SCHED_FIFO | senders pinned | capture | sent / target | "
             "sender max lag | "
             "packets > 1 ms late | longest gap | lost | capture flags | case | goal: keeps its schedule "
             "(sent / target ≥ 0.99, < 5 % of packets > 1 ms late) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    keys = sorted({(r["flows"], r["rate_per_flow"], r["realtime"], r["pinned"], r["capture"]) for r in rows})
    for key in keys:
        group = [r for r in rows if (r["flows"], r["rate_per_flow"], r["realtime"], r["pinned"], r["capture"]) == key]

        def med(name: str, group: list[dict[str, Any]] = group) -> float:
            return float(statistics.median(r[name] for r in group))

        flags = [r["capture_flagged"] for r in group if r["capture_flagged"] is not None]
        lines.append(f"| {key[0]} × {key[1]:g} ({1000 / key[1]:g} ms) | {'yes' if key[2] else 'no'} | "
                     f"{'CPU 0' if key[3] else 'no'} | {'yes' if key[4] else 'no'} | {med('sent_ratio'):.3f} | "
                     f"{med('max_lag_ms'):.1f} ms | "
                     f"{100 * med('late_share'):.1f} % | {med('longest_gap_ms'):.1f} ms | {med('lost'):.0f} | "
                     f"{max(flags) if flags else '–'} | {med('case_s'):.1f} s | "
                     f"{'pass' if med('sent_ratio') >= 0.99 and med('late_share') < 0.05 else '**fail**'} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
