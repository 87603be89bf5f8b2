"""Expected movers from the MX selector's own tables (pure).

The events runner samples every MX's published selector table (bucket -> member) while an event
runs. A flow's bucket is the selector's hash of its subscriber address (`dataplane.core.nfthash`), so
the flows that a phase (the event, its restore, an add or a delete) must move are exactly those
whose bucket's member changed at some point inside that phase, on some MX. Losses on any other
flow are "unaffected" losses. Nothing here is inferred from the same observations as the losses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from dataplane.core.nfthash import bucket

VIA = "@"  # a table entry "member@via": the member and the node that carries it (TLB per MNHA pair)


def member_count(table: Sequence[str]) -> int:
    """Distinct members of a table (entries may carry "@via")."""
    return len({entry.split(VIA, 1)[0] for entry in table})


@dataclass(frozen=True)
class TableSample:
    """One MX's selector table as published at monotonic time AT (seconds); () = no next hop."""

    at: float
    node: str
    table: tuple[str, ...]
    changes: int = 0  # the selector's change counter (a jump > 1 between samples: a table was missed)


@dataclass(frozen=True)
class Phase:
    """A named time window [start, end) of an event run (monotonic seconds)."""

    name: str
    start: float
    end: float = float("inf")


def flow_buckets(addresses: Mapping[int, str], buckets: int, seed: int) -> dict[int, int]:
    """Flow id -> its bucket under the selector's jhash (the subscriber address is the key)."""
    return {flow: bucket(address, buckets, seed) for flow, address in addresses.items()}


def window(samples: Sequence[TableSample], phase: Phase) -> list[TableSample]:
    """The samples of one MX that frame PHASE: the last one before it started, then those inside it."""
    ordered = sorted(samples, key=lambda s: s.at)
    before = [s for s in ordered if s.at < phase.start]
    inside = [s for s in ordered if phase.start <= s.at < phase.end]
    return before[-1:] + inside


def changed_buckets(tables: Sequence[tuple[str, ...]]) -> set[int]:
    """Buckets whose member differs between any two consecutive tables (a resize: every bucket)."""
    out: set[int] = set()
    for a, b in zip(tables, tables[1:], strict=False):
        if len(a) != len(b):
            out.update(range(max(len(a), len(b))))
            continue
        out.update(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
    return out


def phase_movers(samples: Iterable[TableSample], phase: Phase, buckets_of: Mapping[int, int]) -> set[int]:
    """Flow ids whose bucket changed member inside PHASE on any MX."""
    by_node: dict[str, list[TableSample]] = {}
    for s in samples:
        by_node.setdefault(s.node, []).append(s)
    moved: set[int] = set()
    for node_samples in by_node.values():
        tables = [s.table for s in window(node_samples, phase)]
        changed = changed_buckets(tables)
        moved.update(flow for flow, b in buckets_of.items() if b in changed)
    return moved


def disagreeing_buckets(samples: Iterable[TableSample], phase: Phase) -> set[int]:
    """Buckets whose member differs between two MXs' tables at some moment of PHASE (their tables as
    they stood when it started, then after each change). Each MX keeps its own table (after an MX
    reboot, or a link failure only one MX saw, they differ); a flow whose gateway switches MX (SRD
    mastership changes, both masters on an inter-MX link failure) lands on the other MX's member."""
    by_node: dict[str, list[TableSample]] = {}
    for s in samples:
        by_node.setdefault(s.node, []).append(s)
    if len(by_node) < 2:
        return set()
    framed = sorted((s for node_samples in by_node.values() for s in window(node_samples, phase)),
                    key=lambda s: s.at)
    current: dict[str, tuple[str, ...]] = {}
    out: set[int] = set()
    for sample in framed:
        current[sample.node] = sample.table
        tables = [t for t in current.values() if t]
        for a, b in zip(tables, tables[1:], strict=False):
            if len(a) == len(b):
                out.update(i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y)
    return out


def missed_tables(samples: Iterable[TableSample]) -> int:  # counts the selector's own changes only
    """Table changes that happened between two samples of the same MX (not seen by the sampler)."""
    by_node: dict[str, list[TableSample]] = {}
    for s in samples:
        by_node.setdefault(s.node, []).append(s)
    missed = 0
    for node_samples in by_node.values():
        ordered = sorted(node_samples, key=lambda s: s.at)
        missed += sum(max(0, b.changes - a.changes - 1) for a, b in zip(ordered, ordered[1:], strict=False))
    return missed


def share_ideal(flows: int, members_after: int, changed: int = 1) -> int:
    """Flows an ideal CHASH change of CHANGED members moves (a pair powered off, a spare pair added:
    two): their share of the larger member set, flows * changed / members."""
    return round(flows * changed / members_after) if members_after else flows


def share_of_change(first: int, last: int) -> float:
    """The share of the table an ideal change from FIRST to LAST members moves: the members that left
    (or joined) over the larger set; 0 when the count did not change."""
    return round(abs(first - last) / max(first, last), 5) if first != last else 0
