"""The dual-stack topology 3 with `services.selector: ebpf` up for real (root): the tc program steers IPv6
flows into the same buckets as the nftables `ip6` rule would, verified from the SRXs' own session tables
(conntrack, as tests/integration/test_dualstack.py does for the nftables selector): each flow crosses one
SRX both ways, a node of the pair its bucket's member names; the program's per-member counters count
exactly those flows; IPv4 is steered as before by the same program."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from ipaddress import ip_address

import pytest
from running import REPO, SRX, RunningLab

from dataplane.core import nfthash
from lab_orchestrator.events import sessions

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(shutil.which("bird") is None or shutil.which("conntrack") is None,
                       reason="needs bird2 and conntrack (make deps)"),
]

SERVER6 = "2001:db8:203::9"
CLIENTS6 = "2001:db8:172:80::/112"
FLOWS6 = 300
PAIRS = {"MNHA_SRX1": {"srx1", "srx2"}, "MNHA_SRX3": {"srx3", "srx4"}}
GROUP = {"srx1": 1, "srx2": 1, "srx3": 3, "srx4": 3}


@pytest.fixture(scope="module")
def dual(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningLab]:
    with RunningLab("eb6", REPO / "labs/topology3-dualstack.yml", tmp_path_factory.mktemp("ebpf6"),
                    selector="ebpf") as running:
        running.echo(SERVER6, 7006)
        yield running


def _probe6(dual: RunningLab, port: int) -> dict[str, object]:
    out = dual.exec("client", sys.executable, "-m", "dataplane.traffic.udpprobe", "probe", "--sources", CLIENTS6,
                    "--count", str(FLOWS6), "--to", f"[{SERVER6}]:7006", "--port", str(port))
    result: dict[str, object] = json.loads(out)
    return result


def _counters(dual: RunningLab) -> dict[str, dict[str, int]]:
    """member -> side -> packets the program counted (the daemon's status, refreshed about once a second)."""
    members = dual.selector()["members"]
    assert isinstance(members, list)
    return {m["name"]: {side: c.get("packets", 0) for side, c in m["counters"].items()} for m in members}


def _settled_counters(dual: RunningLab) -> dict[str, dict[str, int]]:
    last, since = _counters(dual), time.monotonic()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = _counters(dual)
        if now != last:
            last, since = now, time.monotonic()
        elif time.monotonic() - since >= 2.5:
            break
    return last


def test_no_nft_selector_and_a_program_on_both_sides(dual: RunningLab) -> None:
    mx = dual.ns("mx1")
    for side in ("trust-vr", "untrust-vr"):
        ns = f"{mx}-{side}"
        assert subprocess.run(["ip", "netns", "exec", ns, "nft", "list", "table", "inet", "mxlb"],
                              capture_output=True).returncode != 0, "no nft selector in an eBPF lab"
        dev = "ge-0-0-0" if side == "trust-vr" else "ge-0-0-1"
        out = subprocess.run(["ip", "netns", "exec", ns, "tc", "-j", "filter", "show", "dev", dev, "ingress"],
                             capture_output=True, text=True, check=True).stdout
        assert any((f.get("options") or {}).get("bpf_name") == "lab_selector" for f in json.loads(out or "[]")), out


def test_ipv6_flows_cross_the_srx_of_their_bucket_both_ways(dual: RunningLab) -> None:
    dual.wait_members(set(PAIRS))
    before = _settled_counters(dual)
    result = _probe6(dual, 41600)
    assert result["missing"] == [], f"{len(result['missing'])} IPv6 flows got no echo"  # type: ignore[arg-type]
    carriers: dict[str, str] = {}
    for srx in SRX:
        for s in sessions.read(dual.ns(srx)):
            if s.protocol == "udp" and s.source_port == 41600 and s.packets > 0:
                assert ":" in s.source
                assert s.source not in carriers, f"{s.source} crossed {carriers.get(s.source)} and {srx}"
                carriers[s.source] = srx
    answered = [str(ip_address(a)) for a in result["answered"]]  # type: ignore[union-attr]
    assert sorted(carriers) == sorted(answered)
    status, config = dual.selector(), dual.selector_config()
    table, buckets, seed = status["table"], int(config["buckets"]), int(config["seed"])  # type: ignore[call-overload]
    assert isinstance(table, list)
    member = {a: table[nfthash.bucket(a, buckets, seed)] for a in carriers}
    wrong = {a: (srx, member[a]) for a, srx in carriers.items() if srx not in PAIRS[member[a]]}
    assert not wrong, f"flows off their bucket's member: {dict(list(wrong.items())[:5])}"
    assert {pair for pair, nodes in PAIRS.items() if set(carriers.values()) & nodes} == set(PAIRS)
    # The program's own counters: each member counted (at least, the probe resends what got no echo) the
    # requests of its flows on the trust side (by source) and their echoes on the untrust side (by
    # destination); a flow hashed into another bucket would leave some member short.
    after = _settled_counters(dual)
    for name in PAIRS:
        flows = sum(1 for a in carriers if member[a] == name)
        for side in ("trust", "untrust"):
            got = after[name].get(side, 0) - before[name].get(side, 0)
            assert flows <= got <= flows + FLOWS6 // 10, (name, side, flows, got)


def test_ipv4_still_steered_by_the_same_program(dual: RunningLab) -> None:
    result = dual.probe(40700, "100.64.8.0/24")
    assert result["missing"] == []
    where = dual.carriers(40700, GROUP)
    assert len(where) == len(result["answered"])  # type: ignore[arg-type]
    status, config = dual.selector(), dual.selector_config()
    table, buckets, seed = status["table"], int(config["buckets"]), int(config["seed"])  # type: ignore[call-overload]
    assert isinstance(table, list)
    wrong = {a: srx for a, srx in where.items() if srx not in PAIRS[table[nfthash.bucket(a, buckets, seed)]]}
    assert not wrong, dict(list(wrong.items())[:5])
