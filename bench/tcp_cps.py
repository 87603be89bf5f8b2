"""TCP through the firewalls: connections per second and long-lived connections through `srx-power-off`.

    sudo .venv/bin/python bench/tcp_cps.py [--labs topology3 topology1] [--seconds 5] [--long 5000]

Two tools, each on every path in the same run:
- `tcpload`: the lab's own generator (`dataplane.traffic.tcpload cps`: connect, 1 byte each way, close;
  one Python process, one source address per connection from 100.64.0.0/20);
- `wrk`: Debian's wrk (HTTP/1.1 load, `Connection: close`, so one TCP connection per request) against
  Debian's nginx answering a 1-byte body, started by this script with its own configuration in a temporary
  folder. wrk cannot bind a source address, so a source NAT in the client namespace (nftables, numgen over
  the same 100.64.0.0/20) gives each connection one of those addresses, as the lab's generator does (the MX
  hashes subscribers by address); the rule is there only while wrk runs, on every path alike (and plain
  routing once more without it: what it costs).
Paths:
- ceiling: client and server in one namespace over its loopback (what the tool itself reaches);
- plain routing: client, router, server namespaces (veths, the kernel routing, no firewall), and again
  through --hops routers in a row (as many namespaces as forward on the lab's path);
- each lab: the lab's client host to its server host, through the MXs and the SRXs (nftables, conntrack,
  MNHA sync); on an MNHA lab also the CPU its conntrackd processes used, and the run again with them
  paused (what session sync costs).
Every run also gives the machine's busy CPUs (all CPUs, /proc/stat, from 1 s after the client started to
its end) and so CPS per busy CPU, and the connections the server's kernel accepted (TcpPassiveOpens),
which shows one connection per request. A lab's CPS is given against plain routing and against routing
through as many routers as its path has (what its rules, conntrack, NAT and sync cost). Then, on the first
lab with MNHA, N long-lived connections (a request every second each) while the SRX carrying most of them
is powered off, with their outcomes.
Writes docs/benchmarks-tcp.md.

wrk and nginx come from Debian (`apt-get install wrk nginx`, or `make deps-bench`); without them,
`--tools tcpload` measures with the lab's generator only.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from common import ROOT, BenchLab, lab, logger, topology_text, write_doc
from cpu_window import per_cpu, profile_tables, window
from tcp_wrk import SOURCES, passive_opens, wrk_cps

from lab_orchestrator import kinds
from lab_orchestrator.events import sessions

log = logger("tcp")
TOOL = [sys.executable, "-m", "dataplane.traffic.tcpload"]
TOOLS = ("tcpload", "wrk")
SERVER = "203.0.113.9"
Row = tuple[str, str, dict[str, Any]]  # path, tool, figures


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
        rate: float, profile: Path | None = None) -> dict[str, Any]:
    """The lab's generator: `tcpload serve` in the server namespace, `tcpload cps` in the client's."""
    server = subprocess.Popen([*server_cmd, *TOOL, "serve", "--bind", bind, "--port", "8000",
                               "--seconds", str(seconds + 30)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and "serving" in server.stdout.readline()
        before = passive_opens(server_cmd)
        cpu = window(seconds, profile)
        out = subprocess.run([*client_cmd, *TOOL, "cps", "--sources", sources, "--to", f"{bind}:8000",
                              "--rate", str(rate), "--seconds", str(seconds), "--concurrency", "2000"],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout
        figures = cpu.figures()
        accepted = passive_opens(server_cmd) - before
    finally:
        server.terminate()
        server.wait(10)
    result: dict[str, Any] = json.loads(out)
    result.update(figures, accepted=accepted)
    per_cpu(result)
    log(f"tcpload {result}")
    return result


class Runner:
    """One CPS run of a tool between a server and a client namespace command; with PROFILE, where the
    machine's CPU went during it (perf)."""

    def __init__(self, args: argparse.Namespace):
        self.args = args

    def __call__(self, tool: str, server_cmd: list[str], client_cmd: list[str], bind: str,
                 sources: str = str(SOURCES), profile: bool = False, spread: bool = True) -> dict[str, Any]:
        a = self.args
        with tempfile.TemporaryDirectory(prefix="tcpb-perf-") as tmp:
            data = Path(tmp) / "perf.data" if profile and a.profile else None
            if tool == "wrk":
                result = wrk_cps(server_cmd, client_cmd, bind, a.seconds, a.wrk_threads, a.wrk_connections,
                                 a.nginx_workers, data, spread)
            else:
                result = cps(server_cmd, client_cmd, bind, sources, a.seconds, a.rate, data)
        if "profile" in result:
            log(f"{tool} profile: {result['profile']}")
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


