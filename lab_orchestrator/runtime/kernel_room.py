"""Kernel limits shared by every namespace, raised (never lowered) by `lab up` to a lab's needs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from .. import kinds
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


def sessions(plan: LabPlan, progress: Progress) -> None:
    """The kernel's conntrack limit and hash size are one value for every namespace (read-only
    inside a namespace on this kernel): raise them (never lower them) to services.max_sessions per
    SRX, with a hash for every SRX's table."""
    base = Path("/proc/sys/net/netfilter")
    for name, wanted in conntrack_room(plan.max_sessions, session_tables(plan)).items():
        knob = base / name
        try:
            if int(knob.read_text()) < wanted:
                knob.write_text(str(wanted))
                progress("sessions", f"net.netfilter.{name} raised to {wanted}")
        except (OSError, ValueError):
            progress("sessions", f"net.netfilter.{name} could not be raised to {wanted}: "
                                      f"`lab doctor` shows the limit")
