#!/usr/bin/env python3
"""HA benchmark: MNHA SRG1 failover, MNHA session sync lag, SRD switchover convergence (issues 5, 9).

Measured on real namespaces, with real packets, in one run (this machine is shared and noisy, so
every traffic measurement has a no-event baseline window measured alongside, in the same lab):

  1. MNHA SRG1 failover (lab bh1: `bench/gen_topology.py --srx 4 --mnha`, both pairs `mode: srg1`,
     ECMP CHASH, one MX). Two-way UDP flows (client -> server and the same 5-tuples back) at a known
     per-flow rate; the SRG1 active carrying the flows is powered off (`lab fail ... srx-power-off`)
     and its backup takes the flows with the synced sessions. Per run: the loss-derived outage
     (lost / per-flow rate, RFC 6412) and the longest gap of every flow the failed SRX carried, plus
     a server-push flow (`dataplane.udpprobe push/pull`, only the server sends) through the same SRX.
     Then `lab restore` under traffic: the failback (preemption) outage, and the wait for it.
  2. MNHA session sync lag (lab bh3: labs/topology3.yml, SRG0 pairs, TLB). 1000 new UDP sessions in
     1 s (1000 distinct subscriber addresses, one datagram each, paced 1 ms apart). With the conntrack
     timestamp extension on in the SRX namespaces, the kernel stamps each entry when it is created:
     lag = creation of the synced copy on the peer (conntrackd inserting it) - creation on the SRX
     that carried the packet, both read back over ctnetlink. (`conntrack -E -o timestamp` stamps an
     event when the listener prints it: two listeners in one namespace disagreed by up to ~57 ms on
     this machine, far more than the lag itself.) Baseline: send time -> entry created on the carrier.
     Then 3 one-second bursts at 5000/s and at 10000/s: lag, sessions gone from the carrier or never
     copied to the peer 1.5 s later, and conntrackd's netlink overruns (counted in its log).
  3. SRD switchover (lab bh2: labs/topology2.yml, dual MX, ECMP CHASH): CLI (`lab switchover`, each run
     from the current master), and a monitored-link failure (the master MX's gateway-facing link
     `ge-0-0-0` of TRUST-VR down; then up, and `lab switchover` back to mx1 outside the measurement).
     Per run: every flow's loss-derived convergence, both directions.

Resolution of a loss-derived figure: 1 / per-flow rate (10 ms at the default 100 flows x 100 pps).
Prints a markdown table with the machine and date and writes it to docs/benchmarks-ha.md (notes
below the marker line there are kept). Needs root. Only touches labs named bh1, bh2, bh3, brought
down in finally blocks (also on errors and Ctrl-C).

  sudo python3 bench/ha.py --quick           # 5 runs of each measurement
  sudo python3 bench/ha.py                   # 20 runs
  sudo python3 bench/ha.py --runs 3 --only srd --json
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import platform
import re
import select
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from common import (  # noqa: E402
    BenchError,
    BenchLab,
    interruptible,
    lab,
    lab_cmd,
    logger,
    summary,
    topology_text,
    wait_for,
    write_doc,
)

from dataplane.traffic import Flow, Receiver, Sender, Spawned, make_flows, reverse_flows  # noqa: E402
from lab_orchestrator import api, eventrun, ops  # noqa: E402
from lab_orchestrator.plan import LabPlan  # noqa: E402
from lab_orchestrator.state import LabState  # noqa: E402

DOC = ROOT / "docs" / "benchmarks-ha.md"
PEER = {"srx1": "srx2", "srx2": "srx1", "srx3": "srx4", "srx4": "srx3"}
REVERSE_ID_OFFSET = 100000
SERVER = "203.0.113.9"  # the push server's address (the server host's AnyIP prefix)
PARTS = ("failover", "sync", "srd")
PUSH_RATE = 200  # datagrams/s of the server-push flow (udpprobe's default)

# Goals: the bounds the acceptance tests hold these to (tests/integration/test_mnha.py, test_srd.py).
GOAL_FAILOVER_MS = 500.0
GOAL_SWITCHOVER_MS = 1000.0


log = logger("ha")


# ---------------------------------------------------------------- labs
class Lab(BenchLab):
    """A bh* lab brought up from a topology text; down again on exit, whatever happens."""

    def __init__(self, name: str, text: str, workdir: Path):
        if not re.fullmatch(r"bh[0-9a-z-]*", name):
            raise AssertionError(f"refusing lab {name}: this benchmark only uses labs named bh*")
        file = workdir / f"{name}.yml"
        file.write_text(text)
        super().__init__(name, file, log)

    def state(self) -> LabState:
        return self.lab.refresh().state

    def plan(self) -> LabPlan:
        return self.lab.plan()


def srg1_text(name: str) -> str:
    text = subprocess.run([sys.executable, str(ROOT / "bench/gen_topology.py"), "--name", name, "--srx", "4",
                           "--mnha"], capture_output=True, text=True, check=True).stdout
    text = text.replace("{nodes: [srx1, srx2]}", "{nodes: [srx1, srx2], mode: srg1, srg1_active: srx1}")
    text = text.replace("{nodes: [srx3, srx4]}", "{nodes: [srx3, srx4], mode: srg1, srg1_active: srx3}")
    if text.count("mode: srg1") != 2:
        raise BenchError("bench/gen_topology.py output changed: cannot set mode: srg1")
    return text


# ---------------------------------------------------------------- two-way traffic
class Traffic:
    """Two-way UDP flows at a known rate, started now, stopped by `stop()` (per-flow figures)."""

    def __init__(self, plan: LabPlan, flows: list[Flow], rate: float, sizes: str, max_seconds: float = 120.0):
        self.ends = eventrun.endpoints(plan)
        self.flows = flows
        self.rate = rate
        self.per_flow = rate / len(flows)
        self.sizes = sizes
        self.max_seconds = max_seconds
        self.children: list[Spawned] = []

    def start(self) -> Traffic:
        e = self.ends
        try:
            self.rx_f = self._add(Receiver(iface=e.server_iface, ns=e.server_ns, rate_per_flow=self.per_flow).spawn())
            self.rx_r = self._add(Receiver(iface=e.client_iface, ns=e.client_ns, rate_per_flow=self.per_flow).spawn())
            self.rx_f.wait_ready()
            self.rx_r.wait_ready()
            self.tx_f = self._add(Sender(iface=e.client_iface, ns=e.client_ns, flows=self.flows, rate=self.rate,
                                         sizes=self.sizes, duration=self.max_seconds, realtime=True).spawn())
            self.tx_f.wait_ready()
            time.sleep(0.3)  # the forward packets open the sessions the reverse flows need
            self.tx_r = self._add(Sender(iface=e.server_iface, ns=e.server_ns,
                                         flows=reverse_flows(self.flows, REVERSE_ID_OFFSET), rate=self.rate,
                                         sizes=self.sizes, duration=self.max_seconds, realtime=True).spawn())
            self.tx_r.wait_ready()
        except BaseException:
            self.kill()
            raise
        return self

    def _add(self, child: Spawned) -> Spawned:
        self.children.append(child)
        return child

    def kill(self) -> None:
        for child in self.children:
            with contextlib.suppress(Exception):
                child.kill()

    def stop(self) -> dict[str, Any]:
        """Stop sending, let the last packets arrive, return the per-flow figures."""
        try:
            sent_f = self.tx_f.stop(timeout=30)
            sent_r = self.tx_r.stop(timeout=30)
            time.sleep(0.3)
            report_f = self.rx_f.stop(timeout=30, sent=sent_f)
            report_r = self.rx_r.stop(timeout=30, sent=sent_r)
        except BaseException:
            self.kill()
            raise
        fwd = {f["flow"]: f for f in report_f["per_flow"]}
        rev = {f["flow"] - REVERSE_ID_OFFSET: f for f in report_r["per_flow"]}
        end_ns = min(sent_f["end_ns"], sent_r["end_ns"])
        rows = {}
        for flow in self.flows:
            a, b = fwd.get(flow.flow_id, {}), rev.get(flow.flow_id, {})
            lost_f, lost_r = int(a.get("lost", 0)), int(b.get("lost", 0))
            gaps = [(float(x.get("max_gap_ms") or 0), x.get("max_gap_start_ns")) for x in (a, b)]
            gap, gap_start = max(gaps, key=lambda g: g[0])
            rows[flow.src] = {
                "flow": flow.flow_id, "lost_forward": lost_f, "lost_reverse": lost_r,
                # RFC 6412 packet-loss duration, per direction; a flow's outage is its worse direction
                "convergence_ms": round(max(lost_f, lost_r) / self.per_flow * 1000, 3),
                "max_gap_ms": gap, "gap_start_ns": gap_start,
                "recovered": all(x.get("last_seen_ns") and end_ns - x["last_seen_ns"] < 0.5e9 for x in (a, b)),
            }
        return {"rows": rows, "per_flow_pps": self.per_flow, "resolution_ms": round(1000 / self.per_flow, 3),
                "sent": sent_f["sent"] + sent_r["sent"], "lost": report_f["lost"] + report_r["lost"],
                "sender_max_lag_ms": round(max(sent_f["max_lag_ms"], sent_r["max_lag_ms"]), 1),
                "sender_errors": sent_f["errors"] + sent_r["errors"]}


def flow_stats(result: dict[str, Any], sources: set[str] | None = None) -> dict[str, Any]:
    """Convergence and gap figures of the flows from SOURCES (all flows: None)."""
    rows = [r for src, r in result["rows"].items() if sources is None or src in sources]
    conv = [r["convergence_ms"] for r in rows]
    gaps = [r["max_gap_ms"] for r in rows]
    return {"flows": len(rows), "flows_with_loss": sum(1 for r in rows if r["convergence_ms"]),
            "worst_ms": max(conv, default=0.0), "median_ms": statistics.median(conv) if conv else 0.0,
            "longest_gap_ms": max(gaps, default=0.0), "all_recovered": all(r["recovered"] for r in rows),
            "per_flow_ms": conv}


def window(plan: LabPlan, flows: list[Flow], rate: float, sizes: str, warmup: float,
           action: Callable[[], dict[str, Any]], after: float) -> tuple[dict[str, Any], dict[str, Any],
                                                                     dict[tuple[str, int], str],
                                                                     dict[tuple[str, int], str]]:
    """Traffic for WARMUP s, ACTION (its facts returned), AFTER s more; (traffic result, facts,
    carriers before, carriers after) - carriers: which SRX's session counters grow per flow."""
    traffic = Traffic(plan, flows, rate, sizes).start()
    try:
        time.sleep(max(0.0, warmup - 0.7))
        before = eventrun.carriers(plan, gap=0.4)
        facts = action()
        time.sleep(max(0.0, after - 0.5))
        after_ = eventrun.carriers(plan, gap=0.4)
    except BaseException:
        traffic.kill()
        raise
    return traffic.stop(), facts, before, after_


