"""On real namespaces: the FlexVPN load balancer of labs/flexvpn.yml.

Three labs, each brought up by this module and taken down by it (never anyone else's):

* `fvship` — labs/flexvpn.yml as shipped, renamed (not to clash with a `lab up labs/flexvpn.yml` of
  someone else on this machine; default HSRP timers 3 s / 10 s, max-session 10): ready and
  forwarding (as every shipped lab in test_shipped_labs.py), HSRP election, the VIP with its virtual
  MAC, `show standby`, the cluster, strongSwan redirected and established (PSK and certificates,
  CHILD_SA through kernel-libipsec), tshark decoding HSRP and REDIRECT / REDIRECTED_FROM, a forged
  REDIRECT, a redirect loop, malformed input, master power-off; down with nothing left.
* `fvlb` — the same with 1 s / 3 s timers and max-session 100: 30 clients spread within one session,
  a member's silent loss detected in the hold time, a new member taking the new sessions, overload.
* `fvauth` — `redirect: auth`: redirect in IKE_AUTH after mutual authentication.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from labtools import (
    STATE_ROOT,
    LabOwner,
    PlanFacts,
    assert_down_clean,
    assert_ready,
    copy_lab,
    explain,
    flat,
    ping,
    run_lab,
)

from dataplane.ikev2 import swan
from lab_orchestrator import api
from lab_orchestrator.cli_ssh import flexshow
from lab_orchestrator.plan.features import flexvpn
from labkit.files import read_secret

REPO = Path(__file__).resolve().parents[2]
VIP = "10.10.10.100"
ROUTERS = {"router1": "10.10.10.1", "router2": "10.10.10.2", "router3": "10.10.10.3"}
CLIENT1, CLIENT2 = "10.10.20.6", "10.10.20.7"

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
]
needs_swan = pytest.mark.skipif(swan.available() is not None, reason=str(swan.available()))
needs_tshark = pytest.mark.skipif(shutil.which("tshark") is None, reason="tshark is not installed (apt-get install "
                                                                         "tshark)")


# ------------------------------------------------------------------------------------------ helpers
class Lab:
    def __init__(self, name: str):
        self.name = name
        self.state_dir = STATE_ROOT / name

    @property
    def lab(self) -> api.Lab:
        return api.pick(self.name)

    def ns(self, node: str) -> str:
        return self.lab.ns(node)

    def run(self, node: str, *argv: str, timeout: float = 60, check: bool = True) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(["ip", "netns", "exec", self.ns(node), *argv], capture_output=True, text=True,
                                timeout=timeout, cwd=REPO)
        if check and result.returncode != 0:
            raise AssertionError(f"{node}: {' '.join(argv)} failed: {result.stdout}\n{result.stderr}")
        return result

    def hsrp(self, node: str) -> dict[str, Any]:
        """NODE's first HSRP group, read as the daemon's model (labkit.flexstatus.HsrpStatus)."""
        status = flexshow.hsrp_status(self.state_dir, node)
        assert status is not None, f"no HSRP status for {node}"
        group: dict[str, Any] = status.to_dict()["groups"][0]
        return group

    def ike(self, node: str) -> dict[str, Any]:
        """NODE's IKEv2 status, read as the daemon's model (labkit.flexstatus)."""
        status = flexshow.ikev2_status(self.state_dir, node)
        assert status is not None, f"no IKEv2 status for {node}"
        return status.to_dict()

    def show(self, node: str, command: str) -> str:
        return flexshow.show(self.state_dir, node, command)

    @property
    def psk_file(self) -> str:
        """The lab's pre-shared key (drawn at random by `lab up`), as router1 holds it."""
        return str(self.state_dir / "nodes" / "router1" / flexvpn.PSK_FILE)

    def clients(self, count: int, *extra: str, node: str = "client1", source: str = CLIENT1,
                gateway: str = VIP) -> dict[str, Any]:
        out = self.run(node, sys.executable, "-m", "dataplane.ikev2.client", "--gateway", gateway, "--bind",
                       source, "--psk-file", self.psk_file, "--count", str(count), *extra, check=False, timeout=120)
        data: dict[str, Any] = json.loads(out.stdout)
        return data

    def state(self) -> Any:
        return self.lab.state

    def power(self, node: str, on: bool) -> None:
        self.lab.power(node, on)

    def master_rows(self, master: str) -> dict[str, dict[str, Any]]:
        cluster = self.ike(master)["cluster"]
        return {r["address"]: r for r in cluster.get("rows", [])}


