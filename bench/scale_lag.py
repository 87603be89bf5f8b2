#!/usr/bin/env python3
"""How far the MNHA peers lag behind new sessions: docs/benchmarks-scale-lag.md.

    sudo .venv/bin/python bench/scale_lag.py [--rate 50000] [--seconds 60] [--sample 400]

Lab lg3: labs/topology3.yml with the client prefix widened to 100.64.0.0/12 (1,048,574 subscriber
addresses), `services.max_sessions` raised for every session and its copy, and `services.udp_timeout`
long enough that no session ages out during the run. The traffic generator opens RATE new UDP
sessions a second for SECONDS seconds: one datagram per session (a distinct 5-tuple), client ->
server, unanswered (the sync sends a UDP session when it opens, answered or not). One generator per
source port when the sessions outnumber the addresses (source ports 40000, 40001, ...), the rate
shared between them. Session I of a generator is its flow I, sent at its start + I / its rate.

While the sessions open, every few seconds, SAMPLE sessions already sent are looked up by 5-tuple in
all four SRXs (ctnetlink GET: the cost follows the sample, not the tables). After the run, each
looked-up session's age at its lookup is known from the generator's own start time; a session at
least LAG_S (2 s) old counts: present on both nodes of its pair (synced), on one only (the peer lags),
or on none (never established). At the end (LAG_S after the last session), SAMPLE_END sessions of
the whole run are looked up the same way. Root; about SECONDS + 2 minutes.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common import ROOT, BenchError, BenchLab, lab_cmd, logger, publish, topology_text

from dataplane.traffic.frames import Flow, make_flows
from lab_orchestrator.events import flowlookup
from lab_orchestrator.runtime.netns import session_count

LAB = "lg3"
PAIRS = (("srx1", "srx2"), ("srx3", "srx4"))
SOURCES, SERVER, PORT, FIRST_SPORT = "100.64.0.0/12", "203.0.113.9", 7000, 40000
LAG_S = 2.0  # the goal: a session this old is on its peer
SAMPLE_EVERY_S = 5.0
SAMPLE_END = 10000
DOC = ROOT / "docs" / "benchmarks-scale-lag.md"
log = logger("scale-lag")


@dataclass(frozen=True)
class Generator:
    """One generator process's share: COUNT sessions from source port SPORT at RATE a second."""

    index: int
    sport: int
    count: int
    rate: float


