"""A CPU of their own for the senders while the session tables are big (`lab events run --sessions`).

The kernel keeps one session hash for every namespace, and a dump of one namespace's table walks all
of it with the CPU's softirqs (and so preemption) off until a message is full. A namespace that holds
few sessions makes one call walk every namespace's sessions: conntrackd reads its kernel table when it
starts, so an SRX that powers on beside a few hundred thousand sessions kept one CPU for over a
hundred milliseconds in one go (seen with `perf sched`). A SCHED_FIFO sender woken on that CPU waits
the whole walk: the kernel moves a woken realtime task to another CPU only when the one it last ran
on runs another realtime task. The flows then fall behind their schedule at the restore, and the case
cannot be judged.

So with sessions the senders get the last CPU the run may use, and the rest of the case runs on the
other CPUs: every process of the lab (its daemons, and the supervisor, whose children the daemons a
restore starts again are), and the run itself with what it starts (the receivers, the table reads,
the background sessions' processes). Each task gets its old CPUs back after the case; a daemon started
during the case gets all the run's CPUs. Without sessions nothing moves: the walks are short there.

`split` is pure; `apart` moves the tasks.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..runtime.state import LabState


def split(cpus: Iterable[int]) -> tuple[int, set[int]] | None:
    """(the senders' CPU, the others') from the CPUs the run may use; None with fewer than two."""
    ordered = sorted(set(cpus))
    if len(ordered) < 2:
        return None
    return ordered[-1], set(ordered[:-1])


def tasks(pids: Iterable[int]) -> list[int]:
    """Every thread of PIDS that still runs (a process's new threads inherit its creator's CPUs, its
    old ones do not)."""
    found: list[int] = []
    for pid in pids:
        if pid <= 0:
            continue
        try:
            found += sorted(int(t.name) for t in Path(f"/proc/{pid}/task").iterdir())
        except OSError:  # ended meanwhile
            continue
    return found


def lab_pids(state: LabState) -> list[int]:
    """The lab's processes: its supervisor, its daemons and this run."""
    return [state.supervisor_pid, *(r.pid for r in state.processes), os.getpid()]


def _move(tids: Iterable[int], cpus: set[int], before: dict[int, set[int]] | None = None) -> None:
    for tid in tids:
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            if before is not None:
                before[tid] = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, cpus)


@contextlib.contextmanager
def apart(state: LabState, wanted: bool) -> Iterator[int | None]:
    """While in the block (WANTED: a case with sessions, realtime senders, no CPU chosen), every task of
    the lab and of this run leaves the senders' CPU, which it yields (None: nothing moved)."""
    everything = os.sched_getaffinity(0)
    chosen = split(everything) if wanted else None
    if chosen is None:
        yield None
        return
    sender, others = chosen
    before: dict[int, set[int]] = {}
    _move(tasks(lab_pids(state)), others, before)
    try:
        yield sender
    finally:
        for tid in tasks(lab_pids(state)):  # the daemons started meanwhile too (a restore, a crash)
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, before.get(tid, everything))
