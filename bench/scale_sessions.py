#!/usr/bin/env python3
"""Session scale benchmark: N UDP sessions through topology3's two MNHA pairs, kept alive two-way.

    sudo .venv/bin/python bench/scale_sessions.py [--sessions 20000,100000] [--rate 5000] [--keepalive 10]
                                                  [--hold 90]

Lab bs3: labs/topology3.yml with the client prefix widened to 100.64.0.0/12 (room for a million
subscriber addresses) and services.max_sessions raised to fit. The traffic generator
(`dataplane.traffic send`) opens N sessions: one flow per distinct subscriber address to the
server's UDP echo (`dataplane.traffic.udpprobe serve`), which answers every datagram, so every
session is replied (two-way). Then each flow sends one more datagram every KEEPALIVE seconds for
HOLD seconds (longer than the SRX's 60 s UDP timeout and than the windows of the former periodic
table push, 60 s, and cache flush, 10 s). Measured:

  - sessions on each SRX after the opening, and at the end of the hold;
  - peer completeness: per pair, the benchmark's sessions held by both nodes / held by either
    (read back from both kernels at the end of the hold);
  - the sync's CPU during the hold (conntrackd + mnhad of each SRX, from /proc/PID/stat), with
    the sessions alive and none opening: the refresh windows' cost;
  - the peer's sessions written by conntrackd per second during the hold (its counters).

Writes docs/benchmarks-scale.md (machine, date; notes below the marker line kept). Needs root.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import ROOT, BenchError, BenchLab, lab, lab_cmd, logger, publish, topology_text

from lab_orchestrator.events import sessions as sessionsmod

LAB = "bs3"
PAIRS = (("srx1", "srx2"), ("srx3", "srx4"))
SERVER, PORT = "203.0.113.9", 7000
DOC = ROOT / "docs" / "benchmarks-scale.md"
log = logger("scale")


def topology(tmp: Path, sessions: int) -> Path:
    text = topology_text(ROOT / "labs" / "topology3.yml", LAB)
    text = text.replace("prefixes: [100.64.0.0/16]", "prefixes: [100.64.0.0/12]", 1)
    limit = max(262144, 2 * sessions)
    text = text.replace("\nservices:\n", f"\nservices:\n  max_sessions: {limit}\n", 1)
    path = tmp / f"{LAB}.yml"
    path.write_text(text)
    return path


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sync_pids() -> dict[str, list[int]]:
    """SRX -> the pids of its conntrackd and mnhad."""
    report = json.loads(lab("status", "--lab", LAB, "--json").stdout)[0]
    return {n["name"]: [d["pid"] for d in n["daemons"] if d["name"] in ("conntrackd", "mnhad") and d["running"]]
            for n in report["nodes"] if n["name"].startswith("srx")}


def mine(bench: BenchLab, node: str) -> set[tuple[str, int]]:
    """The benchmark's sessions in NODE's kernel: (subscriber address, source port)."""
    return {(s.source, s.source_port) for s in sessionsmod.read(bench.ns(node))
            if s.protocol == "udp" and s.destination_port == PORT}


def send(bench: BenchLab, flows: int, count: int, rate: float) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*lab_cmd(), "exec", "--lab", LAB, "client", "--", sys.executable, "-m", "dataplane.traffic", "send",
         "--iface", "eth1", "--flows", str(flows), "--sources", "100.64.0.0/12", "--dst", SERVER, "--dport", str(PORT),
         "--rate", str(rate), "--count", str(count), "--sizes", "64"],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def report(output: tuple[str, str], code: int | None) -> None:
    """The generator's last report line; its error and a BenchError when it failed."""
    out, err = output
    last = out.strip().splitlines()[-1] if out.strip() else ""
    log(f"generator: {last[:300]}")
    if code != 0:
        raise BenchError(f"the generator failed ({code}): {err.strip()[-500:]}")


