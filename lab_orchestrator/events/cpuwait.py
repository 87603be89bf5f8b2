"""How long a task at the lab daemons' priority waited for a CPU while a case ran.

The generator's senders (and NAT64's translators) run SCHED_FIFO so that their schedule holds; BIRD,
the MNHA and selector daemons, conntrackd and the runner itself run at normal priority. When the
realtime work leaves them no CPU (on a 2-CPU machine: the senders and the forwarding they do fill
both), BGP keepalives, MNHA heartbeats and session syncs wait, sessions drop and flows go lost that
the lab would have kept: the event is not what failed, the machine was overloaded. The senders' own
schedule does not show it (they are the ones running).

So a small process at normal priority, started with the case's traffic, wakes every PERIOD_S and
notes each wake-up later than NOTED_MS with when it happened (CLOCK_MONOTONIC, as the case's marks).
The runner reads them once the traffic has stopped and does not judge a case in which such a task
waited longer than the lab's timers allow (`keptup.CPU_WAIT_MAX_S`).

    python -m lab_orchestrator.events.cpuwait    (reports on stdout when its stdin closes)
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import IO

PERIOD_S = 0.02
NOTED_MS = 20.0  # a wake-up later than this is noted (at normal priority on a busy machine, a few ms is usual)
BOUND_S = 3600.0  # the probe's own bound, should its parent never close its stdin


def watch(stdin: IO[str], out: IO[str], period: float = PERIOD_S, bound: float = BOUND_S) -> None:
    """Wake every PERIOD until STDIN ends (or BOUND passes); write {"waits": [[ns, ms], ...]} to OUT."""
    waits: list[tuple[int, float]] = []
    ends = time.monotonic() + bound
    due = time.monotonic() + period
    while time.monotonic() < ends:
        readable, _, _ = select.select([stdin], [], [], max(0.0, due - time.monotonic()))
        now = time.monotonic()
        if readable and not stdin.readline():
            break
        late_ms = (now - due) * 1000
        if late_ms > NOTED_MS:
            waits.append((time.monotonic_ns(), round(late_ms, 1)))
        due = max(due + period, now)
    out.write(json.dumps({"waits": waits}) + "\n")
    out.flush()


def worst(waits: Sequence[Sequence[float]], start: float, end: float) -> tuple[float, float | None]:
    """The longest wait (ms) noted between START and END (monotonic seconds) and when it ended (seconds
    from START); (0.0, None) when none was noted."""
    inside = [(ms, ns / 1e9) for ns, ms in waits if start <= ns / 1e9 <= end]
    if not inside:
        return 0.0, None
    ms, at = max(inside)
    return ms, round(at - start, 3)


class CpuWait:
    """The probe as a child process of the runner."""

    def __init__(self) -> None:
        self.proc: subprocess.Popen[str] | None = None

    def start(self) -> CpuWait:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [_repo(), os.environ.get("PYTHONPATH")]))}
        self.proc = subprocess.Popen([sys.executable, "-m", "lab_orchestrator.events.cpuwait"], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        return self

    def stop(self, timeout: float = 10.0) -> list[list[float]] | None:
        """Its waits (None if it gave no report: the case's check then says "not measured")."""
        if self.proc is None:
            return None
        try:
            out, _ = self.proc.communicate(input="", timeout=timeout)
            return list(json.loads(out.strip().splitlines()[-1])["waits"]) if out.strip() else None
        except (subprocess.TimeoutExpired, ValueError, KeyError, IndexError):
            self.proc.kill()
            self.proc.wait()
            return None
        finally:
            self.proc = None


def _repo() -> str:
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


if __name__ == "__main__":
    watch(sys.stdin, sys.stdout)