def wait_for(check: Callable[[], Any], timeout: float, what: str, step: float = 0.05) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = check()
        except (AssertionError, KeyError, TypeError, OSError, ValueError) as exc:
            last = exc
            last_ok = False
        else:
            last_ok = bool(last)
        if last_ok:
            return last
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


FACTS: dict[str, PlanFacts] = {}  # lab name -> what it creates on the host


def bring_up(tmp: Path, name: str, edit: Callable[[str], str] = lambda t: t) -> Iterator[Lab]:
    """labs/flexvpn.yml (EDITed) up as NAME for the module; after its last test, down by `lab down`,
    which must end well and leave nothing of it (the cleanup only takes down what that left)."""
    source = tmp / "source.yml"
    source.write_text(edit((REPO / "labs/flexvpn.yml").read_text()))
    path = copy_lab(source, name, tmp)
    owner = LabOwner(tmp)
    FACTS[name] = owner.claim(path)
    try:
        result = run_lab("up", str(path), timeout=120)
        assert result.returncode == 0, explain(result)
        assert f"lab {name} is up" in flat(result.stdout)
        yield Lab(name)
        assert_down_clean(FACTS[name], "down", "--lab", name)
    finally:
        problems = owner.cleanup()
        assert not problems, problems


def fast(text: str) -> str:
    return text.replace("name: group1}}", "name: group1, hello_ms: 1000, hold_ms: 3000}}")


def cluster_ready(lab: Lab, master: str, members: int) -> bool:
    status = lab.ike(master)["cluster"]
    return status["role"] == "master" and sum(1 for r in status.get("rows", []) if r["role"] == "Slave") == members


@pytest.fixture(scope="module")
def shipped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    yield from bring_up(tmp_path_factory.mktemp("fvship"), "fvship")


@pytest.fixture(scope="module")
def balanced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    yield from bring_up(tmp_path_factory.mktemp("fvlb"), "fvlb",
                        lambda t: fast(t).replace("max_session: 10}", "max_session: 100}"))


