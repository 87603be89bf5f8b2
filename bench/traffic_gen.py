#!/usr/bin/env python3
"""Traffic generator figures (root): packets/s of dataplane.traffic against iperf3 on the same paths.

Paths:
1. direct: a veth pair between two fresh namespaces, tgbench-a (100.64.0.0/16 AnyIP) and tgbench-b
   (203.0.113.0/24 AnyIP), created and deleted here (distinct ifindexes, as the lab does);
2. topology1: a renamed copy of labs/topology1.yml (lab `tg1`), client -> gw-trust -> MX -> SRX
   (CHASH, stateful) -> MX -> gw-untrust -> server, brought up and down here.

On each path, alternating within every round (so load changes hit all of them alike):
- ours at full speed (rate 0), 200 flows, IMIX, and fixed frames of 110 and 746 bytes, the frame
  sizes (with FCS) of iperf3's `-l 64` and `-l 700` datagrams;
- iperf3 `-u -b 0 -l 64` and `-l 700`, one flow;
- ours paced: 200 flows x 100 pps (10 ms resolution) and 200 flows x 500 pps (2 ms);
- a known 300 ms outage (nft netdev ingress drop) in 200 flows x 100 pps: per-flow lost/rate
  against the outage made.
The sender (and iperf3's client) is pinned to CPU 0, the receiver (and iperf3's server) to CPU 1;
with veth the whole forwarding path runs in softirq on the sending CPU. "Received pps" is what
the receiving application got; ratios are ours / iperf3 at equal frame size, medians of the rounds.

    python3 bench/traffic_gen.py [--rounds 3] [--seconds 3] [--json] [--no-lab] [--out docs/benchmarks-traffic.md]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from dataplane.traffic import Receiver, Sender, make_flows  # noqa: E402

LAB = [sys.executable, "-m", "lab_orchestrator.cli"]
NS_A, NS_B = "tgbench-a", "tgbench-b"
FLOWS = 200
SEND_CPU, RECV_CPU = 0, 1
GOAL_DIRECT_IMIX = 150_000


@dataclass
class NetPath:
    name: str
    client_ns: str
    client_iface: str
    server_ns: str
    cut_ns: str  # where a known outage is made: an nft ingress drop on CUT_IFACE in CUT_NS
    cut_iface: str
    src: str = "100.64.0.1"
    dst: str = "203.0.113.10"


# --------------------------------------------------------------------------- paths
def sh(*argv: str, check: bool = True, timeout: float = 60) -> str:
    result = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
    if check and result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)}: {result.stderr.strip()}")
    return result.stdout


def netns_exists(name: str) -> bool:
    return name in sh("ip", "netns", "list").split()


@contextlib.contextmanager
def direct_pair() -> Iterator[NetPath]:
    for name in (NS_A, NS_B):
        if netns_exists(name):
            sh("ip", "netns", "del", name)  # a leftover of an interrupted run of this bench
    steps = [
        ["netns", "add", NS_A], ["netns", "add", NS_B],
        ["link", "add", "tgb0", "netns", NS_A, "index", "50", "type", "veth", "peer", "name", "tgb1",
         "netns", NS_B, "index", "60"],
        ["-n", NS_A, "addr", "add", "192.0.2.0/31", "dev", "tgb0"],
        ["-n", NS_B, "addr", "add", "192.0.2.1/31", "dev", "tgb1"],
        ["-n", NS_A, "link", "set", "lo", "up"], ["-n", NS_B, "link", "set", "lo", "up"],
        ["-n", NS_A, "link", "set", "tgb0", "up"], ["-n", NS_B, "link", "set", "tgb1", "up"],
        ["-n", NS_A, "route", "add", "local", "100.64.0.0/16", "dev", "lo"],
        ["-n", NS_B, "route", "add", "local", "203.0.113.0/24", "dev", "lo"],
        ["-n", NS_A, "route", "add", "203.0.113.0/24", "via", "192.0.2.1"],
        ["-n", NS_B, "route", "add", "100.64.0.0/16", "via", "192.0.2.0"],
    ]
    try:
        for step in steps:
            sh("ip", *step)
        sh("ip", "netns", "exec", NS_A, "ping", "-c", "1", "-W", "2", "203.0.113.10")
        yield NetPath("direct veth pair", NS_A, "tgb0", NS_B, NS_B, "tgb1")
    finally:
        for name in (NS_A, NS_B):
            if netns_exists(name):
                sh("ip", "netns", "del", name, check=False)


@contextlib.contextmanager
def topology1(name: str) -> Iterator[NetPath]:
    if Path(f"/run/lab/{name}/state.json").exists() or netns_exists(f"{name}-client"):
        raise SystemExit(f"lab {name} is already running (not started by this bench): choose --lab-name")
    source = (REPO / "labs/topology1.yml").read_text()
    old = next(line for line in source.splitlines() if line.startswith("name:"))
    with tempfile.TemporaryDirectory() as tmp:
        topo = Path(tmp) / f"{name}.yml"
        topo.write_text(source.replace(old, f"name: {name}", 1))
        try:
            up = subprocess.run([*LAB, "up", str(topo)], cwd=REPO, capture_output=True, text=True, timeout=120)
            if up.returncode != 0:
                raise SystemExit(f"lab up {topo}: {up.stderr.strip()}")
            yield NetPath(f"topology1 (lab {name})", f"{name}-client", "eth1", f"{name}-server", f"{name}-gw-trust",
                          "Gi0-0")
        finally:
            subprocess.run([*LAB, "down", "--lab", name], cwd=REPO, capture_output=True, text=True, timeout=120)


# --------------------------------------------------------------------------- measurements
def ksoftirqd_cpu_s(cpu: int = SEND_CPU) -> float:
    """CPU seconds ksoftirqd/CPU has used: softirq work deferred from the sender's context runs there
    (other work of that CPU too, so per-CPU-second figures that add it err on the low side)."""
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if (entry / "comm").read_text().strip() == f"ksoftirqd/{cpu}":
                    fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
                    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            except OSError:
                continue
    return 0.0


def ours(path: NetPath, sizes: str, seconds: float, rate: float = 0.0, flows: int = FLOWS) -> dict[str, Any]:
    flow_list = make_flows(flows, "100.64.0.0/16", path.dst)
    receiver = Receiver(ns=path.server_ns, port=7000, cpu=RECV_CPU, realtime=rate > 0).spawn()
    try:
        receiver.wait_ready()
        sender = Sender(iface=path.client_iface, flows=flow_list, rate=rate, sizes=sizes, duration=seconds,
                        ns=path.client_ns, cpu=SEND_CPU, realtime=rate > 0).spawn()
        try:
            sender.wait_ready()
            soft = ksoftirqd_cpu_s()
            sent = sender.wait(timeout=seconds * 3 + 30)
            soft = ksoftirqd_cpu_s() - soft
        finally:
            sender.kill()
        time.sleep(0.2)
        got = receiver.stop(sent=sent)
    finally:
        receiver.kill()
    elapsed = sent["elapsed_s"]
    return {"sent_pps": sent["pps"], "received_pps": got["received"] / elapsed, "sent": sent["sent"],
            "received": got["received"], "lost": got["lost"], "send_errors": sent["errors"],
            "socket_drops": got.get("socket_drops"), "max_lag_ms": sent["max_lag_ms"],
            "avg_size": sent["avg_size"], "per_flow_pps": sent["sent"] / flows / elapsed,
            "resolution_ms": 1000 * flows * elapsed / sent["sent"] if sent["sent"] else None,
            "rate_pps": rate, "l2_mbps": sent["l2_mbps"], "sender_cpu_s": sent["cpu_s"], "ksoftirqd_s": soft,
            "pps_per_cpu_s": sent["sent"] / (sent["cpu_s"] + soft) if sent["cpu_s"] + soft > 0 else None}


def iperf(path: NetPath, length: int, seconds: float) -> dict[str, Any]:
    server = subprocess.Popen(["ip", "netns", "exec", path.server_ns, "iperf3", "-s", "-1", "-B", path.dst,
                               "-J", "-A", str(RECV_CPU)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(0.3)
        before, soft = resource.getrusage(resource.RUSAGE_CHILDREN), ksoftirqd_cpu_s()
        client = sh("ip", "netns", "exec", path.client_ns, "iperf3", "-c", path.dst, "-B", path.src, "-u", "-b", "0",
                    "-l", str(length), "-t", str(seconds), "-J", "-A", str(SEND_CPU), timeout=seconds + 30)
        after, soft = resource.getrusage(resource.RUSAGE_CHILDREN), ksoftirqd_cpu_s() - soft
        out, _ = server.communicate(timeout=seconds + 15)
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()
    total = json.loads(out)["end"]["sum"]
    received = total["packets"] - total["lost_packets"]
    sent = json.loads(client)["end"]["sum"]["packets"]
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)  # `ip netns exec` execs iperf3
    return {"received_pps": received / total["seconds"], "sent_pps": total["packets"] / total["seconds"],
            "lost": total["lost_packets"], "frame": length + 46, "sender_cpu_s": cpu, "ksoftirqd_s": soft,
            "pps_per_cpu_s": sent / (cpu + soft) if cpu + soft > 0 else None}


def accuracy(path: NetPath, outage_s: float = 0.3, per_flow_pps: int = 100) -> dict[str, Any]:
    """A known outage (nft netdev ingress drop, switched by libnftables in well under a ms) in
    200 flows x PER_FLOW_PPS: how far each flow's lost/rate is from the outage we made."""
    from dataplane.kernel.nft import Nft

    nft = Nft()
    nft.run("add table netdev tg_outage; add chain netdev tg_outage cut "
            f'{{ type filter hook ingress device "{path.cut_iface}" priority -500; policy accept; }}',
            ns=path.cut_ns)
    marks: list[int] = []
    try:
        nft.run("list chain netdev tg_outage cut", ns=path.cut_ns)
        flows = make_flows(FLOWS, "100.64.0.0/16", path.dst)
        receiver = Receiver(ns=path.server_ns, port=7000, cpu=RECV_CPU, realtime=True).spawn()
        try:
            receiver.wait_ready()
            sender = Sender(iface=path.client_iface, flows=flows, rate=FLOWS * per_flow_pps, duration=2.0,
                            ns=path.client_ns, cpu=SEND_CPU, realtime=True).spawn()
            try:
                sender.wait_ready()
                time.sleep(0.8)
                marks.append(time.monotonic_ns())
                nft.run("add rule netdev tg_outage cut drop", ns=path.cut_ns)
                marks.append(time.monotonic_ns())
                time.sleep(max(0.0, outage_s - (time.monotonic_ns() - marks[0]) / 1e9))
                marks.append(time.monotonic_ns())
                nft.run("flush chain netdev tg_outage cut", ns=path.cut_ns)
                marks.append(time.monotonic_ns())
                sent = sender.wait(timeout=60)
            finally:
                sender.kill()
            got = receiver.stop(sent=sent)
        finally:
            receiver.kill()
    finally:
        nft.run("delete table netdev tg_outage", ns=path.cut_ns)
        nft.close()
    t0, t1, t2, t3 = marks
    outage_ms = ((t2 + t3) - (t0 + t1)) / 2e6
    errors = [f["convergence_ms"] - outage_ms for f in got["per_flow"]]
    interval = 1000 / per_flow_pps
    switch_ms = ((t1 - t0) + (t3 - t2)) / 2e6  # how uncertain the outage made is
    return {"outage_ms": outage_ms, "switch_ms": switch_ms,
            "convergence_ms": got["convergence_ms"], "max_abs_error_ms": max(abs(e) for e in errors),
            "within_one_interval": sum(1 for e in errors if abs(e) <= interval + switch_ms) / len(errors),
            "interval_ms": interval, "max_lag_ms": sent["max_lag_ms"], "lost": got["lost"],
            "flows_with_loss": got["flows_with_loss"], "errors_ms": [round(e, 3) for e in errors]}


