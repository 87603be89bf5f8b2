#!/usr/bin/env python3
"""Bring-up benchmark: how long `lab up` / `lab down` take and how much memory a lab's nodes use.

Measures, on this machine and in one run (machines here are noisy, so a baseline is timed alongside):
  1. topology3 (a copy of labs/topology3.yml named bench3): wall time of `lab up` until it exits 0
     (ready: every BGP session Established, every expected route in the kernel) and of `lab down`,
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
import platform
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
STATE_ROOT = Path(os.environ.get("LAB_STATE_ROOT", "/run/lab"))
DOC = ROOT / "docs" / "benchmarks-bringup.md"
NOTES_MARKER = "<!-- notes below this line are kept when the benchmark rewrites this file -->"
BASELINE_PREFIX = "benchbl"  # namespaces benchbl-N, root-namespace links benchbl-mN / benchbl-mg
MIB = 1024 * 1024

GOAL_T3_UP = 3.0
GOAL_T3_DOWN = 1.0
GOAL_BIG_UP = 20.0
GOAL_RSS_PER_NODE_MIB = 30.0
# goals for the 256-SRX lab (--srx 256): up, down, RSS per node, and the CLI reads on a running lab
GOAL_256_UP = 15.0
GOAL_256_DOWN = 3.0
GOAL_256_RSS_PER_NODE_MIB = 6.0
GOAL_BIG_CLI = 2.0  # `lab status` / `lab events list --lab` wall on the big lab


def big_goals(n_srx: int) -> tuple[float, float | None, float]:
    """(up, down, RSS per node) goals for a generated lab of N_SRX."""
    if n_srx >= 256:
        return GOAL_256_UP, GOAL_256_DOWN, GOAL_256_RSS_PER_NODE_MIB
    return GOAL_BIG_UP, None, GOAL_RSS_PER_NODE_MIB


def log(message: str) -> None:
    print(f"[bringup] {message}", file=sys.stderr, flush=True)


def lab_cmd() -> list[str]:
    exe = shutil.which("lab")
    return [exe] if exe else [sys.executable, "-m", "lab_orchestrator.cli"]


# ---------------------------------------------------------------- timing helpers
@dataclass
class Series:
    values: list[float] = field(default_factory=list)

    def add(self, value: float) -> None:
        self.values.append(value)

    @property
    def median(self) -> float | None:
        return statistics.median(self.values) if self.values else None

    def summary(self) -> dict[str, Any]:
        if not self.values:
            return {"n": 0}
        return {"n": len(self.values), "median": round(statistics.median(self.values), 3),
                "min": round(min(self.values), 3), "max": round(max(self.values), 3),
                "values": [round(v, 3) for v in self.values]}

    def text(self, unit: str = "s") -> str:
        if not self.values:
            return "n/a"
        if len(self.values) == 1:
            return f"{self.values[0]:.2f} {unit}"
        return (f"{statistics.median(self.values):.2f} {unit} "
                f"(min {min(self.values):.2f}, max {max(self.values):.2f}, n={len(self.values)})")


def run_timed(argv: list[str], timeout: float = 300.0) -> tuple[float, subprocess.CompletedProcess[str]]:
    """Run ARGV, return (wall seconds, result). On Ctrl-C/SIGTERM the child is not SIGKILLed at once
    (as subprocess.run would): a Ctrl-C reached it too and `lab up` removes what it made, so give it
    time; if it did not get the signal, SIGTERM it (which `lab up` also treats as an interrupt)."""
    started = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            for sig, grace in ((None, 10.0), (signal.SIGTERM, 30.0), (signal.SIGKILL, 5.0)):
                if sig is not None:
                    proc.send_signal(sig)
                try:
                    proc.communicate(timeout=grace)
                    break
                except subprocess.TimeoutExpired:
                    continue
        finally:
            signal.signal(signal.SIGINT, previous)
        raise
    return time.monotonic() - started, subprocess.CompletedProcess(argv, proc.returncode, out, err)


class BenchError(RuntimeError):
    pass


# ---------------------------------------------------------------- lab up / down
def lab_up(topology: Path, timeout: float) -> tuple[float, float | None]:
    """`lab up --json`; return (wall seconds, in-process seconds). Raises if lab up fails."""
    wall, result = run_timed(lab_cmd() + ["up", str(topology), "--json", "--timeout", str(timeout)],
                             timeout=timeout + 120)
    if result.returncode != 0:
        raise BenchError(f"lab up {topology} exited {result.returncode}: "
                         f"{(result.stderr or result.stdout).strip()[-800:]}")
    inner = None
    try:
        inner = float(json.loads(result.stdout)["seconds"])
    except (ValueError, KeyError, TypeError):
        log(f"could not parse `seconds` from lab up --json: {result.stdout.strip()[:200]!r}")
    return wall, inner


def lab_down(name: str) -> tuple[float, float | None]:
    """`lab down --name NAME`; return (wall seconds, in-process seconds lab printed)."""
    wall, result = run_timed(lab_cmd() + ["down", "--name", name], timeout=120)
    if result.returncode != 0:
        raise BenchError(f"lab down --name {name} exited {result.returncode}: "
                         f"{(result.stderr or result.stdout).strip()[-800:]}")
    match = re.search(r"is down \(([\d.]+) s\)", result.stdout)
    return wall, float(match.group(1)) if match else None


def lab_is_up(name: str) -> bool:
    return (STATE_ROOT / name / "state.json").exists() or any(
        n.startswith(name + "-") for n in netns_names())


def ensure_down(name: str) -> None:
    """Best-effort cleanup used in finally blocks: never raises, not interrupted by Ctrl-C."""
    if not name.startswith("bench"):
        raise AssertionError(f"refusing to touch lab {name}: only bench* labs are ours")
    if not lab_is_up(name):
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        result = subprocess.run(lab_cmd() + ["down", "--name", name], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            log(f"cleanup: lab down --name {name} exited {result.returncode}: {result.stderr.strip()[-300:]}")
    except (OSError, subprocess.SubprocessError) as exc:
        log(f"cleanup: lab down --name {name} failed: {exc}")
    finally:
        signal.signal(signal.SIGINT, previous)


def netns_names() -> list[str]:
    try:
        return sorted(os.listdir("/run/netns"))
    except FileNotFoundError:
        return []


def render_plan(topology: Path, workdir: Path) -> dict[str, Any]:
    out = workdir / ("render-" + topology.stem)
    result = subprocess.run(lab_cmd() + ["render", str(topology), "--out", str(out)], capture_output=True, text=True)
    if result.returncode != 0:
        raise BenchError(f"lab render {topology} failed: {result.stderr.strip()[-800:]}")
    plan: dict[str, Any] = json.loads((out / "plan.json").read_text())
    return plan


# ---------------------------------------------------------------- baseline with plain `ip`
def baseline_scripts(plan: dict[str, Any]) -> tuple[str, str, dict[str, int]]:
    """Shell scripts creating/removing what the plan's network is made of, one `ip` command per step:
    a namespace per plan namespace (lo up), a veth pair per plan veth (both ends in their
    namespaces), a management veth per node (host end in the root namespace, on a bridge), every
    address, every link up."""
    ns_map = {ns["name"]: f"{BASELINE_PREFIX}-{i}" for i, ns in enumerate(plan["namespaces"])}
    q = shlex.quote
    up: list[str] = []
    steps = {"namespaces": 0, "veth_pairs": 0, "addresses": 0, "link_ups": 0}
    for ns in ns_map.values():
        up.append(f"ip netns add {ns}")
        up.append(f"ip -n {ns} link set lo up")
        steps["namespaces"] += 1
        steps["link_ups"] += 1
    for veth in plan["veths"]:
        a, b = veth["a"], veth["b"]
        na, nb = ns_map[a["ns"]], ns_map[b["ns"]]
        up.append(f"ip link add {q(a['name'])} netns {na} type veth peer name {q(b['name'])} netns {nb}")
        steps["veth_pairs"] += 1
        for end, ns in ((a, na), (b, nb)):
            if end.get("address"):
                up.append(f"ip -n {ns} addr add {end['address']} dev {q(end['name'])}")
                steps["addresses"] += 1
            up.append(f"ip -n {ns} link set {q(end['name'])} up")
            steps["link_ups"] += 1
    bridge = f"{BASELINE_PREFIX}-mg"
    up.append(f"ip link add {bridge} type bridge")
    up.append(f"ip link set {bridge} up")
    steps["link_ups"] += 1
    for i, port in enumerate(plan["mgmt"]["ports"]):
        ns, host = ns_map[port["ns"]], f"{BASELINE_PREFIX}-m{i}"
        up.append(f"ip link add {q(port['name'])} netns {ns} type veth peer name {host}")
        up.append(f"ip link set {host} master {bridge} up")
        up.append(f"ip -n {ns} addr add {port['address']} dev {q(port['name'])}")
        up.append(f"ip -n {ns} link set {q(port['name'])} up")
        steps["veth_pairs"] += 1
        steps["addresses"] += 1
        steps["link_ups"] += 2
    down = [f"ip netns del {ns}" for ns in ns_map.values()] + [f"ip link del {bridge}"]
    steps["commands_up"] = len(up)
    steps["commands_down"] = len(down)
    return "set -e\n" + "\n".join(up) + "\n", "set -e\n" + "\n".join(down) + "\n", steps


def baseline_cleanup() -> None:
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        for ns in netns_names():
            if ns.startswith(BASELINE_PREFIX + "-"):
                subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        if Path(f"/sys/class/net/{BASELINE_PREFIX}-mg").exists():
            subprocess.run(["ip", "link", "del", f"{BASELINE_PREFIX}-mg"], capture_output=True)
    finally:
        signal.signal(signal.SIGINT, previous)


def baseline_run(up_script: Path, down_script: Path) -> tuple[float, float]:
    try:
        up_wall, result = run_timed(["sh", str(up_script)], timeout=300)
        if result.returncode != 0:
            raise BenchError(f"baseline up script failed: {result.stderr.strip()[-500:]}")
        down_wall, result = run_timed(["sh", str(down_script)], timeout=300)
        if result.returncode != 0:
            raise BenchError(f"baseline down script failed: {result.stderr.strip()[-500:]}")
        return up_wall, down_wall
    finally:
        baseline_cleanup()


# ---------------------------------------------------------------- memory
def smaps_rollup(pid: int) -> tuple[int, int] | None:
    """(RSS, PSS) in bytes of PID, or None if it is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    values = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] in ("Rss:", "Pss:"):
            values[parts[0][:-1]] = int(parts[1]) * 1024
    if "Rss" not in values or "Pss" not in values:
        return None
    return values["Rss"], values["Pss"]


