"""What the HA benchmark (bench/ha.py) drives and watches: its labs, two-way traffic windows, carrier
and selector watches, a server-push flow, SRG1/SRD roles, conntrack creation stamps."""

from __future__ import annotations

import contextlib
import json
import re
import select
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

from common import (  # noqa: E402
    BenchError,
    BenchLab,
    lab_cmd,
    logger,
)

from dataplane.traffic import Flow, Receiver, Sender, Spawned, reverse_flows  # noqa: E402
from lab_orchestrator.events import watch as eventwatch  # noqa: E402
from lab_orchestrator.plan import trafficsetup  # noqa: E402
from lab_orchestrator.plan.pipeline import LabPlan  # noqa: E402
from lab_orchestrator.runtime.state import LabState  # noqa: E402

log = logger("ha")

PEER = {"srx1": "srx2", "srx2": "srx1", "srx3": "srx4", "srx4": "srx3"}


REVERSE_ID_OFFSET = 100000


SERVER = "203.0.113.9"  # the push server's address (the server host's AnyIP prefix)


PUSH_RATE = 200  # datagrams/s of the server-push flow (udpprobe's default)


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
        self.ends = trafficsetup.endpoints(plan)
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
        before = eventwatch.carriers(plan, gap=0.4)
        facts = action()
        time.sleep(max(0.0, after - 0.5))
        after_ = eventwatch.carriers(plan, gap=0.4)
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
    """Server push (`dataplane.traffic.udpprobe push/pull`): one client datagram, then only the server sends."""

    def __init__(self, lab_: Lab, client: str, port: int, seconds: float, rate: int = PUSH_RATE):
        base = [*lab_cmd(), "exec", "--lab", lab_.name]
        self.server = subprocess.Popen(
            [*base, "server", "--", sys.executable, "-m", "dataplane.traffic.udpprobe", "push", "--bind", SERVER,
             "--port", str(port), "--rate", str(rate), "--seconds", str(seconds)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        assert self.server.stdout is not None
        if "serving" not in self.server.stdout.readline():
            self.kill()
            raise BenchError("push server did not start")
        self.puller = subprocess.Popen(
            [*base, "client", "--", sys.executable, "-m", "dataplane.traffic.udpprobe", "pull", "--source", client,
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


# ---------------------------------------------------------------- 3. SRD switchover
def srd_roles(lab_: Lab) -> dict[str, str]:
    return {mx: status.role if (status := lab_.srd(mx)) else "?" for mx in ("mx1", "mx2")}


def srd_transitions(lab_: Lab, mx: str) -> list[dict[str, Any]]:
    """The MX's SRD transitions in the shape transition_after reads; [] while the file is rewritten."""
    status = lab_.srd(mx)
    return status.to_dict()["transitions"] if status else []


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
