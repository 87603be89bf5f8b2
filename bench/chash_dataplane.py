#!/usr/bin/env python3
"""Load-balancer figures on real namespaces (root): forwarding cost and failover speed.

1. 64-byte UDP pps (iperf3, received) client -> MX -> SRX -> MX -> server with the selector (CHASH
   in topology1, TLB in topology3) and the SRX stateful ruleset, against two baselines measured
   alternately in the same run: (a) the same chain hand-built with plain kernel ECMP (a multipath
   route over the SRX next hops in a table of its own, fib_multipath_hash_policy 0 = L3 source and
   destination) and the same SRX conntrack rules, no selector (goal >= 0.97): the selector's own
   cost; (b) plain routing, no rules at all (goal >= 0.90). Both for the nftables selector (the lab as
   it runs) and for the eBPF selector (`services.selector: ebpf`: its tc program put on the same MX
   interfaces with the same table in place of the nft rule, same marks, rules and tables), in the
   same rounds. Written to docs/benchmarks-chash-forwarding.md.
2. CHASH: time from carrier loss on an MX-SRX link (the SRX end set down over netlink) to the
   selector map being reprogrammed by dataplane.daemons.mxlb (its status file records when): goal <= 10 ms.
3. TLB (--lab topology3): time from an SRX ceasing to answer health checks (its loopback filtered)
   to its removal from the selector, against the configured interval x failures, over N runs.

    python3 bench/chash_dataplane.py [--lab topology1|topology3] [--rounds 3] [--seconds 3]
                                     [--trials 10] [--interval-ms 200] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.common import write_doc  # noqa: E402
from labkit import netnsutil  # noqa: E402
from labkit.contracts import MXLB_STATUS  # noqa: E402

LAB = [sys.executable, "-m", "lab_orchestrator.cli"]
NAME = "benchch"
HEALTH = {"interval_ms": 200, "failures": 3}


def lab(*args: str) -> str:
    result = subprocess.run([*LAB, *args], cwd=REPO, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise SystemExit(f"lab {' '.join(args)}: {result.stderr.strip()}")
    return result.stdout


def in_ns(node: str, *argv: str, timeout: float = 60) -> str:
    return subprocess.run(["ip", "netns", "exec", f"{NAME}-{node}", *argv], capture_output=True, text=True,
                          timeout=timeout).stdout


def iperf_pps(seconds: float) -> float:
    server = subprocess.Popen(["ip", "netns", "exec", f"{NAME}-server", "iperf3", "-s", "-1", "-B", "203.0.113.9",
                               "-J"], stdout=subprocess.PIPE, text=True)
    time.sleep(0.3)
    in_ns("client", "iperf3", "-c", "203.0.113.9", "-B", "100.64.1.1", "-u", "-l", "64", "-b", "0",
          "-t", str(seconds), "-J")
    out, _ = server.communicate(timeout=seconds + 10)
    data = json.loads(out)
    received = data["end"]["sum"]["packets"] - data["end"]["sum"]["lost_packets"]
    return float(received) / float(data["end"]["sum"]["seconds"])


RULES = {
    "mx1-trust-vr": "table ip mxlb", "mx1-untrust-vr": "table ip mxlb",
    **{f"srx{i}": "table inet srx" for i in range(1, 5)},
}  # TLB adds policy rules that need the marks; without the nft tables nothing is marked


ECMP_TABLE = 900  # the hand-built ECMP baseline's table and rule priority (before the selector's marks)
ECMP_PRIORITY = 900
MX_SIDES = {"mx1-trust-vr": "203.0.113.0/24", "mx1-untrust-vr": "100.64.0.0/16"}


def ecmp_nexthops() -> dict[str, list[tuple[str, str]]]:
    """Per MX side: the (gateway, device) of every SRX, from the selector's per-SRX tables in the plan."""
    plan = json.loads(Path(f"/run/lab/{NAME}/plan.json").read_text())
    hops: dict[str, list[tuple[str, str]]] = {side: [] for side in MX_SIDES}
    for route in plan["routes"]:
        side = route["ns"][len(NAME) + 1:]
        if side in hops and route["kind"] == "unicast" and route["table"] and route["via"] and route["dev"]:
            hops[side].append((route["via"], route["dev"]))
    return hops


