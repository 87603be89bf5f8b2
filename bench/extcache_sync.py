#!/usr/bin/env python3
"""Session sync with the peer's copies in conntrackd's external cache, committed into the kernel on takeover.

    sudo .venv/bin/python bench/extcache_sync.py [--sessions 100000,1000000] [--idle 60] [--delete-prefix 18]
                                                 [--commit-timeout S] [--doc]

The alternative to the lab's MNHA sync (`DisableExternalCache On`: copies written straight into the peer's
kernel, refreshed once per window because a copy keeps the sender's remaining timeout). Here the peer keeps
the copies in conntrackd's user-space cache (external cache on) and writes them into its kernel only when it
takes over (`conntrackd -c`). No lab: two network namespaces (A sends, B receives) joined by a veth, one
conntrackd each (FTFW over unicast UDP on the veth, the lab's other settings), and N UDP conntrack entries
inserted on A with `conntrack -R` (one netlink request each, 3600 s timeout, ASSURED). Measured per N:

  1. live sync: from the first insert on A until B's external cache holds all N (and the insert rate);
  2. idle: CPU of both conntrackd over IDLE s with the N entries alive and nothing changing
     (/proc/PID/stat), the sync packets exchanged meanwhile, B's external cache before and after;
  3. delete: the entries of the first /DELETE_PREFIX of the subscriber range deleted on A in one pass
     (`conntrack -D` with a source mask): how fast B's external cache loses them; then PROBES entries
     with a 10 s timeout: how long after they expire on A B's cache loses them;
  4. bulk: B's external cache flushed (`conntrackd -f external`), A's `conntrackd -B`: the sync rate without
     the insert path in front of it (a returning peer's cold sync);
  5. takeover: PROBES entries with a 15 s timeout synced, A's conntrackd killed (SIGKILL: the node fails),
     a wait past their timeout (does the external cache age its copies on its own?), then `conntrackd -c`
     on B: wall time, the daemon's own commit time, how many of the copies are in B's kernel and with which
     timeout, B's conntrackd CPU for the commit and the 10 s after it.

Holds /tmp/lab-ns.lock while its namespaces exist (one hold per N; a hold longer than --max-hold aborts
the run). Raises the machine's nf_conntrack_max if N needs it (the limit applies to each namespace's
table) and puts the previous value back. With --doc, writes its section below the notes marker of
docs/benchmarks-scale.md (the rest of the file kept). Needs root.
"""

from __future__ import annotations

import argparse
import fcntl
import ipaddress
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from common import BenchError, logger
from extcache_report import DOC, ROOT, markdown, write_section

NS_A, NS_B = "xcache-a", "xcache-b"
DEV = "xcache0"
IP_A, IP_B = "192.0.2.1", "192.0.2.2"
PORT = 3780
LOCK = Path("/tmp/lab-ns.lock")
CT_MAX = Path("/proc/sys/net/netfilter/nf_conntrack_max")
SUBSCRIBERS = ipaddress.IPv4Network("100.64.0.0/12")  # the N live entries: one subscriber address each
EXPIRY_PROBES = ipaddress.IPv4Network("100.112.0.0/16")  # short-lived: expire on A while A's daemon runs
STALE_PROBES = ipaddress.IPv4Network("100.113.0.0/16")  # short-lived: expire after A's daemon is killed
SERVER, SPORT, DPORT = "203.0.113.9", 40000, 7000
LIVE_TIMEOUT = 3600
log = logger("extcache")

CONF = """\
# conntrackd for {name}: FTFW over unicast UDP on the veth. With the external cache, copies received from
# the peer are kept in user space and written into the kernel only by a commit (conntrackd -c); without
# it (DisableExternalCache On, as the lab), they are written into the kernel as they arrive.
Sync {{
	Mode FTFW {{
		DisableExternalCache {external_off}
		ResendQueueSize 131072
{commit}	}}
	UDP {{
		IPv4_address {local}
		IPv4_Destination_Address {peer}
		Port {port}
		Interface {dev}
		SndSocketBuffer 8388608
		RcvSocketBuffer 8388608
		Checksum on
	}}
}}
General {{
	HashSize {hash_size}
	HashLimit {hash_limit}
	Syslog off
	LogFile {dir}/{name}.log
	LockFile {dir}/{name}.lock
	UNIX {{
		Path {dir}/{name}.ctl
	}}
	NetlinkBufferSize 8388608
	NetlinkBufferSizeMaxGrowth 67108864
	NetlinkOverrunResync On
	Filter From Kernelspace {{
		Protocol Accept {{
			TCP
			UDP
			ICMP
		}}
		# The daemons' own sync traffic is not a transit flow.
		Address Ignore {{
			IPv4_address 127.0.0.1
			IPv4_address {local}
			IPv4_address {peer}
		}}
	}}
}}
"""


