"""Route changes in the lab's namespaces while an event runs: the first clue to a failed case.

A failed case says which flows lost packets, in which direction and when; the next question is what
the routers did at that moment. For each namespace of the lab, iproute2 (`ip -n NS -ts monitor
route`, the kernel's rtnetlink route notifications) writes every route added, replaced or deleted,
with its wall-clock time, to a file of its own while the case runs. At the end they are read back and
timed from the event. A case keeps a count of changes per namespace; a failed case also keeps the
changes themselves (the first MAX_KEPT in time), which `lab events run` prints and its JSON carries.

Left out as noise: the kernel's `local` table (addresses coming and going with their links), IPv6
link-local and multicast routes.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

MAX_KEPT = 80
_LINE = re.compile(r"^\[(?P<when>[0-9T:.\-]+)\]\s*(?P<change>\S.*?)\s*$")
_NOISE = (" table local ", "fe80::", "ff00::", " multicast ")


@dataclass(frozen=True)
class Change:
    at: float  # CLOCK_MONOTONIC seconds
    ns: str
    change: str


def parse(ns: str, lines: Iterable[str], wall_minus_mono: float) -> list[Change]:
    """The route changes of one namespace's monitor output (`-ts` lines), timed on CLOCK_MONOTONIC.
    WALL_MINUS_MONO: time.time() - time.monotonic() when the monitors started (iproute2 stamps
    lines with the local wall clock)."""
    out = []
    for line in lines:
        m = _LINE.match(line)
        if m is None or any(noise in f" {m['change']} " for noise in _NOISE):
            continue
        try:
            wall = datetime.fromisoformat(m["when"]).timestamp()
        except ValueError:
            continue
        out.append(Change(wall - wall_minus_mono, ns, m["change"]))
    return out


def kept(changes: Iterable[Change], limit: int = MAX_KEPT) -> list[Change]:
    """The first LIMIT changes in time (namespace, then text, break ties: the same run, the same list)."""
    return sorted(changes, key=lambda c: (c.at, c.ns, c.change))[:limit]


def counts(changes: Iterable[Change]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in changes:
        out[c.ns] = out.get(c.ns, 0) + 1
    return dict(sorted(out.items()))


def monitor_argv(ns: str) -> list[str]:
    return ["ip", "-n", ns, "-ts", "monitor", "route"]


class RouteLog:
    """One route monitor per namespace from start() to stop(); changes() reads what they saw."""

    def __init__(self, namespaces: Sequence[str]) -> None:
        self.namespaces = list(namespaces)
        self.folder: Path | None = None
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.wall_minus_mono = 0.0
        self._changes: list[Change] = []

    def start(self) -> RouteLog:
        self.folder = Path(tempfile.mkdtemp(prefix="lab-routes-"))
        self.wall_minus_mono = time.time() - time.monotonic()
        for ns in self.namespaces:
            with open(self.folder / ns, "wb") as sink:
                try:
                    proc = subprocess.Popen(monitor_argv(ns), stdout=sink, stderr=subprocess.DEVNULL,
                                            stdin=subprocess.DEVNULL)
                except OSError:  # no iproute2: the case runs without its route log
                    continue
            self.procs.append((ns, proc))
        return self

    def stop(self) -> None:
        """Stop the monitors and read their files (idempotent)."""
        for _, proc in self.procs:
            proc.terminate()
        for _, proc in self.procs:
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.folder is not None:
            for ns, _ in self.procs:
                text = (self.folder / ns).read_text(errors="replace")
                self._changes += parse(ns, text.splitlines(), self.wall_minus_mono)
            shutil.rmtree(self.folder, ignore_errors=True)
        self.procs, self.folder = [], None

    def changes(self) -> list[Change]:
        return list(self._changes)
