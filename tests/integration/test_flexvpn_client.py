"""IOS-like FlexVPN clients (`flexvpn_client`, labs/flexvpn-branch.yml) on real namespaces.

One lab (`fvcli`: the shipped file with 1 s / 3 s HSRP timers, router1 (the master) with slave
priority 1, router3 with `strict_overload`):
branch1 and branch2 connect to the cluster VIP by themselves, are redirected by the master (IKE_SA_INIT)
to a member, get their Tunnel1 address from its pool and ping the northbound router through ESP; `show
crypto session` and `show crypto ikev2 sa` on the branch say where it was redirected. router3, filled
to its max-session, refuses a new IKE SA (strict overload). Then the member of a branch powers off:
dead peer detection brings the branch back through the VIP to a live member, and traffic resumes.
"""

from __future__ import annotations

import json
import math
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
from labtools import LabOwner, copy_lab, explain, run_lab
from test_flexvpn import CLIENT1, REPO, ROUTERS, VIP, Lab, cluster_ready, elected, fast, wait_for

NORTH = "10.10.10.254"
BRANCHES = {"branch1": "10.10.20.11", "branch2": "10.10.20.12"}


@pytest.fixture(scope="module")
def branch_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    tmp = tmp_path_factory.mktemp("fvcli")
    source = tmp / "source.yml"
    text = fast((REPO / "labs/flexvpn-branch.yml").read_text())
    cluster = "    ikev2_cluster: {standby_group: group1, max_session: 10}\n    ikev2: {redirect: init, pool: 172.16."
    router1, router3 = cluster + "1", cluster + "3"
    assert router1 in text and router3 in text
    # router1 (the master) with slave priority 1: its load counts double, so with equal SAs a member is
    # always the least loaded (the guide's advice: make the master the most loaded gateway)
    text = text.replace(router1, router1.replace("max_session: 10}", "max_session: 10, priority: 1}"))
    source.write_text(text.replace(router3, router3.replace("max_session: 10}", "max_session: 10, "
                                                                                "strict_overload: true}")))
    path = copy_lab(source, "fvcli", tmp)
    owner = LabOwner(tmp)
    owner.claim(path)
    try:
        result = run_lab("up", str(path), timeout=120)
        assert result.returncode == 0, explain(result)
        yield Lab("fvcli")
    finally:
        problems = owner.cleanup()
        assert not problems, problems


def client(lab: Lab, node: str) -> dict[str, Any]:
    status: dict[str, Any] = lab.ike(node)["client"]
    return status


def up(lab: Lab, node: str) -> dict[str, Any] | None:
    status = client(lab, node)
    return status if status["state"] == "up" and status["address"] else None


def ping(lab: Lab, node: str, source: str) -> bool:
    # three echoes (one answer is enough): a single lost packet on a loaded host is no fault
    argv = ["ping", "-n", "-c", "3", "-i", "0.2", "-W", "1", "-I", source, NORTH]
    return lab.run(node, *argv, check=False, timeout=30).returncode == 0


def member_sa(lab: Lab, gateway: str, branch: str) -> dict[str, Any] | None:
    node = next((n for n, a in ROUTERS.items() if a == gateway), "router1")  # the VIP: the master
    return next((sa for sa in lab.ike(node).get("ipsec_sas", []) if sa["remote"] == BRANCHES[branch]), None)


