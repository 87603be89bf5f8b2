"""Consistent-hash (CHASH) selector tables for ECMP toward scale-out SRX firewalls.

A selector table maps every hash bucket (index ``0..n-1``) to the name of one next-hop
member. The kernel hashes a flow to a bucket and forwards it to that bucket's member, so a
flow stays on the same firewall exactly as long as its bucket keeps its member. That is why
every change here moves as few buckets as possible:

* removing a member moves only that member's buckets (spread over the survivors);
* adding a member moves buckets only *to* it, taken evenly from every existing member;
* every table this module returns is balanced (bucket counts differ by at most 1) whenever
  its input was.

Everything is deterministic and depends only on the arguments, never on hash seeds or set
iteration order: two routers (the trust and untrust side, or two MX) that apply the same
changes to the same ordered member list (the "unilist" order, the SRX order from the
topology) compute identical tables. Ties are always broken by that order.

A table with zero buckets, ``SelectorTable()``, means "no next hop": every member is gone
and the dataplane must not forward (the nftables map is left empty, so traffic is dropped).

This module is pure: no I/O, inputs are never mutated.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

# 6400 = 2^8 x 5^2: divisible by 4 and 5 (the JVD's "4 -> 5 SRX moves 5 % from each" is exact, 320
# buckets from each of 1600) and by 64 (64 SRX get exactly 100 each); below 64 members no member's
# share is more than 1 % away from the ideal 1/N (one bucket is at most 1/100 of a share).
DEFAULT_BUCKETS = 6400


@dataclass(frozen=True)
class SelectorTable:
    """Bucket index -> member name. Zero buckets means "no next hop"."""

    buckets: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # Validate here so a table read from JSON or built by hand cannot smuggle in a
        # bucket that the nftables map would render as an empty next hop.
        if not isinstance(self.buckets, tuple):
            kind = type(self.buckets).__name__
            raise TypeError(f"buckets must be a tuple of member names, got {kind}")
        for index, name in enumerate(self.buckets):
            if not isinstance(name, str) or not name:
                raise ValueError(f"bucket {index}: member must be a non-empty string, not {name!r}")

    @property
    def n_buckets(self) -> int:
        return len(self.buckets)

    def members(self) -> tuple[str, ...]:
        """Distinct members, in order of their first bucket."""
        return tuple(dict.fromkeys(self.buckets))

    def share(self, member: str) -> int:
        """Number of buckets held by `member` (0 if it is not in the table)."""
        return self.buckets.count(member)

    def counts(self) -> dict[str, int]:
        """Member -> number of buckets, in order of each member's first bucket."""
        counts: dict[str, int] = {}
        for name in self.buckets:
            counts[name] = counts.get(name, 0) + 1
        return counts

    def to_json(self) -> str:
        return json.dumps({"n_buckets": self.n_buckets, "buckets": list(self.buckets)})

    @classmethod
    def from_json(cls, text: str) -> SelectorTable:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"selector table JSON is malformed: {exc}") from exc
        if not isinstance(data, dict) or not isinstance(data.get("buckets"), list):
            # ValueError, not TypeError: callers loading state treat any bad document alike.
            message = 'selector table JSON must be an object with a "buckets" list'
            raise ValueError(message)  # noqa: TRY004
        buckets = data["buckets"]
        if "n_buckets" in data and data["n_buckets"] != len(buckets):
            declared = data["n_buckets"]
            raise ValueError(f"selector table JSON: n_buckets={declared!r} but {len(buckets)} buckets")
        return cls(tuple(buckets))


def build_initial(members: Sequence[str], n_buckets: int = DEFAULT_BUCKETS) -> SelectorTable:
    """Round-robin table: bucket i -> members[i % N].

    A formula this simple is what lets two routers agree without talking to each other.
    It interleaves members across the index space and gives the first ``n % N`` members
    one extra bucket. It is deliberately identical to `plain_ecmp`: the two modes start
    from the same table and differ only in how they react to membership changes.
    """
    names = _checked_members(members, n_buckets)
    return SelectorTable(tuple(names[i % len(names)] for i in range(n_buckets)))