@contextlib.contextmanager
def paused(pids: list[int]) -> Iterator[None]:
    """The processes stopped (SIGSTOP) for the body, resumed after whatever happens."""
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        for pid in pids:
            os.kill(pid, signal.SIGCONT)


def lab_cps(name: str, state_dir: Path, tools: list[str], run: Runner) -> list[Row]:
    """CPS through the lab with each tool; on an MNHA lab, conntrackd's CPU during it, then once more
    with the lab's conntrackd processes paused (SIGSTOP, resumed after): what session sync costs."""
    pids = conntrackd_pids(state_dir)
    rows = []
    for tool in tools:
        before, start = cpu_ticks(pids), time.monotonic()
        result = run(tool, lab_exec(name, "server"), lab_exec(name, "client"), SERVER, profile=True)
        if pids:
            result["sync_cpu"] = (cpu_ticks(pids) - before) / os.sysconf("SC_CLK_TCK") / (time.monotonic() - start)
        rows.append(("", tool, result))
        if pids:
            with paused(pids):
                rows.append((", session sync paused", tool,
                             run(tool, lab_exec(name, "server"), lab_exec(name, "client"), SERVER)))
    return rows


def lab_exec(name: str, node: str) -> list[str]:
    return [sys.executable, "-m", "lab_orchestrator.cli", "exec", "--lab", name, node, "--"]