def test_ios_clients_are_redirected_and_ping_north_through_esp(branch_lab: Lab) -> None:
    elected(branch_lab, 30)
    # The branches connected at `lab up`, as soon as the VIP answered: before the members had joined
    # the cluster, so the master kept them. Started again now (their IKE SAs deleted), they meet the
    # whole cluster, where a member is always less loaded than the master (priority 1).
    for branch in BRANCHES:
        wait_for(lambda b=branch: up(branch_lab, b), 30, f"{branch}'s first tunnel up")
        branch_lab.lab.restart(branch, "flexclient")
    for branch, source in BRANCHES.items():
        status = wait_for(lambda b=branch: up(branch_lab, b), 30, f"{branch}'s Tunnel1 up")
        gateway, path = status["gateway"], status["path"]
        assert path == [VIP, gateway] and gateway in ("10.10.10.2", "10.10.10.3"), status
        assert status["local"] == source
        assert ping(branch_lab, branch, status["address"]), f"{branch}: no answer through Tunnel1"
        sa = wait_for(lambda b=branch, g=gateway: (s := member_sa(branch_lab, g, b)) and s["decaps"] >= 1 and s,
                      5, f"{branch}'s CHILD_SA on {gateway} with its packets")
        assert sa["remote_ident"] == [f"{status['address']}/32"]
        mine = wait_for(lambda b=branch: (s := branch_lab.ike(b)["ipsec_sas"]) and s[0]["encaps"] >= 1 and s[0],
                        5, f"{branch}'s own ESP counters")
        assert mine["interface"] == "Tunnel1" and mine["remote"] == gateway
        session = branch_lab.lab.cli(branch, "show crypto session")[0]  # the SSH CLI's own code
        assert f"Interface: Tunnel1\nProfile: default\nSession status: UP-ACTIVE\nPeer: {gateway} port 4500" \
            in session, session
        ikev2 = branch_lab.show(branch, "show crypto ikev2 sa")
        assert re.search(rf"^1\s+{re.escape(source)}/4500\s+{re.escape(gateway)}/4500\s.*READY", ikev2, re.M), ikev2
        assert f"Assigned host addr: {status['address']}" in ikev2
        assert f"Redirected from: {VIP}" in session and f"Redirected from: {VIP}" in ikev2  # the branch's
        member = next(n for n, a in ROUTERS.items() if a == gateway)
        assert f"Redirected from: {VIP}" in branch_lab.show(member, "show crypto ikev2 sa")  # and the member's
        running = branch_lab.lab.cli(branch, "show running-config")[0]
        assert "crypto ikev2 client flexvpn flex_client\n peer 1 10.10.10.100\n client connect Tunnel1" in running


