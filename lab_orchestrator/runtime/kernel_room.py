"""Kernel limits shared by every namespace: raised by `lab up` to a lab's needs, given back by `lab down`.

One record for the machine (`RECORD`, whatever a lab's state root, as the knobs are the machine's)
keeps each knob's value from before any lab raised it, the value a lab last left in it (read back: the
kernel rounds the hash up to whole pages), and what every lab still up wants. When a lab goes, a knob
goes back down to the larger of its old value and what the other labs want: a big lab's hash left
behind makes every later full table dump of every lab longer (measured: 27 ms a dump at 2,200,064
buckets against under 20 ms at 262,144). A knob someone else set meanwhile is left as it is. The
record is read and written under a lock, so labs coming up and going down at once keep it whole; a
crash between a knob's write and the record's leaves the knob raised, as if no lab gave it back.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from labkit.files import write_atomic

from .. import kinds
from ..plan.plantypes import LabPlan

Progress = Callable[[str, str], None]

PROC_SYS = Path("/proc/sys")
NEIGH = "net/ipv4/neigh/default"
NETFILTER = "net/netfilter"


def neighbour_room(plan: LabPlan) -> dict[str, int]:
    """The kernel's ARP table limit (gc_thresh3, 1024 by default) counts the entries of every
    namespace together: past it, a new neighbour fails with ENOBUFS and a BGP session stays in
    Connect. Room for this lab's ends four times over."""
    ends = 2 * (len(plan.veths) + len(plan.mgmt.ports))
    return {f"{NEIGH}/gc_thresh2": 2 * ends, f"{NEIGH}/gc_thresh3": 4 * ends}


# 8 bytes a bucket: 128 MiB at most, whatever the lab asks for
MAX_BUCKETS = 1 << 24


