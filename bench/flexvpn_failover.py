"""Per-client outage of IOS FlexVPN clients when their cluster member powers off.

labs/flexvpn-branch.yml (lab `fvfail`, HSRP hello 1 s / hold 3 s, the master's slave priority 1 so
that it is the most loaded gateway; the branches' DPD 3 s / 1 s): once the cluster is whole the
branches' client daemons are started again, so the master redirects both to members. Each branch
then pings the northbound router (10.10.10.254) through its Tunnel1 every 20 ms, from whatever
address its tunnel has (read from its status file: the address changes when it reconnects to
another member). Then the member of branch1 powers off (`flexvpn-member-power-off`, the event
`lab fail` runs): per branch, the outage is the longest gap between answers, and the answers lost.
The affected branch needs its DPD to fail (3 s without news, then 6 checks 1 s apart), IKEv2
through the VIP and a redirect; the other branch must lose nothing. The member is powered on again
between rounds. Writes docs/benchmarks-flexvpn-failover.md.

    python3 bench/flexvpn_failover.py [--rounds 3]      (root; about 1.5 minutes per round)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import select
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import BenchError, BenchLab, logger, topology_text, wait_for, write_doc  # noqa: E402
from labkit.contracts import IKEV2_STATUS  # noqa: E402
from labkit.flexstatus import FlexclientStatus, GatewayStatus  # noqa: E402
from labkit.status import read_status  # noqa: E402

NAME = "fvfail"
NORTH = "10.10.10.254"
BRANCHES = ("branch1", "branch2")
ROUTERS = {"10.10.10.1": "router1", "10.10.10.2": "router2", "10.10.10.3": "router3"}
INTERVAL = 0.02
DOC = ROOT / "docs" / "benchmarks-flexvpn-failover.md"
log = logger("flexvpn-failover")


# ------------------------------------------------------------------------------------------ probe
def _checksum(data: bytes) -> int:
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    return ~(total + (total >> 16)) & 0xFFFF


def probe(status: Path, seconds: float) -> None:
    """Inside a branch: ICMP echo to NORTH every INTERVAL from the tunnel's current address; prints
    the monotonic times of the answers (one JSON line)."""
    ident = os.getpid() & 0xFFFF
    sock: socket.socket | None = None
    address = None
    sent = 0
    replies: list[float] = []
    end = time.monotonic() + seconds
    next_send = time.monotonic()
    checked = 0.0
    while time.monotonic() < end:
        now = time.monotonic()
        if now - checked > 0.1:
            checked = now
            try:
                client = json.loads(status.read_text()).get("client") or {}
            except (OSError, ValueError):
                client = {}
            current = client.get("address") if client.get("state") == "up" else None
            if current != address:
                if sock is not None:
                    sock.close()
                sock, address = None, current
                if current:
                    sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
                    try:
                        sock.bind((current, 0))
                    except OSError:  # the address is not on Tu1 yet
                        sock.close()
                        sock, address = None, None
        if now >= next_send:
            next_send += INTERVAL
            sent += 1
            if sock is not None:
                body = struct.pack("!BBHHH", 8, 0, 0, ident, sent & 0xFFFF) + bytes(16)
                packet = body[:2] + struct.pack("!H", _checksum(body)) + body[4:]
                with contextlib.suppress(OSError):  # the tunnel went down meanwhile: a lost probe
                    sock.sendto(packet, (NORTH, 0))
        wait = max(0.0, next_send - time.monotonic())
        if sock is None:
            time.sleep(min(wait, 0.01))
            continue
        ready, _, _ = select.select([sock], [], [], wait)
        while ready:
            try:
                data = sock.recv(2048, socket.MSG_DONTWAIT)
            except BlockingIOError:
                break
            header = (data[0] & 0x0F) * 4
            if len(data) >= header + 8 and data[header] == 0 and struct.unpack("!H", data[header + 4:header + 6])[0] \
                    == ident:
                replies.append(time.monotonic())
    print(json.dumps({"sent": sent, "replies": replies}), flush=True)


# ------------------------------------------------------------------------------------------ rounds
def client(bench: BenchLab, node: str) -> dict[str, Any]:
    """The FlexVPN client's state (labkit.flexstatus.FlexClient); {} while its status is being rewritten."""
    status = read_status(bench.lab.node_file(node, IKEV2_STATUS), FlexclientStatus)
    return {} if status is None else status.client.to_dict()


def cluster_whole(bench: BenchLab) -> bool:
    status = read_status(bench.lab.node_file("router1", IKEV2_STATUS), GatewayStatus)
    cluster = None if status is None else status.cluster
    return cluster is not None and cluster.role == "master" and sum(r.role == "Slave" for r in cluster.rows or []) == 2


def on_members(bench: BenchLab) -> bool:
    return all(client(bench, b).get("state") == "up" and client(bench, b).get("gateway") in ROUTERS
               and client(bench, b).get("gateway") != "10.10.10.1" for b in BRANCHES)


