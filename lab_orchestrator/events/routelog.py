"""Route changes in the lab's namespaces while an event runs: the first clue to a failed case.

A failed case says which flows lost packets, in which direction and when; the next question is what
the routers did at that moment. For each namespace of the lab, iproute2 (`ip -n NS -o -ts monitor
route`, the kernel's rtnetlink route notifications; one line per route, a multipath route's next hops
joined on it; time stamps in UTC) writes every route added, replaced or deleted to a file of its own
while the case runs. At the end they are read back and timed from the event. A case keeps a count
of changes per namespace; a failed one also keeps the changes themselves (the first MAX_KEPT from a
second before the event), which `lab events run` prints and its JSON carries.

Left out as noise: the kernel's `local` table (addresses coming and going with their links), and
routes to IPv6 link-local and multicast destinations.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

MAX_KEPT = 80
_LINE = re.compile(r"^\[(?P<when>[0-9T:.\-]+)\]\s*(?P<change>\S.*?)\s*$")
# route types iproute2 prints before the destination (`unicast` is left out when it prints)
_TYPES = {"local", "broadcast", "multicast", "anycast", "blackhole", "unreachable", "prohibit", "throw", "nat",
          "unicast"}


def _noise(change: str) -> bool:
    words = change.split()
    if words and words[0] == "Deleted":
        words = words[1:]
    if words and words[0] in _TYPES:
        words = words[1:]
    dest = words[0].lower() if words else ""
    return "table local" in " ".join(words) or dest.startswith(("fe80:", "ff"))


@dataclass(frozen=True)
class Change:
    at: float  # CLOCK_MONOTONIC seconds
    ns: str
    change: str


def parse(ns: str, lines: Iterable[str], wall_minus_mono: float) -> list[Change]:
    """The route changes of one namespace's monitor output (`-ts` lines), timed on CLOCK_MONOTONIC.
    WALL_MINUS_MONO: time.time() - time.monotonic() when the monitors started (iproute2 stamps
    lines with the wall clock, in UTC here). A multipath route's next hops are on its line, after
    iproute2's `\\` separators, which become " | "."""
    out = []
    for line in lines:
        m = _LINE.match(line)
        if m is None or _noise(m["change"]):
            continue
        try:  # the monitors run with TZ=UTC0: their stamps are UTC
            wall = datetime.fromisoformat(m["when"]).replace(tzinfo=UTC).timestamp()
        except ValueError:
            continue
        change = re.sub(r"\s*\\\s*", " | ", m["change"])
        out.append(Change(wall - wall_minus_mono, ns, change))
    return out


def kept(changes: Iterable[Change], since: float = float("-inf"), limit: int = MAX_KEPT) -> list[Change]:
    """The first LIMIT changes in time from SINCE on (namespace, then text, break ties: the same run,
    the same list)."""
    return sorted((c for c in changes if c.at >= since), key=lambda c: (c.at, c.ns, c.change))[:limit]


def counts(changes: Iterable[Change]) -> dict[str, int]:
    out: dict[str, int] = {}
    for c in changes:
        out[c.ns] = out.get(c.ns, 0) + 1
    return dict(sorted(out.items()))


def monitor_argv(ns: str) -> list[str]:
    return ["ip", "-n", ns, "-o", "-ts", "monitor", "route"]


class RouteLog:
    """One route monitor per namespace from start() to stop(); changes() reads what they saw."""

    def __init__(self, namespaces: Sequence[str]) -> None:
        self.namespaces = list(namespaces)
        self.folder: Path | None = None
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []
        self.wall_minus_mono = 0.0
        self._changes: list[Change] = []
        self.unmonitored: list[str] = []

    def start(self) -> RouteLog:
        self.folder = Path(tempfile.mkdtemp(prefix="lab-routes-"))
        self.wall_minus_mono = time.time() - time.monotonic()
        for ns in self.namespaces:
            with open(self.folder / ns, "wb") as sink:
                try:
                    proc = subprocess.Popen(monitor_argv(ns), stdout=sink, stderr=subprocess.DEVNULL,
                                            stdin=subprocess.DEVNULL, env={**os.environ, "TZ": "UTC0"})
                except OSError:  # no iproute2: the case runs without its route log
                    continue
            self.procs.append((ns, proc))
        return self

    def stop(self) -> None:
        """Stop the monitors and read their files (idempotent). A monitor that had ended by itself
        (its namespace gone, netlink refused) is named in `unmonitored`: its silence means nothing."""
        for ns, proc in self.procs:
            if proc.poll() is not None:
                self.unmonitored.append(ns)
            proc.terminate()
        for _, proc in self.procs:
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        if self.folder is not None:
            for ns, _ in self.procs:
                try:
                    text = (self.folder / ns).read_text(errors="replace")
                except OSError:
                    continue
                self._changes += parse(ns, text.splitlines(), self.wall_minus_mono)
            shutil.rmtree(self.folder, ignore_errors=True)
        self.procs, self.folder = [], None

    def changes(self) -> list[Change]:
        return list(self._changes)
