"""NAT64 through an SRX against the SRX's own forwarding: docs/benchmarks-nat64.md.

    python3 bench/nat64_forwarding.py [--seconds 4] [--repeats 3] [--sizes 64,1200]

On the dual-stack topology 3 (labs/topology3-dualstack.yml, one lab for every path): one UDP flow
at full speed (iperf3 `-b 0`) from the client host to the server host, through the MX's selector and
one SRX, three ways in turn (each repeated, the order rotated so that no path always runs first):

- SFW44: IPv4 client to the server's IPv4 address (kernel forwarding and conntrack),
- SFW66: IPv6 client to the server's IPv6 address (the same, in IPv6),
- NAT64: IPv6 client to the NAT64 address, translated by tayga on the SRX's TUN device into IPv4
  and into the pair's NAT64 pool by nftables, to the IPv4 server.

Figures: packets and megabits per second received by the server (iperf3's own count), the NAT64
path's as a ratio of SFW66's and SFW44's of the same run, and the translator's CPU time (every
tayga of the lab, from /proc) per NAT64 packet received. Root; about two minutes.
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
from dataclasses import dataclass
from pathlib import Path

from common import ROOT, BenchLab, logger, publish, topology_text

LAB = "bn64"
DOC = ROOT / "docs" / "benchmarks-nat64.md"
log = logger("nat64")


@dataclass(frozen=True)
class Route:
    name: str
    source: str  # the client's address (one of the client host's)
    target: str  # where the client sends
    server: str  # where iperf3 listens on the server host


PATHS = (
    Route("SFW44", "100.64.1.1", "203.0.113.9", "203.0.113.9"),
    Route("SFW66", "2001:db8:172:80::2:1", "2001:db8:203::9", "2001:db8:203::9"),
    Route("NAT64", "2001:db8:172:80::101", "2001:db8:64::1", "203.0.113.64"),
)


def _in(lab: BenchLab, node: str, *argv: str, timeout: float = 60.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["ip", "netns", "exec", lab.ns(node), *argv], capture_output=True, text=True,
                          timeout=timeout)


def _tayga_cpu_s() -> float:
    """CPU seconds (user + system) of every tayga process of the lab."""
    total = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if not cmdline or not cmdline[0].endswith(b"tayga") or f"/{LAB}/".encode() not in b" ".join(cmdline):
                continue
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
        except OSError:
            continue
    return total / os.sysconf("SC_CLK_TCK")


def measure(lab: BenchLab, path: Route, size: int, seconds: float) -> dict[str, float]:
    """One run of PATH: the server's received packets/s and Mbit/s, loss, the translator's CPU."""
    server = subprocess.Popen(["ip", "netns", "exec", lab.ns("server"), "iperf3", "-s", "-1", "-B", path.server, "-J"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.4)
    cpu = _tayga_cpu_s()
    client = _in(lab, "client", "iperf3", "-c", path.target, "-B", path.source, "-u", "-l", str(size), "-b", "0",
                 "-t", str(seconds), "-J", timeout=seconds + 30)
    cpu = _tayga_cpu_s() - cpu
    out, err = server.communicate(timeout=seconds + 30)
    if client.returncode != 0 or server.returncode != 0:
        raise SystemExit(f"{path.name}: iperf3 failed: {client.stdout[-400:]} {err[-400:]}")
    end = json.loads(out)["end"]["sum"]
    received = end["packets"] - end["lost_packets"]
    return {"pps": received / end["seconds"], "mbps": received * size * 8 / end["seconds"] / 1e6,
            "loss_pct": 100.0 * end["lost_packets"] / max(1, end["packets"]), "tayga_cpu_s": cpu,
            "received": float(received)}


def run(seconds: float, repeats: int, sizes: list[int]) -> dict[int, dict[str, list[dict[str, float]]]]:
    results: dict[int, dict[str, list[dict[str, float]]]] = {s: {p.name: [] for p in PATHS} for s in sizes}
    with tempfile.TemporaryDirectory() as tmp:
        topo = Path(tmp) / f"{LAB}.yml"
        topo.write_text(topology_text(ROOT / "labs" / "topology3-dualstack.yml", LAB))
        with BenchLab(LAB, topo, log) as lab:
            for size in sizes:
                for round_ in range(repeats):
                    order = PATHS[round_ % len(PATHS):] + PATHS[:round_ % len(PATHS)]
                    for path in order:
                        got = measure(lab, path, size, seconds)
                        log(f"{size} B {path.name}: {got['pps']:.0f} pps, {got['mbps']:.1f} Mbit/s, "
                            f"loss {got['loss_pct']:.1f} %")
                        results[size][path.name].append(got)
    return results


def markdown(results: dict[int, dict[str, list[dict[str, float]]]], seconds: float, repeats: int) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        "# NAT64 (tayga) against the SRX's kernel forwarding",
        "",
        f"Measured {when} by `{' '.join(['python3', 'bench/nat64_forwarding.py', *sys.argv[1:]])}`. Machine: "
        f"{os.cpu_count()} CPUs, kernel {platform.release()}.",
        "",
        f"One UDP flow at full speed (iperf3 `-b 0`, {seconds:g} s, {repeats} runs per path and size, the order "
        "rotated) on `topology3-dualstack` through the MX's selector and one SRX; packets/s received by the "
        "server (medians). SFW44 and SFW66: the kernel forwards and tracks the session; NAT64: tayga on the "
        "SRX's TUN device translates (user space), nftables then translate into the pair's NAT64 pool.",
        "",
        "| ratio | UDP payload (bytes) | NAT64 (pps) | SFW66 (pps) | SFW44 (pps) | NAT64 / SFW66 | NAT64 / SFW44 | "
        "NAT64 Mbit/s | NAT64 loss (%) | tayga CPU per NAT64 packet (µs) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for size, by_path in results.items():
        med = {name: statistics.median(r["pps"] for r in runs) for name, runs in by_path.items()}
        nat = by_path["NAT64"]
        cpu_us = 1e6 * sum(r["tayga_cpu_s"] for r in nat) / max(1.0, sum(r["received"] for r in nat))
        lines.append(
            f"| NAT64 / kernel | {size} | {med['NAT64']:.0f} | {med['SFW66']:.0f} | {med['SFW44']:.0f} | "
            f"{med['NAT64'] / med['SFW66']:.2f} | {med['NAT64'] / med['SFW44']:.2f} | "
            f"{statistics.median(r['mbps'] for r in nat):.1f} | {statistics.median(r['loss_pct'] for r in nat):.1f} | "
            f"{cpu_us:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=4.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", default="64,1200", help="UDP payload sizes, comma-separated")
    parser.add_argument("--no-doc", action="store_true", help="print the table only")
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("root is needed (network namespaces)")
    sizes = [int(s) for s in args.sizes.split(",")]
    text = markdown(run(args.seconds, args.repeats, sizes), args.seconds, args.repeats)
    return publish(text, DOC, keep=not args.no_doc)


if __name__ == "__main__":
    sys.exit(main())
