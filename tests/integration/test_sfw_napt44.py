"""On real namespaces: labs/topology3-mixed.yml runs SFW and NAPT44 on the same SRXs at once, chosen by
the client's source prefix (the JVD's srx1a_srx4600.conf: rule srx_nat_rule1 translates source-address
172.80.0.0/12, SFW44_POLICY passes 172.160.0.0/12 untranslated).

Flows from the SFW prefix (100.64.0.0/17) reach the server with their own source address, flows from the
NAT prefix (100.64.128.0/17) with an address of the pool of the SRX that carried them; every flow is
answered, and its request and answer cross one SRX (its conntrack entry counted both; no other SRX
counted a packet of it). One SRX carries flows of both use cases. `lab traffic` sends from both prefixes
and every flow is answered.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from ipaddress import IPv4Network, ip_address
from pathlib import Path

import pytest
from running import LAB, REPO, SRX, RunningLab, lab

from lab_orchestrator.events import sessions

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(shutil.which("bird") is None or shutil.which("conntrack") is None,
                       reason="needs bird2 and conntrack (make deps)"),
]

SFW, NAT = IPv4Network("100.64.0.0/17"), IPv4Network("100.64.128.0/17")
SERVER, PORT, SPORT = "203.0.113.9", 7010, 41010
PER_PREFIX = 16

# A UDP echo on the server that prints the source address of every datagram it answers: what the server
# sees of each client (its own address, or the SRX's NAT binding).
ECHO = f"""
import json, socket, select, time
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("{SERVER}", {PORT}))
print(json.dumps({{"serving": True}}), flush=True)
end = time.monotonic() + 60
while time.monotonic() < end:
    if select.select([s], [], [], 0.2)[0]:
        data, peer = s.recvfrom(2048)
        s.sendto(data, peer)
        print(json.dumps({{"sent_by": data.decode(), "seen": peer[0]}}), flush=True)
"""


def _probe(running: RunningLab, sources: IPv4Network) -> dict[str, list[str]]:
    out = running.exec("client", sys.executable, "-m", "dataplane.traffic.udpprobe", "probe", "--sources",
                       f"{sources.network_address}/27", "--count", str(PER_PREFIX), "--to", f"{SERVER}:{PORT}",
                       "--port", str(SPORT))
    result: dict[str, list[str]] = json.loads(out)
    return result


def test_sfw_and_napt44_side_by_side_through_one_srx(tmp_path: Path) -> None:
    with RunningLab("mixit", REPO / "labs" / "topology3-mixed.yml", tmp_path) as running:
        pools = {n.name: IPv4Network(n.nat_pool) for n in running.running.plan().nodes if n.nat_pool}
        assert sorted(pools) == list(SRX)
        server = subprocess.Popen([*LAB, "exec", "--lab", running.name, "server", "--", sys.executable, "-c", ECHO],
                                  cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            assert server.stdout is not None and "serving" in server.stdout.readline()
            probes = {"sfw": _probe(running, SFW), "nat": _probe(running, NAT)}
        finally:
            server.terminate()
            seen_lines = server.communicate(timeout=10)[0]
        for use, result in probes.items():
            assert len(result["answered"]) == PER_PREFIX and not result["missing"], f"{use}: {result}"
        seen: dict[str, set[str]] = {}
        for line in seen_lines.splitlines():
            record = json.loads(line)
            seen.setdefault(record["sent_by"], set()).add(record["seen"])

        time.sleep(0.3)
        carried: dict[str, list[tuple[str, sessions.Session]]] = {}
        for srx in SRX:
            for s in sessions.read(running.ns(srx)):
                if s.protocol == "udp" and s.source_port == SPORT and s.destination == SERVER and s.packets > 0:
                    carried.setdefault(s.source, []).append((srx, s))
        kinds: dict[str, set[str]] = {}
        for client in probes["sfw"]["answered"] + probes["nat"]["answered"]:
            where = carried.get(client, [])
            # one SRX counted the flow, both ways (request and echo); an MNHA peer's synced copy counts none
            assert len(where) == 1, f"{client}: sessions with packets on {[w for w, _ in where]}"
            srx, session = where[0]
            assert session.packets >= 2, f"{client} on {srx}: {session}"
            if ip_address(client) in SFW:
                assert not session.translated and session.reply_destination == client, session
                assert seen[client] == {client}, f"the server saw {seen[client]} for SFW client {client}"
                kinds.setdefault(srx, set()).add("sfw")
            else:
                assert session.translated, session
                binding = session.reply_destination
                assert ip_address(binding) in pools[srx], f"{client}: {binding} is not in {srx}'s pool {pools[srx]}"
                assert seen[client] == {binding}, f"the server saw {seen[client]} for NAT client {client}"
                kinds.setdefault(srx, set()).add("nat")
        assert any(k == {"sfw", "nat"} for k in kinds.values()), f"no SRX carried both use cases: {kinds}"

        # the traffic generator: flows from both prefixes in turn, each answered at what the server saw (its
        # own address for SFW, the NAT binding for NAPT44)
        lab("traffic", "start", "--lab", running.name, "--flows", "20", "--rate", "1000", "--duration", "20")
        time.sleep(3)
        reports = json.loads(lab("traffic", "stop", "--lab", running.name, "--json").stdout)
    assert reports["tx-reverse"]["learned_before_start"] == 20, reports["tx-reverse"]
    for direction in ("rx-forward", "rx-reverse"):
        assert reports[direction]["received"] > 0 and reports[direction]["flows_never_seen"] == 0, reports
    assert reports["rx-reverse"]["lost"] == 0, reports
