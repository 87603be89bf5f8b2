"""The external-cache benchmark's section of docs/benchmarks-scale.md (bench/extcache_sync.py): its tables,
its reading from the figures, and the section put below the page's notes marker."""

from __future__ import annotations

import os
import platform
import time
from typing import Any

from common import NOTES_MARKER, ROOT, BenchError

DOC = ROOT / "docs" / "benchmarks-scale.md"
HEADING = "## External cache with a commit on takeover"


def pct_core(value: float) -> str:
    return f"{value:.2f}"


def markdown(results: list[dict[str, Any]], command: str) -> str:
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    lines = [
        HEADING,
        "",
        f"Measured {when} by `{command}`. Machine: {platform.node()}, {os.cpu_count()} CPUs, "
        f"{round(os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / 2**30)} GiB, kernel "
        f"{platform.release()}, conntrackd 1.4.7; shared machine: CPU figures are noisy.",
        "",
        "The alternative to copies written straight into the peer's kernel: the peer keeps them in conntrackd's "
        "external cache (user space, `DisableExternalCache Off`) and writes them into its kernel with "
        "`conntrackd -c` when it takes over. Two network namespaces joined by a veth, one conntrackd each "
        "(FTFW over unicast UDP), N UDP entries inserted on the sender (`conntrack -R`, 3600 s timeout); no "
        "traffic, no lab. CPU in % of one core.",
        "",
        "| entries | inserted on the sender | peer's external cache complete | live sync rate | bulk send (`-B`) "
        "| bulk rate | memory (sender, peer) |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(f"| {r['sessions']} | {r['insert_s']} s ({r['insert_rate']}/s) | {r['live_sync_s']} s | "
                     f"{r['live_rate']}/s | {r['bulk_s']} s for {r['sessions'] - r['deleted']} | "
                     f"{r['bulk_rate']}/s | {r['rss_mib']['a']} / {r['rss_mib']['b']} MiB |")
    lines += ["", "| entries | idle CPU sender | idle CPU peer | sync packets in the idle window (sender, peer) "
              "| peer's cache before / after the idle window | goal |", "|---|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['sessions']} | {pct_core(r['idle_cpu_pct']['a'])} | {pct_core(r['idle_cpu_pct']['b'])} "
                     f"| {r['idle_packets']['a']}, {r['idle_packets']['b']} in {r['idle_measured_s']} s | "
                     f"{r['idle_external'][0]} / {r['idle_external'][1]} | CPU ≤ 5 % |")
    lines += ["", "| entries | deleted on the sender | gone from the peer's cache after | expired on the sender "
              "| gone from the peer's cache after their timeout |", "|---|---|---|---|---|"]
    for r in results:
        lines.append(f"| {r['sessions']} | {r['deleted']} (one `conntrack -D`, {r['delete_cmd_s']} s) | "
                     f"{r['delete_sync_s']} s | {r['probes']} (10 s timeout) | {r['expiry_sync_s']} s |")
    lines += ["", "| entries | copies in the peer's cache | commit (`conntrackd -c` returns / kernel complete "
              "/ daemon's figure) | in the peer's kernel after | their timeout (min / median / max) "
              "| stale copies kept, committed | peer's CPU for the commit | peer's own cache holds them after "
              "(its CPU) |",
              "|---|---|---|---|---|---|---|---|"]
    for r in results:
        t = r["committed_timeout"]["live"] or ["-"] * 3
        stale_t = r["committed_timeout"]["stale"]
        stale = f"{r['stale_kept']} of {r['probes']}, {r['committed']['stale']}"
        if stale_t:
            stale += f" (timeout {stale_t[0]}–{stale_t[2]} s)"
        lines.append(f"| {r['sessions']} | {r['external_before_commit']} | {r['commit_cmd_s']} s / {r['commit_s']} s "
                     f"/ {r['commit_log_s']} s | {r['committed']['live']} of {r['sessions'] - r['deleted']} | "
                     f"{t[0]} / {t[1]} / {t[2]} s | {stale} | {r['commit_cpu_b_s']} s | {r['catchup_s']} s "
                     f"({r['catchup_cpu_b_s']} s) |")
    lines += [""]
    for r in results:
        lines.append(f"Run of {r['sessions']}: sender's kernel {r['kernel_a']} entries; peer's kernel with its "
                     f"external cache complete {r['kernel_b_after_sync']}, before the commit "
                     f"{r['kernel_b_before_commit']}, after {r['kernel_b_after_commit']}; peer's internal cache "
                     f"as the commit ends {r['internal_b_after_commit']} (its log: "
                     f"{'; '.join(r['b_log_overrun']) or 'nothing'}; its runtime counters: "
                     f"{'; '.join(r['b_runtime']) or 'none'}); conntrackd CPU for the live sync "
                     f"{r['live_cpu_s']['a']} s (sender), {r['live_cpu_s']['b']} s (peer), for the bulk send "
                     f"{r['bulk_cpu_s']['a']} s, {r['bulk_cpu_s']['b']} s; peer's memory after the commit "
                     f"{r['rss_mib_b_after_commit']} MiB; CommitTimeout "
                     f"{r['commit_timeout'] or 'not set'}; kernel conntrack limit {r['kernel_limit']}.")
    lines += ["", reading(results), ""]
    return "\n".join(lines)


