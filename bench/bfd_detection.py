"""Failure detection: a path that stops forwarding with its carrier up, with and without BFD.

On topology1 (one MX, standalone SRXs, ECMP CHASH), twice: with the lab's default BGP timers (hold
3 s, keepalive 1 s) and with `services.bfd` at the JVD's bfd-liveness-detection (300 ms x 3). Each
run drops every packet on srx1's two links to the MX inside srx1's namespace (nftables; the links
keep their carrier: a blackholing path, which only a protocol notices), then measures from that
moment until the MX's BGP route to the default route loses srx1's next hop (the routing change) and
until the MX's selector takes srx1 out of its table (the forwarding change, after its 1 s hold-down
of route changes). A carrier loss of the same links is the baseline (seen at once, with or without
BFD). Also `lab up` of each variant (one run each).

    sudo python3 bench/bfd_detection.py [--runs 5] [--out docs/benchmarks-bfd.md]
"""

from __future__ import annotations

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import BenchLab, logger, summary, topology_text, wait_for, write_doc  # noqa: E402

LOG = logger("bfd")
SRX = "srx1"
MX = "mx1"
BLACKHOLE_TABLE = "bench_blackhole"


def _links(bench: BenchLab) -> tuple[list[str], str]:
    """srx1's interfaces toward the MX (Linux names) and its trust-side address (the MX's next hop)."""
    plan = bench.lab.plan()
    names, trust_hop = [], ""
    for iface in plan.interfaces():
        if iface.node == SRX and iface.peer_node == MX:
            names.append(iface.name)
            if iface.zone == "trust" and iface.address:
                trust_hop = iface.address.split("/")[0]
    return names, trust_hop


def _default_hops(ns: str) -> set[str]:
    out = subprocess.run(["ip", "-n", ns, "-j", "route", "show", "default"], capture_output=True, text=True,
                         check=True).stdout
    hops: set[str] = set()
    for route in json.loads(out or "[]"):
        if route.get("gateway"):
            hops.add(route["gateway"])
        hops |= {h["gateway"] for h in route.get("nexthops", []) if h.get("gateway")}
    return hops


def _selector_has(bench: BenchLab, member: str) -> bool | None:
    status = bench.status(MX, "mxlb")
    for m in status.get("members", []):
        if m.get("name") == member:
            return bool(m.get("buckets"))
    return None


def _blackhole(ns: str, devs: list[str], on: bool) -> None:
    if not on:
        subprocess.run(["ip", "netns", "exec", ns, "nft", "delete", "table", "inet", BLACKHOLE_TABLE], check=True)
        return
    names = ", ".join(f'"{d}"' for d in devs)
    rules = (f"table inet {BLACKHOLE_TABLE} {{\n"
             f"  chain drop_in {{ type filter hook prerouting priority -400; iifname {{ {names} }} drop; }}\n"
             f"  chain drop_out {{ type filter hook postrouting priority 400; oifname {{ {names} }} drop; }}\n"
             f"  chain drop_local {{ type filter hook output priority -400; oifname {{ {names} }} drop; }}\n}}\n")
    subprocess.run(["ip", "netns", "exec", ns, "nft", "-f", "-"], input=rules, text=True, check=True)


def _carrier(ns: str, devs: list[str], up: bool) -> None:
    for dev in devs:
        subprocess.run(["ip", "-n", ns, "link", "set", dev, "up" if up else "down"], check=True)


def _measure(bench: BenchLab, how: str, runs: int) -> dict[str, list[float]]:
    devs, hop = _links(bench)
    srx_ns, mx_ns = bench.ns(SRX), bench.ns(MX, "TRUST-VR")
    route_ms: list[float] = []
    selector_ms: list[float] = []
    for run in range(runs):
        wait_for("srx1 in the MX's route and table", lambda: hop in _default_hops(mx_ns)
                 and bool(_selector_has(bench, SRX)), timeout=60)
        time.sleep(2.0)  # BFD (when on) up and steady
        started = time.monotonic()
        if how == "blackhole":
            _blackhole(srx_ns, devs, True)
        else:
            _carrier(srx_ns, devs, False)
        try:
            route_at = wait_for("the route change", lambda: hop not in _default_hops(mx_ns), timeout=30, interval=0.01)
            table_at = wait_for("the selector change", lambda: _selector_has(bench, SRX) is False, timeout=30,
                                interval=0.01)
        finally:
            if how == "blackhole":
                _blackhole(srx_ns, devs, False)
            else:
                _carrier(srx_ns, devs, True)
        route_ms.append((route_at - started) * 1000)
        selector_ms.append((table_at - started) * 1000)
        LOG(f"{how} run {run + 1}: route {route_ms[-1]:.0f} ms, selector {selector_ms[-1]:.0f} ms")
    return {"route": route_ms, "selector": selector_ms}


