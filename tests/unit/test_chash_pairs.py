"""MNHA-aware selector changes: a failed SRX's flows go to its pair peer, and come back from it."""

from __future__ import annotations

import itertools
import random

import pytest

from dataplane.chash import SelectorTable, build_initial, hand_back, hand_over, moved_buckets, reconcile_pairs

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
