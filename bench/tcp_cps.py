"""TCP through the firewalls: connections per second and long-lived connections through `srx-power-off`.

    sudo .venv/bin/python bench/tcp_cps.py [--labs topology3 topology1] [--seconds 5] [--long 5000]

Same tool (`dataplane.traffic.tcpload`), same run, these paths:
- ceiling: client and server in one namespace over its loopback (what the tool itself reaches);
- plain routing: client, router, server namespaces (veths, the kernel routing, no firewall), and again
  through --hops routers in a row (as many namespaces as forward on the lab's path);
- each lab: the lab's client host to its server host, through the MXs and the SRXs (nftables, conntrack,
  MNHA sync); on an MNHA lab also the CPU its conntrackd processes used, and the run again with them
  paused (what session sync costs).
Then, on the first lab with MNHA, N long-lived connections (a request every second each) while the SRX
carrying most of them is powered off, with their outcomes. Writes docs/benchmarks-tcp.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from common import ROOT, BenchLab, lab, logger, topology_text, write_doc

from lab_orchestrator import kinds
from lab_orchestrator.events import sessions

log = logger("tcp")
TOOL = [sys.executable, "-m", "dataplane.traffic.tcpload"]
SERVER = "203.0.113.9"


def sh(*argv: str) -> None:
    subprocess.run(argv, check=True, capture_output=True)


def chain(routers: int) -> list[str]:
    return ["tcpb-c", *(f"tcpb-r{i}" for i in range(1, routers + 1)), "tcpb-s"]


def plain_up(routers: int) -> None:
    """Client, ROUTERS routers in a row, server: one namespace each, veths between them, kernel routing."""
    names = chain(routers)
    for ns in names:
        sh("ip", "netns", "add", ns)
        sh("ip", "-n", ns, "link", "set", "lo", "up")
    for i, (left, right) in enumerate(zip(names, names[1:], strict=False)):
        sh("ip", "link", "add", f"e{i}r", "netns", left, "type", "veth", "peer", f"e{i}l", "netns", right)
        for ns, dev, addr in ((left, f"e{i}r", f"10.255.0.{2 * i}/31"), (right, f"e{i}l", f"10.255.0.{2 * i + 1}/31")):
            sh("ip", "-n", ns, "addr", "add", addr, "dev", dev)
            sh("ip", "-n", ns, "link", "set", dev, "up")
    sh("ip", "-n", "tcpb-c", "route", "add", "local", "100.64.0.0/16", "dev", "lo")
    sh("ip", "-n", "tcpb-c", "route", "add", "default", "via", "10.255.0.1")
    sh("ip", "-n", "tcpb-s", "route", "add", "local", "203.0.113.0/24", "dev", "lo")
    sh("ip", "-n", "tcpb-s", "route", "add", "default", "via", f"10.255.0.{2 * routers}")
    for i in range(1, routers + 1):
        ns = f"tcpb-r{i}"
        sh("ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.ip_forward=1")
        sh("ip", "-n", ns, "route", "add", "100.64.0.0/16", "via", f"10.255.0.{2 * i - 2}")
        sh("ip", "-n", ns, "route", "add", "203.0.113.0/24", "via", f"10.255.0.{2 * i + 1}")


def plain_down(routers: int) -> None:
    for ns in chain(routers):
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def in_ns(ns: str) -> list[str]:
    return ["ip", "netns", "exec", ns]


def cps(server_cmd: list[str], client_cmd: list[str], bind: str, sources: str, seconds: float,
        rate: float) -> dict[str, Any]:
    server = subprocess.Popen([*server_cmd, *TOOL, "serve", "--bind", bind, "--port", "8000",
                               "--seconds", str(seconds + 30)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and "serving" in server.stdout.readline()
        out = subprocess.run([*client_cmd, *TOOL, "cps", "--sources", sources, "--to", f"{bind}:8000",
                              "--rate", str(rate), "--seconds", str(seconds), "--concurrency", "2000"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout
    finally:
        server.terminate()
        server.wait(10)
    result: dict[str, Any] = json.loads(out)
    log(f"cps {result}")
    return result


def cpu_ticks(pids: list[int]) -> int:
    """User and system clock ticks the processes used so far (0 for one that is gone)."""
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total


def conntrackd_pids(state_dir: Path) -> list[int]:
    """The lab's conntrackd processes (MNHA session sync), found by their configuration's path."""
    found = subprocess.run(["pgrep", "-f", f"^conntrackd -C {state_dir}/"], capture_output=True, text=True)
    return [int(p) for p in found.stdout.split()]


def lab_cps(name: str, state_dir: Path, seconds: float, rate: float) -> list[tuple[str, dict[str, Any]]]:
    """CPS through the lab; on an MNHA lab, conntrackd's CPU during it, then once more with the
    lab's conntrackd processes paused (SIGSTOP, resumed after): what session sync costs."""
    def run() -> dict[str, Any]:
        return cps(lab_exec(name, "server"), lab_exec(name, "client"), SERVER, "100.64.0.0/20", seconds, rate)

    pids = conntrackd_pids(state_dir)
    before, start = cpu_ticks(pids), time.monotonic()
    result = run()
    if pids:
        result["sync_cpu"] = (cpu_ticks(pids) - before) / os.sysconf("SC_CLK_TCK") / (time.monotonic() - start)
    rows = [("", result)]
    if pids:
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            rows.append((", session sync paused", run()))
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
    return rows