def set_ecmp(hops: dict[str, list[tuple[str, str]]], on: bool) -> None:
    """The hand-built ECMP baseline: a multipath route to the far side in table ECMP_TABLE, a rule
    sending the far side's prefix there, L3 (source, destination) multipath hashing."""
    for side, dst in MX_SIDES.items():
        ns = f"{NAME}-{side}"
        subprocess.run(["ip", "-n", ns, "rule", "del", "priority", str(ECMP_PRIORITY)], capture_output=True)
        subprocess.run(["ip", "-n", ns, "route", "flush", "table", str(ECMP_TABLE)], capture_output=True)
        if not on:
            continue
        nexthops = [arg for via, dev in hops[side] for arg in ("nexthop", "via", via, "dev", dev)]
        subprocess.run(["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv4.fib_multipath_hash_policy=0"],
                       check=True)
        subprocess.run(["ip", "-n", ns, "route", "replace", dst, "table", str(ECMP_TABLE), *nexthops], check=True)
        subprocess.run(["ip", "-n", ns, "rule", "add", "priority", str(ECMP_PRIORITY), "to", dst,
                        "table", str(ECMP_TABLE)], check=True)


def save_rules() -> dict[str, str]:
    return {node: in_ns(node, "nft", "list", *table.split()) for node, table in RULES.items()}


def set_rules(saved: dict[str, str], on: bool, srx_only: bool = False) -> None:
    for node, table in RULES.items():
        in_ns(node, "nft", "delete", *table.split())
        if on and (not srx_only or node.startswith("srx")):
            subprocess.run(["ip", "netns", "exec", f"{NAME}-{node}", "nft", "-f", "-"], input=saved[node],
                           text=True, check=True)


def set_ebpf(on: bool) -> int:
    """The eBPF selector in place of the nft one (whose table set_rules removes): the program of
    `services.selector: ebpf` on the same ingress interfaces, its map holding the daemon's table.
    Returns the packets the program being removed had steered (0 when none was there)."""
    from dataplane.kernel.tcsel import TcSelector
    from labkit.configs import SelectorConfig

    root = Path(f"/run/lab/{NAME}/nodes/mx1")
    config = SelectorConfig.read(root / "mxlb.json")
    table = json.loads((root / MXLB_STATUS).read_text())["table"]
    steered = 0
    for sel in config.selectors:
        marks = {m.name: m.mark for m in sel.members}
        side = TcSelector(sel.ns, sel.ingress, sel.hash_field, config.buckets, config.seed, sel.match_prefixes,
                          ipv6=sel.dual_stack)
        if side.find():
            steered += sum(packets for packets, _ in side.counters(list(marks.values())).values())
            side.close()
        for dev in sel.ingress:
            subprocess.run(["ip", "netns", "exec", sel.ns, "tc", "qdisc", "del", "dev", dev, "clsact"],
                           capture_output=True)
        if on:
            side.attach([(b, marks[name]) for b, name in enumerate(table)])
            side.close()
    return steered


def failover_latency(trials: int) -> list[float]:
    from pyroute2 import IPRoute

    status_file = Path(f"/run/lab/{NAME}/nodes/mx1/{MXLB_STATUS}")
    with netnsutil.entered(f"{NAME}-srx3"):
        ipr = IPRoute()
    index = ipr.link_lookup(ifname="ge-0-0-0")[0]
    samples = []
    try:
        for _ in range(trials):
            before = json.loads(status_file.read_text())["changes"]
            t0 = time.time()
            ipr.link("set", index=index, state="down")
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline:
                status = json.loads(status_file.read_text())
                if status["changes"] > before:
                    samples.append((status["last_programmed_at"] - t0) * 1000)
                    break
                time.sleep(0.001)
            ipr.link("set", index=index, state="up")
            wait_all_alive(status_file)
    finally:
        ipr.link("set", index=index, state="up")
        ipr.close()
    return samples


def tlb_detection(trials: int) -> list[float]:
    """Seconds from filtering srx2's loopback to the selector dropping srx2."""
    status_file = Path(f"/run/lab/{NAME}/nodes/mx1/{MXLB_STATUS}")
    plan = json.loads(Path(f"/run/lab/{NAME}/plan.json").read_text())
    loopback = next(n["loopbacks"][""] for n in plan["nodes"] if n["name"] == "srx2")
    block = ("table inet hc_block {\n  chain input {\n    type filter hook input priority -5;\n"
             f"    ip daddr {loopback} icmp type echo-request drop\n  }}\n}}\n")
    samples = []
    for _ in range(trials):
        wait_all_alive(status_file)
        t0 = time.time()
        subprocess.run(["ip", "netns", "exec", f"{NAME}-srx2", "nft", "-f", "-"], input=block, text=True, check=True)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            status = json.loads(status_file.read_text())
            srx2 = next(m for m in status["members"] if m["name"] == "srx2")
            if not srx2["buckets"]:
                samples.append(status["last_programmed_at"] - t0)
                break
            time.sleep(0.005)
        in_ns("srx2", "nft", "delete", "table", "inet", "hc_block")
    wait_all_alive(status_file)
    return samples