def lab_memory(name: str) -> dict[str, Any]:
    """Memory of every process of a running lab, per node; the supervisor's share divided over nodes."""
    state = json.loads((STATE_ROOT / name / "state.json").read_text())
    plan = json.loads((STATE_ROOT / name / "plan.json").read_text())
    nodes = {n["name"]: n["kind"] for n in plan["nodes"]}
    per_node = {n: {"kind": kind, "rss": 0, "pss": 0, "processes": 0} for n, kind in nodes.items()}
    missing = []
    measured = 0
    shared_rss = shared_pss = 0
    for proc in state["processes"]:
        mem = smaps_rollup(int(proc["pid"]))
        if mem is None:
            missing.append(f"{proc['node']}/{proc['name']}({proc['pid']})")
            continue
        if proc["node"] not in per_node:  # a lab-wide daemon (the SSH server): shared like the supervisor
            shared_rss += mem[0]
            shared_pss += mem[1]
            measured += 1
            continue
        entry = per_node[proc["node"]]
        entry["rss"] += mem[0]
        entry["pss"] += mem[1]
        entry["processes"] += 1
        measured += 1
    sup = smaps_rollup(int(state.get("supervisor_pid") or 0)) if state.get("supervisor_pid") else None
    sup_rss, sup_pss = sup if sup else (0, 0)
    sup_rss, sup_pss = sup_rss + shared_rss, sup_pss + shared_pss
    if sup is None:
        missing.append(f"supervisor({state.get('supervisor_pid')})")
    n = len(per_node)
    for entry in per_node.values():
        entry["rss"] += sup_rss / n
        entry["pss"] += sup_pss / n
    total_rss = sum(e["rss"] for e in per_node.values())
    total_pss = sum(e["pss"] for e in per_node.values())
    by_kind: dict[str, dict[str, float]] = {}
    for entry in per_node.values():
        k = by_kind.setdefault(entry["kind"], {"nodes": 0, "rss": 0.0, "pss": 0.0})
        k["nodes"] += 1
        k["rss"] += entry["rss"]
        k["pss"] += entry["pss"]
    heaviest = max(per_node.items(), key=lambda item: item[1]["rss"])
    return {
        "nodes": n,
        "processes": measured + (1 if sup else 0),
        "missing": missing,
        "supervisor_rss_mib": round(sup_rss / MIB, 2),
        "supervisor_pss_mib": round(sup_pss / MIB, 2),
        "total_rss_mib": round(total_rss / MIB, 2),
        "total_pss_mib": round(total_pss / MIB, 2),
        "avg_rss_per_node_mib": round(total_rss / n / MIB, 2),
        "avg_pss_per_node_mib": round(total_pss / n / MIB, 2),
        "max_rss_node": {"node": heaviest[0], "rss_mib": round(heaviest[1]["rss"] / MIB, 2)},
        "by_kind": {kind: {"nodes": v["nodes"], "avg_rss_mib": round(v["rss"] / v["nodes"] / MIB, 2),
                           "avg_pss_mib": round(v["pss"] / v["nodes"] / MIB, 2)}
                    for kind, v in sorted(by_kind.items())},
    }