def lab_exec(name: str, node: str) -> list[str]:
    return [sys.executable, "-m", "lab_orchestrator.cli", "exec", "--lab", name, node, "--"]


def long_through_power_off(name: str, count: int, seconds: float) -> dict[str, Any]:
    running = BenchLab(name, Path()).lab
    server = subprocess.Popen([*lab_exec(name, "server"), *TOOL, "serve", "--bind", SERVER, "--port", "8001",
                               "--seconds", str(seconds + 120)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and "serving" in server.stdout.readline()
        client = subprocess.Popen([*lab_exec(name, "client"), *TOOL, "long", "--sources", "100.64.32.0/19",
                                   "--count", str(count), "--to", f"{SERVER}:8001", "--interval", "1",
                                   "--seconds", str(seconds), "--timeout", "20", "--stall", "2",
                                   "--open-rate", "1000"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        time.sleep(count / 1000 + 4)
        srxs = [n.name for n in running.plan().nodes if kinds.get(n.kind).firewall]
        carried = {s: sum(1 for x in sessions.read(running.ns(s))
                          if x.protocol == "tcp" and x.destination_port == 8001 and x.packets > 0) for s in srxs}
        target = max(carried, key=lambda s: carried[s])
        log(f"carried {carried}; power off {target}")
        lab("fail", "--lab", name, target, "srx-power-off")
        out, _ = client.communicate(timeout=seconds + 120)
        lab("restore", "--lab", name, target)
    finally:
        server.terminate()
        server.wait(10)
    result: dict[str, Any] = json.loads(out)
    result.pop("stalls", None)
    result.pop("not_completed", None)
    result.update(target=target, carried_by_target=carried[target])
    log(f"long {result}")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--labs", nargs="+", default=["topology3"])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--rate", type=float, default=20000.0, help="target CPS (above what the tool reaches)")
    parser.add_argument("--long", type=int, default=5000, help="long-lived connections through srx-power-off")
    parser.add_argument("--hops", type=int, default=5,
                        help="plain routing again through this many routers (topology3's path forwards in 5 "
                             "namespaces: gw-trust, mx1's trust VR, an SRX, mx1's untrust VR, gw-untrust); 0: not")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks-tcp.md")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2
    rows: list[tuple[str, dict[str, Any]]] = []
    long: dict[str, Any] | None = None
    for routers in (1, args.hops):
        plain_up(routers)
        try:
            if routers == 1:
                rows.append(("ceiling (one namespace, loopback)",
                             cps(in_ns("tcpb-c"), in_ns("tcpb-c"), "127.0.0.9", "127.1.0.0/16", args.seconds,
                                 args.rate)))
                rows.append(("plain routing (client, router, server)",
                             cps(in_ns("tcpb-s"), in_ns("tcpb-c"), SERVER, "100.64.0.0/20", args.seconds, args.rate)))
            elif routers > 1:
                rows.append((f"plain routing, {routers} routers in a row",
                             cps(in_ns("tcpb-s"), in_ns("tcpb-c"), SERVER, "100.64.0.0/20", args.seconds, args.rate)))
        finally:
            plain_down(routers)
    for shipped in args.labs:
        name = f"tb{shipped.removeprefix('topology')}"[:10]
        file = Path(f"/tmp/{name}.yml")
        file.write_text(topology_text(ROOT / "labs" / f"{shipped}.yml", name))
        with BenchLab(name, file, log) as bench:
            rows += [(f"{shipped} (MX, SRX){suffix}", r)
                     for suffix, r in lab_cps(name, bench.state_dir, args.seconds, args.rate)]
            if long is None and args.long and "mnha:" in file.read_text():
                long = long_through_power_off(name, args.long, 30)
                long["lab"] = shipped
    write_doc(report(rows, long, args), args.out)
    log(f"wrote {args.out}")
    return 0


def report(rows: list[tuple[str, dict[str, Any]]], long: dict[str, Any] | None, args: argparse.Namespace) -> str:
    plain = next((r for n, r in rows if n.startswith("plain")), None)
    lines = ["# Benchmarks: TCP through the firewalls", "",
             f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `bench/tcp_cps.py --labs "
             f"{' '.join(args.labs)} --seconds {args.seconds:g} --rate {args.rate:g} --long {args.long} "
             f"--hops {args.hops}` "
             "(as root). "
             f"Machine: {os.cpu_count()} CPUs, {platform.machine()}, kernel {platform.release()}, Python "
             f"{platform.python_version()}; load average {os.getloadavg()[0]:.1f} at the end.",
             "", "## Connections per second (connect, 1 byte each way, close)", "",
             "The same tool (`dataplane.traffic.tcpload cps`, one process) on every path in the same run. "
             "conntrackd CPU: the CPUs the lab's conntrackd processes (MNHA session sync, all SRXs) used during "
             "the run; \"session sync paused\": the same run with them stopped (SIGSTOP) and resumed after.", "",
             "| path | CPS | of plain routing | goal | completed | reset | failed | timed out | retried "
             "| conntrackd CPU |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for name, r in rows:
        share = f"{r['cps'] / plain['cps']:.2f}" if plain and plain["cps"] else "-"
        goal = "≥ 0.8" if not name.startswith(("plain", "ceiling")) and "paused" not in name else "-"
        sync = f"{r['sync_cpu']:.2f}" if "sync_cpu" in r else "-"
        lines.append(f"| {name} | {r['cps']:.0f} | {share} | {goal} | {r['completed']} | {r['reset']} | "
                     f"{r['failed']} | {r['timed_out']} | {r['retried']} | {sync} |")
    if long is not None:
        lines += ["", f"## Long-lived connections through `srx-power-off` ({long['lab']})", "",
                  f"{long['connections']} connections, a 16-byte request every second each; the SRX carrying "
                  f"most of them ({long['target']}, {long['carried_by_target']}) powered off.", "",
                  "| connections | goal | completed | reset | timed out | failed | retried | longest gap (s) "
                  "| stalled > 2 s |",
                  "|---|---|---|---|---|---|---|---|---|",
                  f"| {long['connections']} | 0 reset, 0 failed | {long['completed']} | {long['reset']} | "
                  f"{long['timed_out']} | {long['failed']} | {long['retried']} | {long['longest_gap_s']} | "
                  f"{long['stalled']} |"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
