"""The bring-up benchmark's goals and document (docs/benchmarks-bringup.md): machine, verdicts, markdown."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
from bringup_measure import STATE_ROOT  # noqa: E402

DOC = ROOT / "docs" / "benchmarks-bringup.md"



GOAL_T3_UP = 2.0


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
        "in-process times are what lab measures itself. Up means ready for traffic, what `lab up` waits "
        "for (docs/architecture.md, Readiness): every BGP session Established, every expected route at the "
        "gateways, the health-check responder, every selector table, the MNHA pairs in step and synced, the "
        "SSH server. The baseline creates the same namespaces, veth pairs "
        "(management ports included), addresses and link-ups with one `ip` command per step and no "
        "daemons; its down is one `ip netns del` per namespace. Memory: RSS and PSS from "
        "/proc/PID/smaps_rollup of every process in the lab's state.json plus its supervisor, whose "
        "share is divided over all nodes (hosts run no process of their own); RSS counts shared pages "
        "(the bird binary, libc) once per process, PSS divides them.",
    ]
    return "\n".join(lines) + "\n"
