"""Restore policies side by side: flows disturbed per fail + restore cycle, and the balance after.

For N = 4, 5, 8 SRX (6400 buckets, the default) and each SRX failing in turn: the selector table
goes through the failure (`remove_member`) and the return of the SRX under each policy of
`dataplane.core.chash.reconcile_pairs`:

- proportional (the Junos-like default): the returning SRX is an ECMP addition and takes an equal
  share from every member;
- keep-buckets: it gets back exactly the buckets it had.

Flows: 10 000 subscriber addresses hashed as the MX does (nftables jhash, `dataplane.core.nfthash`,
default seed). Per cycle: flows that moved at least once (disturbed), flows that never were on the
failed SRX but moved anyway (collateral), flows that moved twice, and the balance after the
restore (largest / smallest share of buckets). The baseline is the failure alone (the flows of the
failed SRX: every policy must move those), measured in the same run.

    python3 bench/restore_policy.py                 # markdown
    python3 bench/restore_policy.py --json
    python3 bench/restore_policy.py --out docs/benchmarks-restore.md
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dataplane.core.chash import DEFAULT_BUCKETS, build_initial, reconcile_pairs  # noqa: E402
from dataplane.core.nfthash import bucket  # noqa: E402

SEED = 0x5EED  # the lab's default services.hash_seed
FLOWS = 10_000
POLICIES = ("proportional", "keep-buckets")


@dataclass
class Row:
    srx: int
    policy: str
    failure_movers: float  # mean flows moved by the failure (the failed SRX's own: the baseline)
    disturbed: float  # mean flows that moved at least once over fail + restore
    collateral: float  # mean flows never on the failed SRX that moved anyway
    moved_twice: float
    balance_after: float  # mean largest / smallest bucket share after the restore (1.0 = perfect)
    ratio_to_baseline: float  # disturbed / failure_movers


def cycle(n: int, policy: str, flows: list[int], buckets: int) -> list[tuple[int, int, int, int, float]]:
    order = [f"srx{i + 1}" for i in range(n)]
    start = build_initial(order, buckets)
    out = []
    for failed in order:
        alive = [m for m in order if m != failed]
        down = reconcile_pairs(start, alive, order, {}, n_buckets=buckets, policy=policy)
        own = [b for b, m in enumerate(start.buckets) if m == failed]
        back = reconcile_pairs(down, order, order, {}, n_buckets=buckets, policy=policy,
                               remembered={failed: own})
        first = sum(1 for b in flows if start.buckets[b] != down.buckets[b])
        second = [down.buckets[b] != back.buckets[b] for b in flows]
        moved_once = [start.buckets[b] != down.buckets[b] or s for b, s in zip(flows, second, strict=True)]
        collateral = sum(1 for b, m in zip(flows, moved_once, strict=True) if m and start.buckets[b] != failed)
        twice = sum(1 for b, s in zip(flows, second, strict=True) if s and start.buckets[b] != down.buckets[b])
        shares = back.counts().values()
        out.append((first, sum(moved_once), collateral, twice, max(shares) / min(shares)))
    return out


def measure(counts: tuple[int, ...], buckets: int) -> list[Row]:
    net = ipaddress.IPv4Network("100.64.0.0/16")
    hosts = net.hosts()
    flows = [bucket(str(next(hosts)), buckets, SEED) for _ in range(FLOWS)]
    rows = []
    for n in counts:
        for policy in POLICIES:
            runs = cycle(n, policy, flows, buckets)
            mean = [sum(r[i] for r in runs) / len(runs) for i in range(5)]
            rows.append(Row(n, policy, mean[0], mean[1], mean[2], mean[3], round(mean[4], 4),
                            round(mean[1] / mean[0], 3) if mean[0] else 0.0))
    return rows


def goal(row: Row) -> str:
    if row.policy == "keep-buckets":
        return "ratio 1.00, collateral 0, balance unchanged"
    # the returning SRX takes 1/N of every other member's flows: (N-1)/N of the flows, 1/N of them
    return f"collateral about F(N-1)/N^2 = {FLOWS * (row.srx - 1) / row.srx ** 2:.0f}"


def markdown(rows: list[Row], took: float, buckets: int) -> str:
    machine = (f"{os.cpu_count()} CPUs, {platform.machine()}, kernel {platform.release()}, "
               f"Python {platform.python_version()}")
    lines = [
        "# Restore policies benchmark",
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} by `python3 bench/restore_policy.py --out "
        f"docs/benchmarks-restore.md` in {took:.1f} s. Machine: {machine}.",
        "",
        f"Pure selector logic (`dataplane.core.chash`), no lab: {FLOWS} subscriber addresses hashed into {buckets} "
        "buckets as the MX does (nftables jhash, `dataplane.core.nfthash`), each SRX failing in turn and coming back "
        "under each `services.restore_policy`; figures are means over the SRXs. Baseline (same run): the failure "
        "alone moves the failed SRX's flows (1/N); `ratio` = flows disturbed by the whole cycle / that baseline "
        "(1.00 = only the failed SRX's flows ever moved).",
        "",
        "| SRX | policy | moved by the failure | disturbed by fail + restore | ratio | collateral (never on the "
        "failed SRX) | moved twice | balance after (max/min share) | goal |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        lines.append(f"| {r.srx} | {r.policy} | {r.failure_movers:.0f} | {r.disturbed:.0f} | "
                     f"{r.ratio_to_baseline:.2f} | {r.collateral:.0f} | {r.moved_twice:.0f} | {r.balance_after:.4f} | "
                     f"{goal(r)} |")
    lines += [
        "",
        "<!-- notes below: not figures of the run -->",
        "",
        "Reading: under `proportional` (the default: a restore is an ECMP addition, as Junos treats a returning "
        "next hop, see docs/fidelity.md) the returning SRX takes an equal share from every member, so about 1/N "
        "of the flows that were never on it move too (collateral), and their first return packets can reach an "
        "SRX that has no session for them yet. Under `keep-buckets` only the flows that moved away move back: no "
        "collateral, and the table after the restore is the table before the failure.",
        "",
    ]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--buckets", type=int, default=DEFAULT_BUCKETS)
    parser.add_argument("--out", type=Path, help="write the markdown here as well")
    args = parser.parse_args()
    started = time.monotonic()
    rows = measure((4, 5, 8), args.buckets)
    took = time.monotonic() - started
    if args.json:
        print(json.dumps([asdict(r) for r in rows], indent=2))
        return 0
    text = markdown(rows, took, args.buckets)
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
