"""`dataplane.core.nfthash` against this kernel's nftables on IPv6 (root): the MX selector's own
expression, `jhash ip6 saddr|daddr mod N seed S`, in a throwaway network namespace (`unshare --net`,
gone with its process), fed with real packets from and to hundreds of addresses."""

from __future__ import annotations

import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
from ipaddress import ip_address
from pathlib import Path

import pytest
from labtools import SEEN_READER

from dataplane.core import nfthash

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a network namespace"),
    pytest.mark.skipif(shutil.which("nft") is None or shutil.which("unshare") is None, reason="needs nft and unshare"),
]

TWIN6 = r"""
import json, socket, subprocess, sys
buckets, seed, addresses = json.loads(sys.stdin.read())
run = lambda *a: subprocess.run(a, check=True, capture_output=True, text=True)
run("ip", "link", "set", "lo", "up")
run("ip", "-6", "route", "add", "local", "2001:db8::/32", "dev", "lo")
run("sysctl", "-qw", "net.ipv6.ip_nonlocal_bind=1")
rules = "".join(f"meta mark set jhash ip6 {f} mod {buckets} seed {seed}\nadd @seen_{f} {{ ip6 {f} . meta mark }}\n"
                for f in ("saddr", "daddr"))
sets = "".join(f"set seen_{f} {{ typeof ip6 {f} . meta mark; flags dynamic; size 65535; }}\n"
               for f in ("saddr", "daddr"))
subprocess.run(["nft", "-f", "-"], input=f"table ip6 twin {{\n{sets} chain out {{ type filter hook output "
               f"priority mangle; policy accept;\n{rules} }}\n}}\n", check=True, text=True)
for a in addresses:
    with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
        s.bind((a, 0))
        s.sendto(b"x", (a, 9))
print(json.dumps(read_seen("ip6")))
"""


@pytest.mark.parametrize(("buckets", "seed"), [(256, 0x5EED), (6400, 0x5EED), (7, 1)])
def test_ipv6_buckets_are_the_kernel_s(buckets: int, seed: int) -> None:
    rng = random.Random(buckets)
    addresses = sorted({str(ip_address(f"2001:db8:{rng.randrange(65536):x}:{rng.randrange(65536):x}::"
                                       f"{rng.randrange(1, 65536):x}")) for _ in range(300)})
    done = subprocess.run(["unshare", "--net", sys.executable, "-c", SEEN_READER + TWIN6],
                          capture_output=True, text=True,
                          input=json.dumps([buckets, seed, addresses]), timeout=60)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    for field in ("saddr", "daddr"):
        by_kernel = {str(ip_address(a)): mark for a, mark in seen[field] if ip_address(a) != ip_address("::1")}
        assert set(by_kernel) >= set(addresses), "every packet passed the rule"
        assert {a: nfthash.bucket(a, buckets, seed) for a in addresses} == {a: by_kernel[a] for a in addresses}


def _golden6() -> list[tuple[str, int, int, int]]:
    """The eBPF program's unit tests' golden vectors (tests/unit/test_tcprog.py GOLDEN6)."""
    spec = importlib.util.spec_from_file_location("golden_tcprog", Path(__file__).parents[1] / "unit/test_tcprog.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return list(module.GOLDEN6)


def test_the_ebpf_unit_tests_golden_vectors_are_the_kernel_s() -> None:
    golden = _golden6()
    for buckets, seed in sorted({(b, s) for _, b, s, _ in golden}):
        addresses = [a for a, b, s, _ in golden if (b, s) == (buckets, seed)]
        done = subprocess.run(["unshare", "--net", sys.executable, "-c", SEEN_READER + TWIN6],
                              capture_output=True, text=True,
                              input=json.dumps([buckets, seed, addresses]), timeout=60)
        assert done.returncode == 0, done.stderr
        seen = json.loads(done.stdout)
        for field in ("saddr", "daddr"):
            by_kernel = {str(ip_address(a)): mark for a, mark in seen[field]}
            for address, b, s, bucket in golden:
                if (b, s) == (buckets, seed):
                    assert by_kernel[str(ip_address(address))] == bucket, (field, address, buckets, seed)
