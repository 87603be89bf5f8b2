"""A CPU of their own for the senders while the session tables are big (`lab events run --sessions`).

The kernel keeps a single session hash shared by all namespaces, and a dump of one namespace's table
walks all of it with the CPU's softirqs (and so preemption) off until a message is full. A namespace
that holds few sessions makes one call walk every namespace's sessions: conntrackd reads its kernel
table when it starts, so an SRX that powers on beside a few hundred thousand sessions kept one CPU
for over a hundred milliseconds in one go (seen with `perf sched`). A SCHED_FIFO sender woken on
that CPU waits the whole walk: the kernel moves a woken real-time task to another CPU only when the
task running on its CPU is real-time too (of equal or higher priority, or bound to that CPU); an
ordinary task that cannot be preempted does not count. The flows then fall behind their schedule at
the restore, and the case cannot be judged.

So with many sessions (`SPLIT_MIN_SESSIONS`) the senders get the last CPU the run may use, and the
rest of the case runs on the other CPUs: every process of the lab (its daemons, and the supervisor,
whose children the daemons a restore starts again are), and the run itself with what it starts (the
receivers, the table reads, the background sessions' processes). Each task gets its old CPUs back
after the case; a daemon started during the case gets all the run's CPUs. With fewer sessions
nothing moves. Only this lab's tasks move: other labs and the machine's other processes may still
use the senders' CPU.

`split` is pure; `apart` moves the tasks.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

from ..runtime import supervisor
from ..runtime.state import LabState

# From this many background sessions on, the senders get a CPU of their own. Below it (the events'
# and the report's usual 2,000) they run as they always have, free on every CPU.
SPLIT_MIN_SESSIONS = 100_000


def wanted(sessions: int, realtime: bool, sender_cpu: int | None) -> bool:
    """Whether a case moves the lab off its senders' CPU: big session tables, real-time senders, and
    no CPU chosen for them already."""
    return sessions >= SPLIT_MIN_SESSIONS and realtime and sender_cpu is None


def split(cpus: Iterable[int]) -> tuple[int, set[int]] | None:
    """(the senders' CPU, the others') from the CPUs the run may use; None with fewer than two."""
    ordered = sorted(set(cpus))
    if len(ordered) < 2:
        return None
    return ordered[-1], set(ordered[:-1])


def tasks(pids: Iterable[int]) -> list[int]:
    """Every thread of PIDS that still runs, each once (a process's new threads inherit its creator's
    CPUs, its old ones do not)."""
    found: set[int] = set()
    for pid in set(pids):
        if pid <= 0:
            continue
        try:
            found |= {int(t.name) for t in Path(f"/proc/{pid}/task").iterdir()}
        except OSError:  # ended meanwhile
            continue
    return sorted(found)


def lab_pids(state: LabState) -> list[int]:
    """The lab's live processes (their pids as the supervisor has them now: it restarts a crashed
    daemon by itself), its supervisor and this run. A record whose process has ended is left out: its
    pid may be another process's by now."""
    state.refresh_processes()
    daemons = [r.pid for r in state.processes if supervisor.alive(r)]
    return [state.supervisor_pid, *daemons, os.getpid()]


def _move(tids: Iterable[int], cpus: set[int], before: dict[int, set[int]]) -> None:
    for tid in tids:
        with contextlib.suppress(OSError):  # a thread that ended meanwhile
            before.setdefault(tid, os.sched_getaffinity(tid))
            os.sched_setaffinity(tid, cpus)


@contextlib.contextmanager
def apart(state: LabState, wanted: bool) -> Iterator[int | None]:
    """While in the block (WANTED: see `wanted`), every task of the lab and of this run leaves the
    senders' CPU, which it yields (None: nothing moved)."""
    everything = os.sched_getaffinity(0)
    chosen = split(everything) if wanted else None
    if chosen is None:
        yield None
        return
    sender, others = chosen
    before: dict[int, set[int]] = {}
    try:
        moved: set[int] = set()
        while True:  # a thread started by one not moved yet inherits the senders' CPU: list again
            listed = set(tasks(lab_pids(state)))
            if listed <= moved:
                break
            _move(listed - moved, others, before)
            moved |= listed
        yield sender
    finally:
        for tid in tasks(lab_pids(state)):  # the daemons started meanwhile too (a restore, a crash)
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, before.get(tid, everything))
