"""MNHA-aware selector changes: a failed SRX's flows go to its pair peer, and come back from it."""

from __future__ import annotations

import itertools
import random

import pytest

from dataplane.core.chash import SelectorTable, build_initial, hand_back, hand_over, moved_buckets, reconcile_pairs

ORDER = ["srx1", "srx2", "srx3", "srx4"]
PEERS = {"srx1": "srx2", "srx2": "srx1", "srx3": "srx4", "srx4": "srx3"}


@pytest.mark.parametrize("buckets", [8, 64, 100, 256])
@pytest.mark.parametrize("member", ORDER)
def test_failure_hands_every_bucket_to_the_peer_and_nothing_else_moves(buckets: int, member: str) -> None:
    table = build_initial(ORDER, buckets)
    after = reconcile_pairs(table, [m for m in ORDER if m != member], ORDER, PEERS, n_buckets=buckets)
    for b, (old, new) in enumerate(zip(table.buckets, after.buckets, strict=True)):
        if old == member:
            assert new == PEERS[member], f"bucket {b} went to {new}, not the peer"
        else:
            assert new == old, f"bucket {b} of a healthy member moved"


@pytest.mark.parametrize("member", ORDER)
def test_return_takes_back_exactly_its_own_buckets(member: str) -> None:
    table = build_initial(ORDER, 64)
    failed = reconcile_pairs(table, [m for m in ORDER if m != member], ORDER, PEERS, n_buckets=64)
    back = reconcile_pairs(failed, ORDER, ORDER, PEERS, n_buckets=64)
    assert back == table
    assert moved_buckets(failed, back) == table.share(member)


def test_whole_pair_down_spreads_over_the_other_pair_then_comes_back_by_chash() -> None:
    table = build_initial(ORDER, 64)
    down = reconcile_pairs(table, ["srx3", "srx4"], ORDER, PEERS, n_buckets=64)
    assert set(down.members()) == {"srx3", "srx4"}
    assert all(new == old for old, new in zip(table.buckets, down.buckets, strict=True) if old in ("srx3", "srx4"))
    one_back = reconcile_pairs(down, ["srx1", "srx3", "srx4"], ORDER, PEERS, n_buckets=64)
    pairs = zip(down.buckets, one_back.buckets, strict=True)
    assert all(new in ("srx1", old) for old, new in pairs), "buckets move only to srx1"
    counts = one_back.counts()
    assert max(counts.values()) - min(counts.values()) <= 1


def test_members_without_peer_use_ordinary_chash() -> None:
    table = build_initial(ORDER, 64)
    after = reconcile_pairs(table, ["srx2", "srx3", "srx4"], ORDER, {}, n_buckets=64)
    counts = after.counts()
    assert max(counts.values()) - min(counts.values()) <= 1, "spread over every survivor"


def test_hand_back_without_home_buckets_gives_half() -> None:
    table = SelectorTable(("b",) * 8)
    home = SelectorTable(("b",) * 8)
    back = hand_back(table, "a", "b", home)
    assert back.counts() == {"b": 4, "a": 4}
    assert back.buckets[4:] == ("a",) * 4, "the highest-index half is given"


def test_hand_over_and_back_refuse_nonsense() -> None:
    table = build_initial(["a", "b"], 8)
    with pytest.raises(ValueError):
        hand_over(table, "x", "a")
    with pytest.raises(ValueError):
        hand_over(table, "a", "a")
    with pytest.raises(ValueError):
        hand_back(table, "a", "b", table)
    with pytest.raises(ValueError):
        hand_back(SelectorTable(("a",) * 8), "b", "c", table)


def test_random_failure_sequences_keep_every_member_reachable_and_deterministic() -> None:
    rng = random.Random(7)
    for _ in range(200):
        table = build_initial(ORDER, 64)
        twin = table
        for _ in range(6):
            alive = [m for m in ORDER if rng.random() > 0.3] or ["srx1"]
            table = reconcile_pairs(table, alive, ORDER, PEERS, n_buckets=64)
            twin = reconcile_pairs(twin, alive, ORDER, PEERS, n_buckets=64)
            assert table == twin, "two routers applying the same events agree"
            assert set(table.members()) == set(alive)
            assert table.n_buckets == 64