# ---------------------------------------------------------------- machine
def machine() -> dict[str, Any]:
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_kib = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    except OSError:
        pass
    bird = subprocess.run(["bird", "--version"], capture_output=True, text=True) if shutil.which("bird") else None
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "model": model,
        "kernel": platform.release(),
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "python": platform.python_version(),
        "bird": (bird.stderr or bird.stdout).strip() if bird else "not found",
        "loadavg_at_start": os.getloadavg()[0],
        "other_labs_at_start": other_labs(),
    }


def other_labs() -> list[str]:
    """Labs running that are not ours: they compete for the CPUs while we measure."""
    try:
        return sorted(e.name for e in STATE_ROOT.iterdir()
                      if (e / "state.json").exists() and not e.name.startswith("bench"))
    except OSError:
        return []


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


def bgp_established(name: str) -> dict[str, int]:
    """BGP sessions of a running lab by state, from `lab status --json` (every one should be Established)."""
    result = subprocess.run(lab_cmd() + ["status", name, "--json"], capture_output=True, text=True, timeout=120)
    counts: dict[str, int] = {}

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for session in value.get("bgp") or []:
                state = "Established" if session["state"] == "up" else session["state"]  # BIRD's "up"
                counts[state] = counts.get(state, 0) + 1
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    if result.returncode == 0:
        walk(json.loads(result.stdout))
    return counts


