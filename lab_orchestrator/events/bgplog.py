"""What the lab's BIRDs logged while an event ran: why a BGP session went down, how a graceful restart went.

Next to the route log (events.routelog: what the kernels' tables did), the BIRD logs say why: each BIRD
of the lab writes its BGP sessions' state changes and events to its log (the `trace` class, `debug
{ states, events }`: "Neighbor graceful restart detected", "Received: Cease", "BGP session
established", "Graceful restart done"...). At the start of a case the runner notes how long each log
is; at the end it reads what was appended since, times each line from the event, and a failed case
keeps the first MAX_KEPT lines from a second before the event, protocol state changes left out
(printed by `lab events run`, in its JSON).

BIRD stamps its lines with the local wall clock and milliseconds ("2026-12-05 07:51:29.970 <TRACE>
peer_mx1: Connection closed"). A line without a stamp (a continuation) is left out.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

MAX_KEPT = 120
_LINE = re.compile(r"^(?P<when>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)?) <(?P<level>[A-Z]+)> (?P<text>.*?)\s*$")


@dataclass(frozen=True)
class Line:
    at: float  # CLOCK_MONOTONIC seconds
    log: str  # the daemon's name in the lab: "mx1 bird-untrust-vr", "gw-untrust bird"
    level: str  # TRACE, INFO, WARN, ERR...
    text: str


def parse(log: str, lines: Iterable[str], wall_minus_mono: float) -> list[Line]:
    """The stamped lines of one BIRD log, timed on CLOCK_MONOTONIC (WALL_MINUS_MONO: time.time() -
    time.monotonic(); BIRD's stamps are the local time of this machine)."""
    out = []
    for line in lines:
        m = _LINE.match(line)
        if m is None:
            continue
        try:
            wall = datetime.fromisoformat(m["when"]).timestamp()  # naive: local time, as BIRD wrote it
        except ValueError:
            continue
        out.append(Line(wall - wall_minus_mono, log, m["level"], m["text"]))
    return out


# "fw_srx1: State changed to flush": the protocol's state, which the event lines around it already say
# ("Down", "Starting", "BGP session established"); a power-off writes seven per session, enough to push
# the lines that explain a failure past the limit.
_STATE_CHANGE = re.compile(r"^\S+: State changed to \w+$")


def kept(lines: Iterable[Line], since: float = float("-inf"), limit: int = MAX_KEPT) -> list[Line]:
    """The first LIMIT lines in time from SINCE on, protocol state changes left out (ties broken by
    log, then text: the same run, the same list)."""
    return sorted((x for x in lines if x.at >= since and not _STATE_CHANGE.match(x.text)),
                  key=lambda x: (x.at, x.log, x.text))[:limit]


class BgpLog:
    """The BIRD logs of a lab (name -> file), read from where each ended at start() to stop()."""

    def __init__(self, logs: Mapping[str, str | Path]) -> None:
        self.logs = {name: Path(path) for name, path in logs.items()}
        self.offsets: dict[str, int] = {}
        self.wall_minus_mono = 0.0

    def start(self) -> BgpLog:
        self.wall_minus_mono = time.time() - time.monotonic()
        for name, path in self.logs.items():
            try:
                self.offsets[name] = path.stat().st_size
            except OSError:  # not written yet: read from its start
                self.offsets[name] = 0
        return self

    def lines(self) -> list[Line]:
        """What each log got since start(). A log that shrank (rewritten by a restart of its daemon)
        is read from its start."""
        out: list[Line] = []
        for name, path in self.logs.items():
            try:
                with open(path, "rb") as f:
                    size = f.seek(0, 2)
                    f.seek(self.offsets.get(name, 0) if self.offsets.get(name, 0) <= size else 0)
                    text = f.read().decode(errors="replace")
            except OSError:
                continue
            out += parse(name, text.splitlines(), self.wall_minus_mono)
        return out
