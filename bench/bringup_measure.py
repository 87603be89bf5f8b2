"""What the bring-up benchmark (bench/bringup.py) measures with: timed `lab` runs, the plain-`ip`
baseline, the memory of a lab's processes, BGP sessions up."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent



STATE_ROOT = Path(os.environ.get("LAB_STATE_ROOT", "/run/lab"))


BASELINE_PREFIX = "benchbl"  # namespaces benchbl-N, root-namespace links benchbl-mN / benchbl-mg


MIB = 1024 * 1024


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
    """`lab down --lab NAME`; return (wall seconds, in-process seconds lab printed)."""
    wall, result = run_timed(lab_cmd() + ["down", "--lab", name], timeout=120)
    if result.returncode != 0:
        raise BenchError(f"lab down --lab {name} exited {result.returncode}: "
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
        result = subprocess.run(lab_cmd() + ["down", "--lab", name], capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            log(f"cleanup: lab down --lab {name} exited {result.returncode}: {result.stderr.strip()[-300:]}")
    except (OSError, subprocess.SubprocessError) as exc:
        log(f"cleanup: lab down --lab {name} failed: {exc}")
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
