"""The eBPF selector against the nftables one: same bucket, same member, for the same packets (root).

The program runs through BPF_PROG_TEST_RUN (no namespace needed) on frames built here; the nftables
twin is the MX's own rule (`meta mark set 0x100 meta mark set jhash ip FIELD mod N seed S map @sel`,
and in a dual-stack lab the `ip6` one into the same map) in a throwaway network namespace
(`unshare --net`, gone with its process), fed with real packets.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Iterator
from ipaddress import IPv6Address, IPv6Network, ip_address

import pytest
from labtools import SEEN_READER
from running import FLOWS, REPO, SRX, RunningLab, lab

from dataplane.core import nfthash
from dataplane.core.chash import SelectorTable, build_initial, remove_member
from dataplane.kernel import bpfsys, tcprog

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for bpf(2)"),
]

MARKS = {"srx1": 0x101, "srx2": 0x102, "srx3": 0x103, "srx4": 0x104}


def frame(src: str, dst: str, ethertype: int = 0x0800) -> bytes:
    ip = bytes([0x45, 0, 0, 28, 0, 0, 0, 0, 64, 17, 0, 0]) + socket.inet_aton(src) + socket.inet_aton(dst)
    return b"\x02" * 6 + b"\x04" * 6 + struct.pack(">H", ethertype) + ip + b"\0" * 8


class Program:
    """One loaded selector program with its bucket array holding a table."""

    def __init__(self, field: str, buckets: int, seed: int, prefixes: tuple[str, ...] = (), ipv6: bool = False):
        self.buckets = buckets
        self.sel = bpfsys.map_create(bpfsys.MAP_TYPE_ARRAY, 4, 4, buckets, "sel")
        self.cnt = bpfsys.map_create(bpfsys.MAP_TYPE_PERCPU_ARRAY, 4, tcprog.COUNTER_SIZE, tcprog.COUNTERS, "cnt")
        self.prog = bpfsys.prog_load(tcprog.selector_program(field, buckets, seed, prefixes, self.sel, self.cnt,
                                                             ipv6=ipv6), "test_selector")

    def load_table(self, table: SelectorTable, empty: set[int] = frozenset()) -> None:  # type: ignore[assignment]
        bpfsys.array_update(self.sel, [(b, 0 if b in empty else MARKS[name]) for b, name in enumerate(table.buckets)])

    def mark(self, packet: bytes) -> int:
        retval, mark = bpfsys.test_run(self.prog, packet)
        assert retval == tcprog.TC_ACT_OK, "the selector never drops or redirects"
        return mark

    def close(self) -> None:
        for fd in (self.prog, self.sel, self.cnt):
            os.close(fd)


@pytest.fixture
def program() -> Iterator[type[Program]]:
    made: list[Program] = []

    def make(*args: object, **kwargs: object) -> Program:
        p = Program(*args, **kwargs)  # type: ignore[arg-type]
        made.append(p)
        return p

    yield make  # type: ignore[misc]
    for p in made:
        p.close()


def addresses(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [socket.inet_ntoa(struct.pack(">I", rng.getrandbits(32))) for _ in range(count)]


@pytest.mark.parametrize(("field", "buckets", "seed"), [
    ("saddr", 6400, 0x5EED), ("daddr", 6400, 0x5EED), ("saddr", 64, 0), ("daddr", 7, 0xFFFFFFFF),
    ("saddr", 65536, 0x12345678), ("daddr", 2, 1),
])
def test_member_is_the_table_s_member_of_the_nfthash_bucket(program: type[Program], field: str, buckets: int,
                                                             seed: int) -> None:
    prog = program(field, buckets, seed)
    table = remove_member(build_initial(list(MARKS), buckets), "srx3", list(MARKS)) if buckets >= 4 else \
        build_initial(["srx1", "srx2"], buckets)
    prog.load_table(table)
    sources, destinations = addresses(1500, buckets), addresses(1500, seed)
    for src, dst in zip(sources, destinations, strict=True):
        key = src if field == "saddr" else dst
        want = MARKS[table.buckets[nfthash.bucket(key, buckets, seed)]]
        assert prog.mark(frame(src, dst)) == want, f"{src} -> {dst}"


def test_an_empty_bucket_leaves_the_steering_mark_and_other_frames_are_untouched(program: type[Program]) -> None:
    prog = program("saddr", 64, 0x5EED)
    table = build_initial(list(MARKS), 64)
    empty = {nfthash.bucket("100.64.0.1", 64, 0x5EED)}
    prog.load_table(table, empty)
    assert prog.mark(frame("100.64.0.1", "203.0.113.9")) == tcprog.TLB_BIT, "no member: the blackhole mark"
    assert prog.mark(frame("100.64.0.1", "203.0.113.9", ethertype=0x0806)) == 0, "not IPv4: not steered"
    # (the kernel's test run refuses an IPv4 frame shorter than its header: the bare header is the edge)
    other = next(a for a in addresses(50, 9) if nfthash.bucket(a, 64, 0x5EED) not in empty)
    assert prog.mark(frame(other, "203.0.113.9")[:34]) == MARKS[table.buckets[nfthash.bucket(other, 64, 0x5EED)]]


def test_match_prefixes_steer_only_their_addresses(program: type[Program]) -> None:
    prog = program("daddr", 64, 7, ("100.64.0.0/16", "10.1.2.0/24"))
    table = build_initial(list(MARKS), 64)
    prog.load_table(table)
    for dst in ("100.64.77.1", "10.1.2.200", "100.64.0.0"):
        assert prog.mark(frame("203.0.113.9", dst)) == MARKS[table.buckets[nfthash.bucket(dst, 64, 7)]]
    for dst in ("100.65.0.1", "10.1.3.1", "203.0.113.9", "99.64.0.1"):
        assert prog.mark(frame("203.0.113.9", dst)) == 0, f"{dst} is outside the prefixes"


def test_counters_count_each_member_s_packets_and_ip_bytes(program: type[Program]) -> None:
    prog = program("saddr", 64, 1)
    table = build_initial(list(MARKS), 64)
    prog.load_table(table)
    sources = addresses(200, 3)
    for src in sources:
        prog.mark(frame(src, "203.0.113.9"))
    cpus = bpfsys.possible_cpus()
    for name, mark in MARKS.items():
        raw = bpfsys.map_lookup(prog.cnt, struct.pack("<I", mark & 0xFF), tcprog.COUNTER_SIZE * cpus)
        values = struct.unpack(f"<{2 * cpus}Q", raw)
        want = sum(1 for s in sources if table.buckets[nfthash.bucket(s, 64, 1)] == name)
        assert (sum(values[0::2]), sum(values[1::2])) == (want, want * (len(frame("1.1.1.1", "2.2.2.2")) - 14))


NFT_TWIN = r"""
import json, socket, subprocess, sys
buckets, seed, elements, pairs = json.loads(sys.stdin.read())
run = lambda *a: subprocess.run(a, check=True, capture_output=True, text=True)
run("ip", "link", "set", "lo", "up")
run("ip", "route", "add", "local", "100.64.0.0/16", "dev", "lo")
run("ip", "route", "add", "203.0.113.0/24", "dev", "lo")
elems = ", ".join(f"{b} : {m}" for b, m in elements)
rules = "".join(
    f"meta mark set 0x100 meta mark set jhash ip {f} mod {buckets} seed {seed} map @sel\n"
    f"add @seen_{f} {{ ip saddr . ip daddr . meta mark }}\n" for f in ("saddr", "daddr"))
