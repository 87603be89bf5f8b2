"""On real namespaces: SSH into every node of topology1 and topology3 (and a CGNAT copy).

The OpenSSH client (with the lab's key, or sshpass for passwords) and paramiko talk to the lab-wide
server; outputs are checked against state read independently: `ip -n NS -j route/addr`, BIRD's
control socket, `conntrack -L` in the node's namespace, the daemons' status files.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import paramiko
import pytest
from labtools import (
    REPO,
    STATE_ROOT,
    LabOwner,
    assert_no_traceback,
    copy_lab,
    explain,
    root_networks,
    run_lab,
)

from lab_orchestrator import api
from labkit import birdctl
from labkit.files import read_secret

pytestmark = [
    pytest.mark.root,
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root for network namespaces"),
    pytest.mark.skipif(shutil.which("bird") is None or shutil.which("ssh") is None,
                       reason="needs bird2 and the OpenSSH client (make deps)"),
]
SSHPASS = shutil.which("sshpass")
JUNOS_COMMANDS = [
    "show version", "show system uptime", "show interfaces terse", "show interfaces", "show interfaces descriptions",
    "show route", "show route forwarding-table", "show bgp summary", "show bgp neighbor", "show configuration",
    "show configuration | display set", "show configuration | display json", "show route | display json",
    "show bgp summary | display json", "show route | match BGP", "show route | count",
    "show chassis high-availability information",
]
SRX_COMMANDS = ["show security flow session", "show security flow session summary",
                "show security nat source summary", "show security policies", "show security policies hit-count",
                "show security zones", "show arp", "show security nat source pool all",
                "show security nat source rule all"]
MX_COMMANDS = ["show services traffic-load-balance statistics", "show arp", "show services redundancy-group"]
IOS_COMMANDS = ["show version", "show running-config", "show ip interface brief", "show ip route",
                "show ip bgp summary", "show standby", "show crypto ikev2 cluster", "show crypto ikev2 sa",
                "show crypto ipsec sa", "show running-config | include ip address", "show ip route | include B"]
# Commands whose feature is not configured on that node answer with the vendor's error (exit 1).
NOT_CONFIGURED = {"show chassis high-availability information", "show services traffic-load-balance statistics",
                  "show security nat source pool all", "show security nat source rule all",
                  "show services redundancy-group",
                  "show standby", "show crypto ikev2 cluster", "show crypto ikev2 sa", "show crypto ipsec sa"}


@dataclass
class Lab:
    name: str
    state_dir: Path

    @property
    def ssh_config(self) -> str:
        return str(self.state_dir / "ssh_config")

    @property
    def sshd(self) -> dict[str, Any]:
        return json.loads((self.state_dir / "ssh" / "sshd.json").read_text())

    def node(self, name: str) -> dict[str, Any]:
        return next(n for n in self.sshd["nodes"] if n["name"] == name)

    def address(self, node: str) -> str:
        return str(self.node(node)["mgmt_address"].split("/")[0])

    def ssh(self, node: str, command: str, *options: str, stdin: str = "",
            timeout: float = 30) -> subprocess.CompletedProcess[str]:
        """OpenSSH, as a user would after `lab up`: the lab's ssh_config (its key and known_hosts)."""
        argv = ["ssh", "-F", self.ssh_config, *options, f"{self.name}-{node}", command]
        return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout)

    def password(self, user: str = "admin") -> str:
        """USER's password: the topology's, or the one `lab up` drew at random (ssh/passwords.secret.json)."""
        return read_secret(self.state_dir / "ssh" / "passwords.secret.json", user)

    def key(self, user: str = "admin") -> str:
        """The client key the lab made for USER."""
        return str(self.state_dir / "ssh" / f"id_ed25519-{user}")

    def client(self, node: str, user: str = "admin", password: str | None = None,
               key: str | None = None) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        client.load_host_keys(str(self.state_dir / "ssh" / "known_hosts"))
        client.set_missing_host_key_policy(paramiko.RejectPolicy())
        if password is None:
            client.connect(self.address(node), username=user, key_filename=key or self.key(user),
                           look_for_keys=False, allow_agent=False, timeout=5)
        else:
            client.connect(self.address(node), username=user, password=password, look_for_keys=False,
                           allow_agent=False, timeout=5)
        return client

    def ns(self, node: str, instance: str = "") -> str:
        return api.pick(self.name).ns(node, instance or None)

    def state(self) -> dict[str, Any]:
        return json.loads((self.state_dir / "state.json").read_text())


def exec_on(client: paramiko.SSHClient, command: str, stdin: str = "") -> tuple[str, int]:
    chan = client.get_transport().open_session()
    chan.exec_command(command)
    if stdin:
        chan.sendall(stdin.encode())
    chan.shutdown_write()
    out = b""
    while True:
        data = chan.recv(65536)
        if not data:
            break
        out += data
    return out.decode(), chan.recv_exit_status()