def shares(total: int, rate: float, addresses: int) -> list[Generator]:
    """TOTAL sessions at RATE a second in as few generators as the ADDRESSES allow (one source
    port each), the sessions and the rate shared evenly."""
    count = max(1, math.ceil(total / addresses))
    per = [total // count + (1 if i < total % count else 0) for i in range(count)]
    return [Generator(i, FIRST_SPORT + i, n, rate * n / total) for i, n in enumerate(per)]


def sent_at(gen: Generator, start_s: float, flow_index: int) -> float:
    """When flow FLOW_INDEX of GEN was due (one datagram per flow, in flow order)."""
    return start_s + flow_index / gen.rate


def classify(held_by: set[str]) -> str:
    """A looked-up session by the SRXs that hold it: synced (both nodes of a pair), lagging (one)
    or missing (none)."""
    for a, b in PAIRS:
        if a in held_by and b in held_by:
            return "synced"
    return "lagging" if held_by else "missing"


def topology(tmp: Path, total: int, udp_timeout: int) -> Path:
    text = topology_text(ROOT / "labs" / "topology3.yml", LAB)
    text = text.replace("prefixes: [100.64.0.0/16]", f"prefixes: [{SOURCES}]", 1)
    limit = max(262144, total + 200000)  # a node holds its pair's sessions (its own or its peer's copies)
    text = text.replace("\nservices:\n", f"\nservices:\n  max_sessions: {limit}\n  udp_timeout: {udp_timeout}\n", 1)
    path = tmp / f"{LAB}.yml"
    path.write_text(text)
    return path


def spawn(gen: Generator, out: Path) -> subprocess.Popen[str]:
    """GEN's generator, its report written to the file OUT (a report of a million flows' counts is
    larger than a pipe holds: read from a pipe only at the end, the generator would block on it)."""
    with out.open("w") as report:
        return subprocess.Popen(
            [*lab_cmd(), "exec", "--lab", LAB, "client", "--", sys.executable, "-m", "dataplane.traffic", "send",
             "--iface", "eth1", "--flows", str(gen.count), "--sources", SOURCES, "--dst", SERVER, "--dport",
             str(PORT), "--sport", str(gen.sport), "--rate", f"{gen.rate:.3f}", "--count", str(gen.count),
             "--sizes", "64"],
            cwd=ROOT, stdout=report, stderr=subprocess.PIPE, text=True)


def lookup(counters: flowlookup.FlowCounters, flows: list[Flow]) -> dict[tuple[str, int], set[str]]:
    """(source, source port) -> the SRXs holding a session for it."""
    held: dict[tuple[str, int], set[str]] = {(f.src, f.sport): set() for f in flows}
    for key, by_node in counters.read(flows).items():
        held[key] = set(by_node)
    return held


def run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    total = int(args.rate * args.seconds)
    gens = shares(total, args.rate, 2 ** 20 - 2)
    udp_timeout = int(args.seconds + 600)
    result: dict[str, Any] = {"rate": args.rate, "seconds": args.seconds, "sessions": total,
                              "generators": len(gens), "udp_timeout": udp_timeout, "sample": args.sample}
    log(f"building the flow lists of {len(gens)} generator(s)")
    flows = {g.index: make_flows(g.count, SOURCES, SERVER, g.sport, PORT) for g in gens}
    rng = random.Random(7)
    samples: list[tuple[int, int, float, str]] = []  # (generator, flow index, looked up at, class)
    with BenchLab(LAB, topology(tmp, total, udp_timeout), log, up_timeout=600) as bench:
        srxs = {n: bench.ns(n) for pair in PAIRS for n in pair}
        with flowlookup.FlowCounters(srxs) as counters:
            log(f"opening {total} sessions at {args.rate:g}/s with {len(gens)} generator(s)")
            launched = time.monotonic()
            procs = {g.index: spawn(g, tmp / f"generator-{g.index}.json") for g in gens}
            # the frames are built before a generator starts sending: until its report, its start is
            # estimated (the lookups of sessions not yet sent are dropped once it is known)
            build_guess = 3.0 + max(g.count for g in gens) / 100000
            while any(p.poll() is None for p in procs.values()):
                time.sleep(SAMPLE_EVERY_S)
                guess = time.monotonic() - launched - build_guess - LAG_S
                if guess <= 0:
                    continue
                picked = [(g.index, rng.randrange(min(g.count, max(1, int(guess * g.rate)))))
                          for g in rng.choices(gens, k=args.sample)]
                at = time.monotonic()
                held = lookup(counters, [flows[g][i] for g, i in picked])
                samples += [(g, i, at, classify(held[(flows[g][i].src, flows[g][i].sport)])) for g, i in picked]
                log(f"sampled {len(picked)} ({time.monotonic() - at:.1f} s)")
            reports = {}
            for index, proc in procs.items():
                _, err = proc.communicate()
                out = (tmp / f"generator-{index}.json").read_text()
                if proc.returncode != 0 or not out.strip():
                    raise BenchError(f"generator {index} failed ({proc.returncode}): {err.strip()[-500:]}")
                reports[index] = json.loads(out.strip().splitlines()[-1])
            end_s = max(r["end_ns"] for r in reports.values()) / 1e9
            time.sleep(max(0.0, end_s + LAG_S - time.monotonic()))
            picked = [(g.index, rng.randrange(g.count)) for g in rng.choices(gens, k=SAMPLE_END)]
            at = time.monotonic()
            held = lookup(counters, [flows[g][i] for g, i in picked])
            final = [classify(held[(flows[g][i].src, flows[g][i].sport)]) for g, i in picked]
            result["end_lookup_s"] = round(time.monotonic() - at, 1)
        result["tables"] = {n: session_count(ns) for n, ns in srxs.items()}
    starts = {i: r["start_ns"] / 1e9 for i, r in reports.items()}
    result["senders"] = {i: {"sent": r["sent"], "pps": round(r["pps"]), "max_lag_ms": round(r["max_lag_ms"], 1),
                             "elapsed_s": round(r["elapsed_s"], 1)} for i, r in reports.items()}
    by_gen = {g.index: g for g in gens}
    aged = [(cls, at - sent_at(by_gen[g], starts[g], i)) for g, i, at, cls in samples]
    old = [cls for cls, age in aged if age >= LAG_S]
    result["during"] = {"looked_up": len(samples), "old_enough": len(old),
                        **{c: old.count(c) for c in ("synced", "lagging", "missing")}}
    result["end"] = {"looked_up": len(final), **{c: final.count(c) for c in ("synced", "lagging", "missing")}}
    log(json.dumps(result))
    return result


def share(part: int, whole: int) -> str:
    return f"{100 * part / whole:.3f} %" if whole else "-"


def markdown(r: dict[str, Any], command: str, seconds: float) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    d, e = r["during"], r["end"]
    present = d["synced"] + d["lagging"]
    lines = [
        "# Session sync lag under new sessions",
        "",
        f"Measured {when} by `{command}` ({seconds / 60:.1f} min). Machine: {platform.node()}, {os.cpu_count()} "
        f"CPUs, kernel {platform.release()}; shared machine.",
        "",
        f"{r['sessions']} new UDP sessions on topology3 (lab {LAB}), {r['rate']:g} a second for {r['seconds']:g} s "
        f"from {r['generators']} generator(s), one unanswered datagram each. While they opened, {r['sample']} sessions "
        f"already sent were looked up in the four SRXs every {SAMPLE_EVERY_S:g} s; those at least {LAG_S:g} s old "
        f"when looked up are counted. `services.udp_timeout` {r['udp_timeout']} s.",
        "",
        "| looked up | sessions | on both nodes of a pair | on one node only (peer lagging) | on none | "
        "on the peer, of those on a node | goal |",
        "|---|---|---|---|---|---|---|",
        f"| while opening, ≥ {LAG_S:g} s old | {d['old_enough']} | {d['synced']} | {d['lagging']} | {d['missing']} | "
        f"{share(d['synced'], present)} | ≥ 99.99 % |",
        f"| {LAG_S:g} s after the last | {e['looked_up']} | {e['synced']} | {e['lagging']} | {e['missing']} | "
        f"{share(e['synced'], e['synced'] + e['lagging'])} | ≥ 99.99 % |",
        "",
        "| generator | sent | rate reached (pps) | elapsed (s) | worst lateness (ms) |",
        "|---|---|---|---|---|",
    ]
    for index, s in sorted(r["senders"].items()):
        lines.append(f"| {index} | {s['sent']} | {s['pps']} | {s['elapsed_s']} | {s['max_lag_ms']} |")
    tables = ", ".join(f"{n} {c}" for n, c in sorted(r["tables"].items()))
    lines += ["", f"Sessions in each SRX's table at the end: {tables}. The end lookup took {r['end_lookup_s']} s.", ""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=50000.0, help="new sessions a second")
    parser.add_argument("--seconds", type=float, default=60.0, help="how long sessions open")
    parser.add_argument("--sample", type=int, default=400, help="sessions looked up every few seconds")
    parser.add_argument("--no-doc", action="store_true", help="print the tables only")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        result = run(args, Path(tmp))
    text = markdown(result, "python3 bench/scale_lag.py " + " ".join(sys.argv[1:]), time.monotonic() - started)
    return publish(text, DOC, keep=not args.no_doc)


if __name__ == "__main__":
    sys.exit(main())