def reading(results: list[dict[str, Any]]) -> str:
    """The short reading under the tables, from the figures (the largest run for the headline)."""
    big = max(results, key=lambda r: r["sessions"])
    n, live = big["sessions"], big["sessions"] - big["deleted"]
    idle = max(v for r in results for v in r["idle_cpu_pct"].values())
    verdict = "meets" if idle <= 5 else "does not meet"
    commit_rate = round(big["committed"]["live"] / big["commit_s"]) if big["commit_s"] else None
    expiries = ", ".join(f"{r['expiry_sync_s']} s at {r['sessions']:,}" for r in results)
    overrun = any("overrun" in line.lower() and not line.rstrip().endswith(" 0")
                  for line in big["b_log_overrun"] + big["b_runtime"])
    tail = round(big["live_sync_s"] - big["insert_s"], 2)
    text = (
        f"Reading: with the copies in the peer's external cache nothing is sent or refreshed while no entry opens, "
        f"changes or ends: at most {idle:.2f} % of a core per node at up to {n:,} entries, which {verdict} the "
        f"goal of ≤ 5 % (the idle window's packets are FTFW's alive messages, one a second each way whatever the "
        f"table's size). The live sync kept up with the inserts (the peer's cache complete {tail} s after the "
        f"last one); the bulk send of a whole cache ran at {big['bulk_rate']:,} copies/s. The external cache "
        f"does not age its copies: a copy stays until the sender reports the "
        f"entry's end (a delete had reached the peer's cache when the delete command returned, "
        f"{big['delete_sync_s']} s for {big['deleted']:,} entries; an expiry once the sender's kernel reaped the "
        f"entry: {expiries} after the timeout), and "
        f"the copies of entries that expired while the sender's daemon was down stayed and were committed with "
        f"the 60 s fallback. The cost moves to the takeover: `conntrackd -c` "
        f"wrote {commit_rate:,} entries/s into the peer's kernel ({big['commit_s']} s for {live:,}, in the daemon's "
        f"one thread: {big['commit_cpu_b_s']} s of CPU); a packet of a flow whose entry is not committed yet "
        f"finds no conntrack entry on the node that took over. Committed timeouts are the sender's timeout when "
        f"the copy was sent minus the copy's age, 60 s when that is negative; `CommitTimeout` sets one value instead. ")
    if overrun:
        text += (f"The kernel reports the committed entries to the same daemon as new ones and its event socket "
                 f"overruns while it commits: its internal cache (what it sends to the returning peer) is complete "
                 f"only after its overrun resync, {big['catchup_s']} s after the commit "
                 f"({big['catchup_cpu_b_s']} s of CPU), then holds both caches ({big['rss_mib_b_after_commit']} MiB). ")
    else:
        text += (f"The peer's own cache (what it sends to the returning peer) held the committed entries "
                 f"{big['catchup_s']} s after the commit ({big['catchup_cpu_b_s']} s of CPU), then holds both caches "
                 f"({big['rss_mib_b_after_commit']} MiB). ")
    text += (f"The copies are not in the peer's kernel: a flow that moves to the peer without a takeover (SRG0 "
             f"active/active) finds no conntrack entry there until a commit. Memory: {big['rss_mib']['b']} MiB for "
             f"the peer's daemon at {n:,} copies (~{round(1024 * big['rss_mib']['b'] / n, 2)} KiB a copy).")
    return text


def write_section(text: str) -> None:
    """Put TEXT below the notes marker of the scale page, in place of an earlier version of it."""
    page = DOC.read_text()
    if NOTES_MARKER not in page:
        raise BenchError(f"{DOC} has no notes marker")
    if HEADING in page:
        start = page.index(HEADING)
        end = page.find("\n## ", start + len(HEADING))
        page = page[:start] + text.rstrip("\n") + ("\n" + page[end:] if end >= 0 else "\n")
    else:
        page = page.rstrip("\n") + "\n\n" + text.rstrip("\n") + "\n"
    DOC.write_text(page)
