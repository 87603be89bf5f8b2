"""CPU time the hypervisor gave to something else while this machine's CPUs wanted to run (steal
time, the 8th figure of each ``cpuN`` line of /proc/stat). A sender that falls behind because its
virtual machine was paused cannot catch up by any setting of its own: the figure names that cause."""

from __future__ import annotations

import os

STAT = "/proc/stat"
STEAL_FIELD = 8  # cpuN user nice system idle iowait irq softirq steal ...


def _tick_ms() -> float:
    try:
        return 1000.0 / os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError):
        return 10.0


TICK_MS = _tick_ms()


def parse(text: str) -> list[float]:
    """Per CPU, its steal time in ms, from the text of /proc/stat (the summary ``cpu`` line skipped)."""
    per_cpu = []
    for line in text.splitlines():
        if line.startswith("cpu") and not line.startswith("cpu "):
            fields = line.split()
            per_cpu.append(int(fields[STEAL_FIELD]) * TICK_MS if len(fields) > STEAL_FIELD else 0.0)
    return per_cpu


def read(path: str = STAT) -> list[float]:
    """Per CPU, steal time in ms since boot ([] where /proc/stat cannot be read)."""
    try:
        with open(path) as fh:
            return parse(fh.read())
    except OSError:
        return []


def most(before: list[float], after: list[float]) -> float:
    """The most steal any one CPU had between two readings (ms; 0 without both)."""
    if not before or len(before) != len(after):
        return 0.0
    return max(a - b for b, a in zip(before, after, strict=True))