def one_round(bench: BenchLab, number: int, seconds: float) -> dict[str, Any]:
    wait_for("the cluster whole", lambda: cluster_whole(bench), 60)
    for branch in BRANCHES:  # connected while the cluster formed: start again to be redirected
        bench.lab.restart(branch, "flexclient")
    wait_for("both branches on members", lambda: on_members(bench), 40)
    before = {b: client(bench, b) for b in BRANCHES}
    probes = {b: subprocess.Popen(["ip", "netns", "exec", bench.ns(b), sys.executable, __file__, "_probe",
                                   "--status", str(bench.state_dir / "nodes" / b / IKEV2_STATUS),
                                   "--seconds", str(seconds)], stdout=subprocess.PIPE, text=True)
              for b in BRANCHES}
    time.sleep(2.0)
    member = ROUTERS[before["branch1"]["gateway"]]
    failed_at = time.monotonic()
    bench.lab.fail("flexvpn-member-power-off", member)
    log(f"round {number}: {member} powered off (branch1 was on it)")
    results = {b: json.loads(p.communicate(timeout=seconds + 30)[0]) for b, p in probes.items()}
    after = {b: client(bench, b) for b in BRANCHES}
    bench.lab.restore(member)
    rows = []
    for branch in BRANCHES:
        replies = list(results[branch]["replies"])
        gaps = [b - a for a, b in zip(replies, replies[1:], strict=False)]
        longest = max(gaps, default=seconds)
        lost = results[branch]["sent"] - len(replies)
        back = next((t - failed_at for t, g in zip(replies[1:], gaps, strict=False) if g == longest), None)
        rows.append({"round": number, "branch": branch, "before": before[branch].get("gateway"),
                     "after": after[branch].get("gateway"), "affected": before[branch].get("gateway")
                     == before["branch1"]["gateway"], "outage_s": round(longest, 2), "lost": lost,
                     "sent": results[branch]["sent"], "back_after_s": None if back is None else round(back, 2),
                     "reconnects": after[branch].get("connects", 0) - before[branch].get("connects", 0)})
        log(f"round {number} {branch}: {rows[-1]}")
    wait_for(f"{member} back in the cluster", lambda: cluster_whole(bench), 60)
    return {"member": member, "rows": rows}


def report(rounds: list[dict[str, Any]], args: argparse.Namespace, when: str) -> str:
    rows = [r for one in rounds for r in one["rows"]]
    affected = [r["outage_s"] for r in rows if r["affected"]]
    others = [r for r in rows if not r["affected"]]
    lines = ["# FlexVPN member failure: outage per IOS client", "",
             f"Measured by `bench/flexvpn_failover.py --rounds {args.rounds}` on {when}. Machine: "
             f"{os.cpu_count()} cores, kernel {platform.release()}, Python {platform.python_version()}. Noisy "
             "shared machine.", "",
             "labs/flexvpn-branch.yml with HSRP 1 s / 3 s: both branches redirected to members, each pinging "
             f"the northbound router through its Tunnel1 every {INTERVAL * 1000:.0f} ms from its current "
             "tunnel address; branch1's member powers off (`flexvpn-member-power-off`). Outage: the longest "
             "gap between answers. The affected branch's DPD (`crypto ikev2 dpd 3 1 periodic`) declares the "
             "peer dead after 3 s without news and 6 unanswered checks 1 s apart (at most 9 s), then IKEv2 "
             "through the VIP, a redirect to a live member and a new tunnel address.", "",
             "## Every client", "",
             "| round | branch | member before | member after | outage | answers lost | reconnections |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['round']} | {r['branch']}{' (affected)' if r['affected'] else ''} | {r['before']} "
                     f"| {r['after']} | {r['outage_s']:.2f} s | {r['lost']} of {r['sent']} | {r['reconnects']} |")
    lines += ["", "## Headline", "",
              f"Median: **{statistics.median(affected):.1f} s** outage of a client whose member powered off "
              f"(max {max(affected):.1f} s over {len(affected)} clients); clients of the live members: "
              f"longest gap {max((r['outage_s'] for r in others), default=0):.2f} s, "
              f"{sum(r['reconnects'] for r in others)} reconnections.", ""]
    return "\n".join(lines)


def main() -> int:
    if len(sys.argv) > 1 and sys.argv[1] == "_probe":
        sub = argparse.ArgumentParser()
        sub.add_argument("--status", type=Path, required=True)
        sub.add_argument("--seconds", type=float, required=True)
        opts = sub.parse_args(sys.argv[2:])
        probe(opts.status, opts.seconds)
        return 0
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=22.0, help="probe duration per round")
    parser.add_argument("--out", type=Path, default=DOC)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("bench/flexvpn_failover.py creates a lab: run it as root")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rounds = []
    with tempfile.TemporaryDirectory(prefix="fvfail-") as folder:
        source = Path(folder) / f"{NAME}.yml"
        text = topology_text(ROOT / "labs" / "flexvpn-branch.yml", NAME)
        text = text.replace("name: group1}}", "name: group1, hello_ms: 1000, hold_ms: 3000}}")
        # the master's slave priority 1 (its load counts double): the branches go to members
        master = ("    ikev2_cluster: {standby_group: group1, max_session: 10}\n"
                  "    ikev2: {redirect: init, pool: 172.16.1")
        if master not in text:
            raise BenchError("labs/flexvpn-branch.yml changed: router1's cluster line not found")
        source.write_text(text.replace(master, master.replace("max_session: 10}", "max_session: 10, priority: 1}")))
        with BenchLab(NAME, source, log) as bench:
            for number in range(1, args.rounds + 1):
                rounds.append(one_round(bench, number, args.seconds))
    if not rounds:
        raise BenchError("no round ran")
    write_doc(report(rounds, args, when), args.out)
    print(args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