def _variant(bfd: bool, runs: int) -> dict[str, object]:
    name = "bfdon" if bfd else "bfdoff"
    text = topology_text(ROOT / "labs" / "topology1.yml", name)
    if bfd:
        text = text.replace("  use_case: sfw\n", "  use_case: sfw\n  bfd: {interval_ms: 300, multiplier: 3}\n", 1)
        assert "bfd:" in text
    file = Path(f"/tmp/bench-{name}.yml")
    file.write_text(text)
    started = time.monotonic()
    with BenchLab(name, file, LOG) as bench:
        up_s = time.monotonic() - started
        out: dict[str, object] = {"up_s": round(up_s, 1)}
        for how in ("blackhole", "carrier"):
            out[how] = _measure(bench, how, runs)
    file.unlink()
    return out


def _row(metric: str, values: list[float], goal: str) -> str:
    s = summary(values, 0)
    return f"| {metric} | {s['median']:.0f} ms | {s['max']:.0f} ms | {s['n']} | {goal} |"


def render(results: dict[str, dict[str, object]], seconds: float, command: str) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    machine = f"Machine: {subprocess.run(['nproc'], capture_output=True, text=True).stdout.strip()} CPUs, " \
              f"{platform.machine()}, kernel {platform.release()}, Python {platform.python_version()}."
    on, off = results["bfd"], results["timers"]
    lines = [
        "# BFD benchmark: failure detection with and without BFD", "",
        f"Measured {when} by `{command}` in {seconds:.0f} s. {machine} Shared machine: other labs may have "
        "been running (timings noisy; the two variants were measured in the same run).", "",
        "topology1 (one MX, 4 standalone SRXs, ECMP CHASH). A blackhole drops every packet on srx1's two links "
        "to the MX inside srx1 (the links keep their carrier); a carrier loss takes the same links down. "
        "`route`: until the MX's default route has lost srx1's next hop; `selector`: until the MX's selector "
        "has taken srx1 out of its table (it holds a route change for 1 s before acting on it; a carrier loss "
        "it acts on at once). The JVD's timers: BFD 300 ms x 3 on every eBGP session, a failure detected after "
        "0.9 s.", "",
        "| metric | median | max | runs | goal |",
        "|---|---|---|---|---|",
        _row("blackhole, BFD 300 ms x 3: route change", on["blackhole"]["route"],  # type: ignore[index]
             "<= 1000 ms (3 x 300 ms + route change)"),
        _row("  same, selector change", on["blackhole"]["selector"], "<= 2000 ms (+ 1 s hold-down)"),  # type: ignore[index]
        _row("blackhole, BGP timers only (hold 3 s): route change", off["blackhole"]["route"],  # type: ignore[index]
             "2000-3000 ms (hold 3 s after the last keepalive: what BFD saves)"),
        _row("  same, selector change", off["blackhole"]["selector"], "hold time + 1 s"),  # type: ignore[index]
        _row("carrier loss, BFD on: selector change", on["carrier"]["selector"], "< 100 ms (carrier, as before)"),  # type: ignore[index]
        _row("carrier loss, BFD off: selector change", off["carrier"]["selector"], "< 100 ms"),  # type: ignore[index]
        "",
        f"`lab up` of topology1: {off['up_s']} s without BFD, {on['up_s']} s with BFD (one run each).",
        "",
        "Samples (ms): " + json.dumps({k: {h: v[h] for h in ("blackhole", "carrier")}  # type: ignore[index]
                                        for k, v in results.items()}),
    ]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", default=str(ROOT / "docs" / "benchmarks-bfd.md"))
    args = parser.parse_args(argv)
    started = time.monotonic()
    results = {"timers": _variant(False, args.runs), "bfd": _variant(True, args.runs)}
    text = render(results, time.monotonic() - started, f"python3 bench/bfd_detection.py --runs {args.runs}")
    write_doc(text, Path(args.out))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
