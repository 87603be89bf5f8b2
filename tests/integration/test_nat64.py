"""NAT64 on the dual-stack topology 3 (labs/topology3-dualstack.yml, `services.nat64`) up for real (root):
IPv6 clients that send to the NAT64 address reach the IPv4 server through the translator of the SRX their
bucket names, their sources translated into the pair's NAT64 pool; both sessions (the IPv6 one and the
translated IPv4 one) are synchronised to the MNHA peer, and after the carrying SRX is powered off the peer
passes the clients' next datagrams with the same pool address and port."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from ipaddress import IPv4Address, IPv4Network, IPv6Address
from pathlib import Path

import pytest
from running import REPO, SRX, RunningLab, lab

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(any(shutil.which(t) is None for t in ("bird", "conntrack", "tayga")),
                       reason="needs bird2, conntrack and tayga (make deps)"),
]

NAT64_ADDRESS = "2001:db8:64::1"  # labs/topology3-dualstack.yml services.nat64
SERVER = "203.0.113.64"
CLIENTS = "2001:db8:172:80::/112"
MAPPED = IPv4Network("10.255.0.0/16")
PORT, SPORT, COUNT = 7064, 41064, 200
BINDING = re.compile(r"src=(\S+) dst=(\S+) sport=(\d+) dport=(\d+) .*?src=(\S+) dst=(\S+) sport=(\d+) dport=(\d+)")


@pytest.fixture(scope="module")
def ds(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningLab]:
    with RunningLab("n64", REPO / "labs/topology3-dualstack.yml", tmp_path_factory.mktemp("nat64")) as running:
        running.echo(SERVER, PORT)
        yield running


def _probe(ds: RunningLab) -> dict[str, list[str]]:
    out = ds.exec("client", sys.executable, "-m", "dataplane.traffic.udpprobe", "probe", "--sources", CLIENTS,
                  "--count", str(COUNT), "--to", f"[{NAT64_ADDRESS}]:{PORT}", "--port", str(SPORT))
    result: dict[str, list[str]] = json.loads(out)
    return result


def _bindings(ds: RunningLab, srx: str) -> dict[str, tuple[str, int]]:
    """The translated IPv4 sessions of the probe on SRX: mapped client -> (pool address, port) the server
    answers to."""
    out = subprocess.run(["ip", "netns", "exec", ds.ns(srx), "conntrack", "-L", "-p", "udp", "--dport", str(PORT)],
                         capture_output=True, text=True, check=True).stdout
    found = {}
    for line in out.splitlines():
        m = BINDING.search(line)
        if m and ":" not in m.group(1) and int(m.group(3)) == SPORT:
            found[m.group(1)] = (m.group(6), int(m.group(8)))
    return found


def _v6_sessions(ds: RunningLab, srx: str) -> set[str]:
    out = subprocess.run(["ip", "netns", "exec", ds.ns(srx), "conntrack", "-L", "-f", "ipv6", "-p", "udp",
                          "--dport", str(PORT)], capture_output=True, text=True, check=True).stdout
    return {m.group(1) for m in map(BINDING.search, out.splitlines()) if m and m.group(2) == NAT64_ADDRESS}


def _mapped(client: str) -> str:
    return str(MAPPED.network_address + (int(IPv6Address(client)) & 0xFFFF))


def _pool(ds: RunningLab, srx: str) -> IPv4Network:
    pool = ds.running.plan().node(srx).nat64_pool
    assert pool is not None
    return IPv4Network(pool)


def test_ipv6_clients_reach_the_ipv4_server_through_their_pairs_pool(ds: RunningLab) -> None:
    result = _probe(ds)
    assert result["missing"] == [], f"{len(result['missing'])} NAT64 clients got no answer"
    carried: dict[str, str] = {}
    for srx in SRX:
        for client in _v6_sessions(ds, srx):
            bindings = _bindings(ds, srx)
            if _mapped(client) in bindings and bindings[_mapped(client)][0] != "":
                carried.setdefault(client, srx)
    assert sorted(carried) == sorted(result["answered"])
    for srx in SRX:
        own = _bindings(ds, srx)
        for mapped, (address, _port) in own.items():
            assert IPv4Address(mapped) in MAPPED
            assert IPv4Address(address) in _pool(ds, srx), f"{srx}: {mapped} translated to {address}"
    # both pairs carry some: the clients are spread by the TLB selector, not all on one pair
    pairs = {("srx1", "srx2"), ("srx3", "srx4")}
    assert all(any(_bindings(ds, n) for n in pair) for pair in pairs)
    assert _pool(ds, "srx1") == _pool(ds, "srx2") != _pool(ds, "srx3") == _pool(ds, "srx4")


def test_nat64_sessions_survive_a_power_off_with_their_address_and_port(ds: RunningLab) -> None:
    _probe(ds)  # refresh: every client's sessions on its SRX and, synchronised, on the peer
    before = {srx: _bindings(ds, srx) for srx in ("srx1", "srx2")}
    carried_v6 = _v6_sessions(ds, "srx1")
    assert carried_v6, "srx1 carried no NAT64 client"
    # the peer holds copies of both sessions of each client (the IPv6 one and its translation)
    assert carried_v6 <= _v6_sessions(ds, "srx2")
    assert all(before["srx2"].get(m) == b for m, b in before["srx1"].items())
    # The copies above are the synchronisation's proof; the pool's address and port after the failover are
    # what a client sees (persistent NAT would give the same address afresh: the kept port is the point)
    lab("fail", "--lab", ds.name, "srx1", "srx-power-off")
    try:
        result = _probe(ds)
        assert result["missing"] == [], f"{len(result['missing'])} clients lost with srx1 off"
        after = _bindings(ds, "srx2")
        moved = {_mapped(c) for c in carried_v6}
        changed = {m: (before["srx1"][m], after.get(m)) for m in moved if after.get(m) != before["srx1"][m]}
        assert changed == {}, f"{len(changed)} of {len(moved)} clients got another pool address or port: {changed}"
    finally:
        lab("restore", "--lab", ds.name, "srx1")


def _tayga_pid(ds: RunningLab, srx: str) -> int:
    conf = f"{ds.running.state.state_dir}/nodes/{srx}/tayga.conf"
    found = subprocess.run(["pgrep", "-f", f"tayga -c {conf}"], capture_output=True, text=True)
    pids = found.stdout.split()
    assert len(pids) == 1, f"{srx}: tayga processes {pids}"
    return int(pids[0])


def test_the_translator_is_restarted_and_keeps_its_routes(ds: RunningLab) -> None:
    ns = ds.ns("srx3")
    before = _tayga_pid(ds, "srx3")
    lab("restart", "--lab", ds.name, "srx3", "nat64", "--kill")
    assert _tayga_pid(ds, "srx3") != before  # a new translator, on the device and routes the first one had
    after = subprocess.run(["ip", "netns", "exec", ns, "ip", "-6", "route", "show", "dev", "nat64"],
                           capture_output=True, text=True, check=True).stdout
    assert NAT64_ADDRESS in after
    result = _probe(ds)
    assert result["missing"] == [], f"{len(result['missing'])} clients unanswered after the translator's restart"


def test_events_judge_nat64_flows_both_ways_through_a_power_off(ds: RunningLab, tmp_path: Path) -> None:
    """`lab events run --family 64`: the generator's NAT64 flows (IPv6 from the clients, IPv4 at the server,
    which answers each flow's binding) are judged on their own; the flows of the powered-off SRX go on
    through its peer with the pool address and port they had, and every flow is answered."""
    report = tmp_path / "events.json"
    result = lab("events", "run", "--lab", ds.name, "-e", "srx-power-off", "--target", "srx1", "--family", "64",
                 "--flows", "60", "--rate", "3000", "--warmup", "1.5", "--hold", "1.5", "--duration", "2.5",
                 "--json-out", str(report), check=False)
    assert report.exists(), result.stderr + result.stdout
    event = json.loads(report.read_text())["events"][0]
    assert result.returncode == 0 and event["passed"], (event.get("reasons"), result.stderr[-2000:])
    assert list(event["families"]) == ["64"] and event["families"]["64"]["flows"] == 60
    assert event["reverse"]["flows_never_seen"] == 0 and event["reverse"]["received"] > 0
    pools = {srx: _pool(ds, srx) for srx in SRX}
    rows = event["per_flow"]
    assert all(":" in r["src"] and r["bindings"] for r in rows)
    for row in rows:  # each binding in the NAT64 pool of the pair that carried the flow, kept through the event
        assert IPv4Address(row["bindings"][0].split(":")[0]) in pools[row["srx_before"]], row
        assert not row["rebound"], row
    assert any(r["srx_before"] == "srx1" and r["srx_after"] == "srx2" for r in rows), "no flow moved to the peer"