def ip_json(ns: str, *args: str) -> list[dict[str, Any]]:
    result = subprocess.run(["ip", "-n", ns, "-j", *args], capture_output=True, text=True, check=True)
    return list(json.loads(result.stdout or "[]"))


def prefix(dst: str) -> str:
    if dst == "default":
        return "0.0.0.0/0"
    return dst if "/" in dst else f"{dst}/32"


def kernel_main(ns: str) -> dict[str, set[str]]:
    """Main-table prefix -> its gateways (or interface names for connected routes), from `ip -j route`."""
    out: dict[str, set[str]] = {}
    for route in ip_json(ns, "route", "show", "table", "main"):
        hops = route.get("nexthops") or [route]
        out[prefix(route["dst"])] = {h.get("gateway") or h.get("dev", "") for h in hops}
    return out


def wait_for(predicate: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def bgp_established(lab: Lab, node: str) -> bool:
    for bird in lab.node(node)["birds"]:
        try:
            protocols = [p for p in birdctl.protocols(bird["socket"]) if p.proto == "BGP"]
        except birdctl.BirdError:
            return False
        if not protocols or not all(p.info.startswith("Established") for p in protocols):
            return False
    return True


def answers(address: str, timeout: float = 1.0) -> bool:
    try:
        with socket.create_connection((address, 22), timeout=timeout) as sock:
            sock.settimeout(timeout)
            return sock.recv(64).startswith(b"SSH-2.0-")
    except OSError:
        return False


def subnet_for(name: str, attempt: int) -> IPv4Network:
    """A free /24 of 10.253.0.0/16 picked from the lab's name: other suites running on this machine
    meanwhile take theirs from labtools' pools, in order, and two labs on one subnet would collide."""
    used = root_networks()
    start = (zlib.crc32(name.encode()) + attempt * 37) % 250 + 1
    for offset in range(250):
        subnet = IPv4Network(f"10.253.{(start + offset) % 250 + 1}.0/24")
        if not any(subnet.overlaps(n) for n in used):
            return subnet
    raise AssertionError("no free management subnet in 10.253.0.0/16")


def bring_up(owner: LabOwner, source: str, name: str, tmp: Path, extra: str = "") -> Lab:
    """A copy of a shipped lab under NAME with a free management subnet (another engineer's test may
    take the one picked meanwhile: then pick again)."""
    for attempt in range(3):
        topology = copy_lab(REPO / "labs" / source, name, tmp, mgmt=subnet_for(name, attempt))
        topology.write_text(topology.read_text() + extra)
        facts = owner.claim(topology)
        up = run_lab("up", str(topology))
        if up.returncode == 0:
            return Lab(facts.name, STATE_ROOT / facts.name)
        owner.labs.pop(facts.name, None)
        assert "overlaps" in up.stderr, explain(up)
    raise AssertionError(f"no free management subnet for {name}")


@pytest.fixture(scope="module")
def labs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Lab]]:
    tmp = tmp_path_factory.mktemp("ssh")
    owner = LabOwner(tmp)
    made: dict[str, Lab] = {}
    try:
        made["t1"] = bring_up(owner, "topology1.yml", "sst1", tmp)
        made["t3"] = bring_up(owner, "topology3.yml", "sst3", tmp,
                              "ssh:\n  users:\n    - {name: admin, password: admin}\n"
                              "    - {name: viewer, password: view, class: read-only}\n")
        for lab in made.values():
            wait_for(lambda lab=lab: (lab.state_dir / "ssh" / "ready").exists(), 10, f"{lab.name} SSH ready")
        yield made
    finally:
        for lab in made.values():  # shown when a test failed: what the server saw
            log = lab.state_dir / "logs" / "_lab-sshd.log"
            if log.exists():
                print(f"--- {log} (last lines)\n" + "\n".join(log.read_text().splitlines()[-60:]))
        problems = owner.cleanup()
        assert not problems, problems


@pytest.fixture(scope="module")
def t1(labs: dict[str, Lab]) -> Lab:
    return labs["t1"]


@pytest.fixture(scope="module")
def t3(labs: dict[str, Lab]) -> Lab:
    return labs["t3"]


