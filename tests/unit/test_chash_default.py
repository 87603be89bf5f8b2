"""The default bucket count: the JVD's 4 -> 5 SRX example is exact, and shares stay near ideal."""

from __future__ import annotations

import pytest

from dataplane.core.chash import DEFAULT_BUCKETS, add_member, build_initial, moved_buckets, reconcile

ORDER = [f"srx{i}" for i in range(1, 65)]


def test_adding_a_fifth_srx_moves_five_percent_from_each_of_four() -> None:
    four = build_initial(ORDER[:4])
    five = add_member(four, "srx5", ORDER)
    assert four.n_buckets == DEFAULT_BUCKETS
    for member in ORDER[:4]:
        given = sum(1 for old, new in zip(four.buckets, five.buckets, strict=True) if old == member and new == "srx5")
        assert given / DEFAULT_BUCKETS == 0.05, member
    assert moved_buckets(four, five) / DEFAULT_BUCKETS == 0.20
    assert five.share("srx5") == DEFAULT_BUCKETS // 5


@pytest.mark.parametrize("members", range(1, 65))
def test_every_share_is_within_one_percent_of_ideal_up_to_64_srx(members: int) -> None:
    ideal = DEFAULT_BUCKETS / members
    for table in (build_initial(ORDER[:members]),
                  reconcile(build_initial(ORDER[:64]), ORDER[:members], ORDER, DEFAULT_BUCKETS)):
        shares = table.counts()
        assert len(shares) == members
        assert all(abs(share - ideal) / ideal <= 0.01 for share in shares.values()), shares


def test_64_buckets_would_not_make_the_example_exact() -> None:
    """The reason for the default: with 64 buckets 4 -> 5 moves 12 of 64 (18.75 %), not 20 %."""
    four = build_initial(ORDER[:4], 64)
    assert moved_buckets(four, add_member(four, "srx5", ORDER)) == 12
