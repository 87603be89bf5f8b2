"""FlexVPN tunnels carry traffic (user-space ESP on TUN, ESP-in-UDP 4500) on real namespaces.

One lab (`fvesp`: labs/flexvpn.yml with 1 s / 3 s HSRP timers and max-session 100): 30 of the
project's tunnel clients at once, each pinging north of the cluster through its own tunnel, with tshark
showing only ESP-in-UDP between clients and members; forged and replayed ESP dropped and counted;
strongSwan (charon + kernel-libipsec) redirected by the master and pinging through a member.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_flexvpn import CLIENT1, CLIENT2, REPO, ROUTERS, VIP, Lab, bring_up, elected, fast, needs_swan, needs_tshark
from test_flexvpn import wait_for as wait_until

from dataplane.ikev2 import swan
from labkit.files import read_secret

NORTH = "10.10.10.254"  # the WAN router's LAN address: routes each member's pool back to it


@pytest.fixture(scope="module")
def esp_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    yield from bring_up(tmp_path_factory.mktemp("fvesp"), "fvesp",
                        lambda t: fast(t).replace("max_session: 10}", "max_session: 100}"))


class TunnelClients:
    """`python -m dataplane.ikev2.tunnelclient` in a client's namespace, until stopped."""

    def __init__(self, lab: Lab, count: int, node: str = "client1"):
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", lab.ns(node), sys.executable, "-m", "dataplane.ikev2.tunnelclient",
             "--gateway", VIP, "--route", f"{NORTH}/32", "--count", str(count), "--esp", "aes256gcm16",
             "--psk", read_secret(lab.psk_file, "psk")],  # the lab's key, drawn at random by `lab up`
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO)
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, self.proc.stderr.read() if self.proc.stderr else "no output"
        self.up: dict[str, Any] = json.loads(line)

    @property
    def addresses(self) -> list[str]:
        return [r["address"] for r in self.up["results"] if r["ok"]]

    def stop(self) -> dict[str, Any]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=20)
        lines = out.strip().splitlines()
        assert lines, f"the tunnel clients ended without a word: {err[-2000:]}"
        last: dict[str, Any] = json.loads(lines[-1])
        return last


def ping(lab: Lab, node: str, source: str | None, count: int = 1) -> bool:
    args = ["ping", "-n", "-c", str(count), "-i", "0.2", "-W", "1", *(["-I", source] if source else []), NORTH]
    return lab.run(node, *args, check=False, timeout=30).returncode == 0


def ipsec_sas(lab: Lab) -> dict[str, list[dict[str, Any]]]:
    return {node: lab.ike(node).get("ipsec_sas", []) for node in ROUTERS}


def test_thirty_tunnel_clients_pass_traffic_through_esp_only(esp_lab: Lab, tmp_path: Path) -> None:
    elected(esp_lab, 30)
    clients = TunnelClients(esp_lab, 30)
    try:
        assert clients.up["ok"] == 30, clients.up
        members = {r["gateway"] for r in clients.up["results"]}
        assert len(members) >= 2, members  # CLB spread them over the cluster
        pcap = tmp_path / "client1.pcap"
        capture = subprocess.Popen(["ip", "netns", "exec", esp_lab.ns("client1"), "tshark", "-i", "eth1", "-w",
                                    str(pcap), "-a", "duration:6"], stdout=subprocess.DEVNULL,
                                   stderr=subprocess.PIPE, text=True)
        assert capture.stderr is not None
        for line in capture.stderr:
            if "Capturing on" in line:
                break
        time.sleep(1.0)  # tshark says so a little before its capture child is reading
        # three echoes each (one answer is enough): a single lost packet on a loaded host is no fault
        failed = [a for a in clients.addresses if not ping(esp_lab, "client1", a, count=3)]
        assert not failed, f"no answer through the tunnels of {failed}"
        capture.wait(20)  # ends by itself: an interrupted tshark may lose what its capture child buffered
        frames = subprocess.run(["tshark", "-r", str(pcap), "-T", "fields", "-e", "frame.protocols"],
                                capture_output=True, text=True, check=True).stdout.split()
        assert not [f for f in frames if "icmp" in f], "an ICMP packet crossed in the clear"
        esp_frames = [f for f in frames if f.endswith("udp:udpencap:esp")]
        assert len(esp_frames) >= 60, frames[:20]  # 30 requests + 30 replies
        # the gateways' status files are snapshots of their counters: wait until every tunnel's shows
        # the traffic (the first snapshot with any live counter may predate some tunnels' packets)
        sas = wait_until(lambda: len(live := [sa for rows in ipsec_sas(esp_lab).values() for sa in rows
                                              if sa["decaps"] >= 1 and sa["encaps"] >= 1]) >= 30 and live, 5,
                         "live ESP counters on all 30 tunnels")
        assert len(sas) == 30
        # a client the master kept for itself shows the VIP as its gateway: the master is router1
        node = next((n for n, a in ROUTERS.items() if a in members), "router1")
        text = esp_lab.lab.cli(node, "show crypto ipsec sa")[0]
        assert re.search(r"#pkts encaps: [1-9]\d*, #pkts encrypt: [1-9]", text), text
        assert "in use settings ={Tunnel UDP-Encaps, }" in text
    finally:
        final = clients.stop()
    assert sum(t["inbound"]["packets"] for t in final["esp"]["tunnels"]) >= 30
    wait_until(lambda: not any(ipsec_sas(esp_lab).values()), 10, "tunnels removed with their IKE SAs")