# --------------------------------------------------------------------------- access
def test_openssh_exec_with_the_labs_key_and_exit_status(t1: Lab) -> None:
    ok = t1.ssh("mx1", "show version")
    assert ok.returncode == 0, explain(ok)
    assert "Hostname: mx1\n" in ok.stdout
    bad = t1.ssh("mx1", "show foo")
    assert bad.returncode == 1 and "syntax error, expanding <command>." in bad.stdout
    unknown = t1.ssh("srx1", "frobnicate now")
    assert unknown.returncode == 1 and unknown.stdout.endswith("unknown command.\n")
    ios = t1.ssh("gw-trust", "show ip rout")
    assert ios.returncode == 0 and "Gateway of last resort" in ios.stdout
    assert t1.ssh("gw-trust", "show foo").stdout.endswith("% Invalid input detected at '^' marker.\n")


def test_host_keys_are_pinned_in_known_hosts(t1: Lab) -> None:
    strict = t1.ssh("srx2", "show version", "-o", "StrictHostKeyChecking=yes")
    assert strict.returncode == 0, explain(strict)
    lines = (t1.state_dir / "ssh" / "known_hosts").read_text().splitlines()
    assert len(lines) == 7 and all(line.split()[1] == "ssh-ed25519" for line in lines)
    other = subprocess.run(["ssh", "-o", "UserKnownHostsFile=/dev/null", "-o", "GlobalKnownHostsFile=/dev/null",
                            "-o", "StrictHostKeyChecking=yes", "-o", "BatchMode=yes",
                            f"admin@{t1.address('srx2')}", "show version"], capture_output=True, text=True, timeout=30)
    assert other.returncode == 255 and "Host key verification failed" in other.stderr


