"""Kernel limits shared by every namespace, raised (never lowered) by `lab up` to a lab's needs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..plan.plantypes import LabPlan

Progress = Callable[[str, str], None]


def neighbours(plan: LabPlan, progress: Progress) -> None:
    """The kernel's ARP table limit (gc_thresh3, 1024 by default) counts the entries of every
    namespace together: past it, a new neighbour fails with ENOBUFS and a BGP session stays in
    Connect. Raise it (never lower it) to room for this lab's ends four times over."""
    ends = 2 * (len(plan.veths) + len(plan.mgmt.ports))
    base = Path("/proc/sys/net/ipv4/neigh/default")
    for name, wanted in (("gc_thresh2", 2 * ends), ("gc_thresh3", 4 * ends)):
        knob = base / name
        try:
            if int(knob.read_text()) < wanted:
                knob.write_text(str(wanted))
                progress("neighbours", f"net.ipv4.neigh.default.{name} raised to {wanted}")
        except (OSError, ValueError):
            pass  # not writable here: a big lab may then miss neighbours, as without this step


def conntrack_room(max_sessions: int) -> dict[str, int]:
    """The conntrack knobs a lab of MAX_SESSIONS needs: as many entries, and a hash of a quarter as many
    buckets (`lab doctor` checks the same values)."""
    return {"nf_conntrack_max": max_sessions, "nf_conntrack_buckets": max_sessions // 4}


def sessions(plan: LabPlan, progress: Progress) -> None:
    """The kernel's conntrack limit and hash size are one value for every namespace (read-only
    inside a namespace on this kernel): raise them (never lower them) to services.max_sessions,
    with a hash of a quarter as many buckets."""
    base = Path("/proc/sys/net/netfilter")
    for name, wanted in conntrack_room(plan.max_sessions).items():
        knob = base / name
        try:
            if int(knob.read_text()) < wanted:
                knob.write_text(str(wanted))
                progress("sessions", f"net.netfilter.{name} raised to {wanted}")
        except (OSError, ValueError):
            progress("sessions", f"net.netfilter.{name} could not be raised to {wanted}: "
                                      f"`lab doctor` shows the limit")