def measure_path(path: NetPath, rounds: int, seconds: float) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {}
    plan: list[tuple[str, Callable[[], dict[str, Any]]]] = [
        ("ours imix", lambda: ours(path, "imix", seconds)),
        ("iperf3 -l 700", lambda: iperf(path, 700, seconds)),
        ("ours 746", lambda: ours(path, "746", seconds)),
        ("iperf3 -l 64", lambda: iperf(path, 64, seconds)),
        ("ours 110", lambda: ours(path, "110", seconds)),
        ("ours imix 200x100pps", lambda: ours(path, "imix", seconds, rate=FLOWS * 100)),
        ("ours imix 200x500pps", lambda: ours(path, "imix", seconds, rate=FLOWS * 500)),
    ]
    for round_no in range(rounds):
        for key, run in plan:
            result = run()
            runs.setdefault(key, []).append(result)
            print(f"  [{path.name}] round {round_no + 1} {key}: received {result['received_pps']:,.0f} pps",
                  file=sys.stderr)
    summary: dict[str, Any] = {}
    for key, results in runs.items():
        summary[key] = {
            "received_pps": statistics.median(r["received_pps"] for r in results),
            "best_pps": max(r["received_pps"] for r in results),
            "pps_per_cpu_s": statistics.median(r["pps_per_cpu_s"] or 0 for r in results),
            "sent_pps": statistics.median(r["sent_pps"] for r in results),
            "lost": [r["lost"] for r in results],
            "runs": results,
        }
    checks = [accuracy(path) for _ in range(rounds)]
    summary["accuracy"] = checks
    summary["cut"] = f"{path.cut_iface} in {path.cut_ns}"
    for check in checks:
        print(f"  [{path.name}] known outage {check['outage_ms']:.1f} ms: convergence {check['convergence_ms']}",
              file=sys.stderr)
    for ours_key, iperf_key in (("ours imix", "iperf3 -l 700"), ("ours 746", "iperf3 -l 700"),
                                ("ours 110", "iperf3 -l 64")):
        ratios = [o["received_pps"] / i["received_pps"] for o, i in zip(runs[ours_key], runs[iperf_key], strict=True)]
        summary[f"{ours_key} / {iperf_key}"] = {"median": statistics.median(ratios), "per_round": ratios}
    return summary


