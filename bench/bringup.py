#!/usr/bin/env python3
"""Bring-up benchmark: how long `lab up` / `lab down` take and how much memory a lab's nodes use.

Measures, on this machine and in one run (machines here are noisy, so a baseline is timed alongside):
  1. topology3 (a copy of labs/topology3.yml named bench3): wall time of `lab up` until it exits 0
     (ready for traffic: what `lab up` waits for) and of `lab down`,
     as subprocess wall times, plus the in-process time lab reports itself (`lab up --json` "seconds").
  2. a baseline: the same namespaces, veth pairs, addresses and link-ups made with plain `ip`
     commands, one command per step, then removed with `ip netns del`; reported as lab / baseline.
  3. a generated topology1 with 64 SRX (bench/gen_topology.py --name bench64 --srx 64): `lab up`
     time, PSS and RSS (/proc/PID/smaps_rollup) of every process of the lab (state.json processes
     plus the lab's supervisor) per node, and `lab down` time.

Prints a markdown table (metric, value, goal, pass/fail) and the machine, and writes the same to
docs/benchmarks-bringup.md. Needs root. Only touches labs named bench* and namespaces benchbl-*;
every lab it brings up is brought down again in a finally block, also on errors and Ctrl-C.

  sudo python3 bench/bringup.py              # 5 runs of topology3, one 64-SRX run
  sudo python3 bench/bringup.py --quick      # 2 runs (what `make bench` uses)
  sudo python3 bench/bringup.py --runs 3 --json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import shlex
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
from bringup_measure import (  # noqa: E402
    BenchError,
    Series,
    baseline_cleanup,
    baseline_run,
    baseline_scripts,
    bgp_established,
    ensure_down,
    lab_cmd,
    lab_down,
    lab_memory,
    lab_up,
    log,
    render_plan,
    run_timed,
)
from bringup_report import DOC, machine, markdown, other_labs  # noqa: E402
from common import write_doc  # noqa: E402


# ---------------------------------------------------------------- the benchmark
def bench_small(runs: int, workdir: Path, results: dict[str, Any]) -> None:
    name = "bench3"
    topo = workdir / f"{name}.yml"
    source = (ROOT / "labs" / "topology3.yml").read_text()
    topo.write_text(re.sub(r"(?m)^name:.*$", f"name: {name}", source, count=1))
    plan = render_plan(topo, workdir)
    up_s, down_s = workdir / "baseline-up.sh", workdir / "baseline-down.sh"
    up_text, down_text, steps = baseline_scripts(plan)
    up_s.write_text(up_text)
    down_s.write_text(down_text)
    results["topology3"] = {"nodes": len(plan["nodes"]), "namespaces": len(plan["namespaces"]),
                            "veths": len(plan["veths"]), "mgmt_ports": len(plan["mgmt"]["ports"]),
                            "processes": len(plan["processes"]), "bgp_sessions": len(plan["sessions"]) // 2}
    results["baseline"] = {"steps": steps}
    up_wall, up_inner, down_wall, down_inner = Series(), Series(), Series(), Series()
    base_up, base_down, cli_floor = Series(), Series(), Series()
    up_overhead, down_overhead = Series(), Series()
    ensure_down(name)
    baseline_cleanup()
    for i in range(runs):
        # interleave lab and baseline so both see the same machine noise
        b_up, b_down = baseline_run(up_s, down_s)
        base_up.add(b_up)
        base_down.add(b_down)
        wall, result = run_timed(lab_cmd() + ["version"])
        if result.returncode == 0:
            cli_floor.add(wall)
        try:
            wall, inner = lab_up(topo, timeout=30)
            up_wall.add(wall)
            if inner is not None:
                up_inner.add(inner)
                up_overhead.add(wall - inner)
            wall, inner = lab_down(name)
            down_wall.add(wall)
            if inner is not None:
                down_inner.add(inner)
                down_overhead.add(wall - inner)
        finally:
            ensure_down(name)
        log(f"topology3 run {i + 1}/{runs}: up {up_wall.values[-1]:.2f} s, down {down_wall.values[-1]:.2f} s; "
            f"baseline up {b_up:.2f} s, down {b_down:.2f} s")
    results["topology3"].update({"up_wall": up_wall.summary(), "up_inprocess": up_inner.summary(),
                                 "down_wall": down_wall.summary(), "down_inprocess": down_inner.summary(),
                                 "up_outside": up_overhead.summary(), "down_outside": down_overhead.summary(),
                                 "cli_version_wall": cli_floor.summary()})
    results["baseline"].update({"up_wall": base_up.summary(), "down_wall": base_down.summary()})
    assert up_wall.median and down_wall.median and base_up.median and base_down.median
    results["ratios"] = {"up": round(up_wall.median / base_up.median, 2),
                         "down": round(down_wall.median / base_down.median, 2)}


def bench_big(n_srx: int, timeout: float, workdir: Path, results: dict[str, Any]) -> None:
    name = f"bench{n_srx}"
    topo = workdir / f"{name}.yml"
    gen = subprocess.run([sys.executable, str(ROOT / "bench" / "gen_topology.py"), "--name", name,
                          "--srx", str(n_srx)], capture_output=True, text=True, check=True)
    topo.write_text(gen.stdout)
    ensure_down(name)
    entry: dict[str, Any] = {"name": name, "srx": n_srx}
    results["big"] = entry
    try:
        wall, inner = lab_up(topo, timeout=timeout)
        entry["up_wall"], entry["up_inprocess"] = round(wall, 3), inner
        log(f"{name}: up in {wall:.2f} s")
        entry["memory"] = lab_memory(name)
        entry["nodes"] = entry["memory"]["nodes"]
        entry["bgp"] = bgp_established(name)
        for key, argv in (("status_wall", ["status", name, "--json"]),
                          ("events_list_wall", ["events", "list", "--lab", name, "--json"])):
            wall, result = run_timed(lab_cmd() + argv, timeout=120)
            if result.returncode != 0:
                raise BenchError(f"lab {' '.join(argv)} exited {result.returncode}: {result.stderr.strip()[-300:]}")
            entry[key] = round(wall, 3)
        wall, inner = lab_down(name)
        entry["down_wall"], entry["down_inprocess"] = round(wall, 3), inner
        log(f"{name}: down in {wall:.2f} s")
    finally:
        ensure_down(name)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5, help="runs of topology3 and of the baseline (default 5)")
    parser.add_argument("--quick", action="store_true", help="2 runs instead of --runs")
    parser.add_argument("--srx", type=int, default=64, help="SRX in the big generated lab (default 64; 0 skips it)")
    parser.add_argument("--big-timeout", type=float, default=120.0, help="lab up --timeout for the big lab")
    parser.add_argument("--skip-small", action="store_true", help="only the big generated lab (no topology3 runs)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of markdown")
    parser.add_argument("--out", type=Path, default=DOC, help=f"markdown file to write (default {DOC})")
    parser.add_argument("--no-write", action="store_true", help="do not write the markdown file")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench/bringup.py creates namespaces and labs: run it as root", file=sys.stderr)
        return 1
    runs = 2 if args.quick else max(1, args.runs)
    argv = " ".join(shlex.quote(a) for a in sys.argv[1:])
    results: dict[str, Any] = {"date": dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
                               "args": argv, "runs": runs, "machine": machine(), "errors": []}

    def on_term(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, on_term)
    status = 0
    with tempfile.TemporaryDirectory(prefix="bench-bringup-") as tmp:
        workdir = Path(tmp)
        try:
            if not args.skip_small:
                bench_small(runs, workdir, results)
            if args.srx > 0:
                bench_big(args.srx, args.big_timeout, workdir, results)
        except KeyboardInterrupt:
            log("interrupted; labs brought down")
            results["errors"].append("interrupted")
            status = 130
        except (BenchError, subprocess.SubprocessError, OSError) as exc:
            log(f"error: {exc}")
            results["errors"].append(str(exc))
            status = 1
        finally:
            ensure_down("bench3")
            if args.srx > 0:
                ensure_down(f"bench{args.srx}")
            baseline_cleanup()
    results["loadavg_at_end"] = os.getloadavg()[0]
    results["other_labs_at_end"] = other_labs()
    text = markdown(results)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(text, end="")
    if args.no_write:
        pass
    elif status == 0:
        write_doc(text, args.out)
        log(f"wrote {args.out}")
    else:
        log(f"not writing {args.out}: this run did not complete (the last complete figures stay)")
    return status


if __name__ == "__main__":
    sys.exit(main())