@pytest.mark.parametrize("down", list(itertools.combinations(ORDER, 2)))
def test_two_failures_then_recovery_returns_to_balance(down: tuple[str, str]) -> None:
    table = build_initial(ORDER, 64)
    after = reconcile_pairs(table, [m for m in ORDER if m not in down], ORDER, PEERS, n_buckets=64)
    back = reconcile_pairs(after, ORDER, ORDER, PEERS, n_buckets=64)
    counts = back.counts()
    assert max(counts.values()) - min(counts.values()) <= 1


def test_srg1_backup_takes_over_the_active_buckets_as_they_are() -> None:
    """SRG1: only the actives (srx1, srx3) are in the table; srx1 fails, srx2 becomes active."""
    table = build_initial(["srx1", "srx3"], 64)
    after = reconcile_pairs(table, ["srx2", "srx3"], ORDER, PEERS, n_buckets=64)
    assert after.buckets == tuple("srx2" if m == "srx1" else m for m in table.buckets)
    back = reconcile_pairs(after, ["srx1", "srx3"], ORDER, PEERS, n_buckets=64)
    assert back == table, "and back when srx1 is active again"


# --------------------------------------------------------------------------- restore policy
def test_keep_buckets_restore_moves_back_only_what_moved_away() -> None:
    from dataplane.core.chash import add_member, build_initial, reconcile_pairs, remove_member, restore_member

    order = ["srx1", "srx2", "srx3", "srx4", "srx5"]
    start = build_initial(order, 6400)
    down = reconcile_pairs(start, order[1:], order, {}, n_buckets=6400)
    assert down == remove_member(start, "srx1", order)
    own = [b for b, m in enumerate(start.buckets) if m == "srx1"]
    back = reconcile_pairs(down, order, order, {}, n_buckets=6400, policy="keep-buckets",
                           remembered={"srx1": own})
    assert back == start == restore_member(down, "srx1", own), "exactly its old buckets, nothing else"
    never_on_srx1 = [b for b in range(6400) if start.buckets[b] != "srx1"]
    assert all(down.buckets[b] == start.buckets[b] == back.buckets[b] for b in never_on_srx1)
    # the default policy: an ECMP addition, an equal share taken from every member
    proportional = reconcile_pairs(down, order, order, {}, n_buckets=6400)
    assert proportional == add_member(down, "srx1", order)
    disturbed = sum(1 for b in never_on_srx1 if proportional.buckets[b] != start.buckets[b])
    assert disturbed > 0, "proportional restore disturbs flows that never touched srx1"
    # without remembered buckets keep-buckets falls back to the member's buckets in the initial table
    assert reconcile_pairs(down, order, order, {}, n_buckets=6400, policy="keep-buckets") == start


def test_keep_buckets_for_a_member_new_to_the_table_takes_its_initial_buckets() -> None:
    from dataplane.core.chash import build_initial, reconcile_pairs

    table = build_initial(["a", "b", "c", "d"], 64)
    got = reconcile_pairs(table, list("abcde"), list("abcde"), {}, n_buckets=64, policy="keep-buckets",
                          remembered={})
    # not remembered: its buckets in the initial table of the unilist order (i % 5 == 4), nothing else
    assert got.buckets == tuple("e" if i % 5 == 4 else m for i, m in enumerate(table.buckets))
    with pytest.raises(ValueError, match="unknown restore policy"):
        reconcile_pairs(table, ["a"], ["a", "b", "c", "d"], {}, n_buckets=64, policy="nope")


def test_restore_member_refuses_nonsense_and_keeps_other_members_alive() -> None:
    from dataplane.core.chash import SelectorTable, reconcile_pairs, restore_member

    table = SelectorTable(("a", "b", "a", "b"))
    with pytest.raises(ValueError, match="already"):
        restore_member(table, "a", [0])
    with pytest.raises(ValueError, match="none of its buckets"):
        restore_member(table, "c", [9])
    # "b" would lose every bucket to "c": the proportional add is used instead
    got = reconcile_pairs(table, ["a", "b", "c"], ["a", "b", "c"], {}, n_buckets=4, policy="keep-buckets",
                          remembered={"c": [1, 3]})
    assert set(got.counts()) == {"a", "b", "c"}