def plain_ecmp(members: Sequence[str], n_buckets: int = DEFAULT_BUCKETS) -> SelectorTable:
    """Non-consistent ECMP (bucket i -> members[i % N]), recomputed from scratch on every change.

    Kept for side-by-side demos: after a change most buckets land on a different member,
    so most flows hit a firewall that has no session state for them.
    """
    names = _checked_members(members, n_buckets)
    return SelectorTable(tuple(names[i % len(names)] for i in range(n_buckets)))


def remove_member(table: SelectorTable, member: str, order: Sequence[str] | None = None) -> SelectorTable:
    """Hand `member`'s buckets to the survivors; no other bucket changes.

    The buckets go out in index order, each to the survivor holding the fewest buckets, so
    the result is balanced if the input was. Ties go to the survivor that has received
    fewer so far, then to the earlier one in `order` (default: the table's own member order).
    Removing the last member returns the empty "no next hop" table.
    """
    counts = table.counts()
    if member not in counts:
        present = ", ".join(counts) or "none"
        raise ValueError(f"cannot remove {member!r}: not in the selector table (members: {present})")
    del counts[member]
    if not counts:
        return SelectorTable()
    rank = _ranks(table.members(), order or ())
    return _apply(table, _fill_targets(counts, table.n_buckets, rank), rank)


def add_member(table: SelectorTable, member: str, order: Sequence[str]) -> SelectorTable:
    """Give `member` an equal share, ``n // (N + 1)`` buckets, taken evenly from every member.

    Buckets move only to the newcomer, never between existing members. Each step takes from
    the member holding the most buckets (ties: the one that has given fewer, then the later
    one in `order`), and each member gives away its highest-index buckets. On a balanced
    input every member gives within 1 bucket of every other and the result is balanced.
    Re-adding a recovered member is just an add.
    """
    counts = table.counts()
    if not counts:
        raise ValueError("cannot add to an empty table (it has no bucket count); use reconcile()")
    if member in counts:
        raise ValueError(f"cannot add {member!r}: already in the selector table")
    _check_size(len(counts) + 1, table.n_buckets)
    rank = _ranks([*table.members(), member], order)
    share = table.n_buckets // (len(counts) + 1)
    return _apply(table, _drain_targets(counts, member, share, rank), rank)


def reconcile(
    current: SelectorTable | None,
    desired_members: Iterable[str],
    order: Sequence[str],
    n_buckets: int = DEFAULT_BUCKETS,
) -> SelectorTable:
    """Reach the desired member set from `current`, moving the fewest buckets.

    `desired_members` is a set (its order is ignored): the unilist `order` decides ties and
    must contain every desired member. Returns:

    * the empty "no next hop" table if nothing is desired;
    * `build_initial` if there is no current table, it is empty, or `n_buckets` changed
      (bucket indices mean something else after a resize, so nothing can be kept);
    * otherwise a balanced table where the departed members' buckets and any surplus go
      straight to members short of their share. This is the net effect of removals then
      adds computed in one pass, so a replaced member's buckets go directly to its
      replacement instead of bouncing through the survivors. For a single removal or add
      on a balanced table the result equals `remove_member` / `add_member`.
    """
    desired = _in_unilist_order(desired_members, order)
    if not desired:
        return SelectorTable()
    _check_size(len(desired), n_buckets)
    if current is None or current.n_buckets != n_buckets:
        return build_initial(desired, n_buckets)
    counts = current.counts()
    rank = _ranks(desired, order)
    targets = _balanced_targets({m: counts.get(m, 0) for m in desired}, n_buckets, rank)
    return _apply(current, targets, rank)