sets = "".join(f"set seen_{f} {{ typeof ip saddr . ip daddr . meta mark; flags dynamic; size 65535; }}\n"
               for f in ("saddr", "daddr"))
subprocess.run(["nft", "-f", "-"], input=f"table ip twin {{ map sel {{ typeof numgen inc mod {buckets} : meta mark; "
               f"elements = {{ {elems} }} }}\n{sets} chain out {{ type filter hook output priority mangle; "
               f"policy accept;\n{rules} }}\n}}\n", check=True, text=True)
for src, dst in pairs:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind((src, 0))
        s.sendto(b"x", (dst, 9))
print(json.dumps(read_seen("ip")))
"""


@pytest.mark.skipif(shutil.which("nft") is None or shutil.which("unshare") is None, reason="needs nft and unshare")
def test_same_marks_as_the_nftables_rule_on_the_same_packets(program: type[Program]) -> None:
    """The kernel's own nft jhash map against the program: identical marks, also for empty buckets."""
    buckets, seed = 256, 0x5EED
    table = remove_member(build_initial(list(MARKS), buckets), "srx2", list(MARKS))
    empty = set(range(0, buckets, 17))
    rng = random.Random(5)
    pairs = [(f"100.64.{rng.randrange(256)}.{rng.randrange(1, 255)}", f"203.0.113.{rng.randrange(1, 255)}")
             for _ in range(600)]
    pairs = list(dict.fromkeys(pairs))
    elements = [(b, MARKS[name]) for b, name in enumerate(table.buckets) if b not in empty]
    done = subprocess.run(["unshare", "--net", sys.executable, "-c", SEEN_READER + NFT_TWIN],
                          capture_output=True, text=True,
                          input=json.dumps([buckets, seed, elements, pairs]), timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    for field in ("saddr", "daddr"):
        by_nft = {(src, dst): mark for src, dst, mark in seen[field]}
        assert set(by_nft) == set(pairs), "every packet passed the nft rule"
        assert any(mark == tcprog.TLB_BIT for mark in by_nft.values()), "some hit an empty bucket"
        prog = program(field, buckets, seed)
        prog.load_table(table, empty)
        by_bpf = {(src, dst): prog.mark(frame(src, dst)) for src, dst in pairs}
        assert by_bpf == by_nft


# ---------------------------------------------------------------- IPv6 (the dual-stack program)
def frame6(src: str, dst: str) -> bytes:
    ip = struct.pack(">IHBB", 6 << 28, 8, 17, 64) + IPv6Address(src).packed + IPv6Address(dst).packed
    return b"\x02" * 6 + b"\x04" * 6 + struct.pack(">H", 0x86DD) + ip + b"\0" * 8


def addresses6(count: int, seed: int, within: str = "::/0") -> list[str]:
    rng = random.Random(seed)
    net = IPv6Network(within)
    return [str(net.network_address + rng.getrandbits(128 - net.prefixlen)) for _ in range(count)]


@pytest.mark.parametrize(("field", "buckets", "seed"), [
    ("saddr", 6400, 0x5EED), ("daddr", 6400, 0x5EED), ("saddr", 7, 0xFFFFFFFF), ("daddr", 65536, 0x12345678),
])
def test_ipv6_member_is_the_table_s_member_of_the_nfthash_bucket(program: type[Program], field: str, buckets: int,
                                                                  seed: int) -> None:
    prog = program(field, buckets, seed, (), True)
    table = remove_member(build_initial(list(MARKS), buckets), "srx3", list(MARKS)) if buckets >= 4 else \
        build_initial(["srx1", "srx2"], buckets)
    prog.load_table(table)
    for src, dst in zip(addresses6(1500, buckets), addresses6(1500, seed, "2001:db8:172:80::/96"), strict=True):
        key = src if field == "saddr" else dst
        want = MARKS[table.buckets[nfthash.bucket(key, buckets, seed)]]
        assert prog.mark(frame6(src, dst)) == want, f"{src} -> {dst}"
    # the IPv4 path of the same program is the IPv4 program's
    for src in addresses(300, 4):
        key = src if field == "saddr" else "203.0.113.9"
        assert prog.mark(frame(src, "203.0.113.9")) == MARKS[table.buckets[nfthash.bucket(key, buckets, seed)]]


def test_ipv6_prefixes_and_counters(program: type[Program]) -> None:
    prog = program("daddr", 64, 7, ("100.64.0.0/16", "2001:db8:172:80::/96"), True)
    table = build_initial(list(MARKS), 64)
    prog.load_table(table)
    inside = addresses6(200, 1, "2001:db8:172:80::/96")
    for dst in inside:
        assert prog.mark(frame6("2001:db8:203::9", dst)) == MARKS[table.buckets[nfthash.bucket(dst, 64, 7)]]
    for dst in ("2001:db8:172:81::1", "2001:db8:172:80:1::1", "2001:db8:203::9", "::ffff:100.64.0.1"):
        assert prog.mark(frame6("2001:db8:172:80::1", dst)) == 0, f"{dst} is outside the prefixes"
    assert prog.mark(frame("203.0.113.9", "100.64.1.1")) == MARKS[table.buckets[nfthash.bucket("100.64.1.1", 64, 7)]]
    cpus = bpfsys.possible_cpus()
    for name, mark in MARKS.items():
        raw = bpfsys.map_lookup(prog.cnt, struct.pack("<I", mark & 0xFF), tcprog.COUNTER_SIZE * cpus)
        values = struct.unpack(f"<{2 * cpus}Q", raw)
        want6 = sum(1 for d in inside if table.buckets[nfthash.bucket(d, 64, 7)] == name)
        want4 = 1 if table.buckets[nfthash.bucket("100.64.1.1", 64, 7)] == name else 0
        assert (sum(values[0::2]), sum(values[1::2])) == (want6 + want4, want6 * 48 + want4 * 28)


NFT_TWIN6 = r"""
import json, socket, subprocess, sys
buckets, seed, elements, prefixes, pairs = json.loads(sys.stdin.read())
run = lambda *a: subprocess.run(a, check=True, capture_output=True, text=True)
run("ip", "link", "set", "lo", "up")
run("ip", "-6", "route", "add", "local", "2001:db8::/32", "dev", "lo")
run("sysctl", "-qw", "net.ipv6.ip_nonlocal_bind=1")
elems = ", ".join(f"{b} : {m}" for b, m in elements)
match = lambda f: f"ip6 {f} {{ {', '.join(prefixes)} }} " if prefixes else "meta nfproto ipv6 "
rules = "".join(
    f"meta mark set 0\n{match(f)}meta mark set 0x100 meta mark set jhash ip6 {f} mod {buckets} seed {seed} map @sel\n"
    f"meta nfproto ipv6 add @seen_{f} {{ ip6 saddr . ip6 daddr . meta mark }}\n" for f in ("saddr", "daddr"))
sets = "".join(f"set seen_{f} {{ typeof ip6 saddr . ip6 daddr . meta mark; flags dynamic; size 65535; }}\n"
               for f in ("saddr", "daddr"))
subprocess.run(["nft", "-f", "-"], input=f"table inet twin {{ map sel {{ typeof numgen inc mod {buckets} : meta mark; "
               f"elements = {{ {elems} }} }}\n{sets} chain out {{ type filter hook output priority mangle; "
               f"policy accept;\n{rules} }}\n}}\n", check=True, text=True)
for src, dst in pairs:
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
        s.bind((src, 0))
        s.sendto(b"x", (dst, 9))
print(json.dumps(read_seen("inet")))
"""


@pytest.mark.skipif(shutil.which("nft") is None or shutil.which("unshare") is None, reason="needs nft and unshare")
@pytest.mark.parametrize(("buckets", "seed", "prefixes"), [
    (6400, 0x5EED, ()), (256, 0x5EED, ("2001:db8:172:80::/96", "2001:db8:9:8000::/49")), (7, 1, ()),
])
def test_ipv6_same_marks_as_the_nftables_ip6_rule_on_the_same_packets(program: type[Program], buckets: int,
                                                                       seed: int, prefixes: tuple[str, ...]) -> None:
    """The kernel's own `jhash ip6` rule (the MX's, prefixes and empty buckets included) against the
    program on the same addresses: identical marks, so identical buckets, for every address."""
    table = remove_member(build_initial(list(MARKS), buckets), "srx2", list(MARKS)) if buckets >= 4 else \
        build_initial(["srx1", "srx4"], buckets)
    empty = set(range(0, buckets, 17))
    rng = random.Random(buckets)
    pool = (addresses6(400, seed, "2001:db8:172:80::/96") + addresses6(150, seed + 1, "2001:db8:9::/48")
            + addresses6(150, seed + 2, "2001:db8::/32"))
    pairs = list(dict.fromkeys((a, rng.choice(pool)) for a in pool))
    elements = [(b, MARKS[name]) for b, name in enumerate(table.buckets) if b not in empty]
    done = subprocess.run(["unshare", "--net", sys.executable, "-c", SEEN_READER + NFT_TWIN6],
                          capture_output=True, text=True,
                          input=json.dumps([buckets, seed, elements, list(prefixes), pairs]), timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    want = {(str(ip_address(s)), str(ip_address(d))) for s, d in pairs}
    for field in ("saddr", "daddr"):
        by_nft = {(str(ip_address(s)), str(ip_address(d))): m for s, d, m in seen[field]
                  if (str(ip_address(s)), str(ip_address(d))) in want}
        assert set(by_nft) == want, "every packet passed the nft rules"
        assert any(mark == tcprog.TLB_BIT for mark in by_nft.values()), "some hit an empty bucket"
        if prefixes:
            assert any(mark == 0 for mark in by_nft.values()), "some are outside the prefixes"
        prog = program(field, buckets, seed, prefixes, True)
        prog.load_table(table, empty)
        by_bpf = {(s, d): prog.mark(frame6(s, d)) for s, d in want}
        assert by_bpf == by_nft


# ---------------------------------------------------------------- a lab with the eBPF selector
needs_lab = pytest.mark.skipif(shutil.which("bird") is None or shutil.which("conntrack") is None,
                               reason="needs bird2 and conntrack (make deps)")


@pytest.fixture(scope="module")
def ebpf_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningLab]:
    with RunningLab("eb1", REPO / "labs/topology1.yml", tmp_path_factory.mktemp("ebpf"), selector="ebpf") as running:
        yield running


def _program_ids(lab: RunningLab) -> set[int]:
    ids = set()
    for ns in (lab.ns("mx1") + "-trust-vr", lab.ns("mx1") + "-untrust-vr"):
        for dev in ("ge-0-0-0", "ge-0-0-1"):
            out = subprocess.run(["ip", "netns", "exec", ns, "tc", "-j", "filter", "show", "dev", dev, "ingress"],
                                 capture_output=True, text=True).stdout
            ids |= {int(f["options"]["prog"]["id"]) for f in json.loads(out or "[]") if "options" in f}
    return ids


def _check_carriers_follow_the_table(lab: RunningLab, port: int) -> dict[str, str]:
    """Every flow answered, each on the SRX the selector's table gives its bucket."""
    assert lab.probe(port)["missing"] == [], "a reply that crossed another SRX would be dropped by its SFW"
    status, config = lab.selector(), lab.selector_config()
    table = status["table"]
    assert isinstance(table, list)
    where = lab.carriers(port)
    assert len(where) == FLOWS
    for address, srx in where.items():
        assert srx == table[nfthash.bucket(address, int(config["buckets"]), int(config["seed"]))], address
    return where


@needs_lab
def test_ebpf_lab_steers_by_the_table_and_fails_over(ebpf_lab: RunningLab) -> None:
    mx = ebpf_lab.ns("mx1")
    assert subprocess.run(["ip", "netns", "exec", f"{mx}-trust-vr", "nft", "list", "table", "ip", "mxlb"],
                          capture_output=True).returncode != 0, "no nft selector in an eBPF lab"
    assert len(_program_ids(ebpf_lab)) == 2, "one program per side, on its ingress interfaces"
    before = _check_carriers_follow_the_table(ebpf_lab, 41000)
    deadline = time.monotonic() + 10  # the daemon reads the program's counters about once a second
    while True:
        counters = [m["counters"] for m in ebpf_lab.selector()["members"]]  # type: ignore[union-attr]
        if all(c.get("trust", {}).get("packets", 0) > 0 for c in counters) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert all(c.get("trust", {}).get("packets", 0) > 0 for c in counters), counters

    ebpf_lab.exec("srx2", "ip", "link", "set", "ge-0-0-0", "down")
    try:
        ebpf_lab.wait_members({"srx1", "srx3", "srx4"})
        after = _check_carriers_follow_the_table(ebpf_lab, 41001)
    finally:
        ebpf_lab.exec("srx2", "ip", "link", "set", "ge-0-0-0", "up")
    moved = {a for a in before if before[a] != after[a]}
    assert moved == {a for a in before if before[a] == "srx2"}, "exactly the flows of srx2 move"
    ebpf_lab.wait_members(set(SRX))


@needs_lab
def test_ebpf_selector_restart_keeps_program_and_map(ebpf_lab: RunningLab) -> None:
    ebpf_lab.wait_members(set(SRX))
    ids, status = _program_ids(ebpf_lab), ebpf_lab.selector()
    lab("restart", "--lab", ebpf_lab.name, "--kill", "mx1", "mxlb")
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            now = ebpf_lab.selector()
        except (OSError, ValueError):
            now = status
        if now["pid"] != status["pid"]:
            break
        time.sleep(0.1)
    assert now["pid"] != status["pid"], "the selector came back"
    assert _program_ids(ebpf_lab) == ids, "the running program was kept, not reloaded"
    assert now["table"] == status["table"] and now["changes"] == 0, "the programmed map was adopted as it was"
    _check_carriers_follow_the_table(ebpf_lab, 41002)


@needs_lab
def test_ebpf_lab_per_srx_rates_come_from_the_program_s_counters(ebpf_lab: RunningLab) -> None:
    """`lab traffic stats` (and the events runner's timeline) read the eBPF selector's counters."""
    lab("traffic", "start", "--lab", ebpf_lab.name, "--flows", "40", "--rate", "2000", "--duration", "30")
    try:
        stats = json.loads(lab("traffic", "stats", "--lab", ebpf_lab.name, "--json").stdout)
    finally:
        lab("traffic", "stop", "--lab", ebpf_lab.name, "--json")
    assert set(stats["pps_per_srx"]) == set(SRX), stats
    assert sum(stats["pps_per_srx"].values()) > 1000, stats