SNIFF = """
import socket, sys, threading, time
from scapy.all import AsyncSniffer, UDP
listening = threading.Event()  # set by scapy once its socket is open and filtered
sniffer = AsyncSniffer(iface="eth1", filter="udp dst port 4500 and greater 100", count=1, store=True,
                       started_callback=listening.set)
sniffer.start()
if not listening.wait(30):
    sys.exit("the sniffer's socket did not open in 30 s")
print("ready", flush=True)
sniffer.join(timeout=20)
if not sniffer.results:
    sys.exit("nothing captured in 20 s")
packet = sniffer.results[0]
print(bytes(packet[UDP].payload).hex(), packet[UDP].dport, packet["IP"].dst, flush=True)
"""


def test_forged_and_replayed_esp_is_dropped_and_counted(esp_lab: Lab) -> None:
    elected(esp_lab, 30)
    clients = TunnelClients(esp_lab, 1)
    try:
        address = clients.addresses[0]
        member = clients.up["results"][0]["gateway"]
        node = next((n for n, a in ROUTERS.items() if a == member), "router1")  # the VIP: the master kept it
        sniff = subprocess.Popen(["ip", "netns", "exec", esp_lab.ns("client1"), sys.executable, "-c", SNIFF],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        assert sniff.stdout is not None
        assert sniff.stdout.readline().strip() == "ready", "the sniffer did not start"  # scapy's import is slow
        assert ping(esp_lab, "client1", address)
        out, err = sniff.communicate(timeout=20)
        assert out, err
        hex_payload, _port, destination = out.split()
        captured = bytes.fromhex(hex_payload)
        before = wait_until(lambda: [sa for sa in ipsec_sas(esp_lab)[node] if sa["decaps"] >= 1], 5,
                            "the member's SA with the ping counted")[0]
        forged = bytearray(captured)
        forged[4:8] = (int.from_bytes(captured[4:8], "big") + 1000).to_bytes(4, "big")  # ahead of the window
        forged[-20] ^= 0x40
        inject = ("import socket,sys; s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); "
                  "[s.sendto(bytes.fromhex(h),(sys.argv[1],4500)) for h in sys.argv[2:]]")
        esp_lab.run("client1", sys.executable, "-c", inject, destination, captured.hex(), captured.hex(),
                    bytes(forged).hex())
        after = wait_until(lambda: [sa for sa in ipsec_sas(esp_lab)[node] if sa["replay_failed"] >= 2
                                    and sa["verify_failed"] >= 1], 5, "replay and verify drops counted")[0]
        assert after["decaps"] == before["decaps"], "a replayed or forged packet was delivered"
        text = esp_lab.lab.cli(node, "show crypto ipsec sa")[0]
        assert re.search(r"#pkts verify failed: 1, #pkts replay failed: 2", text), text
        assert ping(esp_lab, "client1", address), "the tunnel still works after the attack"
    finally:
        clients.stop()


@needs_swan
@needs_tshark
def test_strongswan_libipsec_client_pings_through_a_member(esp_lab: Lab, tmp_path: Path) -> None:
    elected(esp_lab, 30)
    peer = swan.initiator(esp_lab.ns("client2"), tmp_path / "swan", VIP, CLIENT2, "client2",
                          psk=read_secret(esp_lab.psk_file, "psk"),
                          esp="aes256gcm16", remote_ts=f"{NORTH}/32", install_routes=True)
    peer.start()
    try:
        result = peer.initiate()
        assert result.returncode == 0, result.stdout + result.stderr
        # redirected to a member, or kept by the master when it is the least loaded gateway (its SA is
        # then with the VIP); test_flexvpn checks the redirect itself
        redirected = re.search(r"redirected to (\S+)", result.stdout)
        assert redirected or "established between 10.10.20.7[client2]...10.10.10.100[" in result.stdout, \
            result.stdout
        node = next(n for n, a in ROUTERS.items() if a == redirected.group(1)) if redirected else "router1"
        vip = re.search(r"installing new virtual IP (\S+)", result.stdout)
        assert vip, result.stdout
        assert wait_until(lambda: ping(esp_lab, "client2", None, count=3), 10, "ping through strongSwan's tunnel")
        sas = wait_until(lambda: [sa for sa in ipsec_sas(esp_lab)[node] if sa["remote"] == CLIENT2
                                  and sa["decaps"] >= 3 and sa["encaps"] >= 3], 5, "the member's counters")
        assert sas[0]["remote_ident"] == [f"{vip.group(1)}/32"]
    finally:
        peer.stop()
    assert CLIENT1 != CLIENT2


@needs_swan
def test_strongswan_renews_its_child_sa_and_traffic_goes_on(esp_lab: Lab, tmp_path: Path) -> None:
    """strongSwan's CHILD_SA lives 6 s: it rekeys it (CREATE_CHILD_SA with REKEY_SA) or, as its
    kernel-libipsec lets it expire hard, deletes it and asks for a new one; either way the member
    answers and traffic goes on through the new SA."""
    elected(esp_lab, 30)
    peer = swan.initiator(esp_lab.ns("client2"), tmp_path / "swan", VIP, CLIENT2, "client2", esp="aes256gcm16",
                          psk=read_secret(esp_lab.psk_file, "psk"),
                          remote_ts=f"{NORTH}/32", install_routes=True, child_rekey_s=6)
    peer.start()
    try:
        result = peer.initiate()
        assert result.returncode == 0, result.stdout + result.stderr
        gateway = re.search(r"IKE_SA gw\[\d+\] established between \S+\.\.\.([\d.]+)\[", result.stdout)
        assert gateway, result.stdout
        node = next((n for n, a in ROUTERS.items() if a == gateway.group(1)), "router1")  # the VIP: the master
        assert wait_until(lambda: ping(esp_lab, "client2", None, count=3), 10, "ping before the renewal")
        first = wait_until(lambda: [sa for sa in ipsec_sas(esp_lab)[node] if sa["remote"] == CLIENT2], 5,
                           "the member's CHILD_SA")[0]["spi_in"]

        def renewed() -> dict[str, int] | None:
            counters: dict[str, int] = esp_lab.ike(node)["gateway_counters"]
            return counters if counters["child_rekeys"] + counters["children_created"] >= 1 else None

        try:
            counters = wait_until(renewed, 25, "the CHILD_SA renewed")
        except AssertionError as exc:
            log = peer.log.read_text()[-4000:] if peer.log.exists() else "no charon log"
            raise AssertionError(f"{exc}\n{node}: {esp_lab.ike(node)['gateway_counters']}\ncharon: {log}") from None
        assert counters["create_child_refused"] == 0, counters
        wait_until(lambda: [sa for sa in ipsec_sas(esp_lab)[node] if sa["remote"] == CLIENT2
                            and sa["spi_in"] != first], 10, "the new CHILD_SA in show crypto ipsec sa")
        wait_until(lambda: first not in [t["spi_in"] for t in esp_lab.ike(node)["esp"]["tunnels"]], 15,
                   "the old CHILD_SA's tunnel gone (strongSwan deleted it)")
        assert wait_until(lambda: ping(esp_lab, "client2", None, count=3), 15, "ping after the renewal")
        assert wait_until(lambda: [sa for sa in ipsec_sas(esp_lab)[node] if sa["remote"] == CLIENT2
                                   and sa["spi_in"] != first and sa["decaps"] >= 1 and sa["encaps"] >= 1], 5,
                          "the new SA carries it")
    finally:
        peer.stop()