def conntrack_room(max_sessions: int, tables: int = 1) -> dict[str, int]:
    """The conntrack knobs a lab of MAX_SESSIONS per session table needs, TABLES tables in all (`lab
    doctor` checks the same values). The limit counts each namespace's entries on its own; the hash
    is ONE for the machine, every namespace's entries in it: a hash sized for one table, with a
    million sessions per MNHA pair held on both nodes of both pairs, had chains of ~7 entries, and
    writing a returning node's 500,000 sessions took twice as long as into an empty hash (measured).
    So a quarter as many buckets as all tables can hold."""
    buckets = min(MAX_BUCKETS, max_sessions * max(1, tables) // 4)
    return {"nf_conntrack_max": max_sessions, "nf_conntrack_buckets": buckets}


def session_tables(plan: LabPlan) -> int:
    """The namespaces that keep sessions: the firewalls' (measured: no other node of a lab tracks any)."""
    return sum(1 for node in plan.nodes if kinds.get(node.kind).firewall)


def wanted(plan: LabPlan) -> dict[str, int]:
    """Every knob (its path under /proc/sys) and the value this lab needs at least."""
    room = neighbour_room(plan)
    room.update({f"{NETFILTER}/{name}": value
                 for name, value in conntrack_room(plan.max_sessions, session_tables(plan)).items()})
    return room


RECORD = Path("/run/lab-kernel-room.json")


# The kernel rounds the hash up to whole pages of buckets (512 of 8 bytes on x86_64).
ROUNDING = 511


def _left_by_a_lab(current: int, ours: dict[str, int]) -> bool:
    """Whether CURRENT is the value a lab last wrote (as the kernel holds it: rounded up at most)."""
    return ours["set"] <= current <= ours["set"] + ROUNDING


def _sysctl_name(knob: str) -> str:
    return knob.replace("/", ".")


class KernelRoom:
    """The machine-wide knobs under ROOT (/proc/sys; a folder in tests) and the record of what labs
    changed in them and want (RECORD; its folder is the lock)."""

    def __init__(self, record: Path = RECORD, root: Path = PROC_SYS) -> None:
        self.record = record
        self.root = root

    @contextlib.contextmanager
    def _locked(self) -> Iterator[dict[str, Any]]:
        """The record under an exclusive lock on its folder, written back whole (removed when it holds
        nothing) however the body ends: a knob written before an interrupt is still recorded. A record
        that is not one (damaged, from elsewhere) counts as empty."""
        fd = os.open(self.record.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                data = json.loads(self.record.read_text())
            except (OSError, ValueError):
                data = None
            record: dict[str, Any] = {"knobs": {}, "labs": {}}
            if isinstance(data, dict):
                for part in record:
                    found = data.get(part)
                    if isinstance(found, dict):
                        record[part] = {k: v for k, v in found.items() if isinstance(v, dict)}
                record["knobs"] = {k: v for k, v in record["knobs"].items()
                                   if isinstance(v.get("before"), int) and isinstance(v.get("set"), int)}
            try:
                yield record
            finally:
                if record["knobs"] or record["labs"]:
                    write_atomic(self.record, json.dumps(record, indent=2, sort_keys=True) + "\n", mode=0o600)
                else:
                    self.record.unlink(missing_ok=True)
        finally:
            os.close(fd)  # and with it the lock

    def read(self, knob: str) -> int:
        return int((self.root / knob).read_text().split()[0])

    def write(self, knob: str, value: int) -> int:
        """Set KNOB to VALUE; what the kernel holds afterwards (it may round)."""
        (self.root / knob).write_text(str(value))
        return self.read(knob)

    def raise_to(self, lab: str, room: dict[str, int], progress: Progress) -> None:
        """LAB (its state folder) wants ROOM: raise each knob that is lower (never lower one). What was
        done is said once the record is written and unlocked."""
        said: list[tuple[str, str]] = []
        with self._locked() as record:
            record["labs"][os.path.abspath(lab)] = room
            knobs = record["knobs"]
            for knob, value in room.items():
                step = "sessions" if knob.startswith(NETFILTER) else "neighbours"
                try:
                    current = self.read(knob)
                    ours = knobs.get(knob)
                    if ours is not None and not _left_by_a_lab(current, ours):
                        ours = None  # set by someone else since: that is the value to give back to
                        knobs.pop(knob)
                    if current >= value:
                        continue
                    # recorded before the write (an interrupt between the two still leaves a record),
                    # then as the kernel holds it
                    knobs[knob] = {"before": current if ours is None else ours["before"], "set": value}
                    try:
                        knobs[knob]["set"] = self.write(knob, value)
                    except (OSError, ValueError):
                        knobs.pop(knob)
                        if ours is not None:
                            knobs[knob] = ours
                        raise
                    said.append((step, f"{_sysctl_name(knob)} raised to {knobs[knob]['set']}"))
                except (OSError, ValueError):
                    said.append((step, f"{_sysctl_name(knob)} could not be raised to {value}: "
                                       f"`lab doctor` shows the limit"))
        for step, text in said:
            progress(step, text)

    def give_back(self, lab: str, progress: Progress, lower: bool = True) -> None:
        """LAB has gone: each knob a lab raised goes back to the larger of its value before and what the
        labs still up want (a lab whose state folder has gone without `lab down` wants nothing). A knob
        whose value is no longer the one a lab left (someone else set it) is left alone and forgotten.
        With LOWER false only LAB's wants are dropped (a lab the record does not know is still up)."""
        said: list[str] = []
        with self._locked() as record:
            labs = record["labs"]
            labs.pop(os.path.abspath(lab), None)
            for gone in [name for name in labs if not (Path(name) / "state.json").exists()]:
                labs.pop(gone)
            if not lower:
                return
            for knob, ours in list(record["knobs"].items()):
                target = max([ours["before"], *(int(wants.get(knob, 0)) for wants in labs.values())])
                try:
                    current = self.read(knob)
                    if not _left_by_a_lab(current, ours):
                        record["knobs"].pop(knob)
                        continue
                    if current > target:
                        lowered = self.write(knob, target)
                        if lowered != current:
                            said.append(f"{_sysctl_name(knob)} put back to {lowered}")
                        current = ours["set"] = lowered
                except (OSError, ValueError):
                    continue
                if current <= ours["before"]:
                    record["knobs"].pop(knob)
        for text in said:
            progress("kernel", text)