def moved_buckets(a: SelectorTable, b: SelectorTable) -> int:
    """Buckets whose member differs between `a` and `b`.

    An empty table has no next hop for any bucket, so against it every bucket has moved.
    """
    if not a.buckets or not b.buckets:
        return max(a.n_buckets, b.n_buckets)
    if a.n_buckets != b.n_buckets:
        sizes = f"{a.n_buckets} and {b.n_buckets}"
        raise ValueError(f"cannot compare tables of {sizes} buckets: their indices mean different things")
    return sum(1 for x, y in zip(a.buckets, b.buckets, strict=True) if x != y)


def moved_fraction(a: SelectorTable, b: SelectorTable) -> float:
    """Share of buckets (so of uniformly hashed flows) that changed member; 0.0 if both empty."""
    total = max(a.n_buckets, b.n_buckets)
    return moved_buckets(a, b) / total if total else 0.0


# --- internals -------------------------------------------------------------------------


def _check_size(n_members: int, n_buckets: int) -> None:
    if n_buckets < n_members:
        raise ValueError(
            f"n_buckets={n_buckets} is smaller than the {n_members} members: every member needs at least one bucket"
        )


def _checked_members(members: Sequence[str], n_buckets: int) -> tuple[str, ...]:
    # A bare string is a Sequence[str] too; iterating it would make one member per letter.
    if isinstance(members, str):
        raise TypeError("members must be a sequence of member names, not a single string")
    names = tuple(members)
    if not names:
        raise ValueError("at least one member is required (SelectorTable() means 'no next hop')")
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"duplicate members: {', '.join(duplicates)}")
    _check_size(len(names), n_buckets)
    return names


def _in_unilist_order(desired: Iterable[str], order: Sequence[str]) -> tuple[str, ...]:
    if isinstance(desired, str) or isinstance(order, str):
        raise TypeError("desired_members and order must be collections of names, not one string")
    wanted = set(desired)
    unknown = sorted(wanted.difference(order))
    if unknown:
        raise ValueError(f"desired members missing from the unilist order: {', '.join(unknown)}")
    if len(set(order)) != len(order):
        raise ValueError("the unilist order lists a member more than once")
    return tuple(m for m in order if m in wanted)


def _ranks(names: Iterable[str], order: Sequence[str]) -> dict[str, int]:
    """Tie-break rank: position in `order`; names missing from it come after, as first seen."""
    rank = {name: i for i, name in enumerate(dict.fromkeys(order))}
    for name in names:
        rank.setdefault(name, len(rank))
    return rank


def _balanced_targets(counts: Mapping[str, int], n_buckets: int, rank: Mapping[str, int]) -> dict[str, int]:
    """Final counts differing by at most 1; the extra buckets stay with the biggest holders.

    Giving the ``n % M`` extras to whoever already holds the most maximises the buckets that
    stay put; ties by unilist order.
    """
    base, extra = divmod(n_buckets, len(counts))
    by_size = sorted(counts, key=lambda m: (-counts[m], rank[m]))
    return {m: base + 1 if i < extra else base for i, m in enumerate(by_size)}


def _fill_targets(counts: Mapping[str, int], n_buckets: int, rank: Mapping[str, int]) -> dict[str, int]:
    """Counts after handing out the orphaned buckets one by one to the smallest holder.

    Nobody shrinks, which is what keeps a removal from moving anyone else's buckets even
    when the input table is unbalanced.
    """
    targets = dict(counts)
    for _ in range(n_buckets - sum(counts.values())):
        taker = min(targets, key=lambda m: (targets[m], targets[m] - counts[m], rank[m]))
        targets[taker] += 1
    return targets


def _drain_targets(counts: Mapping[str, int], newcomer: str, share: int, rank: Mapping[str, int]) -> dict[str, int]:
    """Counts after taking `share` buckets one by one from the biggest holder for `newcomer`.

    Among equal holders the one that has given fewer goes first (so everyone gives within 1
    of everyone else), then the later one in unilist order (so, as with the other target
    rules, the earlier members keep the extra buckets).
    """
    targets = dict(counts)
    for _ in range(share):
        giver = max(counts, key=lambda m: (targets[m], targets[m] - counts[m], rank[m]))
        targets[giver] -= 1
    targets[newcomer] = share
    return targets