@pytest.fixture(scope="module")
def auth_mode(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    yield from bring_up(tmp_path_factory.mktemp("fvauth"), "fvauth",
                        lambda t: fast(t).replace("redirect: init", "redirect: auth"))


def elected(lab: Lab, timeout: float) -> None:
    """router1 Active, router2 Standby, router3 Listen, and still so 1.5 s later (settled)."""

    def settled() -> bool:
        states = [str(lab.hsrp(node)["state"]) for node in ("router1", "router2", "router3")]
        return states == ["Active", "Standby", "Listen"]

    def stable() -> bool:
        if not settled():
            return False
        time.sleep(1.5)
        return settled()

    wait_for(stable, timeout, "router1 Active, router2 Standby, router3 Listen")
    wait_for(lambda: cluster_ready(lab, "router1", 2), 10, "both members in the cluster")


class Capture:
    """tshark on the LAN bridge (all of 10.10.10.0/24), written to a pcap file."""

    def __init__(self, lab: Lab, path: Path, seconds: int):
        self.path = path
        self.proc = subprocess.Popen(
            ["ip", "netns", "exec", f"{lab.name}-lan0", "tshark", "-i", "br0", "-a", f"duration:{seconds}", "-f",
             "udp port 1985 or udp port 500 or udp port 4500", "-w", str(path)],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            if "Capturing on" in line:
                break

    def fields(self, display: str, *names: str) -> list[list[str]]:
        self.proc.wait(60)
        args = ["tshark", "-r", str(self.path), "-Y", display, "-T", "fields", "-E", "separator=|"]
        for name in names:
            args += ["-e", name]
        out = subprocess.run(args, capture_output=True, text=True, check=True).stdout
        return [line.split("|") for line in out.splitlines() if line.strip()]


# ------------------------------------------------------------------------------------------ flexvpn (shipped)
def test_the_shipped_lab_is_ready_and_forwards(shipped: Lab) -> None:
    """As every shipped lab (test_shipped_labs.py): its daemons run, and the remote-access client
    reaches the cluster's LAN across the WAN router."""
    assert_ready(FACTS[shipped.name])
    ping(shipped.name, "client1", "10.10.10.3")
    ping(shipped.name, "client1", "10.10.10.1")  # router1's Ethernet0/1


def test_hsrp_elects_router1_active_router2_standby(shipped: Lab) -> None:
    elected(shipped, 45)
    text = shipped.show("router3", "show standby")
    lines = text.splitlines()
    assert lines[0] == "Ethernet0/1 - Group 1"
    assert lines[1] == "  State is Listen"
    assert lines[2] == "  Virtual IP address is 10.10.10.100"
    assert lines[3] == "  Active virtual MAC address is 0000.0c07.ac01"
    assert lines[4] == "    Local virtual MAC address is 0000.0c07.ac01 (v1 default)"
    assert lines[5] == "  Hello time 3 sec, hold time 10 sec"
    assert lines[6] == "  Preemption disabled"
    assert re.fullmatch(r"  Active router is 10\.10\.10\.1, priority 255 \(expires in \d+\.\d{3} sec\)", lines[7])
    assert re.fullmatch(r"  Standby router is 10\.10\.10\.2, priority 200 \(expires in \d+\.\d{3} sec\)", lines[8])
    assert lines[9] == "  Priority 100 (default 100)"
    assert lines[10] == '  Group name is "group1" (cfgd)'
    assert "  State is Active" in shipped.show("router1", "show standby")
    assert "  Standby router is local" in shipped.show("router2", "show standby")


def test_vip_answers_ping_with_the_virtual_mac(shipped: Lab) -> None:
    elected(shipped, 45)
    shipped.run("client1", "ping", "-c", "3", "-i", "0.2", "-W", "1", VIP)
    neigh = shipped.run("wan", "ip", "neigh", "show", VIP).stdout
    assert "lladdr 00:00:0c:07:ac:01" in neigh, neigh
    owners = [node for node in ROUTERS if VIP in shipped.run(node, "ip", "-4", "addr", "show", "dev", "hsrp1").stdout]
    assert owners == ["router1"]


def test_cluster_master_and_members(shipped: Lab) -> None:
    elected(shipped, 45)
    master = shipped.show("router1", "show crypto ikev2 cluster").splitlines()
    assert master[:6] == ["Role : CLB Master", "Status : Up", "CLB Slaves : 2", "Cluster IP : 10.10.10.100",
                          "Hold time : 3000 msec", "Overload limit : 90%"]
    assert {line.split()[0].lstrip("*-") for line in master[10:]} == set(ROUTERS.values())
    slave = shipped.show("router2", "show crypto ikev2 cluster").splitlines()
    assert slave[:6] == ["Role : CLB Slave", "Status : Up", "Cluster IP : 10.10.10.100", "Hold time : 3000 msec",
                         "Hello-interval : 1000 msec", "Update-interval: 3000 msec"]
    assert slave[9].split()[0] == "10.10.10.2"
    listening = shipped.run("router1", "ss", "-lnu").stdout + shipped.run("router1", "ss", "-lnt").stdout
    for port in (":500 ", ":4500 ", ":1985 ", ":2012 "):
        assert port in listening, listening


def _swan_cert(lab: Lab, name: str) -> tuple[bytes, bytes, bytes]:
    from cryptography.hazmat.primitives import serialization

    from dataplane.ikev2 import pki

    folder = lab.state_dir / "pki"
    ca = pki.load_ca(folder)
    cert, key = pki.issue(folder, name, [], [f"{name}.lab"])
    return (ca.public_bytes(serialization.Encoding.PEM), cert.public_bytes(serialization.Encoding.PEM),
            key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                              serialization.NoEncryption()))


@needs_swan
@pytest.mark.parametrize("auth", ["psk", "rsa"])
def test_strongswan_is_redirected_and_establishes_ike_and_child_sa(shipped: Lab, auth: str, tmp_path: Path) -> None:
    elected(shipped, 45)
    cert = _swan_cert(shipped, "client2") if auth == "rsa" else None
    peer = swan.initiator(shipped.ns("client2"), tmp_path / "swan", VIP, CLIENT2, "client2",
                          psk=None if cert else read_secret(shipped.psk_file, "psk"), cert=cert)
    peer.start()
    try:
        result = peer.initiate()
        assert result.returncode == 0, result.stdout + result.stderr
        redirected = re.search(r"redirected to (\S+)", result.stdout)
        if redirected is None:
            # the master keeps a client when it is itself the least loaded (an earlier SA may still
            # load a member): then RSA interop is checked against the master
            assert re.search(rf"IKE_SA gw\[\d+\] established between {CLIENT2}\[.*\]\.\.\.{VIP}\[",
                             result.stdout), result.stdout
            assert re.search(r"CHILD_SA net\{\d+\} established with SPIs", result.stdout), result.stdout
            return
        assert redirected, result.stdout
        member = redirected.group(1)
        assert member in ("10.10.10.2", "10.10.10.3"), member
        assert "N(REDIR_SUP)" in result.stdout and "N(REDIR_FROM)" in result.stdout
        assert re.search(rf"IKE_SA gw\[\d+\] established between {CLIENT2}\[.*\]\.\.\.{re.escape(member)}\[",
                         result.stdout), result.stdout
        assert re.search(r"CHILD_SA net\{\d+\} established with SPIs", result.stdout), result.stdout
        sas = peer.list_sas()
        assert "ESTABLISHED" in sas and "INSTALLED, TUNNEL-in-UDP" in sas, sas
        node = next(n for n, a in ROUTERS.items() if a == member)
        spi_i = re.search(r"ESTABLISHED, IKEv2, ([0-9a-f]{16})_i", sas)
        assert spi_i, sas
        gateway_sa = wait_for(lambda: [s for s in shipped.ike(node)["sas"] if s["spi_i"] == spi_i.group(1)
                                       and s["state"] == "READY"], 5, f"the SA on {node}")[0]
        others = [s for s in shipped.ike(node)["sas"] if s["spi_i"] != spi_i.group(1)]
        assert not [s for s in others if s["remote"].startswith(CLIENT2) and s["state"] != "READY"], others
        assert gateway_sa["redirected_from"] == VIP
        assert gateway_sa["child"]["spi_in"] in sas and gateway_sa["child"]["spi_out"] in sas
        assert gateway_sa["address"] and gateway_sa["address"].startswith(f"172.16.{member[-1]}.")
        assert gateway_sa["auth_verify"] == ("RSA" if cert else "PSK")
        assert f"Redirected from: {VIP}" in shipped.show(node, "show crypto ikev2 sa")
    finally:
        peer.stop()


@needs_swan
def test_strongswan_returns_the_cookie_of_a_flooded_gateway(shipped: Lab, tmp_path: Path) -> None:
    """RFC 7296 section 2.6 on the wire: a flood of IKE_SA_INITs (never answering cookies) puts router3
    under pressure; strongSwan gets N(COOKIE), sends it back and establishes; the flood holds no more
    half-open SAs than the cookie threshold and does not count as CLB load."""
    elected(shipped, 45)
    member = ROUTERS["router3"]
    flood = (
        "import os, socket\n"
        "from dataplane.ikev2 import codec, crypto, iana\n"
        "p = crypto.ike_proposal(crypto.Suite(iana.ENCR_AES_CBC, 256, iana.PRF_HMAC_SHA2_256,"
        " iana.AUTH_HMAC_SHA2_256_128, 19))\n"
        "ke = crypto.Dh(19).public\n"
        "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "for i in range(400):\n"
        "    h = codec.Header(os.urandom(8), bytes(8), iana.SA, iana.IKE_SA_INIT, iana.FLAG_INITIATOR, 0)\n"
        "    u.sendto(codec.encode(h, [codec.SaPayload((p,)), codec.KePayload(19, ke),"
        " codec.NoncePayload(os.urandom(32))]), ('" + member + "', 500))\n"
    )
    shipped.run("client1", sys.executable, "-c", flood)
    status = wait_for(lambda: (s := shipped.ike("router3"))["gateway_counters"]["cookies_sent"] > 0 and s, 10,
                      "cookies demanded")
    assert 0 < status["ike"]["half_open"] <= 50, status["ike"]
    peer = swan.initiator(shipped.ns("client2"), tmp_path / "swan", member, CLIENT2, "client2", vip=False,
                          psk=read_secret(shipped.psk_file, "psk"))
    settled = status["gateway_counters"]["settled"]  # the flood never gets past IKE_SA_INIT
    peer.start()
    try:
        result = peer.initiate()
        assert result.returncode == 0, result.stdout + result.stderr
        assert "N(COOKIE)" in result.stdout, result.stdout
        assert re.search(rf"IKE_SA gw\[\d+\] established between {CLIENT2}\[.*\]\.\.\.{re.escape(member)}\[",
                         result.stdout), result.stdout
        # The status is a snapshot: one written between strongSwan's IKE_SA_INIT (with the cookie: a
        # half-open SA past the threshold, as RFC 7296 admits) and its IKE_AUTH still counts it half-open.
        after = wait_for(lambda: (s := shipped.ike("router3"))["gateway_counters"]["cookies_accepted"] >= 1
                         and s["gateway_counters"]["settled"] > settled and s, 5,
                         "the cookie accepted and strongSwan's IKE_AUTH over in the status")
        assert after["ike"]["half_open"] <= 50
        # The master's table: router3's load is its established SAs, not the flood's half-open ones.
        rows = {r["address"]: r for r in shipped.ike("router1")["cluster"]["rows"]}
        assert rows[member]["ike"] < 50, rows[member]
    finally:
        peer.stop()


@needs_tshark
def test_tshark_decodes_hsrp_and_the_redirect_notifies(shipped: Lab, tmp_path: Path) -> None:
    elected(shipped, 45)
    capture = Capture(shipped, tmp_path / "lan.pcapng", 8)
    # Five clients: the master keeps a client only while it is the least loaded, and at most four
    # (max-session 10 SAs, 3 a session, counted as they are redirected): at least one is redirected
    # whatever the members' CPU load after the earlier tests.
    data = shipped.clients(5)
    assert all(r["ok"] for r in data["results"]), data
    hellos = capture.fields("hsrp", "ip.src", "ip.dst", "hsrp.version", "hsrp.opcode", "hsrp.state",
                            "hsrp.hellotime", "hsrp.holdtime", "hsrp.priority", "hsrp.group", "hsrp.auth_data",
                            "hsrp.virt_ip", "eth.src", "ip.ttl", "udp.srcport", "udp.dstport")
    by_source = {row[0]: row for row in hellos}
    assert by_source["10.10.10.1"][1:] == ["224.0.0.2", "0", "0", "16", "3", "10", "255", "1", "cisco",
                                           "10.10.10.100", "00:00:0c:07:ac:01", "1", "1985", "1985"]
    assert by_source["10.10.10.2"][4] == "8" and by_source["10.10.10.2"][7] == "200"  # Standby, priority 200
    assert by_source["10.10.10.2"][11] != "00:00:0c:07:ac:01"  # only the Active router uses the virtual MAC
    assert "10.10.10.3" not in by_source  # Listen: silent
    requests = {row[0]: row[1] for row in capture.fields(
        "isakmp.exchangetype == 34 && isakmp.flag_r == 0 && ip.dst == 10.10.10.100", "isakmp.ispi",
        "isakmp.nonce")}
    redirects = capture.fields("isakmp.notify.msgtype == 16407", "ip.src", "isakmp.ispi",
                               "isakmp.notify.data.redirect.gw_ident.type",
                               "isakmp.notify.data.redirect.new_resp_gw_ident.ipv4",
                               "isakmp.notify.data.redirect.nonce_data")
    assert redirects, "no REDIRECT captured"
    for source, spi, kind, gateway, nonce in redirects:
        assert source == VIP and kind == "1" and gateway in ("10.10.10.2", "10.10.10.3")
        assert nonce.replace(":", "") == requests[spi].replace(":", ""), "REDIRECT nonce is not the initiator's"
    froms = capture.fields("isakmp.notify.msgtype == 16408", "ip.dst",
                           "isakmp.notify.data.redirect.org_resp_gw_ident.ipv4")
    assert froms and all(row[1] == VIP and row[0] in ("10.10.10.2", "10.10.10.3") for row in froms), froms


def test_forged_redirect_with_a_wrong_nonce_is_ignored(shipped: Lab) -> None:
    elected(shipped, 45)
    forger = subprocess.Popen(["ip", "netns", "exec", shipped.ns("client2"), sys.executable, "-m",
                               "dataplane.ikev2.forge", "--bind", CLIENT2, "--mode", "bad-nonce", "--redirect-to",
                               "192.0.2.66", "--then", VIP, "--seconds", "15"], cwd=REPO, stdout=subprocess.PIPE,
                              text=True)
    try:
        assert forger.stdout is not None and "listening" in forger.stdout.readline()
        data = shipped.clients(1, gateway=CLIENT2)
        result = data["results"][0]
        assert result["ok"], result
        assert result["ignored_redirects"] == 1
        assert "192.0.2.66" not in result["path"]
        assert result["path"][:2] == [CLIENT2, VIP] and result["gateway"] in [VIP, *ROUTERS.values()]
        assert any("wrong nonce" in line for line in data["log"])
    finally:
        forger.terminate()
        forger.wait(5)


def test_redirect_loop_stops_at_max_redirects(shipped: Lab) -> None:
    forger = subprocess.Popen(["ip", "netns", "exec", shipped.ns("client2"), sys.executable, "-m",
                               "dataplane.ikev2.forge", "--bind", CLIENT2, "--mode", "loop", "--seconds", "15"],
                              cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert forger.stdout is not None and "listening" in forger.stdout.readline()
        for limit in (1, 5):
            result = shipped.clients(1, "--max-redirects", str(limit), gateway=CLIENT2)["results"][0]
            assert not result["ok"] and "redirect loop" in result["error"], result
            assert result["redirects"] == limit + 1 and len(result["path"]) == limit + 1
    finally:
        forger.terminate()
        forger.wait(5)


def test_malformed_input_does_not_crash_the_daemon(shipped: Lab) -> None:
    elected(shipped, 45)
    before = shipped.ike("router1")["pid"]
    script = (
        "import socket, os\n"
        "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "for i in range(300):\n"
        "    junk = os.urandom(i % 90)\n"
        f"    u.sendto(junk, ('{VIP}', 500)); u.sendto(bytes(4) + junk, ('{VIP}', 4500))\n"
        "    u.sendto(bytes(28) + junk, ('10.10.10.1', 500))\n"
        "h = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "h.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_TTL, 1)\n"
        "h.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton('10.10.10.254'))\n"
        "for i in range(100):\n"
        "    h.sendto(os.urandom(i % 40), ('224.0.0.2', 1985))\n"
        "for i in range(20):\n"
        f"    t = socket.create_connection(('{VIP}', 2012), timeout=2)\n"
        "    t.sendall(b'CLB\\x01' + os.urandom(40)); t.close()\n"
    )
    shipped.run("wan", sys.executable, "-c", script)
    # the status file is rewritten on the daemon's schedule: wait until it has counted the junk
    status = wait_for(lambda: (s := shipped.ike("router1"))["gateway_counters"]["malformed"] > 0
                      and s["counters"]["clb_malformed"] > 0 and s, 10, "the junk counted")
    assert status["pid"] == before
    assert shipped.hsrp("router1")["state"] == "Active"
    data = shipped.clients(1)
    assert data["results"][0]["ok"], data


def test_flexvpnd_killed_on_the_active_router_comes_back_active(shipped: Lab) -> None:
    """kill -9 of the Active router's daemon: the supervisor restarts it within a second, it resumes
    Active with its VIP (a hello at once), so the Standby never takes over and the cluster re-forms."""
    elected(shipped, 45)
    old = flexshow.hsrp_status(shipped.state_dir, "router1")
    assert old is not None
    standby_changes = shipped.hsrp("router2")["changes"]
    result = run_lab("fail", "--lab", shipped.name, "router1", "daemon-crash", "--daemon", "flexvpn")
    assert result.returncode == 0, explain(result)
    seconds = float(re.search(r"running again after ([0-9.]+) s", result.stdout).group(1))  # type: ignore[union-attr]
    assert seconds < 2.0
    back = wait_for(lambda: (s := flexshow.hsrp_status(shipped.state_dir, "router1")) is not None
                    and s.pid != old.pid and time.time(), 5, "router1's daemon back")
    assert shipped.hsrp("router1")["state"] == "Active"
    # router2 heard router1's resumed hello: its Active timer runs from the restart, not the crash
    wait_for(lambda: shipped.hsrp("router2")["active"]["expires_at"] > back + 9.0, 3, "router2 hears router1")
    assert shipped.hsrp("router2")["state"] == "Standby" and shipped.hsrp("router2")["changes"] == standby_changes
    shipped.run("client1", "ping", "-c", "2", "-i", "0.2", "-W", "1", VIP)
    wait_for(lambda: cluster_ready(shipped, "router1", 2), 15, "both members back in router1's cluster")
    assert any(d["name"] == "flexvpn" and d["restarts"] >= 1 and d["running"]
               for n in shipped.lab.status().nodes if n.name == "router1" for d in [d.__dict__ for d in n.daemons])


def test_master_power_off_standby_takes_over_and_still_redirects(shipped: Lab) -> None:
    elected(shipped, 45)
    last_hello = time.time()
    shipped.power("router1", False)
    took_over = wait_for(lambda: shipped.hsrp("router2")["state"] == "Active" and time.time(), 15,
                         "router2 Active")
    assert took_over - last_hello <= 10 + 1.0  # the hold time after router1's last hello
    wait_for(lambda: cluster_ready(shipped, "router2", 1), 10, "router3 in router2's cluster")
    shipped.run("client1", "ping", "-c", "2", "-i", "0.2", "-W", "1", VIP)
    assert "lladdr 00:00:0c:07:ac:01" in shipped.run("wan", "ip", "neigh", "show", VIP).stdout
    results = shipped.clients(4)["results"]
    assert all(r["ok"] for r in results), results
    assert any(r["path"] == [VIP, "10.10.10.3"] for r in results), results
    # Back on: no preemption, router1 waits as Standby (it outranks router3) and joins as a member.
    shipped.power("router1", True)
    wait_for(lambda: shipped.hsrp("router1")["state"] == "Standby", 40, "router1 Standby again")
    assert shipped.hsrp("router2")["state"] == "Active"
    wait_for(lambda: cluster_ready(shipped, "router2", 2), 10, "router1 back in the cluster")


# ------------------------------------------------------------------------------------------ fvlb
def test_thirty_clients_spread_within_one_session(balanced: Lab) -> None:
    elected(balanced, 20)
    data = balanced.clients(30, "--no-delete")
    results = data["results"]
    assert all(r["ok"] for r in results), [r["error"] for r in results if not r["ok"]]
    # Each one went where the master pointed it: to a member (redirected once) or stayed on the master.
    for r in results:
        assert r["path"] in ([VIP], [VIP, "10.10.10.2"], [VIP, "10.10.10.3"]), r
    counts = Counter("10.10.10.1" if r["gateway"] == VIP else r["gateway"] for r in results)
    assert max(counts.values()) - min(counts.values()) <= 1, counts
    rows = wait_for(lambda: (rows := balanced.master_rows("router1")) and
                    all(r["ike"] == counts[a] and r["ipsec"] == 2 * counts[a] and not r["half_open"]
                        for a, r in rows.items()) and rows, 5, "the loads reported")
    ike = [r["ike"] for r in rows.values()]
    assert max(ike) - min(ike) <= 1 and all(r["ipsec"] == 2 * r["ike"] for r in rows.values()), rows
    text = balanced.show("router1", "show crypto ikev2 cluster")
    for address, count in counts.items():
        assert re.search(rf"^[ *-]{re.escape(address)}\s.*\s{count}\s+{2 * count}$", text, re.M), text


def test_member_silent_loss_is_detected_in_the_hold_time(balanced: Lab) -> None:
    elected(balanced, 20)
    balanced.run("router3", "ip", "link", "set", "Et0-1", "down")
    cut = time.monotonic()
    try:
        wait_for(lambda: "10.10.10.3" not in balanced.master_rows("router1"), 6, "router3 dropped")
        detected = time.monotonic() - cut
        # The hold time (3000 msec) runs from router3's last hello, which left up to one hello interval
        # (1000 msec) before the cut; + the 100 ms expiry check and the status file's 50 ms.
        assert 3.0 - 1.0 - 0.05 <= detected <= 3.0 + 0.5, detected
        dropped = balanced.ike("router1")["cluster"]["dropped"][-1]
        assert dropped["address"] == "10.10.10.3" and "hold time" in dropped["why"]
        results = balanced.clients(4)["results"]
        assert all(r["ok"] and "10.10.10.3" not in r["path"] for r in results), results
    finally:
        balanced.run("router3", "ip", "link", "set", "Et0-1", "up")


def test_new_member_takes_new_sessions_until_its_load_matches(balanced: Lab) -> None:
    elected(balanced, 20)
    balanced.power("router3", False)  # its SAs are gone with it
    wait_for(lambda: "10.10.10.3" not in balanced.master_rows("router1"), 6, "router3 gone")
    balanced.power("router3", True)
    wait_for(lambda: "10.10.10.3" in balanced.master_rows("router1"), 30, "router3 back in the cluster")
    rows = balanced.master_rows("router1")
    assert rows["10.10.10.3"]["ike"] == 0
    others = min(rows[a]["ike"] for a in ("10.10.10.1", "10.10.10.2"))
    assert others >= 5
    results = balanced.clients(others, "--no-delete")["results"]
    assert [r["gateway"] for r in results] == ["10.10.10.3"] * others, [r["path"] for r in results]


def test_overloaded_member_is_skipped(balanced: Lab) -> None:
    elected(balanced, 20)
    wait_for(lambda: "10.10.10.3" in balanced.master_rows("router1"), 30, "router3 in the cluster")
    # Fill router3 directly (not through the VIP) up to max-session: 34 sessions = 102 SAs >= 100.
    filled = balanced.clients(34, "--no-delete", node="client2", source=CLIENT2, gateway="10.10.10.3")
    assert all(r["ok"] for r in filled["results"])
    wait_for(lambda: balanced.master_rows("router1")["10.10.10.3"]["code"] == "-", 5, "router3 marked overloaded")
    assert re.search(r"^-10\.10\.10\.3\s", balanced.show("router1", "show crypto ikev2 cluster"), re.M)
    results = balanced.clients(6)["results"]
    assert all(r["ok"] and "10.10.10.3" not in r["path"] for r in results), results


# ------------------------------------------------------------------------------------------ fvauth
def test_redirect_in_ike_auth_after_mutual_authentication(auth_mode: Lab) -> None:
    elected(auth_mode, 20)
    results = auth_mode.clients(4)["results"]
    assert all(r["ok"] for r in results), results
    redirected = [r for r in results if len(r["path"]) == 2]
    assert redirected and all(r["path"][1] in ("10.10.10.2", "10.10.10.3") for r in redirected), results
    counters = wait_for(lambda: (c := auth_mode.ike("router1")["gateway_counters"])["redirects_auth"]
                        == len(redirected) and c, 3, "the redirect counters")
    assert counters["redirects_init"] == 0
    # The redirected IKE SAs were deleted by the client (RFC 5685 section 6).
    wait_for(lambda: not [s for s in auth_mode.ike("router1")["sas"] if s["state"] == "REDIRECTED"], 3,
             "redirected SAs deleted")


@needs_swan
def test_strongswan_follows_an_ike_auth_redirect(auth_mode: Lab, tmp_path: Path) -> None:
    elected(auth_mode, 20)
    # The master keeps a client when it is itself the least loaded (its CPU and memory count too):
    # fill router1 up to max-session through its own address so that the VIP must redirect.
    filled = auth_mode.clients(4, "--no-delete", gateway=ROUTERS["router1"])
    assert all(r["ok"] for r in filled["results"]), filled
    wait_for(lambda: auth_mode.master_rows("router1")[ROUTERS["router1"]]["code"] == "-", 5,
             "router1 marked overloaded")
    peer = swan.initiator(auth_mode.ns("client2"), tmp_path / "swan", VIP, CLIENT2, "client2", vip=False,
                          psk=read_secret(auth_mode.psk_file, "psk"))
    peer.start()
    try:
        result = peer.swanctl("--initiate", "--ike", "gw", "--timeout", "10", timeout=15)
        # charon writes its log on its own schedule: read it until it tells the redirect was followed
        with contextlib.suppress(AssertionError):
            wait_for(lambda: re.search(r"redirected to 10\.10\.10\.[23]", peer.log.read_text()), 10,
                     "strongSwan's log of the redirect", step=0.1)
        log = peer.log.read_text()
        assert "parsed IKE_AUTH response 1 [ IDr AUTH N(REDIR) ]" in log, result.stdout + log[-3000:]
        assert re.search(r"authentication of '10\.10\.10\.100' with pre-shared key successful", log)
        assert re.search(r"redirected to 10\.10\.10\.[23]", log)
        assert peer.process is not None
        if peer.process.poll() is not None:
            stderr = peer.process.stderr.read().decode() if peer.process.stderr else ""
            pytest.xfail(f"strongSwan 5.9.8 aborts after following a REDIRECT received in IKE_AUTH "
                         f"(exit {peer.process.returncode}: {stderr.strip()[-80:]}); redirect in IKE_SA_INIT works")
        # charon starts over with the member it was redirected to: poll until that IKE SA is up
        with contextlib.suppress(AssertionError):
            wait_for(lambda: "ESTABLISHED" in peer.list_sas(), 15, "the IKE SA with the member", step=0.5)
        log = peer.log.read_text()
        member = re.search(r"redirected to (10\.10\.10\.[23])", log)
        assert member
        after = log[log.index(f"initiating IKE_SA gw[1] to {member.group(1)}"):] \
            if f"initiating IKE_SA gw[1] to {member.group(1)}" in log else ""
        if "ESTABLISHED" not in peer.list_sas() and after and "generating IKE_SA_INIT request" not in after:
            pytest.xfail("strongSwan 5.9.8 stalls after following a REDIRECT received in IKE_AUTH: it logs "
                         "'initiating IKE_SA' to the member and never sends its IKE_SA_INIT (the same defect "
                         "as the abort above); redirect in IKE_SA_INIT works")
        assert "ESTABLISHED" in peer.list_sas(), result.stdout + log[-2000:]
    finally:
        peer.stop()
