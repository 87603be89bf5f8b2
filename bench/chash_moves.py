"""How many flows change firewall when an SRX leaves or joins: CHASH vs plain ECMP.

For N = 2, 4, 8, 16 SRX and 64 / 256 buckets, prints the fraction of buckets and of
simulated flows that land on a different next hop after a removal (ideal 1/N: only the
dead member's flows) and after an add (ideal 1/(N+1): only the newcomer's share).
Removal is tried for every member: the table shows the mean and the worst case.

Flows are client IPv4 addresses drawn with a fixed seed and hashed with
crc32(address bytes) % n_buckets, so the numbers are reproducible run to run.

    python3 bench/chash_moves.py            # markdown table
    python3 bench/chash_moves.py --json     # machine-readable
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import random
import sys
import zlib
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

# Run as a plain script from anywhere: make the repository root importable.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dataplane.core.chash import (
    DEFAULT_BUCKETS,
    SelectorTable,
    add_member,
    build_initial,
    moved_fraction,
    plain_ecmp,
    remove_member,
)

MEMBER_COUNTS = (2, 4, 8, 16)
BUCKET_COUNTS = (64, 256, DEFAULT_BUCKETS)


@dataclass(frozen=True)
class Row:
    n_buckets: int
    members: int
    event: str  # "remove" or "add"
    ideal: float
    chash_buckets: float
    chash_flows: float
    chash_flows_worst: float
    ecmp_buckets: float
    ecmp_flows: float
    ecmp_flows_worst: float


def flow_addresses(count: int, seed: int) -> list[bytes]:
    """Client addresses from 10.0.0.0/8; a fixed seed keeps every run identical."""
    rng = random.Random(seed)
    base = int(ipaddress.IPv4Address("10.0.0.0"))
    return [ipaddress.IPv4Address(base + rng.getrandbits(24)).packed for _ in range(count)]


def flow_buckets(addresses: Sequence[bytes], n_buckets: int) -> list[int]:
    return [zlib.crc32(address) % n_buckets for address in addresses]


def moved(before: SelectorTable, after: SelectorTable, buckets: Sequence[int]) -> tuple[float, float]:
    """(fraction of buckets, fraction of flows) whose next hop changed."""
    flow_moves = sum(1 for b in buckets if before.buckets[b] != after.buckets[b])
    return moved_fraction(before, after), flow_moves / len(buckets)


def summarize(
    before: SelectorTable, afters: Sequence[SelectorTable], buckets: Sequence[int]
) -> tuple[float, float, float]:
    """Mean bucket fraction, mean flow fraction and worst flow fraction over the scenarios."""
    pairs = [moved(before, after, buckets) for after in afters]
    flows = [p[1] for p in pairs]
    return sum(p[0] for p in pairs) / len(pairs), sum(flows) / len(flows), max(flows)


def removal_row(members: list[str], n_buckets: int, buckets: Sequence[int]) -> Row:
    # Both modes start from the same table, so the difference is purely the reaction.
    start = build_initial(members, n_buckets)
    chash = [remove_member(start, gone, members) for gone in members]
    ecmp = [plain_ecmp([m for m in members if m != gone], n_buckets) for gone in members]
    return _row("remove", members, n_buckets, 1 / len(members), start, chash, ecmp, buckets)


def add_row(members: list[str], n_buckets: int, buckets: Sequence[int]) -> Row:
    order = [*members, f"srx{len(members) + 1}"]
    start = build_initial(members, n_buckets)
    chash = [add_member(start, order[-1], order)]
    ecmp = [plain_ecmp(order, n_buckets)]
    return _row("add", members, n_buckets, 1 / len(order), start, chash, ecmp, buckets)


def _row(
    event: str,
    members: list[str],
    n_buckets: int,
    ideal: float,
    start: SelectorTable,
    chash: Sequence[SelectorTable],
    ecmp: Sequence[SelectorTable],
    buckets: Sequence[int],
) -> Row:
    return Row(
        n_buckets, len(members), event, ideal, *summarize(start, chash, buckets), *summarize(start, ecmp, buckets)
    )


def run(flows: int, seed: int) -> list[Row]:
    addresses = flow_addresses(flows, seed)
    rows: list[Row] = []
    for n_buckets in BUCKET_COUNTS:
        buckets = flow_buckets(addresses, n_buckets)
        for count in MEMBER_COUNTS:
            members = [f"srx{i}" for i in range(1, count + 1)]
            rows.append(removal_row(members, n_buckets, buckets))
            rows.append(add_row(members, n_buckets, buckets))
    return rows


def worst_share_error(n_buckets: int, up_to: int = 64) -> tuple[float, int]:
    """Largest |share - ideal| / ideal over 1..UP_TO SRX (initial tables), and where it happens."""
    worst, where = 0.0, 1
    for count in range(1, min(up_to, n_buckets) + 1):
        ideal = n_buckets / count
        error = max(abs(c - ideal) / ideal for c in build_initial([f"srx{i}" for i in range(count)], n_buckets)
                    .counts().values())
        if error > worst:
            worst, where = error, count
    return worst, where


def balance_markdown() -> str:
    lines = ["", "Balance: the largest deviation of one SRX's share from the ideal 1/N, N = 1..64 SRX:", "",
             "| buckets | worst deviation | at N | 4 -> 5 SRX moves (from each) |", "|---:|---:|---:|---|"]
    for n_buckets in BUCKET_COUNTS:
        worst, where = worst_share_error(n_buckets)
        four = build_initial([f"srx{i}" for i in range(1, 5)], n_buckets)
        five = add_member(four, "srx5", [f"srx{i}" for i in range(1, 6)])
        each = sorted({sum(1 for a, b in zip(four.buckets, five.buckets, strict=True) if a == m and b == "srx5")
                       for m in four.members()})
        per = " or ".join(f"{e / n_buckets:.2%}" for e in each)
        lines.append(f"| {n_buckets} | {worst:.2%} | {where} | {moved_fraction(four, five):.2%} ({per}) |")
    return "\n".join(lines)


def markdown(rows: Sequence[Row], flows: int) -> str:
    header = [
        f"{flows} flows hashed by crc32(src IPv4) % buckets. Flow columns: mean / worst over which SRX is removed.",
        "",
        "| buckets | SRX | event | ideal | CHASH buckets | CHASH flows | ECMP buckets | ECMP flows |",
        "|---:|---:|---|---:|---:|---:|---:|---:|",
    ]
    lines = [
        f"| {r.n_buckets} | {r.members} | {r.event} | {r.ideal:.1%} | {r.chash_buckets:.1%} "
        f"| {r.chash_flows:.1%} / {r.chash_flows_worst:.1%} | {r.ecmp_buckets:.1%} "
        f"| {r.ecmp_flows:.1%} / {r.ecmp_flows_worst:.1%} |"
        for r in rows
    ]
    return "\n".join(header + lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--json", action="store_true", help="print JSON instead of a markdown table")
    parser.add_argument("--flows", type=int, default=10_000, help="simulated flows (default 10000)")
    parser.add_argument("--seed", type=int, default=1, help="seed for the flow addresses (default 1)")
    args = parser.parse_args(argv)
    if args.flows < 1:
        parser.error("--flows must be at least 1")
    rows = run(args.flows, args.seed)
    if args.json:
        print(json.dumps({"flows": args.flows, "seed": args.seed, "rows": [asdict(r) for r in rows]}, indent=2))
    else:
        print(markdown(rows, args.flows))
        print(balance_markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