def sh(*cmd: str, timeout: float = 600.0, check: bool = True, stdin: str | None = None) -> str:
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, input=stdin)
    if check and result.returncode != 0:
        raise BenchError(f"{' '.join(cmd)} exited {result.returncode}: {result.stderr.strip()[-400:]}")
    return result.stdout


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


class Daemon:
    """One conntrackd in a namespace, in the foreground (its pid is ours to stop), and its client commands."""

    def __init__(self, name: str, ns: str, local: str, peer: str, workdir: Path, capacity: int,
                 commit_timeout: int | None, external_cache: bool = True):
        self.name, self.ns, self.workdir = name, ns, workdir
        self.conf = workdir / f"{name}.conf"
        hash_size = 65536
        while hash_size * 4 < capacity:
            hash_size *= 2
        commit = f"\t\tCommitTimeout {commit_timeout}\n" if commit_timeout else ""
        self.conf.write_text(CONF.format(name=name, local=local, peer=peer, port=PORT, dev=DEV, dir=workdir,
                                         hash_size=hash_size, hash_limit=capacity, commit=commit,
                                         external_off="Off" if external_cache else "On"))
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        # `ip netns exec` execs conntrackd: the child's pid is the daemon's.
        self.proc = subprocess.Popen(["ip", "netns", "exec", self.ns, "conntrackd", "-C", str(self.conf)],
                                     stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        ctl = self.workdir / f"{self.name}.ctl"
        deadline = time.monotonic() + 10
        while not ctl.exists():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise BenchError(f"conntrackd {self.name} did not start: {self.log_tail()}")
            time.sleep(0.05)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def ctl(self, *args: str, timeout: float = 600.0) -> str:
        # A client of the daemon's UNIX socket (a file: no need to enter the namespace).
        return sh("conntrackd", "-C", str(self.conf), *args, timeout=timeout)

    def cache(self) -> dict[str, int]:
        """Active objects of the internal and external caches."""
        counts, which = {}, ""
        for line in self.ctl("-s", "cache").splitlines():
            if line.startswith("cache:"):
                which = line.split()[0].split(":")[1]
                counts[which] = int(line.rsplit(None, 1)[1])
        return counts

    def packets(self) -> tuple[int, int]:
        """Sync packets (sent, received) on the dedicated link."""
        for line in self.ctl("-s", "network").splitlines():
            if "Pckts sent" in line:
                parts = line.split()
                return int(parts[0]), int(parts[3])
        return 0, 0

    def kill(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def log_tail(self, lines: int = 5) -> str:
        path = self.workdir / f"{self.name}.log"
        return " | ".join(path.read_text().splitlines()[-lines:]) if path.exists() else ""

    def log_lines(self, *words: str) -> list[str]:
        """The daemon's log lines holding one of WORDS (without their time stamps), each once with a count."""
        path = self.workdir / f"{self.name}.log"
        seen: dict[str, int] = {}
        for line in path.read_text().splitlines():
            if any(w in line.lower() for w in words):
                text = line.split("] ", 2)[-1]
                seen[text] = seen.get(text, 0) + 1
        return [f"{text} (x{count})" if count > 1 else text for text, count in seen.items()]

    def commit_log(self) -> float | None:
        """The daemon's own figure for its last commit ('commit has taken S seconds')."""
        path = self.workdir / f"{self.name}.log"
        taken = [line for line in path.read_text().splitlines() if "commit has taken" in line]
        return round(float(taken[-1].split("taken")[1].split()[0]), 2) if taken else None


def addresses(network: ipaddress.IPv4Network, count: int) -> Iterator[str]:
    base = int(network.network_address)
    for i in range(count):
        yield str(ipaddress.IPv4Address(base + i))


def insert(workdir: Path, network: ipaddress.IPv4Network, count: int, timeout: int) -> float:
    """COUNT UDP entries on A, one per source address of NETWORK; returns the wall time."""
    path = workdir / f"insert-{network.network_address}.txt"
    with path.open("w") as f:
        for source in addresses(network, count):
            f.write(f"-I -p udp -s {source} -d {SERVER} --sport {SPORT} --dport {DPORT} -t {timeout} "
                    f"-u SEEN_REPLY,ASSURED\n")
    started = time.monotonic()
    sh("ip", "netns", "exec", NS_A, "conntrack", "-R", str(path))
    return time.monotonic() - started


def kernel_count(ns: str) -> int:
    return int(sh("ip", "netns", "exec", ns, "conntrack", "-C").strip())


def kernel_timeouts(ns: str) -> dict[str, list[int]]:
    """Timeouts of the UDP entries in NS's kernel, by range (live, expiry probes, stale probes)."""
    out = sh("ip", "netns", "exec", ns, "conntrack", "-L", "-p", "udp", "--dport", str(DPORT))
    ranges = {"live": SUBSCRIBERS, "expiry": EXPIRY_PROBES, "stale": STALE_PROBES}
    found: dict[str, list[int]] = {k: [] for k in ranges}
    for line in out.splitlines():
        parts = line.split(None, 4)
        if len(parts) < 4 or not parts[3].startswith("src="):
            continue
        source = ipaddress.IPv4Address(parts[3][4:])
        for key, network in ranges.items():
            if source in network:
                found[key].append(int(parts[2]))
    return found


def wait_until(what: str, check: Callable[[], bool], timeout: float, interval: float = 0.2) -> float | None:
    """Seconds until CHECK holds (polled every INTERVAL), or None after TIMEOUT."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():
            return time.monotonic() - started
        time.sleep(interval)
    log(f"timed out after {timeout} s waiting for {what}")
    return None


@contextmanager
def ns_lock(max_hold: float) -> Iterator[Callable[[], None]]:
    """The machine-wide namespace lock; yields a check that aborts the run once the hold is too long."""
    with LOCK.open("a") as f:
        log("waiting for the namespace lock")
        fcntl.flock(f, fcntl.LOCK_EX)
        taken = time.monotonic()
        log("namespace lock taken")

        def check() -> None:
            if time.monotonic() - taken > max_hold:
                raise BenchError(f"lock held for more than {max_hold} s: run aborted")

        try:
            yield check
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)
            log(f"namespace lock released after {time.monotonic() - taken:.0f} s")


@contextmanager
def namespaces() -> Iterator[None]:
    for ns in (NS_A, NS_B):
        sh("ip", "netns", "del", ns, check=False)
    try:
        for ns in (NS_A, NS_B):
            sh("ip", "netns", "add", ns)
        sh("ip", "link", "add", DEV, "netns", NS_A, "type", "veth", "peer", "name", DEV, "netns", NS_B)
        for ns, address in ((NS_A, IP_A), (NS_B, IP_B)):
            sh("ip", "-n", ns, "addr", "add", f"{address}/30", "dev", DEV)
            sh("ip", "-n", ns, "link", "set", "lo", "up")
            sh("ip", "-n", ns, "link", "set", DEV, "up")
        yield
    finally:
        for ns in (NS_A, NS_B):
            sh("ip", "netns", "del", ns, check=False)


@contextmanager
def conntrack_limit(needed: int) -> Iterator[int]:
    """nf_conntrack_max raised to NEEDED for the run (never lowered), the previous value put back after."""
    previous = int(CT_MAX.read_text())
    if needed > previous:
        CT_MAX.write_text(str(needed))
    try:
        yield max(needed, previous)
    finally:
        # Put it back only if nobody changed it meanwhile (a lab brought up may have raised it further).
        if needed > previous and int(CT_MAX.read_text()) == needed:
            CT_MAX.write_text(str(previous))


def run(n: int, args: argparse.Namespace) -> dict[str, Any]:
    probes, idle = args.probes, args.idle
    deleted = min(n, 2 ** (32 - args.delete_prefix))
    r: dict[str, Any] = {"sessions": n, "idle_s": idle, "deleted": deleted, "probes": probes,
                         "commit_timeout": args.commit_timeout}
    with tempfile.TemporaryDirectory(prefix="extcache-") as tmp, ns_lock(args.max_hold) as check, \
            conntrack_limit(n + 4 * probes + 65536) as limit, namespaces():
        workdir = Path(tmp)
        r["kernel_limit"] = limit
        capacity = n + 4 * probes + 65536
        a = Daemon("a", NS_A, IP_A, IP_B, workdir, capacity, args.commit_timeout)
        b = Daemon("b", NS_B, IP_B, IP_A, workdir, capacity, args.commit_timeout)
        try:
            a.start()
            b.start()
            time.sleep(1)

            # 1. live sync: inserts on A, B's external cache filling behind them.
            log(f"inserting {n} entries on A")
            cpu0 = {d.name: cpu_seconds(d.pid) for d in (a, b)}
            started = time.monotonic()
            r["insert_s"] = round(insert(workdir, SUBSCRIBERS, n, LIVE_TIMEOUT), 2)
            synced = wait_until("B's external cache to hold N", lambda: b.cache()["external"] >= n, 300)
            if synced is None:
                raise BenchError(f"B's external cache holds {b.cache()['external']} of {n}")
            r["live_sync_s"] = round(time.monotonic() - started, 2)
            r["live_rate"] = round(n / r["live_sync_s"])
            r["insert_rate"] = round(n / r["insert_s"])
            r["live_cpu_s"] = {d.name: round(cpu_seconds(d.pid) - cpu0[d.name], 1) for d in (a, b)}
            r["kernel_a"] = kernel_count(NS_A)
            r["kernel_b_after_sync"] = kernel_count(NS_B)
            r["rss_mib"] = {d.name: rss_mib(d.pid) for d in (a, b)}
            log(f"live sync: {json.dumps({k: r[k] for k in ('insert_s', 'live_sync_s', 'live_rate')})}")
            check()

            # 2. idle: nothing opens, changes or ends.
            time.sleep(2)
            ext0, pk0 = b.cache()["external"], {d.name: d.packets() for d in (a, b)}
            cpu0 = {d.name: cpu_seconds(d.pid) for d in (a, b)}
            started = time.monotonic()
            time.sleep(idle)
            held = time.monotonic() - started
            cpu1 = {d.name: cpu_seconds(d.pid) for d in (a, b)}
            pk1 = {d.name: d.packets() for d in (a, b)}
            r["idle_measured_s"] = round(held, 1)
            r["idle_cpu_pct"] = {k: round(100 * (cpu1[k] - cpu0[k]) / held, 2) for k in cpu0}
            r["idle_packets"] = {k: pk1[k][0] - pk0[k][0] for k in pk0}
            r["idle_external"] = [ext0, b.cache()["external"]]
            log(f"idle: {json.dumps({k: r[k] for k in ('idle_cpu_pct', 'idle_packets', 'idle_external')})}")
            check()

            # 3. deletes on A: one pass over the table, a source mask.
            mask = str(ipaddress.IPv4Network(f"0.0.0.0/{args.delete_prefix}").netmask)
            before = b.cache()["external"]
            started = time.monotonic()
            sh("ip", "netns", "exec", NS_A, "conntrack", "-D", "-p", "udp", "-s",
               str(SUBSCRIBERS.network_address), "--mask-src", mask)
            r["delete_cmd_s"] = round(time.monotonic() - started, 2)
            gone = wait_until("B's cache to lose the deleted entries",
                              lambda: b.cache()["external"] <= before - deleted, 120)
            r["delete_sync_s"] = round(time.monotonic() - started, 2) if gone is not None else None
            r["after_delete_external"] = b.cache()["external"]
            log(f"delete of {deleted}: {r['delete_sync_s']} s, B's cache {r['after_delete_external']}")
            live = n - deleted

            # ... and entries that expire on A.
            insert(workdir, EXPIRY_PROBES, probes, 10)
            expires = time.monotonic() + 10  # the last probe's timeout on A
            wait_until("the expiry probes on B", lambda: b.cache()["external"] >= live + probes, 30)
            gone = wait_until("B's cache to lose the expired probes",
                              lambda: b.cache()["external"] <= live, 130, interval=0.5)
            r["expiry_sync_s"] = round(time.monotonic() - expires, 1) if gone is not None else None
            r["after_expiry_external"] = b.cache()["external"]
            log(f"expiry of {probes}: removed {r['expiry_sync_s']} s after their timeout")
            check()

            # 4. bulk: B's external cache emptied, A sends its whole internal cache.
            b.ctl("-f", "external")
            wait_until("B's external cache to empty", lambda: b.cache()["external"] == 0, 30)
            internal_a = a.cache()["internal"]
            cpu0 = {d.name: cpu_seconds(d.pid) for d in (a, b)}
            started = time.monotonic()
            a.ctl("-B")
            synced = wait_until("B's cache after the bulk send", lambda: b.cache()["external"] >= live, 300)
            r["bulk_s"] = round(time.monotonic() - started, 2) if synced is not None else None
            r["bulk_rate"] = round(live / r["bulk_s"]) if r["bulk_s"] else None
            r["bulk_cpu_s"] = {d.name: round(cpu_seconds(d.pid) - cpu0[d.name], 1) for d in (a, b)}
            r["bulk_internal_a"] = internal_a
            r["after_bulk_external"] = b.cache()["external"]
            log(f"bulk: {r['bulk_s']} s for {live} ({r['bulk_rate']}/s)")
            check()

            # 5. takeover: short-lived copies synced, A's daemon dies, B commits past their timeout.
            insert(workdir, STALE_PROBES, probes, 15)
            inserted = time.monotonic()
            wait_until("the stale probes on B", lambda: b.cache()["external"] >= live + probes, 30)
            a.kill(signal.SIGKILL)
            time.sleep(max(0.0, inserted + 20 - time.monotonic()))
            r["external_before_commit"] = b.cache()["external"]
            r["stale_kept"] = r["external_before_commit"] - live
            r["kernel_b_before_commit"] = kernel_count(NS_B)
            cpu0_b = cpu_seconds(b.pid)
            started = time.monotonic()
            b.ctl("-c")
            r["commit_cmd_s"] = round(time.monotonic() - started, 2)
            target = r["kernel_b_before_commit"] + live
            wait_until("B's kernel to hold the commit", lambda: kernel_count(NS_B) >= target, 120, interval=0.5)
            r["commit_s"] = round(time.monotonic() - started, 2)
            r["commit_log_s"] = b.commit_log()
            committed = time.monotonic()
            r["commit_cpu_b_s"] = round(cpu_seconds(b.pid) - cpu0_b, 1)
            timeouts = kernel_timeouts(NS_B)  # read at once: the timeouts the commit gave
            r["kernel_b_after_commit"] = kernel_count(NS_B)
            r["committed"] = {k: len(v) for k, v in timeouts.items()}
            r["committed_timeout"] = {k: [min(v), round(statistics.median(v)), max(v)] if v else None
                                      for k, v in timeouts.items()}
            r["internal_b_after_commit"] = b.cache()["internal"]
            log(f"commit: {json.dumps({k: r[k] for k in ('commit_cmd_s', 'commit_s', 'commit_log_s', 'committed')})}")
            check()

            # 6. after the commit: the kernel reports the committed entries to B's own daemon as new ones;
            # its internal cache (what it would send to the returning peer) has to take them in.
            cpu0_b = cpu_seconds(b.pid)
            caught = wait_until("B's internal cache to hold the committed entries",
                                lambda: b.cache()["internal"] >= live, 120, interval=0.5)
            r["catchup_s"] = round(time.monotonic() - committed, 1) if caught is not None else None
            r["catchup_cpu_b_s"] = round(cpu_seconds(b.pid) - cpu0_b, 1)
            r["internal_b_final"] = b.cache()["internal"]
            r["b_log_overrun"] = b.log_lines("overrun", "resync")
            r["b_runtime"] = [" ".join(line.split()) for line in b.ctl("-s", "runtime").splitlines()
                              if "overrun" in line.lower() or "resync" in line.lower()]
            r["rss_mib_b_after_commit"] = rss_mib(b.pid)
            log(f"internal cache after the commit: {r['internal_b_after_commit']} at once, {r['internal_b_final']} "
                f"after {r['catchup_s']} s; log: {r['b_log_overrun']}")
        except BaseException:
            log(f"A: {a.log_tail()}")
            log(f"B: {b.log_tail()}")
            raise
        finally:
            for d in (a, b):
                d.kill()
    return r


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", default="100000", help="entry counts, comma-separated (one run each)")
    parser.add_argument("--idle", type=float, default=60.0, help="idle window, s")
    parser.add_argument("--delete-prefix", type=int, default=18,
                        help="entries deleted on the sender: the first /PREFIX of the subscriber range")
    parser.add_argument("--probes", type=int, default=1000, help="short-lived entries of each probe")
    parser.add_argument("--commit-timeout", type=int, default=None, help="CommitTimeout of both daemons")
    parser.add_argument("--max-hold", type=float, default=570.0, help="abort a run holding the lock longer, s")
    parser.add_argument("--json", type=Path, help="also write the figures there")
    parser.add_argument("--doc", action="store_true", help=f"write the section into {DOC.relative_to(ROOT)}")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("needs root (network namespaces)", file=sys.stderr)
        return 2
    if not 12 <= args.delete_prefix <= 32:
        parser.error("--delete-prefix: 12 to 32 (inside the subscriber range)")
    results = []
    for count in (int(c) for c in args.sessions.split(",")):
        if count > SUBSCRIBERS.num_addresses:
            parser.error(f"at most {SUBSCRIBERS.num_addresses} entries (one per subscriber address)")
        results.append(run(count, args))
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
    text = markdown(results, "python3 bench/extcache_sync.py " + " ".join(sys.argv[1:]))
    print(text)
    if args.doc:
        write_section(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
