"""Expected movers from the selector's tables: the nft jhash bucket of a subscriber, and which flows
a phase's table changes move (pure)."""

from __future__ import annotations

import socket

import pytest

from dataplane.core import nfthash
from dataplane.core.chash import add_member, build_initial, remove_member
from lab_orchestrator.events import movers
from lab_orchestrator.events.movers import Phase, TableSample


def test_jhash_matches_the_kernel_lookup3_for_one_word() -> None:
    # lookup3 by hand for a 4-byte key: a = b = c = 0xdeadbeef + 4 + seed, a += the key read
    # little-endian, then the final mix (as include/linux/jhash.h does it)
    key = socket.inet_aton("100.64.0.1")
    a = b = c = (0xDEADBEEF + 4 + 7) & 0xFFFFFFFF
    a = (a + int.from_bytes(key, "little")) & 0xFFFFFFFF
    assert nfthash.jhash(key, 7) == nfthash._final(a, b, c)
    assert nfthash.jhash(key, 7) != nfthash.jhash(key, 8), "the seed changes the hash"
    assert nfthash.jhash(b"\x01", 0) != nfthash.jhash(b"\x01\x00", 0), "the length is part of the hash"
    with pytest.raises(ValueError):
        nfthash.jhash(b"", 0)


def test_buckets_are_in_range_and_spread_evenly() -> None:
    counts = [0] * 8
    for i in range(8000):
        b = nfthash.bucket(f"100.64.{i // 250}.{i % 250 + 1}", 8, 0x5EED)
        assert 0 <= b < 8
        counts[b] += 1
    assert max(counts) - min(counts) < 200, counts
    assert nfthash.reciprocal_scale(0xFFFFFFFF, 6400) == 6399 and nfthash.reciprocal_scale(0, 6400) == 0


def sample(at: float, table: tuple[str, ...], node: str = "mx1", changes: int = 0) -> TableSample:
    return TableSample(at, node, table, changes)


def test_a_removal_moves_exactly_the_flows_of_the_removed_member() -> None:
    order = ["srx1", "srx2", "srx3", "srx4"]
    start = build_initial(order, 64)
    after = remove_member(start, "srx2", order)
    buckets_of = {i: i for i in range(64)}  # flow i hashes to bucket i
    samples = [sample(1.0, start.buckets, changes=1), sample(5.0, after.buckets, changes=2)]
    moved = movers.phase_movers(samples, Phase("event", 2.0, 10.0), buckets_of)
    assert moved == {i for i in range(64) if start.buckets[i] == "srx2"}
    assert movers.phase_movers(samples, Phase("restore", 10.0), buckets_of) == set(), "nothing after"


def test_restore_phase_sees_the_returning_members_share_and_flaps_inside_a_phase() -> None:
    order = ["srx1", "srx2", "srx3", "srx4"]
    start = build_initial(order, 64)
    down = remove_member(start, "srx1", order)
    back = add_member(down, "srx1", order)
    samples = [sample(0.5, start.buckets, changes=1), sample(2.0, down.buckets, changes=2),
               sample(6.0, back.buckets, changes=3)]
    buckets_of = {i: i for i in range(64)}
    restore = movers.phase_movers(samples, Phase("restore", 5.0), buckets_of)
    assert restore == {i for i in range(64) if down.buckets[i] != back.buckets[i]}
    assert len(restore) == 16, "the returning member takes one share (64 / 4) from everyone"
    # a table that changes and changes back inside one phase still moved those flows twice
    flap = [sample(0.5, start.buckets), sample(1.5, down.buckets), sample(1.6, start.buckets)]
    assert movers.phase_movers(flap, Phase("event", 1.0, 3.0), buckets_of) == \
        {i for i in range(64) if start.buckets[i] == "srx1"}


def test_movers_on_any_mx_count_and_missed_tables_are_reported() -> None:
    a, b = ("x",) * 4, ("x", "y", "x", "y")
    samples = [sample(0.0, a, "mx1", 1), sample(0.0, a, "mx2", 1), sample(2.0, b, "mx2", 4)]
    assert movers.phase_movers(samples, Phase("event", 1.0), {7: 1, 8: 2, 9: 3}) == {7, 9}
    assert movers.missed_tables(samples) == 2
    assert movers.changed_buckets([a, ("x",) * 8]) == set(range(8)), "a resize moves every bucket"
    assert movers.share_ideal(100, 4) == 25 and movers.share_ideal(100, 5) == 20


def test_the_ideal_of_a_pair_change_is_two_members_share() -> None:
    """A pair powered off (4 -> 2) or a spare pair added per SRX (4 -> 6) moves two members' share;
    one member (or a pair that is one real-service, 2 -> 3) moves one share."""
    assert movers.share_ideal(60, 4, changed=2) == 30 and movers.share_ideal(60, 6, changed=2) == 20
    assert movers.share_of_change(4, 2) == 0.5 and movers.share_of_change(4, 6) == round(2 / 6, 5)
    assert movers.share_of_change(2, 3) == round(1 / 3, 5) and movers.share_of_change(4, 3) == 0.25
    assert movers.share_of_change(4, 4) == 0


def test_flow_buckets_use_the_subscriber_address() -> None:
    got = movers.flow_buckets({1: "100.64.0.1", 2: "100.64.0.2"}, 6400, 0x1234)
    assert got == {1: nfthash.bucket("100.64.0.1", 6400, 0x1234), 2: nfthash.bucket("100.64.0.2", 6400, 0x1234)}


def test_a_change_of_the_node_carrying_a_pair_moves_its_buckets() -> None:
    before = ("MNHA_SRX1@srx1/srx1", "MNHA_SRX3@srx3/srx3") * 2
    after = ("MNHA_SRX1@srx2/srx2", "MNHA_SRX3@srx3/srx3") * 2
    samples = [sample(0.0, before), sample(2.0, after)]
    assert movers.phase_movers(samples, Phase("event", 1.0), {1: 0, 2: 1, 3: 2}) == {1, 3}
    assert movers.member_count(after) == 2


def test_buckets_two_mxs_disagree_on_are_where_a_flow_switching_mx_moves() -> None:
    """Each MX keeps its own table: where they disagree during a phase, a flow whose gateway switches
    MX changes SRX. Agreeing tables (or one MX) give none; a change inside the phase counts."""
    same, other, later = ("x", "y", "x", "y"), ("x", "y", "y", "y"), ("y", "y", "y", "y")
    one = [sample(0.0, same, "mx1", 1), sample(2.0, other, "mx1", 2)]
    assert movers.disagreeing_buckets(one, Phase("event", 1.0)) == set()
    agree = [sample(0.0, same, "mx1", 1), sample(0.0, same, "mx2", 1)]
    assert movers.disagreeing_buckets(agree, Phase("event", 1.0)) == set()
    differ = agree[:1] + [sample(0.0, other, "mx2", 1)]
    assert movers.disagreeing_buckets(differ, Phase("event", 1.0)) == {2}
    # they agree at the start; mx2 changes inside the phase, mx1 after it: buckets 0 and 2 disagree
    moving = agree + [sample(2.0, later, "mx2", 2), sample(5.0, later, "mx1", 2)]
    assert movers.disagreeing_buckets(moving, Phase("event", 1.0, 4.0)) == {0, 2}
    assert movers.disagreeing_buckets(moving, Phase("restore", 4.0)) == {0, 2}, "until mx1 follows"
    assert movers.disagreeing_buckets(moving, Phase("restore", 6.0)) == set()