@pytest.mark.skipif(SSHPASS is None, reason="needs sshpass (make deps)")
def test_passwords_right_and_wrong(t1: Lab) -> None:
    """topology1 sets no password: admin's is drawn at random by `lab up`; admin/admin is refused."""
    password = t1.password()
    assert password != "admin" and len(password) >= 16
    base = ["-o", f"UserKnownHostsFile={t1.state_dir / 'ssh' / 'known_hosts'}", "-o", "PubkeyAuthentication=no",
            "-o", "NumberOfPasswordPrompts=1"]

    def login(user: str, given: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([SSHPASS, "-p", given, "ssh", *base, f"{user}@{t1.address('srx1')}", "show version"],
                              capture_output=True, text=True, timeout=30)

    right = login("admin", password)
    assert right.returncode == 0, explain(right)
    assert "Hostname: srx1" in right.stdout
    for user, given in (("admin", "admin"), ("admin", password.upper()), ("root", password)):
        refused = login(user, given)
        assert refused.returncode != 0 and "Hostname" not in refused.stdout, (user, given)


def test_secrets_are_owner_only(t1: Lab) -> None:
    assert stat.S_IMODE(t1.state_dir.stat().st_mode) == 0o700
    ssh = t1.state_dir / "ssh"
    for path in (ssh / "passwords.secret.json", Path(t1.key()), ssh / "mx1_ed25519_key"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path
    assert t1.password() not in (t1.state_dir / "ssh" / "sshd.json").read_text()
    shown = run_lab("status", t1.name)
    assert shown.returncode == 0, explain(shown)
    assert f"admin / {t1.password()}" in shown.stdout


def test_a_key_the_lab_does_not_know_is_refused(t1: Lab, tmp_path: Path) -> None:
    key = tmp_path / "stranger"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    refused = subprocess.run(["ssh", "-o", f"UserKnownHostsFile={t1.state_dir / 'ssh' / 'known_hosts'}",
                              "-o", "BatchMode=yes", "-o", "IdentitiesOnly=yes", "-i", str(key),
                              f"admin@{t1.address('mx1')}", "show version"], capture_output=True, text=True, timeout=30)
    assert refused.returncode == 255 and "Permission denied" in refused.stderr
    with pytest.raises(paramiko.AuthenticationException):
        t1.client("mx1", password="nope")
    with pytest.raises(paramiko.AuthenticationException):
        paramiko.SSHClient().connect  # noqa: B018 - the attribute exists; the real check follows
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(paramiko.AutoAddPolicy())
        client.connect(t1.address("mx1"), username="admin", pkey=paramiko.Ed25519Key.from_private_key_file(str(key)),
                       look_for_keys=False, allow_agent=False, timeout=5)


def test_paramiko_runs_many_commands_on_one_transport(t1: Lab) -> None:
    client = t1.client("mx1")
    try:
        transport = client.get_transport()
        outputs = [exec_on(client, c) for c in ("show version", "show bgp summary", "show nothing", "show version")]
        assert transport.is_active()
        assert [status for _, status in outputs] == [0, 0, 1, 0]
        assert outputs[0][0] == outputs[3][0]
    finally:
        client.close()


def test_lab_ssh_command(t1: Lab) -> None:
    result = run_lab("ssh", "srx1", "--lab", t1.name, "--", "show", "interfaces", "terse")
    assert result.returncode == 0, explain(result)
    assert "fxp0.0" in result.stdout
    refused = run_lab("ssh", "client", "--lab", t1.name)
    assert refused.returncode != 0 and "does not answer SSH" in refused.stderr
    assert_no_traceback(refused.stderr)


def test_each_user_logs_in_with_its_own_key_only(t3: Lab) -> None:
    client = t3.client("mx1", user="viewer")
    client.close()
    with pytest.raises(paramiko.AuthenticationException):  # admin's key is not viewer's
        t3.client("mx1", user="viewer", key=t3.key("admin"))
    with pytest.raises(paramiko.AuthenticationException):
        t3.client("mx1", user="admin", key=t3.key("viewer"))
    ok = t3.ssh("mx1", "show version", "-l", "viewer")  # ssh_config offers the key of the user logging in
    assert ok.returncode == 0, explain(ok)


def test_read_only_user_from_the_topology(t3: Lab) -> None:
    client = t3.client("srx1", user="viewer", password="view")
    try:
        assert exec_on(client, "show version")[1] == 0
        out, status = exec_on(client, "restart routing")
        assert status == 1 and out == "error: permission denied\n"
    finally:
        client.close()


# --------------------------------------------------------------------------- interactive
def read_until(chan: paramiko.Channel, marker: str, timeout: float = 10.0) -> str:
    data = ""
    deadline = time.monotonic() + timeout
    while marker not in data:
        if time.monotonic() > deadline:
            raise AssertionError(f"{marker!r} not seen; got {data!r}")
        if chan.recv_ready():
            data += chan.recv(65536).decode()
        else:
            time.sleep(0.01)
    return data


def test_interactive_junos_shell(t1: Lab) -> None:
    client = t1.client("mx1")
    try:
        chan = client.invoke_shell(width=120)
        banner = read_until(chan, "admin@mx1> ")
        assert "lab sst1, node mx1" in banner
        chan.send("sh\t")
        assert read_until(chan, "show ") == "show "
        chan.send("ver\t")
        assert read_until(chan, "version ") == "version "
        chan.send("\r")
        out = read_until(chan, "admin@mx1> ")
        assert "\r\nHostname: mx1\r\n" in out and "\n" not in out.replace("\r\n", "")
        chan.send("show bgp ?")
        help_text = read_until(chan, "admin@mx1> show bgp ")
        assert "Possible completions:\r\n  neighbor " in help_text
        chan.send("\x15show foo\r")  # Ctrl-U, then a wrong command
        error = read_until(chan, "admin@mx1> ")
        assert " " * len("admin@mx1> show ") + "^\r\nsyntax error, expanding <command>.\r\n" in error
        chan.send("\x1b[A\x7f\x7f\x7fversion | match Host\r")  # history, edit, pipe
        assert "Hostname: mx1" in read_until(chan, "admin@mx1> ")
        chan.send("exit\r")
        wait_for(chan.exit_status_ready, 5, "the shell to end")
        assert chan.recv_exit_status() == 0
    finally:
        client.close()


def test_hostile_input_is_answered_quickly_and_the_channel_stays(t1: Lab) -> None:
    """The fuzzer's reproducers against the real server: `?` after a thousand value keywords, a
    paste past the line limit, a catastrophic `| match`; meanwhile another session answers at once."""
    hostile, other = t1.client("mx1"), t1.client("srx1")
    try:
        chan = hostile.invoke_shell(width=120)
        read_until(chan, "admin@mx1> ")
        started = time.monotonic()
        chan.send("show route" + " p" * 1000 + " ?")
        assert "Possible completions" in read_until(chan, "admin@mx1> show route p")
        assert time.monotonic() - started < 0.5 + 0.5  # the answer, plus the 2 KB echo of the line itself
        chan.send("\x15" + "x" * 3000 + "\x01" + "y" * 4096)
        assert "line too long: at most 4096 characters" in read_until(chan, "line too long", 5)
        chan.send("\x03")
        read_until(chan, "^C\r\nadmin@mx1> ")
        chan.send('show interfaces terse | match "(.*)*X"\r')
        started = time.monotonic()
        assert exec_on(other, "show version")[1] == 0
        assert time.monotonic() - started < 0.5 + 0.5
        out = read_until(chan, "admin@mx1> ", 5)
        assert "fxp0.0 " in out and "ge-" not in out  # case-insensitive, like Junos: the x of fxp0 matches
        chan.send("show version\r")
        read_until(chan, "Hostname: mx1")
        out, status = exec_on(hostile, "show " + "x" * 5000)
        assert status == 1 and "line too long" in out
        assert hostile.get_transport().is_active()
    finally:
        hostile.close()
        other.close()


def test_interactive_ios_shell_with_openssh(t1: Lab) -> None:
    result = subprocess.run(["ssh", "-tt", "-F", t1.ssh_config, f"{t1.name}-gw-trust"],
                            input=b"show ip interface brief\rshow ?\x15exit\r", capture_output=True, timeout=30)
    out = result.stdout.decode()  # bytes: a pty's CRLF must stay CRLF
    assert result.returncode == 0, out + result.stderr.decode()
    assert out.startswith("gw-trust#show ip interface brief\r\n")
    assert "\r\nGigabitEthernet0/1 " in out and "\n" not in out.replace("\r\n", "")
    assert "  running-config   Current operating configuration\r\n" in out


# --------------------------------------------------------------------------- every command
@pytest.mark.parametrize("node", ["mx1", "srx1", "gw-trust", "gw-untrust"])
def test_every_command_on_topology1(t1: Lab, node: str) -> None:
    run_all(t1, node)


@pytest.mark.parametrize("node", ["mx1", "srx1", "srx4", "gw-trust"])
def test_every_command_on_topology3(t3: Lab, node: str) -> None:
    run_all(t3, node)


def run_all(lab: Lab, node: str) -> None:
    kind = lab.node(node)["kind"]
    commands = IOS_COMMANDS if kind == "ios-router" else JUNOS_COMMANDS + (SRX_COMMANDS if kind == "srx" else
                                                                            MX_COMMANDS)
    client = lab.client(node)
    try:
        for command in commands:
            try:
                out, status = exec_on(client, command)
            except paramiko.SSHException as exc:  # say why the server ended the connection: its log's last lines
                log = lab.state_dir / "logs" / "_lab-sshd.log"
                tail = log.read_text(errors="replace").splitlines()[-30:] if log.is_file() else ["(no server log)"]
                raise AssertionError(f"{node}: {command}: {exc}; the SSH server's log ends:\n"
                                     + "\n".join(tail)) from exc
            assert_no_traceback(out)
            assert out.strip(), f"{node}: {command} printed nothing"
            configured = ("high-availability" in command and "mnha" in lab.node(node)["features"]) or \
                ("traffic-load-balance" in command and lab.node(node)["features"].get("load_balancing") == "tlb")
            if command in NOT_CONFIGURED and not configured:
                assert status == 1 and ("not configured" in out or "not running" in out), (command, out)
            else:
                assert status == 0, f"{node}: {command} -> {status}: {out}"
            if command.endswith("display json"):
                json.loads(out)
    finally:
        client.close()


# --------------------------------------------------------------------------- against independent state
@pytest.mark.parametrize("node, instance", [("srx1", ""), ("mx1", "TRUST-VR"), ("mx1", "UNTRUST-VR"), ("mx1", "")])
def test_show_route_matches_the_kernel(t1: Lab, node: str, instance: str) -> None:
    table = f"{instance}.inet.0" if instance else "inet.0"
    out, status = exec_on_once(t1, node, f"show route table {table} | display json")
    kernel = kernel_main(t1.ns(node, instance))
    assert status == 0
    tables = [t for t in json.loads(out)["route-information"]["route-table"] if t["table-name"] == table]
    assert len(tables) == 1
    shown = {rt["rt-destination"]: rt["rt-entry"] for rt in tables[0]["rt"]}
    for dst, hops in kernel.items():
        assert dst in shown, f"{dst} (kernel) missing from show route"
        active = [e for e in shown[dst] if e["active-tag"] == "*"]
        assert len(active) == 1
        shown_hops = {h["to"] or h["via"] for h in active[0]["nh"]}
        gateways = {h for h in hops if h.count(".") == 3}
        if gateways:
            assert shown_hops == gateways, (dst, shown_hops, hops)
    for address in ip_json(t1.ns(node, instance), "addr"):  # own addresses: Local or Direct /32 entries
        for info in address.get("addr_info", []):
            if info.get("family") == "inet" and not info["local"].startswith("127."):
                assert f"{info['local']}/32" in shown


def exec_on_once(lab: Lab, node: str, command: str) -> tuple[str, int]:
    client = lab.client(node)
    try:
        return exec_on(client, command)
    finally:
        client.close()


def test_forwarding_table_matches_the_kernel(t1: Lab) -> None:
    out, status = exec_on_once(t1, "mx1", "show route forwarding-table table TRUST-VR.inet | display json")
    assert status == 0
    table = json.loads(out)["forwarding-table-information"]["route-table"][0]
    shown = {("0.0.0.0/0" if e["rt-destination"] == "default" else e["rt-destination"]):
             {h["to"] for h in e["nh"] if h["to"]} for e in table["rt-entry"]}
    for dst, hops in kernel_main(t1.ns("mx1", "TRUST-VR")).items():
        assert dst in shown
        gateways = {h for h in hops if h.count(".") == 3}
        if gateways:
            assert shown[dst] == gateways


def test_bgp_summary_matches_bird(t1: Lab) -> None:
    for node in ("mx1", "srx2", "gw-untrust"):
        expected: dict[str, str] = {}
        for bird in t1.node(node)["birds"]:
            for proto in birdctl.protocols(bird["socket"]):
                if proto.proto == "BGP":
                    detail = birdctl.command(bird["socket"], f"show protocols all {proto.name}")
                    address = next(x.split(":", 1)[1].strip() for x in detail if "Neighbor address:" in x)
                    expected[address] = proto.info.split()[0]
        command = "show ip bgp summary" if node.startswith("gw") else "show bgp summary | display json"
        out, status = exec_on_once(t1, node, command)
        assert status == 0
        if node.startswith("gw"):
            rows = {line.split()[0]: line.split()[-1] for line in out.splitlines()
                    if line.split() and line.split()[0].count(".") == 3}
            assert set(rows) == set(expected)
            for address, state in expected.items():
                assert (rows[address].isdigit()) == (state == "Established"), (address, rows[address], state)
        else:
            peers = {p["peer-address"]: p["peer-state"] for p in json.loads(out)["bgp-information"]["bgp-peer"]}
            assert peers == expected


def test_interfaces_terse_matches_ip_addr(t1: Lab) -> None:
    out, status = exec_on_once(t1, "mx1", "show interfaces terse")
    assert status == 0
    for instance in ("", "TRUST-VR", "UNTRUST-VR"):
        aliases = {link["ifname"]: link.get("ifalias", link["ifname"]) for link in ip_json(t1.ns("mx1", instance),
                                                                                          "link")}
        for link in ip_json(t1.ns("mx1", instance), "addr"):
            for info in link.get("addr_info", []):
                if info.get("family") != "inet" or info["local"].startswith("127."):
                    continue
                shown = info["local"] if link["ifname"] == "lo" else f"{info['local']}/{info['prefixlen']}"
                assert f" inet     {shown}" in out, f"{shown} ({link['ifname']}) missing"
                name = "lo0" if link["ifname"] == "lo" else aliases[link["ifname"]]
                assert f"\n{name}" in "\n" + out


def test_ios_routes_match_the_kernel(t1: Lab) -> None:
    client = t1.client("gw-trust")
    try:
        for dst, hops in kernel_main(t1.ns("gw-trust")).items():
            out, status = exec_on(client, f"show ip route {dst}")
            assert status == 0 and out.startswith(f"Routing entry for {dst}\n"), out
            for gateway in (h for h in hops if h.count(".") == 3):
                assert f" {gateway}" in out
        brief, _ = exec_on(client, "show ip interface brief")
        for link in ip_json(t1.ns("gw-trust"), "addr"):
            for info in link.get("addr_info", []):
                if info.get("family") == "inet" and not info["local"].startswith("127."):
                    assert f" {info['local']} " in brief
    finally:
        client.close()


def conntrack_ids(ns: str) -> set[int]:
    result = subprocess.run(["ip", "netns", "exec", ns, "conntrack", "-L", "-p", "tcp", "-o", "id"],
                            capture_output=True, text=True, check=True)
    return {int(line.rsplit("id=", 1)[1]) for line in result.stdout.splitlines() if "id=" in line
            and ("dport=179 " in line or "sport=179 " in line)}


def test_flow_sessions_match_conntrack(t1: Lab) -> None:
    out, status = exec_on_once(t1, "srx3", "show security flow session protocol tcp | display json")
    assert status == 0
    shown = {s["session-identifier"] for s in json.loads(out)["flow-session-information"]["flow-session"]
             if 179 in (s["flow-information"][0]["source-port"], s["flow-information"][0]["destination-port"])}
    assert shown and shown == conntrack_ids(t1.ns("srx3"))  # the SRX's own BGP sessions: stable


def test_a_new_flow_shows_on_the_srx_that_carries_it(t1: Lab) -> None:
    source = "100.64.7.7"
    ping = run_lab("exec", "--lab", t1.name, "client", "--", "ping", "-c", "1", "-W", "2", "-I", source, "203.0.113.9")
    assert ping.returncode == 0, explain(ping)
    carriers = []
    for srx in ("srx1", "srx2", "srx3", "srx4"):
        listed = subprocess.run(["ip", "netns", "exec", t1.ns(srx), "conntrack", "-L", "-p", "icmp", "-s", source],
                                capture_output=True, text=True)
        if source in listed.stdout:
            carriers.append(srx)
    assert len(carriers) == 1
    out, status = exec_on_once(t1, carriers[0], f"show security flow session source-prefix {source}")
    assert status == 0
    assert f"In: {source}/" in out and "--> 203.0.113.9/" in out and ";icmp" in out
    assert "Policy name: permit-outbound/1" in out and out.endswith("Total sessions: 1\n")


def test_tlb_statistics_match_the_selector_status(t3: Lab) -> None:
    out, status = exec_on_once(t3, "mx1", "show services traffic-load-balance statistics | display json")
    assert status == 0
    shown = {r["real-service-name"]: r["real-service-state"] for r in
             json.loads(out)["tlb-statistics-information"]["real-service"]}
    file = json.loads((t3.state_dir / "nodes" / "mx1" / "mxlb-status.json").read_text())
    assert shown == {m["name"]: "UP" if m["alive"] else "DOWN" for m in file["members"]}


def test_chassis_high_availability_matches_mnha_status(t3: Lab) -> None:
    for node in ("srx1", "srx2"):
        out, status = exec_on_once(t3, node, "show chassis high-availability information")
        assert status == 0
        file = json.loads((t3.state_dir / "nodes" / node / "mnha-status.json").read_text())
        assert f"IP address: {file['icl']['peer_ip']} " in out
        conn = "UP" if file["icl"]["up"] and file["heartbeat"]["peer_alive"] else "DOWN"
        assert f"Conn State: {conn}" in out


def test_ping_from_a_node_and_from_its_routing_instance(t3: Lab) -> None:
    peer = next(p for p in t3.node("srx1")["peers"] if p["peer_node"] == "mx1")
    out, status = exec_on_once(t3, "srx1", f"ping {peer['peer_address']} count 3")
    assert status == 0, out
    assert out.startswith(f"PING {peer['peer_address']} ({peer['peer_address']}): 56 data bytes\n")
    assert "3 packets transmitted, 3 packets received, 0% packet loss" in out, out
    # the MX master instance has no route into TRUST-VR: the same ping only works from the instance
    mx_peer = next(p for p in t3.node("mx1")["peers"] if p["peer_node"] == "srx1" and p["instance"] == "TRUST-VR")
    lost, status = exec_on_once(t3, "mx1", f"ping {mx_peer['peer_address']} count 2 wait 0.3")
    assert status == 1 and "0 packets received" in lost or "ping: sendto" in lost, lost
    out, status = exec_on_once(t3, "mx1", f"ping {mx_peer['peer_address']} routing-instance TRUST-VR count 2")
    assert status == 0 and "2 packets received" in out, out
    gw = t3.node("gw-trust")["peers"][0]
    out, status = exec_on_once(t3, "gw-trust", f"ping {gw['peer_address']} repeat 3")
    assert status == 0 and "!!!\nSuccess rate is 100 percent (3/3)" in out, out


def test_cgnat_translations(tmp_path: Path) -> None:
    owner = LabOwner(tmp_path)
    try:
        lab = bring_up(owner, "topology1-cgnat.yml", "sstn", tmp_path)
        wait_for(lambda: (lab.state_dir / "ssh" / "ready").exists(), 10, "SSH ready")
        source = "100.64.9.9"
        ping = run_lab("exec", "--lab", lab.name, "client", "--", "ping", "-c", "1", "-W", "2", "-I", source,
                       "203.0.113.9")
        assert ping.returncode == 0, explain(ping)
        carrier = next(s for s in ("srx1", "srx2", "srx3", "srx4") if source in subprocess.run(
            ["ip", "netns", "exec", lab.ns(s), "conntrack", "-L", "-p", "icmp", "-s", source],
            capture_output=True, text=True).stdout)
        pool = IPv4Network(lab.node(carrier)["nat_pool"])
        summary, status = exec_on_once(lab, carrier, "show security nat source summary")
        assert status == 0 and f"SRC-POOL           {pool.network_address}-{pool.broadcast_address}" in summary
        assert "Total port number usage for port translation pool: 1\n" in summary
        flows, _ = exec_on_once(lab, carrier, f"show security flow session source-prefix {source}")
        translated = flows.split("Out: 203.0.113.9/")[1].split("-->")[1].split("/")[0].strip()
        assert IPv4Network(f"{translated}/32").subnet_of(pool)
    finally:
        problems = owner.cleanup()
        assert not problems, problems


# --------------------------------------------------------------------------- state-changing commands
def test_restart_routing_restarts_bird_through_the_supervisor(t1: Lab) -> None:
    before = next(p for p in t1.state()["processes"] if p["node"] == "srx1" and p["name"] == "bird")
    out, status = exec_on_once(t1, "srx1", "restart routing")
    assert status == 0 and out.startswith("Routing protocols process started, pid "), out
    pid = int(out.split("pid ")[1].split()[0].rstrip(","))
    after = next(p for p in t1.state()["processes"] if p["node"] == "srx1" and p["name"] == "bird")
    assert after["pid"] == pid != before["pid"]
    assert "-R" in Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")  # graceful-restart recovery
    wait_for(lambda: bgp_established(t1, "srx1"), 20, "srx1 BGP back")
    summary, _ = exec_on_once(t1, "srx1", "show bgp summary")
    assert "Down peers: 0" in summary


def test_gres_and_srd_from_the_cli(t1: Lab) -> None:
    before = {p["name"]: p["pid"] for p in t1.state()["processes"] if p["node"] == "mx1"}
    out, status = exec_on_once(t1, "mx1", "request chassis routing-engine master switch")  # no answer: aborted
    assert status == 0 and out == "Toggle mastership between routing engines ? [yes,no] (no) "
    client = t1.client("mx1")
    try:
        out, status = exec_on(client, "request chassis routing-engine master switch", stdin="yes\n")
    finally:
        client.close()
    assert status == 0 and "Complete. The other routing engine becomes the master." in out, out
    after = {p["name"]: p["pid"] for p in t1.state()["processes"] if p["node"] == "mx1"}
    assert set(after) == set(before) and all(after[n] != before[n] for n in before)
    wait_for(lambda: bgp_established(t1, "mx1"), 20, "mx1 BGP back")
    out, status = exec_on_once(t1, "mx1", "request services redundancy-set id 1 switchover")
    assert status == 1 and out == "error: redundancy-set 1 is not configured\n"
    out, status = exec_on_once(t1, "srx1", "request chassis routing-engine master switch")
    assert status == 1 and "not available" in out
    out, status = exec_on_once(t1, "gw-trust", "reload")
    assert status == 1 and "not available in this lab yet" in out


def test_a_powered_off_node_does_not_answer(t1: Lab) -> None:
    address = t1.address("srx2")
    client = t1.client("srx2")
    try:
        fail = run_lab("fail", "srx2", "srx-power-off", "--lab", t1.name)
        assert fail.returncode == 0, explain(fail)
        time.sleep(0.5)  # the server checks its nodes every 0.25 s
        assert not answers(address)
        assert t1.ssh("srx2", "show version", "-o", "ConnectTimeout=2").returncode == 255
        assert answers(t1.address("srx1"))  # the others do
        restore = run_lab("restore", "srx2", "--lab", t1.name)
        assert restore.returncode == 0, explain(restore)
        wait_for(lambda: answers(address), 3, "srx2 to answer again")
        # The session open before the power-off did not survive it (a power-off can tell no client: the
        # link is down; the server dropped it and the client learns it once the link is back).
        wait_for(lambda: not client.get_transport().is_active(), 5, "the old session to be gone")
    finally:
        client.close()
        run_lab("restore", "srx2", "--lab", t1.name)  # again, in case the test failed half-way
    assert t1.ssh("srx2", "show version").returncode == 0


def test_request_system_reboot_performs_the_reboot_event(t1: Lab) -> None:
    address = t1.address("srx4")
    client = t1.client("srx4")
    try:
        out, status = exec_on(client, "request system reboot", stdin="yes\n")
    finally:
        client.close()
    assert status == 0 and "Reboot the system ? [yes,no] (no) " in out and "Shutdown NOW!" in out, out
    wait_for(lambda: not answers(address, 0.3), 5, "srx4 to go down")
    wait_for(lambda: answers(address), 20, "srx4 to come back")
    wait_for(lambda: "srx4" not in t1.state().get("down_nodes", []), 10, "srx4 powered on")
    wait_for(lambda: bgp_established(t1, "srx4"), 20, "srx4 BGP back")
    assert t1.ssh("srx4", "show version").returncode == 0


# --------------------------------------------------------------------------- memory
def pss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith("Pss:"):
            return int(line.split()[1])
    raise AssertionError("no Pss line")


def test_one_server_for_the_lab_and_its_memory(t1: Lab) -> None:
    records = [p for p in t1.state()["processes"] if p["name"] == "sshd"]
    assert len(records) == 1 and records[0]["node"] == "_lab"
    pid = records[0]["pid"]
    own = os.stat(f"/proc/{pid}/ns/net").st_ino
    assert own != os.stat(f"/run/netns/{records[0]['ns']}").st_ino  # not in a node's namespace
    nodes = len(t1.sshd["nodes"])
    pss = pss_kib(pid) / 1024
    print(f"sshd PSS {pss:.1f} MiB for {nodes} nodes: {pss / nodes:.1f} MiB per node")
    assert pss / nodes < 30  # the foundation's per-node budget (every process of a node)