def test_strict_overload_refuses_new_ike_sas_on_a_full_member(branch_lab: Lab) -> None:
    elected(branch_lab, 30)
    own = branch_lab.ike("router3")["cluster"]["own"]
    need = max(1, math.ceil((10 - own["ike"] - own["ipsec"]) / 3))  # sessions of 3 SAs up to max-session 10
    fill = subprocess.Popen(["ip", "netns", "exec", branch_lab.ns("client1"), sys.executable, "-m",
                             "dataplane.ikev2.client", "--gateway", ROUTERS["router3"], "--bind", CLIENT1,
                             "--psk-file", branch_lab.psk_file,
                             "--count", str(need), "--keep", "8"], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        wait_for(lambda: branch_lab.ike("router3")["cluster"]["own"]["overloaded"], 15, "router3 overloaded")
        text = branch_lab.show("router3", "show crypto ikev2 cluster")
        assert "Overload mode : strict" in text and re.search(r"^-10\.10\.10\.3\s", text, re.M), text
        refused = branch_lab.clients(1, "--timeout", "0.3", "--retries", "1", gateway=ROUTERS["router3"])
        assert not refused["results"][0]["ok"] and "no answer" in refused["results"][0]["error"], refused
        assert branch_lab.ike("router3")["gateway_counters"]["overload_refused"] >= 1
        # the master skips it too: a client through the VIP goes elsewhere
        via_vip = branch_lab.clients(1)["results"][0]
        assert via_vip["ok"] and ROUTERS["router3"] not in via_vip["path"], via_vip
    finally:
        out, _ = fill.communicate(timeout=60)
    assert all(r["ok"] for r in json.loads(out)["results"]), out
    wait_for(lambda: not branch_lab.ike("router3")["cluster"]["own"]["overloaded"], 10, "router3 below its limit")


def test_kill_9_of_each_flexvpn_daemon_is_back_in_seconds_and_spares_the_other_branch(branch_lab: Lab) -> None:
    """kill -9 of a branch's client daemon and of the cluster daemon of every router that does not
    carry the other branch's tunnel (the master, the other member): each runs again within 2 s, the
    crashed client is back up through the VIP, and the other branch's pings through its tunnel lose
    nothing meanwhile."""
    elected(branch_lab, 30)
    statuses = {b: wait_for(lambda b=b: up(branch_lab, b), 30, f"{b} up") for b in BRANCHES}
    on_member = [b for b, s in statuses.items() if s["gateway"] in ("10.10.10.2", "10.10.10.3")]
    assert on_member, f"no branch on a member (the first test redirects them): {statuses}"
    witness = on_member[-1]
    victim = next(b for b in BRANCHES if b != witness)
    carrier = next(n for n, a in ROUTERS.items() if a == statuses[witness]["gateway"])
    gateways = [(router, "flexvpn") for router in ROUTERS if router != carrier]
    crashes = [*gateways, (victim, "flexclient")]
    argv = ["ip", "netns", "exec", branch_lab.ns(witness), "ping", "-n", "-i", "0.1", "-W", "1",
            "-I", statuses[witness]["address"], NORTH]
    pinger = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        time.sleep(1.0)
        for node, daemon in crashes:
            if daemon == "flexclient":  # once the cluster has re-formed, so that its redirect holds
                elected(branch_lab, 30)
                wait_for(lambda: cluster_ready(branch_lab, "router1", 2), 20, "the cluster re-formed")
                killed_at = time.time()
            done = branch_lab.lab.fail("daemon-crash", node, daemon=daemon)
            seconds = float(re.search(r"running again after ([0-9.]+) s", done).group(1))  # type: ignore[union-attr]
            assert seconds < 2.0, (node, daemon, done)
            time.sleep(0.5)
        # the crashed client starts afresh: a new tunnel through the VIP
        back = wait_for(lambda: (s := up(branch_lab, victim)) and (s["up_since"] or 0) > killed_at and s, 30,
                        f"{victim} up again after its daemon's crash")
        assert back["path"][0] == VIP, back
        assert ping(branch_lab, victim, back["address"]), f"{victim}: no answer through its new tunnel"
        time.sleep(1.0)
    finally:
        pinger.send_signal(signal.SIGINT)
        out, _ = pinger.communicate(timeout=10)
    answered = {int(m) for m in re.findall(r"bytes from .* icmp_seq=(\d+)", out)}
    assert answered, out
    # every echo but the last few (in flight when ping was stopped) answered
    missing = sorted(set(range(1, max(answered) - 5)) - answered)
    assert not missing, f"{witness} lost echoes {missing} through {carrier} while the others' daemons crashed"
    assert client(branch_lab, witness)["up_since"] == statuses[witness]["up_since"], "the witness reconnected"
    for node, daemon in crashes:
        assert any(d["name"] == daemon and d["restarts"] >= 1 and d["running"]
                   for n in branch_lab.lab.status().nodes if n.name == node for d in [d.__dict__ for d in n.daemons])
    elected(branch_lab, 30)
    wait_for(lambda: cluster_ready(branch_lab, "router1", 2), 20, "both members back in router1's cluster")


def test_member_power_off_brings_its_branch_back_through_the_vip(branch_lab: Lab) -> None:
    elected(branch_lab, 30)
    statuses = {b: wait_for(lambda b=b: up(branch_lab, b), 30, f"{b} up") for b in BRANCHES}
    on_member = [(b, s) for b, s in statuses.items() if s["gateway"] in ("10.10.10.2", "10.10.10.3")]
    assert on_member, f"no branch on a member (the first test redirects them): {statuses}"
    branch, before = on_member[0]
    member = next(n for n, a in ROUTERS.items() if a == before["gateway"])
    done = branch_lab.lab.fail("flexvpn-member-power-off", member)  # the event `lab fail` runs
    assert done == f"FlexVPN member {member} powered off", done
    cut = time.monotonic()
    try:
        # DPD 3 s / 1 s: at most 3 s of silence + 6 checks, then IKE again through the VIP
        after = wait_for(lambda: (s := up(branch_lab, branch)) and s["connects"] > before["connects"] and s, 30,
                         f"{branch} back up without {member}")
        took = time.monotonic() - cut
        assert after["gateway"] != before["gateway"] and after["path"][0] == VIP, after
        assert after["dead_peers"] >= 1 and "dead" in str(after["history"]), after["history"]
        assert ping(branch_lab, branch, after["address"]), f"{branch}: no answer through its new tunnel"
        assert took < 25, took
        other = next(b for b in BRANCHES if b != branch)
        assert client(branch_lab, other)["connects"] == statuses[other]["connects"] or \
            statuses[other]["gateway"] == before["gateway"], "a branch on a live gateway reconnected"
    finally:
        assert branch_lab.lab.restore(member) == [f"{member} powered on"]