# --------------------------------------------------------------------------- report
def machine() -> dict[str, Any]:
    model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                  if line.startswith("model name")), platform.processor())
    iperf_version = sh("iperf3", "--version", check=False).splitlines()[:1]
    return {"nproc": os.cpu_count(), "cpu": model, "kernel": platform.release(),
            "python": platform.python_version(), "iperf3": iperf_version[0] if iperf_version else "?",
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")}


def other_labs(own: str) -> list[str]:
    """Labs running on this machine besides the one this bench brings up (their state folders)."""
    root = Path("/run/lab")
    return sorted(p.name for p in root.iterdir() if p.is_dir() and p.name != own) if root.is_dir() else []


def markdown(result: dict[str, Any]) -> str:
    m = result["machine"]
    lines = [
        "# Traffic generator benchmark",
        "",
        f"Measured {m['date']} by `bench/traffic_gen.py --rounds {result['rounds']} --seconds {result['seconds']}` "
        f"(medians of {result['rounds']} alternating rounds; {FLOWS} flows for our generator).",
        "",
        f"Machine: {m['nproc']} CPUs ({m['cpu']}), kernel {m['kernel']}, Python {m['python']}, {m['iperf3']}. "
        f"Load average {result['load_start']} at start, {result['load_end']} at end; other labs "
        f"running meanwhile: {', '.join(result['other_labs_start']) or 'none'} at start, "
        f"{', '.join(result['other_labs_end']) or 'none'} at end (this machine is shared: expect ±10–20 % noise).",
        "",
        "Sender (ours: one Python process, AF_PACKET `send` of pre-built frames; iperf3's client) pinned to "
        "CPU 0, receiver (ours: UDP socket drained every 1 ms; iperf3's server) to CPU 1. With veth, all "
        "forwarding runs in softirq on the sending CPU, so \"from one core\" includes the path's forwarding. "
        "pps = packets the receiving application got per second of sending. Frame sizes include the 4-byte "
        "FCS (IMIX average 711.83 B; iperf3 `-l 64` = 110 B frames, `-l 700` = 746 B).",
        "",
    ]
    for path_name, summary in result["paths"].items():
        lines += [f"## {path_name}", "",
                  "| measurement | received pps (median) | best round | sent pps | sent per sender CPU-second | "
                  "lost (per round) | resolution |",
                  "|---|---|---|---|---|---|---|"]
        for key, row in summary.items():
            if "received_pps" not in row:
                continue
            resolution = ""
            if key.startswith("ours"):
                res = statistics.median(r["resolution_ms"] for r in row["runs"])
                resolution = f"{res:.2f} ms"
            per_cpu = f"{row['pps_per_cpu_s']:,.0f}" if not key.endswith("pps") else ""  # not for paced rows
            lost = str(row["lost"])
            drops = [r.get("socket_drops") for r in row["runs"]]
            if key.startswith("ours") and any(row["lost"]):
                lost += f" (receiver socket: {drops})"
            lines.append(f"| {key} | {row['received_pps']:,.0f} | {row['best_pps']:,.0f} | {row['sent_pps']:,.0f} | "
                         f"{per_cpu} | {lost} | {resolution} |")
        lines += ["", "| ratio (received pps, same round) | median | per round |", "|---|---|---|"]
        for key, row in summary.items():
            if "median" in row:
                lines.append(f"| {key} | {row['median']:.2f} | {', '.join(f'{r:.2f}' for r in row['per_round'])} |")
        lines += ["", f"Known outage (nft ingress drop on {summary.get('cut', 'the path')}), 200 flows x 100 pps "
                  "IMIX, 10 ms resolution: per-flow lost/rate against the outage made (mid-call to mid-call "
                  "of the libnftables calls that add and remove the drop).", "",
                  "| outage made | ± (half the switch calls) | per-flow convergence min / avg / max | max abs error | "
                  "flows within 1 interval (+ ±) | sender lag |", "|---|---|---|---|---|---|"]
        for check in summary.get("accuracy", []):
            conv = check["convergence_ms"]
            lines.append(f"| {check['outage_ms']:.2f} ms | {check['switch_ms']:.2f} ms | {conv['min']:.0f} / "
                         f"{conv['avg']:.1f} / {conv['max']:.0f} ms | {check['max_abs_error_ms']:.1f} ms | "
                         f"{check['within_one_interval']:.0%} | {check['max_lag_ms']:.1f} ms |")
        lines.append("")
    direct = result["paths"].get("direct veth pair", {}).get("ours imix")
    if direct:
        capacity = float(direct.get("pps_per_cpu_s") or 0)
        verdict = "pass" if capacity >= GOAL_DIRECT_IMIX else "FAIL"
        received_note = ("all received" if not any(direct["lost"])
                         else f"lost at our receiver per round: {direct['lost']}")
        lines += [f"Goal: >= {GOAL_DIRECT_IMIX:,} pps IMIX from one core on the direct pair: "
                  f"{capacity:,.0f} packets per CPU-second of the sender ({received_note}), **{verdict}**; achieved "
                  f"on this shared machine: {direct['received_pps']:,.0f} pps median, {direct['best_pps']:,.0f} "
                  "best round.", ""]
    for error in result.get("errors", []):
        lines += [f"Not measured: {error}", ""]
    lines += [
        "Reading the figures:",
        "",
        "- Sent per sender CPU-second = packets sent / (CPU time of the sending thread, which includes the "
        "softirq forwarding done in its context, + CPU time of ksoftirqd on the sender's CPU, which includes "
        "other work of that CPU): what one core does when it is the sender's alone, independent of how much "
        "of it other processes took. iperf3's client is measured the same way (its process CPU time).",
        "- `lost` for ours: never received, of which `receiver socket` were dropped at our receiver's socket "
        "(the Python receiver fell behind on its shared CPU), the rest by the path; for iperf3 it is its "
        "server's count. At "
        "`-b 0` iperf3's client sends far more than its server reads, so its received pps is its receiver's "
        "limit; ours is the Python sender's (it pays for the path's softirq forwarding on its own CPU).",
        "- The machine is shared with other engineers' test labs: the load average above says how much. "
        "Full-speed figures are what one CPU had left under that load; compare rows of one run (the ratios), "
        "not runs.",
    ]
    for name, summary in result["paths"].items():
        runs = summary.get("ours imix 200x500pps", {}).get("runs", [])
        in_path = [r["lost"] - (r.get("socket_drops") or 0) for r in runs]
        if any(in_path):
            lines.append(f"- Paced 200 x 500 pps (100 kpps) on {name} lost {in_path} packets per round before our "
                         "receiver's socket: above what the path forwarded under that load (softirq backlog), "
                         "the realtime sender keeping its schedule.")
    lines += [
        "- A sender that cannot keep its schedule (the `max_lag_ms` below) sends what it owes late: a paced "
        "row's sent pps then falls short of its rate, and an outage is measured short by up to that lag.",
        "",
        "Resolution = 1 / per-flow rate: the loss-derived convergence time of a flow is a whole number of its "
        "packet intervals. At full speed it is what the achieved rate gives 200 flows; the paced rows show "
        "the configured 10 ms (200 x 100 pps) and 2 ms (200 x 500 pps). Fewer flows or a higher rate give a "
        "finer resolution (resolution_ms = 1000 x flows / aggregate pps).",
        "",
        "Paced rows and known outages run sender and receiver with `realtime=True` (SCHED_FIFO; they sleep "
        "between packets, so each takes a fraction of a CPU). `max_lag_ms` (how late the sender was against "
        f"its schedule at worst, 0 = never more than 1 ms) per round: {result['lags']}.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--lab-name", default="tg1", help="name of the topology1 copy (must start with tg)")
    parser.add_argument("--no-lab", action="store_true", help="only the direct veth pair")
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks-traffic.md")
    parser.add_argument("--from-json", type=Path, help="render the markdown of a saved --json result (no measuring)")
    args = parser.parse_args()
    if args.from_json:
        text = markdown(json.loads(args.from_json.read_text()))
        args.out.write_text(text)
        print(text)
        return
    if os.geteuid() != 0:
        raise SystemExit("needs root (network namespaces)")
    result: dict[str, Any] = {"machine": machine(), "rounds": args.rounds, "seconds": args.seconds,
                              "load_start": round(os.getloadavg()[0], 2), "other_labs_start": other_labs(args.lab_name),
                              "paths": {}}
    with direct_pair() as path:
        result["paths"][path.name] = measure_path(path, args.rounds, args.seconds)
    result["errors"] = []
    if not args.no_lab:
        try:
            with topology1(args.lab_name) as path:
                result["paths"]["topology1"] = measure_path(path, args.rounds, args.seconds)
        except (SystemExit, Exception) as exc:  # keep the direct figures; say why this path is missing
            result["errors"].append(f"topology1 path: {exc}")
            print(f"topology1 path failed: {exc}", file=sys.stderr)
    result["load_end"] = round(os.getloadavg()[0], 2)
    result["other_labs_end"] = other_labs(args.lab_name)
    result["lags"] = {p: {k: [round(r["max_lag_ms"], 1) for r in s[k]["runs"]]
                          for k in ("ours imix 200x100pps", "ours imix 200x500pps")}
                      for p, s in result["paths"].items()}
    if args.json:
        print(json.dumps(result, indent=2))
    text = markdown(result)
    if args.out:
        args.out.write_text(text)
        print(f"wrote {args.out}", file=sys.stderr)
    if not args.json:
        print(text)


if __name__ == "__main__":
    main()