def long_through_power_off(name: str, count: int, interval: float, open_rate: float,
                           seconds: float) -> dict[str, Any]:
    """COUNT long-lived connections (a request every INTERVAL s each, opened at OPEN_RATE/s), the SRX
    carrying most of them powered off once all are open; the connections run SECONDS after the last
    one opened. A connection stalled when its longest gap between two answers exceeds its interval by
    more than 2 s."""
    running = BenchLab(name, Path()).lab
    # a process holds at most its open-files limit of connections (20,000 on a machine whose init keeps
    # CAP_SYS_RESOURCE): the server runs a worker per 15,000, the client shares them out by itself
    server = subprocess.Popen([*lab_exec(name, "server"), *TOOL, "serve", "--bind", SERVER, "--port", "8001",
                               "--seconds", str(count / open_rate + seconds + 180),
                               "--workers", str(max(1, -(-count // 15000)))], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None and "serving" in server.stdout.readline()
        client = subprocess.Popen([*lab_exec(name, "client"), *TOOL, "long", "--sources", "100.64.32.0/19",
                                   "--count", str(count), "--to", f"{SERVER}:8001", "--interval", f"{interval:g}",
                                   "--seconds", f"{seconds:g}", "--timeout", "20", "--stall", f"{interval + 2:g}",
                                   "--open-rate", f"{open_rate:g}"], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        time.sleep(count / open_rate + 4)
        srxs = [n.name for n in running.plan().nodes if kinds.get(n.kind).firewall]
        carried = {s: sum(1 for x in sessions.read(running.ns(s))
                          if x.protocol == "tcp" and x.destination_port == 8001 and x.packets > 0) for s in srxs}
        target = max(carried, key=lambda s: carried[s])
        log(f"carried {carried}; power off {target}")
        powered_off_at = time.monotonic()
        lab("fail", "--lab", name, target, "srx-power-off")
        out, _ = client.communicate(timeout=count / open_rate + seconds + 180)
        lab("restore", "--lab", name, target)
    finally:
        server.terminate()
        server.wait(10)
    result: dict[str, Any] = json.loads(out)
    result.pop("stalls", None)
    result.pop("not_completed", None)
    result.update(target=target, carried_by_target=carried[target], interval_s=interval, open_rate=open_rate,
                  after_power_off_s=round(result["ended_at"] - powered_off_at, 1)
                  if "ended_at" in result else None)
    log(f"long {result}")
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--labs", nargs="*", default=["topology3"],
                        help="shipped labs to measure (none: the plain paths only)")
    parser.add_argument("--tools", nargs="+", choices=TOOLS, default=list(TOOLS),
                        help="tcpload: the lab's generator; wrk: Debian's wrk against nginx (both by default)")
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rate", type=float, default=20000.0, help="tcpload's target CPS (above what it reaches)")
    parser.add_argument("--wrk-threads", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--wrk-connections", type=int, default=256, help="wrk's connections open at once")
    parser.add_argument("--nginx-workers", type=int, default=os.cpu_count() or 1)
    parser.add_argument("--long", type=int, default=5000, help="long-lived connections through srx-power-off")
    parser.add_argument("--long-interval", type=float, default=1.0,
                        help="seconds between two requests of one long-lived connection")
    parser.add_argument("--long-open-rate", type=float, default=1000.0,
                        help="long-lived connections opened per second")
    parser.add_argument("--long-seconds", type=float, default=30.0,
                        help="how long the long-lived connections run after the last one opened")
    parser.add_argument("--hops", type=int, default=5,
                        help="plain routing again through this many routers (topology3's path forwards in 5 "
                             "namespaces: gw-trust, mx1's trust VR, an SRX, mx1's untrust VR, gw-untrust); 0: not")
    parser.add_argument("--profile", action="store_true",
                        help="where the machine's CPU went during each run but the paused ones (perf, every CPU)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks-tcp.md")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2
    missing = [cmd for cmd in ("wrk", "nginx") if "wrk" in args.tools and not shutil.which(cmd)]
    if missing:
        print(f"{' and '.join(missing)} not found: install the Debian packages (apt-get install wrk nginx, or "
              "make deps-bench), or measure with the lab's generator only: --tools tcpload", file=sys.stderr)
        return 2
    if args.profile and not shutil.which("perf"):
        print("perf not found (--profile): apt-get install linux-perf", file=sys.stderr)
        return 2
    run = Runner(args)
    rows: list[Row] = []
    long: dict[str, Any] | None = None
    for routers in (1, args.hops):
        plain_up(routers)
        try:
            for tool in args.tools:
                if routers == 1:
                    rows.append(("ceiling (one namespace, loopback)", tool,
                                 run(tool, in_ns("tcpb-c"), in_ns("tcpb-c"), "127.0.0.9", "127.1.0.0/16",
                                     profile=True)))
                    rows.append(("plain routing (client, router, server)", tool,
                                 run(tool, in_ns("tcpb-s"), in_ns("tcpb-c"), SERVER, profile=True)))
                    if tool == "wrk":  # what the client's source spread costs wrk
                        rows.append(("plain routing, no source spread", tool,
                                     run(tool, in_ns("tcpb-s"), in_ns("tcpb-c"), SERVER, spread=False)))
                elif routers > 1:
                    rows.append((f"plain routing, {routers} routers in a row", tool,
                                 run(tool, in_ns("tcpb-s"), in_ns("tcpb-c"), SERVER, profile=True)))
        finally:
            plain_down(routers)
    for shipped in args.labs:
        name = f"tb{shipped.removeprefix('topology')}"[:10]
        file = Path(f"/tmp/{name}.yml")
        file.write_text(topology_text(ROOT / "labs" / f"{shipped}.yml", name))
        with BenchLab(name, file, log) as bench:
            rows += [(f"{shipped} (MX, SRX){suffix}", tool, r)
                     for suffix, tool, r in lab_cps(name, bench.state_dir, args.tools, run)]
            if long is None and args.long and "mnha:" in file.read_text():
                long = long_through_power_off(name, args.long, args.long_interval, args.long_open_rate,
                                              args.long_seconds)
                long["lab"] = shipped
    write_doc(report(rows, long, args), args.out)
    log(f"wrote {args.out}")
    return 0


def cell(value: Any, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def report(rows: list[Row], long: dict[str, Any] | None, args: argparse.Namespace) -> str:
    plain = {tool: r for n, tool, r in rows if n.startswith("plain routing (")}
    # the same number of forwarding namespaces as a lab's path, with no rule, conntrack or sync in them
    hops = {tool: r for n, tool, r in rows if n.startswith("plain routing,") and "routers in a row" in n}
    lines = ["# Benchmarks: TCP through the firewalls", "",
             f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `bench/tcp_cps.py --labs "
             f"{' '.join(args.labs)} --tools {' '.join(args.tools)} --seconds {args.seconds} --rate {args.rate:g} "
             f"--wrk-threads {args.wrk_threads} --wrk-connections {args.wrk_connections} "
             f"--nginx-workers {args.nginx_workers} --long {args.long} --long-interval {args.long_interval:g} "
             f"--long-open-rate {args.long_open_rate:g} --long-seconds {args.long_seconds:g} --hops {args.hops}"
             f"{' --profile' if args.profile else ''}` (as root). "
             f"Machine: {os.cpu_count()} CPUs, {platform.machine()}, kernel {platform.release()}, Python "
             f"{platform.python_version()}; load average {os.getloadavg()[0]:.1f} at the end.",
             "", "## Connections per second (connect, 1 byte each way, close)", "",
             "Each tool on every path in the same run; \"of plain routing\" is against the same tool's plain "
             "routing row. tcpload: the lab's generator (one Python process); wrk: Debian's wrk "
             f"({args.wrk_threads} threads, {args.wrk_connections} connections, `Connection: close`) against "
             f"nginx ({args.nginx_workers} workers, a 1-byte body). Busy CPUs: the machine's, all processes "
             "(/proc/stat, from 1 s after the client started to its end); per busy CPU: CPS divided by them. "
             "Accepted: connections the server's kernel accepted during the run (one per request or "
             "connection). conntrackd CPU: the CPUs the lab's conntrackd processes (MNHA session sync, all "
             "SRXs) used during the run; \"session sync paused\": the same run with them stopped (SIGSTOP) "
             "and resumed after. \"Of routing on as many routers\": against the same tool's row through "
             f"{args.hops} routers in a row, as many namespaces as forward on a lab's path, so that what is "
             "left is what the lab's rules, conntrack, NAT and session sync cost.", "",
             "| path | tool | CPS | of plain routing | goal | of routing on as many routers | busy CPUs "
             "| CPS per busy CPU | completed | accepted | reset | failed | timed out | retried | conntrackd CPU |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, tool, r in rows:
        base = plain.get(tool)
        share = f"{r['cps'] / base['cps']:.2f}" if base and base["cps"] else "-"
        lab_row = not name.startswith(("plain", "ceiling"))
        goal = "≥ 0.8" if lab_row and "paused" not in name else "-"
        same = hops.get(tool)
        path_share = f"{r['cps'] / same['cps']:.2f}" if lab_row and same and same["cps"] else "-"
        lines.append(f"| {name} | {tool} | {r['cps']:.0f} | {share} | {goal} | {path_share} | "
                     f"{cell(r.get('busy_cpus'), 2)} | "
                     f"{cell(r.get('cps_per_cpu'))} | {r['completed']} | {cell(r.get('accepted'))} | {r['reset']} | "
                     f"{r['failed']} | {r['timed_out']} | {r['retried']} | {cell(r.get('sync_cpu'), 2)} |")
    lines += profile_tables([(f"{name} | {tool}", r["profile"]) for name, tool, r in rows if "profile" in r])
    if long is not None:
        lines += ["", f"## Long-lived connections through `srx-power-off` ({long['lab']})", "",
                  f"{long['connections']} connections (opened at {long['open_rate']:g}/s), a 16-byte request "
                  f"every {long['interval_s']:g} s each; once all were open the SRX carrying most of them "
                  f"({long['target']}, {long['carried_by_target']}) was powered off, and the connections ran "
                  f"{cell(long.get('after_power_off_s'), 1)} s more. A connection stalled when two of its answers "
                  f"were more than its interval + 2 s apart.", "",
                  "| connections | goal | completed | reset | timed out | failed | retried | longest gap (s) "
                  f"| stalled > {long['interval_s'] + 2:g} s |",
                  "|---|---|---|---|---|---|---|---|---|",
                  f"| {long['connections']} | 0 reset, 0 failed | {long['completed']} | {long['reset']} | "
                  f"{long['timed_out']} | {long['failed']} | {long['retried']} | {long['longest_gap_s']} | "
                  f"{long['stalled']} |"]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