def run(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    result: dict[str, Any] = {"sessions": args.sessions, "rate": args.rate, "keepalive_s": args.keepalive,
                              "hold_s": args.hold}
    with BenchLab(LAB, topology(tmp, args.sessions), log) as bench:
        echo = subprocess.Popen(
            [*lab_cmd(), "exec", "--lab", LAB, "server", "--", sys.executable, "-m", "dataplane.traffic.udpprobe",
             "serve", "--bind", SERVER, "--port", str(PORT), "--seconds", str(args.hold + 600)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert echo.stdout is not None and "serving" in echo.stdout.readline()
            log(f"opening {args.sessions} sessions at {args.rate}/s")
            started = time.monotonic()
            opener = send(bench, args.sessions, args.sessions, args.rate)
            report(opener.communicate(timeout=args.sessions / args.rate + 120), opener.returncode)
            result["open_s"] = round(time.monotonic() - started, 1)
            time.sleep(3)
            result["after_open"] = {n: len(mine(bench, n)) for pair in PAIRS for n in pair}
            log(f"after opening: {result['after_open']}")
            pids = sync_pids()
            before = {n: sum(cpu_seconds(p) for p in ps) for n, ps in pids.items()}
            injected0 = {n: (bench.status(n, "mnha").get("sync") or {}).get("injected") or 0 for n in pids}
            rounds = max(1, int(args.hold / args.keepalive))
            log(f"holding {args.hold} s: a datagram per session every {args.keepalive} s")
            started = time.monotonic()
            keeper = send(bench, args.sessions, args.sessions * rounds, args.sessions / args.keepalive)
            report(keeper.communicate(timeout=args.hold + 300), keeper.returncode)
            held = time.monotonic() - started
            after = {n: sum(cpu_seconds(p) for p in ps) for n, ps in pids.items()}
            injected1 = {n: (bench.status(n, "mnha").get("sync") or {}).get("injected") or 0 for n in pids}
            result["hold_measured_s"] = round(held, 1)
            result["sync_cpu_pct"] = {n: round(100 * (after[n] - before[n]) / held, 1) for n in pids}
            result["peer_writes_per_s"] = {n: round((injected1[n] - injected0[n]) / held) for n in pids}
            time.sleep(1)
            completeness = {}
            for a, b in PAIRS:
                on_a, on_b = mine(bench, a), mine(bench, b)
                either = on_a | on_b
                completeness[f"{a}/{b}"] = {"either": len(either), "both": len(on_a & on_b),
                                            "only_" + a: len(on_a - on_b), "only_" + b: len(on_b - on_a)}
            result["end_of_hold"] = completeness
            result["kernel_limit"] = int(Path("/proc/sys/net/netfilter/nf_conntrack_max").read_text())
            log(json.dumps(result))
        finally:
            echo.terminate()
            echo.wait(10)
    return result


def markdown(results: list[dict[str, Any]], command: str) -> str:
    """The detail file: one row per SRX and per pair for each run (RESULTS, one per session count)."""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        "# Session scale benchmark (MNHA session sync)",
        "",
        f"Measured {when} by `{command}`. Machine: {platform.node()}, {os.cpu_count()} CPUs, kernel "
        f"{platform.release()}; shared machine: CPU figures are noisy.",
        "",
        "UDP sessions (distinct subscriber addresses, each replied by the server's echo) opened on topology3 "
        "(lab bs3), then one datagram per session every KEEPALIVE s for HOLD s: longer than the SRX's 60 s UDP "
        "timeout and than the former 60 s table push and 10 s cache flush. Sync CPU: conntrackd plus mnhad "
        "(its heartbeat loop included) of each SRX during the hold.",
        "",
        "| sessions | SRX | after opening | sync CPU during the hold (% of one core) | peer's sessions written/s "
        "| goal |",
        "|---|---|---|---|---|---|",
    ]
    for result in results:
        for node in sorted(result["after_open"]):
            lines.append(f"| {result['sessions']} | {node} | {result['after_open'][node]} | "
                         f"{result['sync_cpu_pct'].get(node, '-')} | {result['peer_writes_per_s'].get(node, '-')} "
                         f"| CPU ≤ 5 % |")
    lines += ["", "| sessions | pair | on either node at the end of the hold | on both | only on one | goal |",
              "|---|---|---|---|---|---|"]
    for result in results:
        for pair, c in result["end_of_hold"].items():
            only = ", ".join(f"{k[5:]}: {v}" for k, v in c.items() if k.startswith("only_"))
            lines.append(f"| {result['sessions']} | {pair} | {c['either']} | {c['both']} | {only} | "
                         f"none only on one |")
    lines += [""] + [f"Run of {r['sessions']}: opened at {r['rate']}/s in {r['open_s']} s, keepalive "
                     f"{r['keepalive_s']} s, hold {r['hold_s']} s (measured {r['hold_measured_s']} s); kernel "
                     f"conntrack limit {r['kernel_limit']}." for r in results] + [""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", default="20000", help="session counts, comma-separated (one run each)")
    parser.add_argument("--rate", type=float, default=5000.0)
    parser.add_argument("--keepalive", type=float, default=10.0)
    parser.add_argument("--hold", type=float, default=90.0)
    parser.add_argument("--no-doc", action="store_true", help="print the table only")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2
    import tempfile

    results = []
    for count in (int(c) for c in args.sessions.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            results.append(run(argparse.Namespace(**{**vars(args), "sessions": count}), Path(tmp)))
    text = markdown(results, "python3 bench/scale_sessions.py " + " ".join(sys.argv[1:]))
    return publish(text, DOC, keep=not args.no_doc)


if __name__ == "__main__":
    sys.exit(main())
