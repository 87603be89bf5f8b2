"""The machine's CPU during a benchmark run: busy CPUs over a window (/proc/stat) and, optionally, where
they went (perf sampling every CPU, by process and by area of the kernel)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any


def cpu_seconds() -> tuple[float, float]:
    """(busy, softirq) CPU seconds of the whole machine since boot (/proc/stat; idle, iowait and steal
    are not busy)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    tick = os.sysconf("SC_CLK_TCK")
    user, nice, system, _idle, _iowait, irq, softirq = fields[:7]
    return (user + nice + system + irq + softirq) / tick, softirq / tick


class CpuWindow:
    """The machine's busy CPUs inside a run: sampled SKIP seconds after it starts (the client is up and
    connecting by then) and again SPAN seconds later, by a thread of its own; with PROFILE, perf samples
    every CPU over the same window into that file."""

    def __init__(self, skip: float, span: float, profile: Path | None = None):
        self.samples: list[tuple[float, float, float]] = []
        self.profile = profile
        self._thread = threading.Thread(target=self._sample, args=(skip, span), daemon=True)
        self._thread.start()

    def _sample(self, skip: float, span: float) -> None:
        time.sleep(skip)
        perf = None
        if self.profile is not None:
            perf = subprocess.Popen(["perf", "record", "-a", "-q", "-F", str(PERF_HZ), "-o", str(self.profile),
                                     "--", "sleep", f"{span:.2f}"], stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL)
        self.samples.append((time.monotonic(), *cpu_seconds()))
        time.sleep(span)
        self.samples.append((time.monotonic(), *cpu_seconds()))
        if perf is not None:
            perf.wait(30)

    def figures(self) -> dict[str, Any]:
        """busy_cpus and softirq_cpus (CPUs used on average over the window), with PROFILE the profile's
        shares; {} if the run was too short."""
        self._thread.join()
        if len(self.samples) < 2:
            return {}
        (t0, busy0, soft0), (t1, busy1, soft1) = self.samples
        found: dict[str, Any] = {"busy_cpus": (busy1 - busy0) / (t1 - t0), "softirq_cpus": (soft1 - soft0) / (t1 - t0)}
        if self.profile is not None and self.profile.exists():
            found["profile"] = read_profile(self.profile)
        return found


def window(seconds: float, profile: Path | None = None) -> CpuWindow:
    return CpuWindow(1.0, max(seconds - 1.5, 0.5), profile)


PERF_HZ = 499
# kernel functions by what they do, first match wins (by name: a rough map, the symbols are in the log)
AREAS = (
    ("conntrack events, netlink (session sync)", ("ctnetlink", "nfnetlink", "netlink_", "__netlink",
                                                  "nf_conntrack_event", "nf_ct_deliver_cached_events",
                                                  "nf_ct_ecache")),
    ("conntrack, NAT", ("nf_conntrack", "__nf_conntrack", "nf_ct_", "__nf_ct", "nf_nat", "__nf_nat",
                        "hash_conntrack", "nf_confirm", "ipv4_confirm", "tcp_in_window", "nf_ct")),
    ("nftables rules", ("nft_", "__nft", "nf_tables", "nf_hook_slow")),
    ("TCP, sockets, syscalls", ("tcp_", "__tcp", "inet_", "__inet", "inet6_", "sock_", "__sock", "sk_", "__sk_",
                                "__sys_", "__x64_sys", "do_syscall", "entry_SYSCALL", "syscall_", "ep_", "do_epoll",
                                "__fput", "fput", "fd_install", "alloc_file", "lock_sock", "release_sock")),
    ("IP forwarding, routing, devices", ("ip_", "__ip", "fib_", "dst_", "ipv4_", "veth_", "netif_", "__netif",
                                         "dev_", "__dev", "net_rx_action", "process_backlog", "__napi", "napi_",
                                         "eth_", "neigh_", "rt_", "skb_", "__skb", "kfree_skb", "__kfree_skb",
                                         "consume_skb", "__alloc_skb", "validate_xmit", "sch_", "pfifo")),
    ("idle", ("pv_native_safe_halt", "default_idle", "cpuidle", "do_idle", "poll_idle", "acpi_")),
)


def perf_report(path: Path, sort: str) -> list[tuple[float, str]]:
    """(share of all samples in %, name) of a perf.data file, sorted by SORT (comm or sym)."""
    out = subprocess.run(["perf", "report", "-i", str(path), "--no-children", "-g", "none", "--sort", sort,
                          "--stdio"], capture_output=True, text=True).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split(None, 1)
        if len(parts) == 2 and parts[0].endswith("%") and not line.startswith("#"):
            rows.append((float(parts[0].rstrip("%")), parts[1].strip()))
    return rows


def read_profile(path: Path) -> dict[str, Any]:
    """Where a run's CPU went: shares of samples by process name and by area of the kernel (AREAS; user
    space and the kernel's other functions apart), and the top kernel functions but idle's."""
    by_comm: dict[str, float] = {}
    for share, comm in perf_report(path, "comm"):
        name = comm.split("/")[0] or comm  # kernel threads per CPU (ksoftirqd/0, kworker/u8:2) as one
        by_comm[name] = by_comm.get(name, 0.0) + share
    areas: dict[str, float] = {}
    top: list[tuple[float, str]] = []
    for share, sym in perf_report(path, "sym"):
        kind, _, name = sym.partition(" ")
        name = name.strip()
        if kind != "[k]":
            area = "user space"
        else:
            area = next((a for a, prefixes in AREAS if name.startswith(prefixes)), "other kernel")
            if area != "idle":
                top.append((share, name))
        areas[area] = areas.get(area, 0.0) + share
    return {"comm": sorted(by_comm.items(), key=lambda x: -x[1]), "areas": sorted(areas.items(), key=lambda x: -x[1]),
            "top": top[:15]}


def per_cpu(result: dict[str, Any]) -> None:
    busy = result.get("busy_cpus")
    if busy:
        result["cps_per_cpu"] = result["cps"] / busy



def profile_tables(profiled: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Where the CPU went (perf, every CPU, during each profiled run): shares of all samples (idle
    included) by area and by process."""
    if not profiled:
        return []
    areas = ["user space", *(a for a, _ in AREAS if a != "idle"), "other kernel", "idle"]
    lines = ["", "## Where the CPU went", "",
             f"perf sampling every CPU at {PERF_HZ} Hz over the same window as busy CPUs; shares of all samples "
             "(2 CPUs = 100 %). Kernel functions are put into areas by name (conntrack before NAT, TCP, IP; the "
             "rest: other kernel); user space is every process's own code (tools, Python daemons).", "",
             "| path | tool | " + " | ".join(areas) + " |", "|---|---|" + "---|" * len(areas)]
    for name, found in profiled:
        shares = dict(found["areas"])
        lines.append(f"| {name} | " + " | ".join(f"{shares.get(a, 0.0):.0f} %" for a in areas) + " |")
    lines += ["", "| path | tool | processes (share of samples) | top kernel functions |", "|---|---|---|---|"]
    for name, found in profiled:
        comm = ", ".join(f"{c} {v:.0f} %" for c, v in found["comm"][:6])
        top = ", ".join(f"{f} {v:.1f} %" for v, f in found["top"][:6])
        lines.append(f"| {name} | {comm} | {top} |")
    return lines