def wait_all_alive(status_file: Path, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            members = json.loads(status_file.read_text())["members"]
        except ValueError:
            members = []
        if members and all(m["alive"] and m["buckets"] for m in members):
            return
        time.sleep(0.05)
    raise SystemExit("selector did not re-add every SRX")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "benchmarks-chash-forwarding.md",
                        help="markdown file to write (default docs/benchmarks-chash-forwarding.md)")
    parser.add_argument("--no-write", dest="out", action="store_const", const=None, help="write no file")
    parser.add_argument("--lab", default="topology1", choices=["topology1", "topology3"])
    parser.add_argument("--interval-ms", type=int, default=HEALTH["interval_ms"],
                        help="TLB health-check interval for the detection runs")
    args = parser.parse_args()
    source = (REPO / f"labs/{args.lab}.yml").read_text()
    old_name = next(line for line in source.splitlines() if line.startswith("name:"))
    source = source.replace(old_name, f"name: {NAME}", 1)
    tlb = args.lab == "topology3"
    if tlb:
        source = source.replace("  use_case: sfw", "  use_case: sfw\n  health_checks: "
                                f"[{{interval_ms: {args.interval_ms}, failures: {HEALTH['failures']}}}]", 1)
    with tempfile.TemporaryDirectory() as tmp:
        topo = Path(tmp) / f"{NAME}.yml"
        topo.write_text(source)
        lab("up", str(topo))
        try:
            saved = save_rules()
            hops = ecmp_nexthops()
            chash, ebpf, ecmp, plain = [], [], [], []
            try:
                for _ in range(args.rounds):
                    set_rules(saved, on=True)
                    chash.append(iperf_pps(args.seconds))
                    set_rules(saved, on=True, srx_only=True)
                    set_ebpf(on=True)
                    ebpf.append(iperf_pps(args.seconds))
                    if set_ebpf(on=False) < ebpf[-1] * args.seconds / 2:
                        raise SystemExit("the eBPF selector steered less than the traffic received")
                    set_ecmp(hops, on=True)
                    ecmp.append(iperf_pps(args.seconds))
                    set_ecmp(hops, on=False)
                    set_rules(saved, on=False)
                    plain.append(iperf_pps(args.seconds))
            finally:
                set_ebpf(on=False)
                set_ecmp(hops, on=False)
                set_rules(saved, on=True)
            latency = [] if tlb else failover_latency(args.trials)
            detection = tlb_detection(args.trials) if tlb else []
        finally:
            lab("down", "--lab", NAME)
    budget = args.interval_ms * HEALTH["failures"] / 1000
    result = {
        "lab": args.lab,
        "tlb_detection_s": detection, "tlb_budget_s": budget,
        "tlb_detection_median_s": statistics.median(detection) if detection else None,
        "tlb_detection_max_s": max(detection) if detection else None,
        "pps_chash_sfw": statistics.median(chash), "pps_plain_routing": statistics.median(plain),
        "pps_ecmp_conntrack": statistics.median(ecmp),
        "ratio": statistics.median(chash) / statistics.median(plain),
        "ratio_vs_ecmp": statistics.median(chash) / statistics.median(ecmp),
        "ratios_per_round": [c / p for c, p in zip(chash, plain, strict=False)],
        "ratios_vs_ecmp_per_round": [c / e for c, e in zip(chash, ecmp, strict=False)],
        "pps_ebpf_sfw": statistics.median(ebpf),
        "ratio_ebpf": statistics.median(ebpf) / statistics.median(plain),
        "ratio_ebpf_vs_ecmp": statistics.median(ebpf) / statistics.median(ecmp),
        "ratios_ebpf_per_round": [b / p for b, p in zip(ebpf, plain, strict=False)],
        "ratios_ebpf_vs_ecmp_per_round": [b / e for b, e in zip(ebpf, ecmp, strict=False)],
        "reprogram_ms_median": statistics.median(latency) if latency else None,
        "reprogram_ms_max": max(latency) if latency else None, "reprogram_ms": latency,
    }
    if args.json:
        print(json.dumps(result, indent=2))
        return
    mode = "TLB" if tlb else "CHASH"
    g_ecmp, g_plain = result["ratio_vs_ecmp"], result["ratio"]
    b_ecmp, b_plain = result["ratio_ebpf_vs_ecmp"], result["ratio_ebpf"]

    def verdict(value: float, goal: float) -> str:
        return "pass" if value >= goal else "**fail**"

    rows = [
        f"| 64 B UDP pps, {mode} selector + SRX conntrack rules ({args.lab}) | {result['pps_chash_sfw']:,.0f} | | |",
        f"| 64 B UDP pps, the same with the eBPF selector (services.selector: ebpf) | "
        f"{result['pps_ebpf_sfw']:,.0f} | | |",
        f"| 64 B UDP pps, hand-built kernel ECMP (L3 hash) + the same SRX rules, no selector | "
        f"{result['pps_ecmp_conntrack']:,.0f} | | |",
        f"| 64 B UDP pps, plain routing, no rules | {result['pps_plain_routing']:,.0f} | | |",
        f"| ratio {mode} / ECMP + conntrack (median of {args.rounds} alternating rounds) | {g_ecmp:.3f} "
        f"(per round {', '.join(f'{r:.3f}' for r in result['ratios_vs_ecmp_per_round'])}) | >= 0.97 | "
        f"{verdict(g_ecmp, 0.97)} |",
        f"| ratio {mode} / plain routing (median of {args.rounds} alternating rounds) | {g_plain:.3f} "
        f"(per round {', '.join(f'{r:.3f}' for r in result['ratios_per_round'])}) | >= 0.90 | "
        f"{verdict(g_plain, 0.90)} |",
        f"| ratio eBPF selector / ECMP + conntrack (median of {args.rounds} alternating rounds) | {b_ecmp:.3f} "
        f"(per round {', '.join(f'{r:.3f}' for r in result['ratios_ebpf_vs_ecmp_per_round'])}) | >= 0.97 | "
        f"{verdict(b_ecmp, 0.97)} |",
        f"| ratio eBPF selector / plain routing (median of {args.rounds} alternating rounds) | {b_plain:.3f} "
        f"(per round {', '.join(f'{r:.3f}' for r in result['ratios_ebpf_per_round'])}) | >= 0.90 | "
        f"{verdict(b_plain, 0.90)} |",
    ]
    if latency:
        rows.append(f"| carrier loss -> selector reprogrammed, median of {len(latency)} | "
                    f"{result['reprogram_ms_median']:.2f} ms (max {result['reprogram_ms_max']:.2f}) | <= 10 ms | "
                    f"{'pass' if result['reprogram_ms_median'] <= 10 else '**fail**'} |")
    if detection:
        rows.append(f"| health checks stop -> SRX removed, median of {len(detection)} (interval {args.interval_ms} "
                    f"ms x {HEALTH['failures']} failures = {budget:.2f} s) | {statistics.median(detection):.3f} s "
                    f"(min {min(detection):.3f}, max {max(detection):.3f}) | <= "
                    f"{budget + args.interval_ms / 1000:.2f} s | |")
    table = "| metric | value | goal | pass/fail |\n|---|---|---|---|\n" + "\n".join(rows) + "\n"
    print(table, end="")
    if args.out is not None:
        argv = " ".join(sys.argv[1:])
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), "unknown CPU")
        text = (f"# Selector cost: forwarding through the MX selector ({args.lab})\n\n"
                f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by "
                f"`bench/chash_dataplane.py {argv}`. Machine: {os.cpu_count()} CPUs ({cpu}), kernel "
                f"{platform.release()}, Python {platform.python_version()}; load average "
                f"{os.getloadavg()[0]:.2f} at the end.\n\n" + table + "\n"
                "iperf3 64-byte UDP at full speed, packets received per second, client -> MX trust side -> "
                "SRX -> MX untrust side -> server. The four set-ups alternate within each round on the same "
                "running lab: the selector (the lab as it runs: the MX's nftables selector marks a flow, a "
                "policy rule per mark picks the SRX's table, the SRXs' stateful ruleset); the eBPF selector "
                "(the MX's nftables table removed, the tc program of `services.selector: ebpf` on the same "
                "interfaces with the same table, marks, rules and tables); ECMP + conntrack "
                "(the selector's nftables table removed on the MX, a multipath route over the same SRX next "
                "hops in a table of its own with a rule for the far side's prefix, "
                "`fib_multipath_hash_policy` 0, the SRXs' ruleset kept); plain routing (every nftables table "
                "removed, the BGP routes only). The first ratio is the selector's own cost, the second the "
                "cost of the whole chain.")
        write_doc(text, args.out)  # the notes below the marker line are kept
        print(f"wrote {args.out}", file=sys.stderr)

if __name__ == "__main__":
    main()