def by_source(carriers: dict[tuple[str, int], str]) -> dict[str, str]:
    return {src: srx for (src, _port), srx in carriers.items()}


class CarrierWatch:
    """When interfaces of namespace NS lose carrier, as a netlink listener there sees it (monotonic s):
    the moment of a power-off from outside, without the `lab fail` command's start-up in it."""

    IFF_LOWER_UP = 0x10000

    def __init__(self, ns: str, names: set[str]):
        from pyroute2 import IPRoute
        from pyroute2.netlink.rtnl import RTMGRP_LINK

        from labkit import netnsutil

        with netnsutil.entered(ns):
            self.ipr = IPRoute()
        self.ipr.bind(groups=RTMGRP_LINK)
        self.names = names
        self.lost: dict[str, float] = {}
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True, name=f"carrier-{ns}")
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            ready, _, _ = select.select([self.ipr.fileno()], [], [], 0.1)
            if not ready:
                continue
            now = time.monotonic()
            for msg in self.ipr.get():
                name = msg.get_attr("IFLA_IFNAME")
                if name in self.names and name not in self.lost and (
                        msg.get("event") == "RTM_DELLINK" or not int(msg["flags"]) & self.IFF_LOWER_UP):
                    self.lost[name] = now

    def first(self) -> float | None:
        return min(self.lost.values()) if self.lost else None

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(2)
        self.ipr.close()