def _apply(table: SelectorTable, targets: Mapping[str, int], rank: Mapping[str, int]) -> SelectorTable:
    """Move the fewest buckets so that every member ends with exactly its target count."""
    slots = _keep_lowest(table, targets)
    return SelectorTable(_fill_slots(slots, targets, rank))


def _keep_lowest(table: SelectorTable, targets: Mapping[str, int]) -> list[str | None]:
    """Each member keeps its lowest-index buckets up to its target; the rest become free (None)."""
    kept = dict.fromkeys(targets, 0)
    slots: list[str | None] = []
    for name in table.buckets:
        keep = name in kept and kept[name] < targets[name]
        if keep:
            kept[name] += 1
        slots.append(name if keep else None)
    return slots


def _fill_slots(slots: list[str | None], targets: Mapping[str, int], rank: Mapping[str, int]) -> tuple[str, ...]:
    """Hand out free buckets in index order, each to the short member holding the fewest.

    Picking the smallest holder each time interleaves the receivers across the index space
    instead of giving each one a contiguous run; ties: fewer received so far, then rank.
    """
    held = dict.fromkeys(targets, 0)
    for name in slots:
        if name is not None:
            held[name] += 1
    received = dict.fromkeys(targets, 0)
    filled: list[str] = []
    for name in slots:
        if name is None:
            short = (m for m in targets if held[m] < targets[m])
            name = min(short, key=lambda m: (held[m], received[m], rank[m]))
            held[name] += 1
            received[name] += 1
        filled.append(name)
    return tuple(filled)


# --------------------------------------------------------------------------- MNHA pairs
#
# Sessions are synchronised only inside an MNHA pair, so when an SRX of a pair fails its flows
# must land on its peer (which has their sessions), not be spread over every survivor. When it
# comes back, the peer hands back exactly the buckets that were the member's own.


def hand_over(table: SelectorTable, member: str, heir: str) -> SelectorTable:
    """All of `member`'s buckets go to `heir` (its MNHA peer); no other bucket moves. The heir may
    be outside the table (an SRG1 backup becoming active takes over the active's buckets as they are)."""
    counts = table.counts()
    if member not in counts:
        raise ValueError(f"cannot hand over {member!r}: not in the selector table")
    if heir == member:
        raise ValueError("cannot hand over to itself")
    return SelectorTable(tuple(heir if name == member else name for name in table.buckets))


