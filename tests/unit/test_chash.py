"""Unit tests for dataplane.core.chash: balance, minimal movement, determinism, errors.

Properties are checked against facts computed here from the tables themselves (counts,
per-index diffs, an independent lower bound on moves), never by re-running the algorithm.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import random
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from dataplane.core.chash import (
    DEFAULT_BUCKETS,
    SelectorTable,
    add_member,
    build_initial,
    moved_buckets,
    moved_fraction,
    plain_ecmp,
    reconcile,
    remove_member,
)

try:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    HAVE_HYPOTHESIS = True
except ImportError:  # the fixed-seed random tests below cover the same properties
    HAVE_HYPOTHESIS = False

REPO_ROOT = Path(__file__).resolve().parents[2]
BUCKET_COUNTS = (1, 5, 16, 17, 64, 100, 255, 256)


def names(count: int, prefix: str = "srx") -> list[str]:
    return [f"{prefix}{i}" for i in range(1, count + 1)]


def sizes(min_members: int) -> list[tuple[int, int]]:
    """(N, n_buckets) pairs for N = 1..16 members, skipping tables too small to hold them."""
    return [(n, b) for n in range(max(1, min_members), 17) for b in BUCKET_COUNTS if b >= n]


def balanced_starts(members: list[str], n_buckets: int) -> list[SelectorTable]:
    """Balanced tables over `members` whose extra buckets sit at the start, end and middle of `members`.

    Tie-breaking rules only show when the biggest holders are not simply the earliest members of
    the unilist order, as they always are in a fresh build_initial table.
    """
    shuffled = random.Random(len(members) * 1000 + n_buckets).sample(members, len(members))
    orderings = [members, members[::-1], shuffled]
    return [build_initial(ordering, n_buckets) for ordering in orderings]


def imbalance(table: SelectorTable) -> int:
    counts = [table.buckets.count(m) for m in set(table.buckets)]
    return max(counts) - min(counts)


def changed(a: SelectorTable, b: SelectorTable) -> list[int]:
    return [i for i, (x, y) in enumerate(zip(a.buckets, b.buckets, strict=True)) if x != y]


def min_moves(current: SelectorTable, desired: set[str]) -> int:
    """Independent lower bound on buckets that must move to reach a balanced `desired` table.

    With M members every final count is base or base+1 (`extra` members get base+1). A
    survivor holding c buckets keeps at most min(c, target); an extra bucket saves a move
    only for a survivor that already holds more than base.
    """
    n = current.n_buckets
    base, extra = divmod(n, len(desired))
    held = [current.buckets.count(m) for m in desired]
    kept = sum(min(c, base) for c in held) + min(extra, sum(1 for c in held if c > base))
    return n - kept


# --- SelectorTable ---------------------------------------------------------------------


def test_table_helpers() -> None:
    table = SelectorTable(("b", "a", "b", "c", "b"))
    assert table.n_buckets == 5
    assert table.members() == ("b", "a", "c")
    assert table.share("b") == 3
    assert table.share("a") == 1
    assert table.share("zzz") == 0
    assert table.counts() == {"b": 3, "a": 1, "c": 1}
    assert list(table.counts()) == ["b", "a", "c"]


def test_empty_table_means_no_next_hop() -> None:
    empty = SelectorTable()
    assert empty.n_buckets == 0
    assert empty.members() == ()
    assert empty.counts() == {}


def test_table_is_frozen() -> None:
    table = build_initial(["a", "b"], 4)
    with pytest.raises(dataclasses.FrozenInstanceError):
        table.buckets = ("a",) * 4  # type: ignore[misc]


@pytest.mark.parametrize("bad", [("a", ""), ("a", None), ("a", 3)])
def test_table_rejects_bad_member_names(bad: tuple[object, ...]) -> None:
    with pytest.raises(ValueError, match="bucket 1"):
        SelectorTable(bad)  # type: ignore[arg-type]


def test_table_rejects_list() -> None:
    with pytest.raises(TypeError, match="tuple"):
        SelectorTable(["a", "b"])  # type: ignore[arg-type]


@pytest.mark.parametrize("table", [SelectorTable(), build_initial(names(5)), SelectorTable(("x", "y", "x"))])
def test_json_round_trip(table: SelectorTable) -> None:
    text = table.to_json()
    assert json.loads(text) == {"n_buckets": table.n_buckets, "buckets": list(table.buckets)}
    assert SelectorTable.from_json(text) == table


def test_from_json_accepts_missing_n_buckets() -> None:
    assert SelectorTable.from_json('{"buckets": ["a", "b"]}') == SelectorTable(("a", "b"))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", "malformed"),
        ('["a", "b"]', "object"),
        ('{"members": ["a"]}', "buckets"),
        ('{"buckets": "ab"}', "buckets"),
        ('{"n_buckets": 3, "buckets": ["a", "b"]}', "n_buckets=3"),
        ('{"buckets": ["a", ""]}', "non-empty"),
        ('{"buckets": ["a", 7]}', "non-empty"),
    ],
)
def test_from_json_rejects_malformed(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SelectorTable.from_json(text)


# --- build_initial ---------------------------------------------------------------------


@pytest.mark.parametrize(("n_members", "n_buckets"), sizes(1))
def test_initial_is_balanced_and_complete(n_members: int, n_buckets: int) -> None:
    members = names(n_members)
    table = build_initial(members, n_buckets)
    assert table.n_buckets == n_buckets
    assert set(table.buckets) == set(members)
    assert imbalance(table) <= 1
    # The extra buckets go to the first members of the unilist order.
    shares = [table.share(m) for m in members]
    assert shares == sorted(shares, reverse=True)
    assert sum(1 for s in shares if s > n_buckets // n_members) == n_buckets % n_members


@pytest.mark.parametrize(("n_members", "n_buckets"), sizes(1))
def test_initial_is_round_robin(n_members: int, n_buckets: int) -> None:
    members = names(n_members)
    table = build_initial(members, n_buckets)
    assert all(table.buckets[i] == members[i % n_members] for i in range(n_buckets))


def test_initial_small_example_and_default_size() -> None:
    assert build_initial(["a", "b", "c"], 8).buckets == ("a", "b", "c", "a", "b", "c", "a", "b")
    table = build_initial(names(5))
    assert table.n_buckets == DEFAULT_BUCKETS == 6400
    assert [table.share(m) for m in names(5)] == [1280] * 5
    assert [build_initial(names(5), 64).share(m) for m in names(5)] == [13, 13, 13, 13, 12]


def test_initial_depends_on_member_order_only() -> None:
    members = names(7)
    assert build_initial(members, 64) == build_initial(tuple(members), 64)
    assert build_initial(members, 64) == build_initial(list(members), 64)
    assert build_initial(members, 64) != build_initial(list(reversed(members)), 64)


@pytest.mark.parametrize("build", [build_initial, plain_ecmp])
def test_builders_reject_bad_input(build: Callable[[Sequence[str], int], SelectorTable]) -> None:
    with pytest.raises(ValueError, match="at least one member"):
        build([], 64)
    with pytest.raises(ValueError, match="duplicate members: a"):
        build(["a", "b", "a"], 64)
    with pytest.raises(ValueError, match="n_buckets=3 is smaller than the 4 members"):
        build(names(4), 3)
    with pytest.raises(ValueError, match="n_buckets=0"):
        build(["a"], 0)
    with pytest.raises(TypeError, match="single string"):
        build("abc", 64)
    with pytest.raises(ValueError, match="non-empty"):
        build(["a", ""], 64)


# --- remove_member ---------------------------------------------------------------------


@pytest.mark.parametrize(("n_members", "n_buckets"), sizes(2))
def test_remove_moves_only_the_removed_members_buckets(n_members: int, n_buckets: int) -> None:
    members = names(n_members)
    for before, gone in ((t, m) for t in balanced_starts(members, n_buckets) for m in members):
        after = remove_member(before, gone, members)
        assert after.n_buckets == n_buckets
        # Every bucket of a survivor is untouched; every bucket of the removed one moved.
        for old, new in zip(before.buckets, after.buckets, strict=True):
            assert new != gone
            assert new == old or old == gone
        assert moved_buckets(before, after) == before.share(gone)
        assert set(after.buckets) == set(members) - {gone}
        assert imbalance(after) <= 1


@pytest.mark.parametrize(("n_members", "n_buckets"), sizes(3))
def test_remove_spreads_evenly_over_survivors(n_members: int, n_buckets: int) -> None:
    members = names(n_members)
    for before, gone in ((t, m) for t in balanced_starts(members, n_buckets) for m in members):
        after = remove_member(before, gone, members)
        received = [after.share(m) - before.share(m) for m in members if m != gone]
        assert min(received) >= 0
        assert max(received) - min(received) <= 1
        # Handed out one at a time to the smallest holder: balanced after every single bucket,
        # so the receivers interleave instead of each taking a contiguous run.
        held = {m: before.share(m) for m in members if m != gone}
        for i in changed(before, after):
            held[after.buckets[i]] += 1
            assert max(held.values()) - min(held.values()) <= 1


def test_remove_small_example_breaks_ties_by_order() -> None:
    table = build_initial(["a", "b", "c", "d"], 8)  # a b c d a b c d
    # b's buckets 1 and 5 go to the least loaded survivors, earliest in order first.
    assert remove_member(table, "b").buckets == ("a", "a", "c", "d", "a", "c", "c", "d")
    reverse = ["d", "c", "b", "a"]
    assert remove_member(table, "b", reverse).buckets == ("a", "d", "c", "d", "a", "c", "c", "d")


def test_remove_interleaves_receivers() -> None:
    table = build_initial(["a", "b", "c"], 12)  # a b c a b c a b c a b c
    after = remove_member(table, "a")
    assert [after.buckets[i] for i in (0, 3, 6, 9)] == ["b", "c", "b", "c"]


def test_remove_fills_the_smallest_holders_first() -> None:
    # c holds 4, a and b hold 2: both of a's buckets go to b.
    table = SelectorTable(tuple("abccabcc"))
    assert "".join(remove_member(table, "a").buckets) == "bbccbbcc"


def test_remove_ties_go_to_fewer_received_then_order() -> None:
    # a holds 2, b holds 3, d's buckets are 2 and 5. Bucket 2 goes to a (smaller); then a and
    # b both hold 3 and b takes bucket 5 because a has already received one: each survivor
    # gets one bucket rather than a getting both.
    table = SelectorTable(tuple("abdbadb"))
    assert "".join(remove_member(table, "d", ["a", "b", "d"]).buckets) == "abababb"
    # All equal: the earliest in order wins, whichever order is given.
    table = SelectorTable(tuple("abcabcdd"))
    assert remove_member(table, "d", ["a", "b", "c", "d"]).buckets[6:] == ("a", "b")
    assert remove_member(table, "d", ["c", "b", "a", "d"]).buckets[6:] == ("c", "b")


def test_remove_from_unbalanced_table_still_moves_only_that_member() -> None:
    table = SelectorTable(("a", "a", "a", "a", "a", "b", "c", "d"))
    after = remove_member(table, "d")
    assert changed(table, after) == [7]
    assert after.buckets[7] == "b"  # the smallest holders (b, c) tie; b is earlier


def test_remove_last_member_gives_no_next_hop() -> None:
    assert remove_member(build_initial(["a"], 16), "a") == SelectorTable()


def test_remove_unknown_member_is_an_error() -> None:
    with pytest.raises(ValueError, match="'zz'.*members: a, b"):
        remove_member(build_initial(["a", "b"], 4), "zz")
    with pytest.raises(ValueError, match="members: none"):
        remove_member(SelectorTable(), "a")


# --- add_member ------------------------------------------------------------------------


@pytest.mark.parametrize(("n_members", "n_buckets"), [(n, b) for n, b in sizes(1) if b > n])
def test_add_takes_evenly_and_only_for_the_newcomer(n_members: int, n_buckets: int) -> None:
    members = names(n_members)
    order = [*members, "new"]
    for before in balanced_starts(members, n_buckets):
        check_add(before, members, order)


def check_add(before: SelectorTable, members: list[str], order: list[str]) -> None:
    n_members, n_buckets = len(members), before.n_buckets
    after = add_member(before, "new", order)
    moved = changed(before, after)
    # Buckets only move to the newcomer: no shuffling between existing members.
    assert all(after.buckets[i] == "new" for i in moved)
    assert after.share("new") == n_buckets // (n_members + 1) == len(moved)
    assert len(moved) <= math.ceil(n_buckets / (n_members + 1))
    assert moved_fraction(before, after) <= 1 / (n_members + 1) + 1 / n_buckets
    given_away = [before.share(m) - after.share(m) for m in members]
    assert max(given_away) - min(given_away) <= 1
    assert imbalance(after) <= 1


@pytest.mark.parametrize(("n_members", "n_buckets"), [(4, 64), (5, 64), (7, 100), (3, 17)])
def test_add_gives_away_highest_index_buckets(n_members: int, n_buckets: int) -> None:
    members = names(n_members)
    before = build_initial(members, n_buckets)
    after = add_member(before, "new", [*members, "new"])
    for member in members:
        kept = [i for i, m in enumerate(after.buckets) if m == member]
        lost = [i for i in changed(before, after) if before.buckets[i] == member]
        if kept and lost:
            assert min(lost) > max(kept)


def test_add_small_examples_break_ties_by_order() -> None:
    three = build_initial(["a", "b", "c"], 8)  # a b c a b c a b: a and b hold 3
    assert add_member(three, "d", ["a", "b", "c", "d"]).buckets == (("a", "b", "c", "a", "b", "c", "d", "d"))
    four = build_initial(["a", "b", "c", "d"], 8)  # 2 each, the newcomer gets 8 // 5 = 1
    # The latest member in order gives, so the earliest ones keep the extra buckets.
    assert add_member(four, "e", ["a", "b", "c", "d", "e"]).buckets[7] == "e"
    assert add_member(four, "e", ["d", "c", "b", "a", "e"]).buckets[4] == "e"


@pytest.mark.parametrize(
    ("buckets", "expected"),
    [
        # a holds 4, b 3: the newcomer takes one from each (their highest-index buckets 5
        # and 6), not two from the bigger one.
        ("abababa", "ababacc"),
        # Same with the bigger holder later in order (b), so order alone cannot explain it.
        ("abababb", "ababcbc"),
    ],
)
def test_add_takes_one_from_each_of_two(buckets: str, expected: str) -> None:
    after = add_member(SelectorTable(tuple(buckets)), "c", ["a", "b", "c"])
    assert "".join(after.buckets) == expected
    assert sorted(after.share(m) for m in "abc") == [2, 2, 3]


def test_add_errors() -> None:
    table = build_initial(names(4), 4)
    with pytest.raises(ValueError, match="already in"):
        add_member(table, "srx2", names(4))
    with pytest.raises(ValueError, match="n_buckets=4 is smaller than the 5 members"):
        add_member(table, "srx5", names(5))
    with pytest.raises(ValueError, match="empty table"):
        add_member(SelectorTable(), "a", ["a"])
    with pytest.raises(ValueError, match="non-empty"):
        add_member(build_initial(["a"], 4), "", ["a"])


@pytest.mark.parametrize(("n_members", "n_buckets"), sizes(2))
def test_remove_then_readd_is_balanced(n_members: int, n_buckets: int) -> None:
    members = names(n_members)
    for table, member in ((t, m) for t in balanced_starts(members, n_buckets) for m in members):
        degraded = remove_member(table, member, members)
        recovered = add_member(degraded, member, members)
        assert set(recovered.buckets) == set(members)
        assert imbalance(recovered) <= 1
        assert recovered.share(member) == n_buckets // n_members
        assert all(recovered.buckets[i] == member for i in changed(degraded, recovered))


def test_long_churn_of_single_changes_stays_balanced() -> None:
    rng = random.Random(20240611)
    order = names(12)
    for n_buckets in (16, 64, 256):
        table = build_initial(order[:6], n_buckets)
        for _ in range(200):
            present = set(table.buckets)
            absent = [m for m in order if m not in present]
            if len(present) > 1 and (not absent or rng.random() < 0.5):
                gone = rng.choice(sorted(present))
                after = remove_member(table, gone, order)
                assert moved_buckets(table, after) == table.share(gone)
            else:
                after = add_member(table, rng.choice(absent), order)
                assert moved_buckets(table, after) == n_buckets // (len(present) + 1)
            assert imbalance(after) <= 1
            table = after


# --- reconcile -------------------------------------------------------------------------


def test_reconcile_without_current_builds_initial_in_unilist_order() -> None:
    order = names(6)
    desired = {"srx5", "srx2", "srx3"}
    expected = build_initial(["srx2", "srx3", "srx5"], 32)
    assert reconcile(None, desired, order, 32) == expected
    assert reconcile(SelectorTable(), ["srx5", "srx3", "srx2"], order, 32) == expected


def test_reconcile_to_nothing_is_no_next_hop() -> None:
    table = build_initial(names(3), 16)
    assert reconcile(table, [], names(3), 16) == SelectorTable()
    assert reconcile(None, set(), names(3), 16).n_buckets == 0


def test_reconcile_same_members_changes_nothing() -> None:
    table = remove_member(build_initial(names(5), 64), "srx3")
    assert reconcile(table, table.members(), names(5), 64) == table


def test_reconcile_resize_rebuilds() -> None:
    table = build_initial(names(4), 64)
    assert reconcile(table, names(4), names(4), 256) == build_initial(names(4), 256)


def test_reconcile_swap_moves_only_the_replaced_members_buckets() -> None:
    order = names(6)
    for n_buckets in (16, 17, 64, 100, 256):
        table = build_initial(order[:5], n_buckets)
        after = reconcile(table, [*order[:2], *order[3:5], "srx6"], order, n_buckets)
        assert moved_buckets(table, after) == table.share("srx3")
        assert all(table.buckets[i] == "srx3" for i in changed(table, after))
        assert imbalance(after) <= 1
        # Removing then adding would have shuffled twice as much.
        stepwise = add_member(remove_member(table, "srx3", order), "srx6", order)
        assert moved_buckets(table, stepwise) > moved_buckets(table, after)


@pytest.mark.parametrize(("n_members", "n_buckets"), sizes(2))
def test_reconcile_single_change_matches_single_operations(n_members: int, n_buckets: int) -> None:
    order = names(n_members + 1)
    members = order[:n_members]
    for table in balanced_starts(members, n_buckets):
        for gone in members:
            rest = [m for m in members if m != gone]
            assert reconcile(table, rest, order, n_buckets) == remove_member(table, gone, order)
        if n_buckets > n_members:
            added = reconcile(table, order, order, n_buckets)
            assert added == add_member(table, order[-1], order)


def test_reconcile_errors() -> None:
    table = build_initial(names(3), 8)
    with pytest.raises(ValueError, match="missing from the unilist order: ghost"):
        reconcile(table, ["srx1", "ghost"], names(3), 8)
    with pytest.raises(ValueError, match="more than once"):
        reconcile(table, ["srx1"], ["srx1", "srx2", "srx1"], 8)
    with pytest.raises(ValueError, match="n_buckets=2 is smaller than the 3 members"):
        reconcile(None, names(3), names(3), 2)
    with pytest.raises(TypeError, match="one string"):
        reconcile(table, "srx1", names(3), 8)


def check_reconcile(current: SelectorTable, desired: set[str], order: list[str]) -> SelectorTable:
    """Every property reconcile promises, for one (current, desired) pair."""
    n_buckets = current.n_buckets
    after = reconcile(current, desired, order, n_buckets)
    assert set(after.buckets) == desired
    assert after.n_buckets == n_buckets
    assert imbalance(after) <= 1
    assert moved_buckets(current, after) == min_moves(current, desired)
    # A bucket only moves away from a departed or shrinking member, to a growing one.
    for i in changed(current, after):
        old, new = current.buckets[i], after.buckets[i]
        assert old not in desired or after.share(old) < current.share(old)
        assert after.share(new) > current.share(new)
    assert reconcile(current, sorted(desired, reverse=True), order, n_buckets) == after
    return after


@pytest.mark.parametrize("seed", range(40))
def test_reconcile_random_sequences(seed: int) -> None:
    rng = random.Random(seed)
    order = names(rng.randint(1, 12))
    n_buckets = rng.choice([b for b in BUCKET_COUNTS if b >= len(order)])
    table = build_initial(rng.sample(order, rng.randint(1, len(order))), n_buckets)
    for _ in range(8):
        desired = set(rng.sample(order, rng.randint(1, len(order))))
        table = check_reconcile(table, desired, order)


@pytest.mark.parametrize("seed", range(40))
def test_reconcile_rebalances_arbitrary_tables(seed: int) -> None:
    rng = random.Random(1000 + seed)
    order = names(rng.randint(1, 10))
    n_buckets = rng.choice([16, 17, 64, 100])
    # Deliberately lopsided (e.g. hand-written JSON): reconcile still converges minimally.
    weights = [rng.random() ** 3 for _ in order]
    current = SelectorTable(tuple(rng.choices(order, weights, k=n_buckets)))
    desired = set(rng.sample(order, rng.randint(1, len(order))))
    check_reconcile(current, desired, order)


if HAVE_HYPOTHESIS:

    @settings(max_examples=300, deadline=None, derandomize=True, database=None)
    @given(
        n_order=st.integers(1, 12),
        n_buckets=st.sampled_from([12, 16, 17, 31, 64, 100, 256]),
        data=st.data(),
    )
    def test_reconcile_properties_hypothesis(n_order: int, n_buckets: int, data: st.DataObject) -> None:
        order = names(n_order)
        start = data.draw(st.lists(st.sampled_from(order), min_size=1, unique=True))
        table = build_initial([m for m in order if m in start], n_buckets)
        steps = data.draw(st.lists(st.sets(st.sampled_from(order), min_size=1), min_size=1, max_size=6))
        for desired in steps:
            table = check_reconcile(table, desired, order)


# --- plain ECMP and movement metrics ---------------------------------------------------


@pytest.mark.parametrize(("n_members", "n_buckets"), sizes(1))
def test_plain_ecmp_starts_where_chash_starts(n_members: int, n_buckets: int) -> None:
    members = names(n_members)
    assert plain_ecmp(members, n_buckets) == build_initial(members, n_buckets)


@pytest.mark.parametrize("n_buckets", [64, 256])
@pytest.mark.parametrize("n_members", range(4, 17))
def test_plain_ecmp_moves_much_more_than_chash(n_members: int, n_buckets: int) -> None:
    members = names(n_members)
    table = build_initial(members, n_buckets)
    for gone in members:
        chash = moved_fraction(table, remove_member(table, gone, members))
        plain = moved_fraction(table, plain_ecmp([m for m in members if m != gone], n_buckets))
        assert chash <= 1 / n_members + 1 / n_buckets
        assert plain >= 0.5
        assert plain > 2.5 * chash
    order = [*members, "new"]
    chash_add = moved_fraction(table, add_member(table, "new", order))
    plain_add = moved_fraction(table, plain_ecmp(order, n_buckets))
    assert plain_add > 2.5 * chash_add


def test_moved_metrics() -> None:
    a = SelectorTable(("a", "b", "c", "d"))
    b = SelectorTable(("a", "c", "c", "a"))
    assert moved_buckets(a, b) == moved_buckets(b, a) == 2
    assert moved_fraction(a, b) == 0.5
    assert moved_buckets(a, a) == 0
    assert moved_fraction(a, a) == 0.0


def test_moved_metrics_with_no_next_hop() -> None:
    table = build_initial(["a", "b"], 16)
    assert moved_buckets(SelectorTable(), table) == moved_buckets(table, SelectorTable()) == 16
    assert moved_fraction(table, SelectorTable()) == 1.0
    assert moved_buckets(SelectorTable(), SelectorTable()) == 0
    assert moved_fraction(SelectorTable(), SelectorTable()) == 0.0


def test_moved_metrics_reject_different_sizes() -> None:
    with pytest.raises(ValueError, match="16 and 64 buckets"):
        moved_buckets(build_initial(["a"], 16), build_initial(["a"], 64))


# --- determinism across processes ------------------------------------------------------

_SCENARIO = """
from dataplane.core.chash import add_member, build_initial, reconcile, remove_member
order = [f"srx{i}" for i in range(1, 11)]
t = build_initial(order[:6], 64)
t = remove_member(t, "srx3", order)
t = add_member(t, "srx8", order)
t = reconcile(t, {"srx1", "srx3", "srx9", "srx10", "srx5"}, order, 64)
t = reconcile(t, set(order), order, 64)
print(t.to_json())
"""


def test_independent_routers_compute_identical_tables() -> None:
    """Two processes with different string-hash seeds (two routers) must agree exactly."""
    outputs = []
    for hash_seed in ("1", "2", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed, "PYTHONPATH": str(REPO_ROOT)}
        result = subprocess.run(
            [sys.executable, "-c", _SCENARIO],
            capture_output=True,
            check=True,
            cwd=REPO_ROOT,
            env=env,
            text=True,
        )
        outputs.append(result.stdout)
    assert outputs[0] == outputs[1] == outputs[2]
    table = SelectorTable.from_json(outputs[0])
    assert set(table.buckets) == {f"srx{i}" for i in range(1, 11)}
    assert imbalance(table) <= 1