# ---------------------------------------------------------------- 1. MNHA SRG1 failover
class PushFlow:
    """Server push (`dataplane.udpprobe push/pull`): one client datagram, then only the server sends."""

    def __init__(self, lab_: Lab, client: str, port: int, seconds: float, rate: int = PUSH_RATE):
        base = [*lab_cmd(), "exec", "--lab", lab_.name]
        self.server = subprocess.Popen(
            [*base, "server", "--", sys.executable, "-m", "dataplane.udpprobe", "push", "--bind", SERVER,
             "--port", str(port), "--rate", str(rate), "--seconds", str(seconds)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.server.stdout is not None
        if "serving" not in self.server.stdout.readline():
            self.kill()
            raise BenchError("push server did not start")
        self.puller = subprocess.Popen(
            [*base, "client", "--", sys.executable, "-m", "dataplane.udpprobe", "pull", "--source", client,
             "--port", str(port + 1000), "--to", f"{SERVER}:{port}", "--seconds", str(seconds)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)

    def result(self) -> dict[str, Any]:
        try:
            out, _ = self.puller.communicate(timeout=60)
            self.server.wait(timeout=10)
        except BaseException:
            self.kill()
            raise
        data: dict[str, Any] = json.loads(out)
        return data

    def kill(self) -> None:
        for proc in (self.server, getattr(self, "puller", None)):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(5)


def srg1_roles(lab_: Lab) -> dict[str, str]:
    return {srx: lab_.status(srx, "mnha").get("srg1", {}).get("role", "?") for srx in PEER}


def selector_members(lab_: Lab) -> set[str]:
    members = lab_.status("mx1", "mxlb").get("members", [])
    return {m["name"] for m in members if m.get("alive") and m.get("buckets")}


def srg1_settled(lab_: Lab) -> bool:
    return srg1_roles(lab_) == {"srx1": "active", "srx2": "backup", "srx3": "active", "srx4": "backup"} \
        and selector_members(lab_) == {"srx1", "srx3"}


def transition_after(transitions: list[dict[str, Any]], role: str, since: float) -> float | None:
    """Monotonic time of the first transition to ROLE at or after SINCE (daemons use CLOCK_MONOTONIC)."""
    return next((t["at"] for t in transitions if t["role"] == role and t["at"] >= since), None)


def selector_change_after(lab_: Lab, since_wall: float, without: str | None = None,
                          with_: str | None = None) -> float | None:
    """Wall time of the first selector reprogramming after SINCE_WALL that drops WITHOUT / adds WITH_."""
    for entry in lab_.status("mx1", "mxlb").get("history", []):
        members = set(entry.get("members", []))
        if entry["at"] >= since_wall and (without is None or without not in members) \
                and (with_ is None or with_ in members):
            return float(entry["at"])
    return None


def measure_failover(out: dict[str, Any], workdir: Path, runs: int, flows_n: int, rate: float, sizes: str) -> None:
    out.update({"lab": "bh1", "runs": [], "baseline": [], "flows": flows_n, "rate": rate,
                "resolution_ms": round(1000 * flows_n / rate, 3)})
    wall_offset = time.time() - time.monotonic()
    with Lab("bh1", srg1_text("bh1"), workdir) as bh1:
        wait_for("SRG1 roles active/backup and selector on srx1+srx3", lambda: srg1_settled(bh1), 30)
        plan = bh1.plan()
        flows = make_flows(flows_n, "100.64.32.0/20", eventrun.endpoints(plan).server_address)
        hb = json.loads((bh1.state_dir / "nodes/srx1/mnha.json").read_text())
        out["heartbeat"] = {"interval_ms": hb["heartbeat_ms"], "threshold": hb["heartbeat_threshold"]}
        where: dict[str, str] = {}
        for run in range(runs):
            # baseline: the same flows, no event (noise floor of the loss / gap measurement)
            push = PushFlow(bh1, flows[0].src, 7200 + run % 50, seconds=8.0)
            try:
                time.sleep(0.5)
                base, _, _, carried = window(plan, flows, rate, sizes, 2.0, dict, 3.0)
                pushed = push.result()
            except BaseException:
                push.kill()
                raise
            where = by_source(carried) or where
            out["baseline"].append(flow_stats(base) | {"sender_max_lag_ms": base["sender_max_lag_ms"],
                                                       "push_gap_ms": round(pushed["longest_gap_s"] * 1000, 1),
                                                       "push_lost": pushed["lost"]})
            target = "srx1" if run % 2 == 0 else "srx3"
            peer = PEER[target]
            mine = {src for src, srx in where.items() if srx == target}
            if not mine:
                raise BenchError(f"no flow is carried by {target}: {sorted(set(where.values()))}")
            push_src = sorted(mine)[0]
            push = PushFlow(bh1, push_src, 7100 + run % 50, seconds=8.0)
            facts: dict[str, Any] = {}

            mx_ns = bh1.ns("mx1", "TRUST-VR")
            watch = CarrierWatch(mx_ns, {name for ns, name in ops.link_peers(plan, target, "mx1") if ns == mx_ns})

            def fail(target: str = target, facts: dict[str, Any] = facts) -> dict[str, Any]:
                facts["cli_start"] = time.monotonic()
                lab("fail", "--lab", bh1.name, target, "srx-power-off")
                facts["cli_end"] = time.monotonic()
                return facts

            try:
                time.sleep(0.5)
                result, _, before, after = window(plan, flows, rate, sizes, 2.0, fail, 3.0)
                pushed = push.result()
            except BaseException:
                push.kill()
                raise
            finally:
                watch.close()
            off = watch.first()  # the MX saw the SRX's link lose carrier: the power-off, to a few ms
            affected = {src for (src, port), srx in before.items() if srx == target and port == flows[0].sport}
            moved_to_peer = sum(1 for (src, port), srx in after.items()
                                if src in affected and port == flows[0].sport and srx == peer)
            stats = flow_stats(result, affected)
            peer_status = bh1.status(peer, "mnha")
            active_at = transition_after(peer_status.get("srg1", {}).get("transitions", []), "active",
                                         facts["cli_start"])
            moved_at = selector_change_after(bh1, facts["cli_start"] + wall_offset, without=target)
            sample = {
                "target": target, "peer": peer, **{k: v for k, v in stats.items() if k != "per_flow_ms"},
                "per_flow_ms": stats["per_flow_ms"], "moved_to_peer": moved_to_peer,
                "unaffected_loss": sum(r["lost_forward"] + r["lost_reverse"] for src, r in result["rows"].items()
                                       if src not in affected),
                "push": pushed, "push_gap_ms": round(pushed["longest_gap_s"] * 1000, 1),
                "push_loss_ms": round(pushed["lost"] / PUSH_RATE * 1000, 1),
                "cli_ms": round((facts["cli_end"] - facts["cli_start"]) * 1000, 1),
                # from the carrier loss (seen by a listener in the MX) to the selector moving the
                # buckets to the peer (mxlb's history) and to the peer's SRG1 transition (mnhad)
                "power_off_after_cli_start_ms": round((off - facts["cli_start"]) * 1000, 1) if off else None,
                "peer_active_after_ms": round((active_at - off) * 1000, 1) if off and active_at else None,
                "selector_moved_after_ms": (round((moved_at - wall_offset - off) * 1000, 1)
                                            if off and moved_at else None),
                "sender_max_lag_ms": result["sender_max_lag_ms"],
                "selector_history": [
                    {"at_ms": round((e["at"] - wall_offset - (off or facts["cli_start"])) * 1000, 1),
                     "reason": e.get("reason"), "members": e.get("members")}
                    for e in bh1.status("mx1", "mxlb").get("history", [])
                    if e["at"] - wall_offset >= facts["cli_start"] - 5],
            }
            # failback: restore under traffic, wait for the preemption, then a little longer
            back: dict[str, Any] = {}

            def restore(target: str = target, back: dict[str, Any] = back) -> dict[str, Any]:
                back["cli_start"] = time.monotonic()
                lab("restore", "--lab", bh1.name, target)
                back["cli_end"] = time.monotonic()
                back["settled"] = wait_for("preemption back", lambda: srg1_settled(bh1), 40)
                return back

            result_b, _, _, _ = window(plan, flows, rate, sizes, 1.5, restore, 2.5)
            stats_b = flow_stats(result_b, affected)
            sample["failback_worst_ms"] = stats_b["worst_ms"]
            sample["failback_flows_with_loss"] = stats_b["flows_with_loss"]
            sample["failback_all_loss_ms"] = flow_stats(result_b)["worst_ms"]
            sample["preempted_after_s"] = round(back["settled"] - back["cli_end"], 2)
            out["runs"].append(sample)
            log(f"failover run {run + 1}/{runs}: {target} off -> {peer}: worst {stats['worst_ms']:.0f} ms "
                f"({stats['flows_with_loss']}/{stats['flows']} flows lost packets), push gap "
                f"{sample['push_gap_ms']:.0f} ms, unaffected loss {sample['unaffected_loss']}, `lab fail` "
                f"{sample['cli_ms']:.0f} ms (power-off +{sample['power_off_after_cli_start_ms']} ms), "
                f"peer active +{sample['peer_active_after_ms']} ms, selector "
                f"+{sample['selector_moved_after_ms']} ms; failback worst {stats_b['worst_ms']:.0f} ms after "
                f"{sample['preempted_after_s']} s; baseline worst {out['baseline'][-1]['worst_ms']:.0f} ms")


# ---------------------------------------------------------------- 2. MNHA session sync lag
def conntrack_starts(ns: str, dport: int, sport: int) -> dict[str, tuple[int, int]]:
    """Subscriber address -> (kernel creation time in ns of CLOCK_REALTIME, packets counted) of the
    UDP sessions SPORT -> DPORT in namespace NS (needs net.netfilter.nf_conntrack_timestamp=1).

    Filtered in the kernel (5.8+) and dumped again until two dumps agree: a dump of a table that
    changes meanwhile (older entries expiring) can come back short or interrupted, and a creation
    time never changes, so the union of the dumps is right."""
    import socket as socketmod

    from pyroute2.netlink.exceptions import NetlinkDumpInterrupted, NetlinkError
    from pyroute2.netlink.nfnetlink.nfctsocket import NFCTAttrTuple, NFCTSocket

    from labkit import netnsutil

    with netnsutil.entered(ns):
        sock = NFCTSocket()
    out: dict[str, tuple[int, int]] = {}
    sizes: list[int] = []
    try:
        for _ in range(6):
            found: dict[str, tuple[int, int]] = {}
            try:
                for msg in sock.dump(tuple_orig=NFCTAttrTuple(proto=socketmod.IPPROTO_UDP, sport=sport, dport=dport)):
                    orig = msg.get_attr("CTA_TUPLE_ORIG")
                    proto = orig.get_attr("CTA_TUPLE_PROTO") if orig else None
                    if proto is None or proto.get_attr("CTA_PROTO_DST_PORT") != dport \
                            or proto.get_attr("CTA_PROTO_SRC_PORT") != sport:
                        continue
                    stamp = msg.get_attr("CTA_TIMESTAMP")
                    start = stamp.get_attr("CTA_TIMESTAMP_START") if stamp else None
                    counters = msg.get_attr("CTA_COUNTERS_ORIG")
                    if start:
                        found[orig.get_attr("CTA_TUPLE_IP").get_attr("CTA_IP_V4_SRC")] = (
                            int(start), int(counters.get_attr("CTA_COUNTERS_PACKETS")) if counters else 0)
            except (NetlinkDumpInterrupted, NetlinkError, OSError):
                time.sleep(0.05)
                continue
            out.update(found)
            sizes.append(len(found))
            if len(sizes) >= 2 and sizes[-1] == sizes[-2] == len(out):
                break
    finally:
        sock.close()
    return out


def sync_run(lab_: Lab, sport: int, sessions: int, per_second: float, dport: int
             ) -> tuple[dict[str, Any], list[float], list[float]]:
    """SESSIONS new sessions (one datagram from each of as many addresses, source port SPORT) at
    PER_SECOND; (sample, sync lags ms, send -> carrier ms)."""
    ends = eventrun.endpoints(lab_.plan())
    flows = make_flows(sessions, "100.64.64.0/18", ends.server_address, sport=sport, dport=dport)
    wall_offset = time.time() - time.monotonic()
    # one packet per flow, flows in order, 1 / PER_SECOND apart
    report = Sender(iface=ends.client_iface, ns=ends.client_ns, flows=flows, rate=per_second,
                    sizes=128, duration=sessions / per_second, realtime=True).spawn().wait(timeout=60)
    time.sleep(1.5)  # let the last ones sync
    tables = {srx: conntrack_starts(lab_.ns(srx), dport, sport) for srx in PEER}
    lags, carrier_lags, missing_peer, missing = [], [], 0, 0
    pairs: dict[str, int] = {}
    for k, flow in enumerate(flows):
        # the carrier: the SRX whose entry counted the packet (a synced copy counts none)
        carrier = next((srx for srx, t in tables.items() if t.get(flow.src, (0, 0))[1] > 0), None)
        if carrier is None:
            missing += 1
            continue
        pairs[carrier] = pairs.get(carrier, 0) + 1
        created = tables[carrier][flow.src][0]
        sent_ns = report["start_ns"] + k * 1e9 / per_second + wall_offset * 1e9
        carrier_lags.append(round((created - sent_ns) / 1e6, 4))
        copy = tables[PEER[carrier]].get(flow.src)
        if copy is None:
            missing_peer += 1
        else:
            lags.append(round((copy[0] - created) / 1e6, 4))
    sample = {"sport": sport, "sessions": sessions, "rate_per_s": per_second, "seen_on_carrier": sessions - missing,
              "missing_on_peer": missing_peer, "by_carrier": dict(sorted(pairs.items())),
              "lag_ms": summary(lags, 3), "send_to_carrier_ms": summary(carrier_lags, 3),
              "sender_max_lag_ms": round(report["max_lag_ms"], 1),
              "send_s": round((report["end_ns"] - report["start_ns"]) / 1e9, 3)}
    return sample, lags, carrier_lags


def conntrackd_overruns(lab_: Lab) -> dict[str, int]:
    """conntrackd's own log: how often its netlink event socket overran (it then doubles the
    buffer) and reached NetlinkBufferSizeMaxGrowth ("likely to be losing events"), all SRX."""
    counts = {"buffer_doubled": 0, "max_growth_reached": 0}
    for srx in PEER:
        with contextlib.suppress(OSError):
            text = (lab_.state_dir / "logs" / f"{srx}-conntrackd.events.log").read_text()
            counts["buffer_doubled"] += text.count("has been doubled")
            counts["max_growth_reached"] += text.count("cannot be doubled further")
    return counts


def measure_sync(out: dict[str, Any], workdir: Path, runs: int, sessions: int = 1000,
                 per_second: float = 1000.0, stress: tuple[float, ...] = (5000.0, 10000.0)) -> None:
    """New sessions at PER_SECOND from distinct addresses; per session, the kernel's creation time
    of the entry on the SRX that carried it (conntrack timestamp extension: set when the first
    packet's entry is confirmed) and of the synced copy on its peer (set when conntrackd inserts it
    over ctnetlink). Kernel clocks on both sides: no listener scheduling in the figure. Then a few
    runs of one second at each STRESS rate (where does the sync start to lag?)."""
    out.update({"lab": "bh3", "runs": [], "sessions_per_run": sessions, "rate_per_s": per_second, "stress": []})
    dport = 7000
    with Lab("bh3", topology_text(ROOT / "labs/topology3.yml", "bh3"), workdir) as bh3:
        wait_for("TLB selector on all four SRX", lambda: selector_members(bh3) == set(PEER), 30)
        for srx in PEER:  # per-namespace sysctl, in our own lab: entries created from now on carry it
            lab("exec", "--lab", bh3.name, srx, "--", "sysctl", "-qw", "net.netfilter.nf_conntrack_timestamp=1")
        ends = eventrun.endpoints(bh3.plan())
        sink = Receiver(port=dport, ns=ends.server_ns).spawn()  # a listener: no ICMP port unreachable back
        try:
            sink.wait_ready()
            lags: list[float] = out.setdefault("all_lags_ms", [])
            carrier_lags: list[float] = out.setdefault("all_send_to_carrier_ms", [])
            sport = 20000  # fresh 5-tuples every run
            for run in range(runs):
                sample, run_lags, run_carrier = sync_run(bh3, sport, sessions, per_second, dport)
                sport += 1
                lags += run_lags
                carrier_lags += run_carrier
                out["lag_ms"], out["send_to_carrier_ms"] = summary(lags, 3), summary(carrier_lags, 3)
                out["runs"].append(sample)
                log(f"sync run {run + 1}/{runs}: {sample['seen_on_carrier']}/{sessions} sessions on a carrier "
                    f"(sent in {sample['send_s']} s), {sample['missing_on_peer']} not on the peer; lag median "
                    f"{sample['lag_ms'].get('median')} ms p99 {sample['lag_ms'].get('p99')} ms max "
                    f"{sample['lag_ms'].get('max')} ms")
            out["conntrackd_overruns"] = conntrackd_overruns(bh3)
            for rate in stress:
                step: dict[str, Any] = {"rate_per_s": rate, "runs": [], "lags_ms": []}
                out["stress"].append(step)
                for _ in range(min(3, runs)):
                    sample, run_lags, _ = sync_run(bh3, sport, int(rate), rate, dport)
                    sport += 1
                    step["runs"].append(sample)
                    step["lags_ms"] += run_lags
                    log(f"sync stress {rate:.0f}/s: {sample['seen_on_carrier']}/{int(rate)} on a carrier (sent in "
                        f"{sample['send_s']} s, late by up to {sample['sender_max_lag_ms']} ms), "
                        f"{sample['missing_on_peer']} not on the peer; lag {sample['lag_ms']}")
                    time.sleep(1.0)
                step["lag_ms"] = summary(step["lags_ms"], 3)
                step["conntrackd_overruns_so_far"] = conntrackd_overruns(bh3)
        finally:
            with contextlib.suppress(Exception):
                sink.kill()


# ---------------------------------------------------------------- 3. SRD switchover
def srd_roles(lab_: Lab) -> dict[str, str]:
    return {mx: lab_.status(mx, "srd").get("role", "?") for mx in ("mx1", "mx2")}


def gateway_mx(lab_: Lab, gateway: str) -> str:
    """Which MX the gateway's default / client route uses (Gi0-1: mx1, Gi0-2: mx2)."""
    prefix = "default" if gateway == "gw-trust" else "100.64.0.0/16"
    text = subprocess.run(["ip", "-n", lab_.ns(gateway), "route", "show", prefix], capture_output=True,
                          text=True).stdout
    hops = [mx for mx, dev in (("mx1", "Gi0-1"), ("mx2", "Gi0-2")) if dev in text]
    return "/".join(hops) or "none"


def link_set(lab_: Lab, state: str) -> None:
    """The master MX's gateway-facing link (TRUST-VR ge-0-0-0, monitored by SRD) down or up."""
    subprocess.run(["ip", "-n", lab_.ns("mx1", "TRUST-VR"), "link", "set", "ge-0-0-0", state], check=True,
                   timeout=30)


def srd_settled(lab_: Lab, master: str) -> bool:
    other = "mx2" if master == "mx1" else "mx1"
    roles = srd_roles(lab_)  # the other: standby, or ineligible while its monitored link is down
    return roles[master] == "master" and roles[other] in ("standby", "ineligible") and \
        gateway_mx(lab_, "gw-trust") == master and gateway_mx(lab_, "gw-untrust") == master


def measure_srd(out: dict[str, Any], workdir: Path, runs: int, flows_n: int, rate: float, sizes: str) -> None:
    out.update({"lab": "bh2", "cli": [], "link": [], "baseline": [], "flows": flows_n, "rate": rate,
                "resolution_ms": round(1000 * flows_n / rate, 3)})
    with Lab("bh2", topology_text(ROOT / "labs/topology2.yml", "bh2"), workdir) as bh2:
        wait_for("mx1 master, gateways on mx1", lambda: srd_settled(bh2, "mx1"), 30)
        wait_for("selector on all four SRX", lambda: selector_members(bh2) == set(PEER), 30)
        plan = bh2.plan()
        flows = make_flows(flows_n, "100.64.32.0/20", eventrun.endpoints(plan).server_address)
        cfg = json.loads((bh2.state_dir / "nodes/mx1/srd.json").read_text())
        out["heartbeat"] = {"interval_ms": cfg["heartbeat_ms"], "threshold": cfg["heartbeat_threshold"]}
        for run in range(runs):
            base, _, _, _ = window(plan, flows, rate, sizes, 2.0, dict, 3.0)
            out["baseline"].append(flow_stats(base) | {"sender_max_lag_ms": base["sender_max_lag_ms"]})
            del out["baseline"][-1]["per_flow_ms"]

            # CLI switchover from the current master, and back: both directions measured
            for _ in range(2):
                master = next((mx for mx, role in srd_roles(bh2).items() if role == "master"), "mx1")
                new = "mx2" if master == "mx1" else "mx1"
                facts: dict[str, Any] = {}

                def cli(new: str = new, facts: dict[str, Any] = facts) -> dict[str, Any]:
                    facts["cli_start"] = time.monotonic()
                    lab("switchover", "--lab", bh2.name)
                    facts["cli_end"] = time.monotonic()
                    facts["settled"] = wait_for(f"{new} master, gateways on {new}", lambda: srd_settled(bh2, new),
                                                15)
                    return facts

                result, _, before, after = window(plan, flows, rate, sizes, 2.0, cli, 2.5)
                out["cli"].append(srd_sample(bh2, result, facts, before, after, f"{master}->{new}", new))
                time.sleep(0.5)

            # monitored link failure on mx1 (made master first: outside any measurement)
            if srd_roles(bh2).get("mx1") != "master":
                lab("switchover", "--lab", bh2.name)
                wait_for("mx1 master again", lambda: srd_settled(bh2, "mx1"), 15)
                time.sleep(1.0)
            facts_l: dict[str, Any] = {}

            def link_down(facts: dict[str, Any] = facts_l) -> dict[str, Any]:
                facts["cli_start"] = time.monotonic()
                # what `lab exec --lab bh2 mx1 --instance TRUST-VR -- ip link set ge-0-0-0 down` runs,
                # without the CLI's Python start-up (seconds on a loaded machine): a precise event time
                link_set(bh2, "down")
                facts["cli_end"] = time.monotonic()
                facts["settled"] = wait_for("mx2 master after the link failure", lambda: srd_settled(bh2, "mx2"), 15)
                return facts

            try:
                result, _, before, after = window(plan, flows, rate, sizes, 2.0, link_down, 2.5)
            finally:
                link_set(bh2, "up")
            out["link"].append(srd_sample(bh2, result, facts_l, before, after, "mx1->mx2 (ge-0/0/0 down)", "mx2"))
            time.sleep(2.0)  # link back, BGP on it again; then mx1 back to master (not measured)
            lab("switchover", "--lab", bh2.name)
            wait_for("mx1 master again", lambda: srd_settled(bh2, "mx1"), 20)
            time.sleep(1.0)
            c, lk, b = out["cli"][-2:], out["link"][-1], out["baseline"][-1]
            cli_text = ", ".join(
                f"{x['direction']} worst {x['worst_ms']:.0f} ms (median flow {x['median_ms']:.0f} ms, "
                f"{x['flows_with_loss']} flows lost packets; CLI {x['cli_ms']:.0f} ms, "
                f"no master {x['no_master_ms']} ms, gateways +{x['gateways_after_master_ms']} ms)" for x in c)
            log(f"srd run {run + 1}/{runs}: CLI {cli_text}; link worst {lk['worst_ms']:.0f} ms (median "
                f"{lk['median_ms']:.0f} ms, master +{lk['new_master_after_ms']} ms (none for {lk['no_master_ms']} ms), "
                f"gateways +{lk['gateways_after_master_ms']} ms); baseline worst {b['worst_ms']:.0f} ms")


def srd_sample(lab_: Lab, result: dict[str, Any], facts: dict[str, Any], before: dict[tuple[str, int], str],
               after: dict[tuple[str, int], str], direction: str, new: str) -> dict[str, Any]:
    stats = flow_stats(result)
    became = transition_after(lab_.status(new, "srd").get("transitions", []), "active", facts["cli_start"])
    old = "mx1" if new == "mx2" else "mx2"
    released = min((t for t in (transition_after(lab_.status(old, "srd").get("transitions", []), role,
                                                 facts["cli_start"]) for role in ("backup", "ineligible"))
                    if t is not None), default=None)
    b, a = by_source(before), by_source(after)
    return {"direction": direction, **stats,
            "srx_changed": sum(1 for src in b if src in a and a[src] not in (b[src], PEER[b[src]])),
            "cli_ms": round((facts["cli_end"] - facts["cli_start"]) * 1000, 1),
            # from the end of the command (`lab switchover` / `ip link set`) to the new master's
            # transition (srdd's CLOCK_MONOTONIC), then to both gateways routing via it
            "new_master_after_ms": round((became - facts["cli_end"]) * 1000, 1) if became else None,
            "gateways_after_master_ms": round((facts["settled"] - became) * 1000, 1) if became else None,
            "settled_after_ms": round((facts["settled"] - facts["cli_end"]) * 1000, 1),
            # the old master gave up (CLI release / monitored link down) -> the new one took over:
            # neither is master meanwhile (no signal route, both prepend)
            "no_master_ms": round((became - released) * 1000, 1) if became and released else None,
            "sender_max_lag_ms": result["sender_max_lag_ms"]}


# ---------------------------------------------------------------- report
def machine() -> dict[str, Any]:
    model = "unknown"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    labs = [lab_.name for lab_ in api.labs()]
    return {"nproc": os.cpu_count(), "model": model, "kernel": platform.release(),
            "python": platform.python_version(), "loadavg": round(os.getloadavg()[0], 2), "other_labs": labs}


def _fmt(value: float | None, unit: str = "ms", digits: int = 0) -> str:
    return "n/a" if value is None else f"{value:.{digits}f} {unit}".rstrip()


def rows(results: dict[str, Any]) -> list[tuple[str, str, str, str, str]]:
    """(metric, median, max, runs, goal) rows of the markdown table."""
    out: list[tuple[str, str, str, str, str]] = []

    def add(metric: str, values: list[float], goal: str = "", unit: str = "ms", digits: int = 0) -> None:
        values = [v for v in values if v is not None]
        if not values:
            out.append((metric, "n/a", "n/a", "0", goal))
            return
        out.append((metric, _fmt(statistics.median(values), unit, digits), _fmt(max(values), unit, digits),
                    str(len(values)), goal))

    f = results.get("failover")
    if f and f.get("runs"):
        r = f["runs"]
        goal = f"< {GOAL_FAILOVER_MS:.0f} ms"
        add("MNHA SRG1 failover (power-off): worst affected flow, loss-derived", [x["worst_ms"] for x in r], goal)
        add("  same, median affected flow", [x["median_ms"] for x in r])
        add("  same, longest gap of an affected flow", [x["longest_gap_ms"] for x in r], goal)
        add("  server-push flow through the failed SRX: longest gap (receive times)", [x["push_gap_ms"] for x in r],
            goal)
        add(f"  server-push flow through the failed SRX: loss-derived ({PUSH_RATE} pps)",
            [x["push_loss_ms"] for x in r])
        add("  selector moved the SRX's buckets to its peer, after the carrier loss", [x["selector_moved_after_ms"]
                                                                                      for x in r])
        add("  backup became SRG1 active, after the carrier loss", [x["peer_active_after_ms"] for x in r])
        add("  baseline (no event): worst flow, loss-derived", [x["worst_ms"] for x in f["baseline"]])
        add("  baseline (no event): longest gap", [x["longest_gap_ms"] for x in f["baseline"]])
        add("  baseline (no event): server-push flow, longest gap", [x["push_gap_ms"] for x in f["baseline"]])
        add("MNHA SRG1 failback (restore + preemption): worst affected flow", [x["failback_worst_ms"] for x in r])
        add("  restore -> preempted back (roles + selector)", [x["preempted_after_s"] for x in r], unit="s",
            digits=2)
    s = results.get("sync")
    if s and s.get("runs"):
        lag = summary(s["all_lags_ms"], 3)
        out.append(("MNHA session sync lag (created on carrier -> copy created on peer), all sessions",
                    f"{lag['median']:.3f} ms (p99 {lag['p99']:.3f} ms)", f"{lag['max']:.3f} ms",
                    f"{len(s['runs'])} x {s['sessions_per_run']}", ""))
        add("  per-run p99 of the sync lag", [x["lag_ms"].get("p99") for x in s["runs"]], digits=3)
        add("  sessions missing on the peer (per run)", [x["missing_on_peer"] for x in s["runs"]], unit="")
        add("  sessions gone from the carrier 1.5 s after (per run)",
            [x["sessions"] - x["seen_on_carrier"] for x in s["runs"]], unit="")
        over = s.get("conntrackd_overruns")
        if over:
            out.append(("  conntrackd netlink overruns during these runs (buffer doublings / at max growth)",
                        f"{over['buffer_doubled']} / {over['max_growth_reached']}", "", "4 SRX", "0"))
        for step in s.get("stress", []):
            if step.get("runs"):
                lag = summary(step["lags_ms"], 3)
                lag_text = f"{lag['median']:.3f} ms (p99 {lag['p99']:.3f} ms)" if lag["n"] else "n/a"
                missing = sum(x["missing_on_peer"] for x in step["runs"])
                seen = sum(x["seen_on_carrier"] for x in step["runs"])
                sent = sum(x["sessions"] for x in step["runs"])
                over = step.get("conntrackd_overruns_so_far", {})
                out.append((f"  stress: {step['rate_per_s']:.0f} new sessions/s for 1 s: sync lag (sessions gone "
                            f"from the carrier 1.5 s later: {sent - seen} of {sent}; no copy on the peer: {missing}; "
                            f"conntrackd overruns so far: {over.get('buffer_doubled', '?')} buffer doublings, "
                            f"{over.get('max_growth_reached', '?')} at max growth)", lag_text,
                            f"{lag['max']:.3f} ms" if lag["n"] else "n/a", str(len(step["runs"])), ""))
        c = summary(s["all_send_to_carrier_ms"], 3)
        out.append(("  baseline: send -> entry created on the carrier", f"{c['median']:.3f} ms "
                    f"(p99 {c['p99']:.3f} ms)", f"{c['max']:.3f} ms", str(c["n"]), ""))
    d = results.get("srd")
    if d and d.get("cli"):
        goal = f"< {GOAL_SWITCHOVER_MS:.0f} ms"
        add("SRD CLI switchover: worst flow, loss-derived", [x["worst_ms"] for x in d["cli"]], goal)
        add("  same, median flow", [x["median_ms"] for x in d["cli"]])
        add("  same, longest gap", [x["longest_gap_ms"] for x in d["cli"]], goal)
        add("  per flow, all flows of all runs", [v for x in d["cli"] for v in x["per_flow_ms"]])
        add("  `lab switchover` command (CLI start-up included)", [x["cli_ms"] for x in d["cli"]])
        add("  no MX master: old master released -> new master took over", [x["no_master_ms"] for x in d["cli"]])
        add("  both gateways route via the new master, after it took over",
            [x["gateways_after_master_ms"] for x in d["cli"]])
        add("SRD monitored link down: worst flow, loss-derived", [x["worst_ms"] for x in d["link"]], goal)
        add("  same, median flow", [x["median_ms"] for x in d["link"]])
        add("  same, longest gap", [x["longest_gap_ms"] for x in d["link"]], goal)
        add("  per flow, all flows of all runs", [v for x in d["link"] for v in x["per_flow_ms"]])
        add("  new master after `ip link set ... down` returned", [x["new_master_after_ms"] for x in d["link"]])
        add("  no MX master: old master ineligible -> new master took over", [x["no_master_ms"] for x in d["link"]])
        add("  both gateways route via the new master, after it took over",
            [x["gateways_after_master_ms"] for x in d["link"]])
        add("  baseline (no event): worst flow, loss-derived", [x["worst_ms"] for x in d["baseline"]])
        add("  baseline (no event): longest gap", [x["longest_gap_ms"] for x in d["baseline"]])
    return out


def markdown(results: dict[str, Any]) -> str:
    m = results["machine"]
    lines = ["# HA benchmark: MNHA failover, session sync, SRD switchover", "",
             f"Measured {results['date']} by `bench/ha.py {results['args']}`.", "",
             f"Machine: {m['nproc']} CPUs ({m['model']}), kernel {m['kernel']}, Python {m['python']}; load "
             f"average {m['loadavg']} at start, {results.get('loadavg_end', '?')} at end; other labs up at start: "
             f"{', '.join(x for x in m['other_labs'] if not x.startswith('bh')) or 'none'} (shared machine: "
             "compare against the baselines of the same run).", ""]
    f, d = results.get("failover"), results.get("srd")
    for name, x in (("MNHA failover", f), ("SRD", d)):
        if x and x.get("resolution_ms"):
            lines.append(f"Traffic, {name}: {x['flows']} two-way UDP flows ({results['sizes']}) at {x['rate']:.0f} pps "
                         f"per direction, {x['rate'] / x['flows']:.0f} pps per flow: **resolution "
                         f"{x['resolution_ms']:g} ms**.")
            lines.append("")
    if (f and f.get("runs")) or (d and d.get("cli")):
        lines.append("Loss-derived outage of a flow = packets lost / per-flow rate (RFC 6412), the worse direction "
                     "of the flow; a whole number of resolutions. Longest gap = the longest silence between two "
                     "packets of a flow (send times), so it includes one packet interval. \"worst\" = the flow with "
                     "the longest outage in a run; median and max are over the runs.")
        lines.append("")
    lines += ["| metric | median | max | runs | goal |", "|---|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {n} | {g} |" for a, b, c, n, g in rows(results)]
    lines.append("")
    if f and f.get("runs"):
        hb = f["heartbeat"]
        lines.append(f"MNHA heartbeat: {hb['interval_ms']} ms x {hb['threshold']} "
                     f"(silence threshold {hb['interval_ms'] * hb['threshold']} ms; an ICL carrier loss is acted on "
                     f"at once). Goals are the acceptance tests' bounds (test_mnha.py: gap < 0.5 s; test_srd.py: gap "
                     "< 1 s).")
        lines.append("")
        lines.append("Per-run samples, MNHA SRG1 failover (ms; target, worst, median, longest gap, push gap, "
                     "failback worst, preempted after s):")
        lines.append("")
        for i, x in enumerate(f["runs"], 1):
            lines.append(f"- {i}: {x['target']}->{x['peer']} worst {x['worst_ms']:.0f}, median {x['median_ms']:.0f}, "
                         f"gap {x['longest_gap_ms']:.0f}, push gap {x['push_gap_ms']:.0f}, flows with loss "
                         f"{x['flows_with_loss']}/{x['flows']}, unaffected loss {x['unaffected_loss']}; failback "
                         f"worst {x['failback_worst_ms']:.0f} (all flows {x['failback_all_loss_ms']:.0f}), "
                         f"preempted after {x['preempted_after_s']} s; baseline worst "
                         f"{f['baseline'][i - 1]['worst_ms']:.0f}")
        lines.append("")
    s = results.get("sync")
    if s and s.get("runs"):
        lines.append(f"Per-run samples, session sync lag ({s['sessions_per_run']} new sessions at "
                     f"{s['rate_per_s']:.0f}/s; ms: median / p99 / max, missing on the peer):")
        lines.append("")
        for i, x in enumerate(s["runs"], 1):
            lag = x["lag_ms"]
            lines.append(f"- {i}: {lag.get('median')} / {lag.get('p99')} / {lag.get('max')}, missing "
                         f"{x['missing_on_peer']}, seen on a carrier {x['seen_on_carrier']}, sent in {x['send_s']} s "
                         f"(sender late by up to {x['sender_max_lag_ms']} ms), by carrier {x['by_carrier']}")
        lines.append("")
    if d and d.get("cli"):
        lines.append("Per-run samples, SRD (ms; worst / median flow / longest gap, flows with loss):")
        lines.append("")
        for i, (lk, b) in enumerate(zip(d["link"], d["baseline"], strict=False), 1):
            cli = "; ".join(f"CLI {c['direction']} {c['worst_ms']:.0f} / {c['median_ms']:.0f} / "
                            f"{c['longest_gap_ms']:.0f}, {c['flows_with_loss']}" for c in d["cli"][2 * i - 2:2 * i])
            lines.append(f"- {i}: {cli}; link down {lk['worst_ms']:.0f} / "
                         f"{lk['median_ms']:.0f} / {lk['longest_gap_ms']:.0f}, {lk['flows_with_loss']}; baseline "
                         f"{b['worst_ms']:.0f} / {b['median_ms']:.0f} / {b['longest_gap_ms']:.0f}")
        lines.append("")
    for part in PARTS:
        for error in (results.get(part) or {}).get("errors", []):
            lines.append(f"- error in {part}: {error}")
    for error in results.get("errors", []):
        lines.append(f"- error: {error}")
    return "\n".join(lines).rstrip() + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=20, help="runs of each measurement (default 20)")
    parser.add_argument("--quick", action="store_true", help="5 runs instead of --runs")
    parser.add_argument("--json", action="store_true", help="print the results as JSON instead of markdown")
    parser.add_argument("--only", action="append", choices=PARTS, help="run only this part (repeatable)")
    parser.add_argument("--flows", type=int, default=50, help="two-way flows for SRD (default 50)")
    parser.add_argument("--failover-flows", type=int, default=20,
                        help="two-way flows for the MNHA failover (default 20: about half cross the failed SRX)")
    parser.add_argument("--rate", type=float, default=10000.0, help="aggregate pps per direction (default 10000)")
    parser.add_argument("--sizes", default="imix", help="frame sizes (dataplane.traffic syntax, default imix)")
    parser.add_argument("--out", type=Path, default=DOC, help=f"markdown file to write (default {DOC})")
    parser.add_argument("--no-write", action="store_true", help="do not write the markdown file")
    args = parser.parse_args()
    if os.geteuid() != 0:
        print("bench/ha.py creates labs (network namespaces): run it as root", file=sys.stderr)
        return 1
    runs = 5 if args.quick else max(1, args.runs)
    parts = args.only or list(PARTS)
    results: dict[str, Any] = {
        "date": dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"),
        "args": " ".join(shlex.quote(a) for a in sys.argv[1:]), "runs": runs, "machine": machine(),
        "sizes": args.sizes, "errors": []}
    status = 0
    with interruptible(), tempfile.TemporaryDirectory(prefix="bench-ha-") as tmp:
        workdir = Path(tmp)
        steps: dict[str, Callable[[dict[str, Any]], None]] = {
            "failover": lambda out: measure_failover(out, workdir, runs, args.failover_flows, args.rate,
                                                         args.sizes),
            "sync": lambda out: measure_sync(out, workdir, runs),
            "srd": lambda out: measure_srd(out, workdir, runs, args.flows, args.rate, args.sizes),
        }
        for part in PARTS:
            if part not in parts:
                continue
            started = time.monotonic()
            out: dict[str, Any] = {"errors": []}
            results[part] = out  # filled as the runs go: an error keeps the runs done
            try:
                steps[part](out)
            except KeyboardInterrupt:
                out["errors"].append("interrupted")
                status = 130
                break
            except (BenchError, subprocess.SubprocessError, OSError, RuntimeError, ValueError) as exc:
                log(f"{part} failed: {exc}")
                out["errors"].append(str(exc))
                status = 1
            finally:
                log(f"{part} took {time.monotonic() - started:.0f} s")
    results["loadavg_end"] = round(os.getloadavg()[0], 2)
    text = markdown(results)
    if args.json:
        print(json.dumps(results, indent=2))
    else:
        print(text)
    if not args.no_write:
        write_doc(text, args.out)
        log(f"wrote {args.out}")
    return status


if __name__ == "__main__":
    sys.exit(main())