def verdict(value: float | None, goal: float) -> str:
    if value is None:
        return "n/a"
    return "pass" if value <= goal else "**fail**"


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    rows: list[tuple[str, str, str, str]] = []

    def series(d: dict[str, Any]) -> str:
        if not d or not d.get("n"):
            return "n/a"
        if d["n"] == 1:
            return f"{d['median']:.2f} s"
        return f"{d['median']:.2f} s (min {d['min']:.2f}, max {d['max']:.2f})"

    t3 = results.get("topology3")
    if t3 and "up_wall" in t3:
        bl = results["baseline"]
        s = bl["steps"]
        shape = f"{t3['nodes']} nodes, {t3['namespaces']} netns, {t3['veths'] + t3['mgmt_ports']} veth pairs"
        rows += [
            (f"topology3 `lab up` wall, until exit 0 ({shape}, {t3['bgp_sessions']} BGP sessions)",
             series(t3["up_wall"]), f"<= {GOAL_T3_UP:g} s", verdict(t3["up_wall"].get("median"), GOAL_T3_UP)),
            ("topology3 `lab up` in-process (`--json` seconds)", series(t3["up_inprocess"]), "", ""),
            ("topology3 `lab down` wall", series(t3["down_wall"]), f"<= {GOAL_T3_DOWN:g} s",
             verdict(t3["down_wall"].get("median"), GOAL_T3_DOWN)),
            ("topology3 `lab down` in-process (printed)", series(t3["down_inprocess"]), "", ""),
            ("topology3 outside lab's own clock (wall - in-process): up / down",
             f"{series(t3['up_outside'])} / {series(t3['down_outside'])}", "", ""),
            ("CLI start floor: `lab version` wall (interpreter + imports)", series(t3["cli_version_wall"]), "", ""),
            (f"baseline: plain `ip`, one command per step, up ({s['commands_up']} commands: {s['namespaces']} "
             f"netns, {s['veth_pairs']} veth pairs, {s['addresses']} addresses, {s['link_ups']} link ups)",
             series(bl["up_wall"]), "", ""),
            (f"baseline: plain `ip` down ({s['commands_down']} commands)", series(bl["down_wall"]), "", ""),
            ("ratio `lab up` / baseline up (medians)", f"{results['ratios']['up']:.2f}x", "", ""),
            ("ratio `lab down` / baseline down (medians)", f"{results['ratios']['down']:.2f}x", "", ""),
        ]
    big = results.get("big")
    if big and "up_wall" in big:
        label = f"{big['name']} ({big['srx']} SRX, {big.get('nodes', '?')} nodes)"
        goal_up, goal_down, goal_rss = big_goals(big["srx"])
        rows.append((f"{label} `lab up` wall, until exit 0", f"{big['up_wall']:.2f} s"
                     + (f" (in-process {big['up_inprocess']:.2f} s)" if big.get("up_inprocess") else ""),
                     f"<= {goal_up:g} s", verdict(big["up_wall"], goal_up)))
        if big.get("bgp") is not None:
            bgp = big["bgp"]
            total = sum(bgp.values())
            rows.append((f"{big['name']} BGP sessions Established (from `lab status`)",
                         f"{bgp.get('Established', 0)} of {total}", "all",
                         "pass" if total and bgp.get("Established", 0) == total else "**fail**"))
        for key, what in (("status_wall", "`lab status NAME --json`"),
                          ("events_list_wall", "`lab events list --lab NAME --json`")):
            if key in big:
                rows.append((f"{big['name']} {what} wall", f"{big[key]:.2f} s", f"<= {GOAL_BIG_CLI:g} s",
                             verdict(big[key], GOAL_BIG_CLI)))
        mem = big.get("memory")
        if mem:
            kinds = ", ".join(f"{k} {v['avg_rss_mib']:.1f}" for k, v in mem["by_kind"].items())
            rows += [
                (f"{big['name']} RSS per node, average ({mem['processes']} processes incl. supervisor and lab-wide "
                 f"{mem['supervisor_rss_mib']:.1f} MiB shared over nodes)",
                 f"{mem['avg_rss_per_node_mib']:.2f} MiB", f"<= {goal_rss:g} MiB",
                 verdict(mem["avg_rss_per_node_mib"], goal_rss)),
                (f"{big['name']} RSS per node by kind (MiB)", kinds, "", ""),
                (f"{big['name']} PSS per node, average", f"{mem['avg_pss_per_node_mib']:.2f} MiB", "", ""),
                (f"{big['name']} total RSS / PSS of the lab's processes",
                 f"{mem['total_rss_mib']:.1f} / {mem['total_pss_mib']:.1f} MiB", "", ""),
            ]
        if "down_wall" in big:
            rows.append((f"{big['name']} `lab down` wall", f"{big['down_wall']:.2f} s"
                         + (f" (in-process {big['down_inprocess']:.2f} s)" if big.get("down_inprocess") else ""),
                         f"<= {goal_down:g} s" if goal_down else "",
                         verdict(big["down_wall"], goal_down) if goal_down else ""))
    lines = [
        "# Bring-up benchmark",
        "",
        f"Measured {results['date']} by `bench/bringup.py {results['args']}` "
        f"({results['runs']} run{'s' if results['runs'] != 1 else ''} of topology3; medians, with min and max).",
        "",
        f"Machine: {m['nproc']} CPUs ({m['model']}), kernel {m['kernel']}, {m['memory_gib']} GiB memory, "
        f"Python {m['python']}, {m['bird']}. Load average {m['loadavg_at_start']:.2f} at start, "
        f"{results.get('loadavg_at_end', 0):.2f} at end; other labs running meanwhile: "
        f"{', '.join(m['other_labs_at_start']) or 'none'} at start, "
        f"{', '.join(results.get('other_labs_at_end', [])) or 'none'} at end.",
        "",
        "| metric | value | goal | pass/fail |",
        "|---|---|---|---|",
    ]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    if results.get("errors"):
        lines += ["", "Errors:", ""] + [f"- {e}" for e in results["errors"]]
    lines += [
        "",
        "Wall times are those of the `lab` subprocess (interpreter start and imports included); "
        "in-process times are what lab measures itself. Ready means every BGP session Established and "
        "every expected route in the kernel. The baseline creates the same namespaces, veth pairs "
        "(management ports included), addresses and link-ups with one `ip` command per step and no "
        "daemons; its down is one `ip netns del` per namespace. Memory: RSS and PSS from "
        "/proc/PID/smaps_rollup of every process in the lab's state.json plus its supervisor, whose "
        "share is divided over all nodes (hosts run no process of their own); RSS counts shared pages "
        "(the bird binary, libc) once per process, PSS divides them.",
    ]
    return "\n".join(lines) + "\n"


def write_doc(text: str, path: Path) -> None:
    notes = ""
    if path.exists():
        old = path.read_text()
        if NOTES_MARKER in old:
            notes = old[old.index(NOTES_MARKER):]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + ("\n" + notes if notes else ""))


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