def hand_back(table: SelectorTable, member: str, peer: str, home: SelectorTable) -> SelectorTable:
    """`member` returns: `peer` gives back the buckets whose home (the table before the failure,
    or the initial one) is `member`. If none of them is held by `peer` any more (the layout moved on
    meanwhile), `peer` gives its highest-index half instead. No other bucket moves."""
    if member in table.counts():
        raise ValueError(f"cannot hand back to {member!r}: already in the selector table")
    if peer not in table.counts():
        raise ValueError(f"cannot hand back from {peer!r}: not in the selector table")
    if home.n_buckets != table.n_buckets:
        raise ValueError("home table has another bucket count")
    returning = [b for b, name in enumerate(table.buckets) if name == peer and home.buckets[b] == member]
    if not returning:
        held = [b for b, name in enumerate(table.buckets) if name == peer]
        returning = held[len(held) - len(held) // 2:]
    give = set(returning)
    return SelectorTable(tuple(member if b in give else name for b, name in enumerate(table.buckets)))


def _carries_for(table: SelectorTable, home: SelectorTable, peer: str, member: str) -> bool:
    """Does `peer` carry (at least half of) `member`'s home buckets, i.e. did it take them over?"""
    own = [b for b, name in enumerate(home.buckets) if name == member]
    held = sum(1 for b in own if table.buckets[b] == peer)
    return bool(own) and 2 * held >= len(own)


RESTORE_POLICIES = ("proportional", "keep-buckets")


def restore_member(table: SelectorTable, member: str, own: Iterable[int]) -> SelectorTable:
    """keep-buckets restore: `member` takes back exactly the buckets it held before it left (OWN),
    from whoever holds them now; no other bucket moves, so only the flows that moved away once
    move back and a flow that never touched `member` is never disturbed."""
    if member in table.counts():
        raise ValueError(f"cannot restore {member!r}: already in the selector table")
    give = {b for b in own if 0 <= b < table.n_buckets}
    if not give:
        raise ValueError(f"cannot restore {member!r}: none of its buckets is in this table")
    if len(give) == table.n_buckets:
        return SelectorTable((member,) * table.n_buckets)
    return SelectorTable(tuple(member if b in give else name for b, name in enumerate(table.buckets)))


def reconcile_pairs(
    current: SelectorTable | None,
    desired_members: Iterable[str],
    order: Sequence[str],
    peers: Mapping[str, str],
    home: SelectorTable | None = None,
    n_buckets: int = DEFAULT_BUCKETS,
    policy: str = "proportional",
    remembered: Mapping[str, Sequence[int]] | None = None,
) -> SelectorTable:
    """Like `reconcile`, but a member of an MNHA pair fails over to, and back from, its peer.

    A departing member whose peer stays hands all its buckets to the peer; a returning member
    whose peer carries its buckets takes them back (see `hand_back`). Members without an alive
    peer go through the ordinary CHASH remove/add. `home` is the layout to return to (default:
    the initial table of `order`).

    POLICY says how any other returning member comes back: "proportional" (the Junos-like default:
    an ECMP addition, it takes an equal share from every member, `add_member`) or "keep-buckets"
    (it gets back exactly the buckets it had, `restore_member`: REMEMBERED[member] when the
    caller kept them, else its buckets in the initial table of `order`). A member never seen
    before (no remembered or initial buckets) is always added proportionally."""
    if policy not in RESTORE_POLICIES:
        raise ValueError(f"unknown restore policy {policy!r} (one of {', '.join(RESTORE_POLICIES)})")
    desired = list(_in_unilist_order(desired_members, order))
    if not desired:
        return SelectorTable()
    if current is None or current.n_buckets != n_buckets or not current.n_buckets:
        return build_initial(desired, n_buckets)
    if home is None and len(order) <= n_buckets:
        home = build_initial(list(order), n_buckets)
    table = current
    for member in [m for m in table.members() if m not in desired]:
        heir = peers.get(member)
        table = hand_over(table, member, heir) if heir in desired else remove_member(table, member, order)
    for member in [m for m in desired if m not in table.counts()]:
        peer = peers.get(member)
        if not table.n_buckets:
            table = build_initial([member], n_buckets)
        elif home is not None and peer in table.counts() and _carries_for(table, home, peer, member):
            table = hand_back(table, member, peer, home)
        elif policy == "keep-buckets" and (own := _own_buckets(member, remembered, home, table)) and \
                set((kept := restore_member(table, member, own)).counts()) == {*table.counts(), member}:
            table = kept  # (a member that would lose every bucket to it keeps the proportional add)
        else:
            table = add_member(table, member, order)
    return table


def _own_buckets(member: str, remembered: Mapping[str, Sequence[int]] | None, home: SelectorTable | None,
                 table: SelectorTable) -> list[int]:
    """The buckets `member` held before it left: as remembered, else in the home (initial) table."""
    own = [b for b in (remembered or {}).get(member, ()) if 0 <= b < table.n_buckets]
    if not own and home is not None and home.n_buckets == table.n_buckets:
        own = [b for b, name in enumerate(home.buckets) if name == member]
    return own
