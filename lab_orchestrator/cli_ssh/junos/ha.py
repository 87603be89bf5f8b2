"""Junos-like high-availability commands: TLB statistics (the MX selector), MNHA
`show chassis high-availability`, SRD `show services redundancy-group` (from the daemons' status files).
"""

from __future__ import annotations

import time

from labkit.contracts import MNHA_STATUS, MXLB_CONFIG, MXLB_STATUS, SRD_STATUS
from labkit.status import MnhaSrg0, MnhaStatus, MxlbStatus, SrdStatus, parse_status

from ..gather import Snapshot
from ..pipes import Output
from .base import Args, error


# ---------------------------------------------------------------------- services (MX)
def show_tlb_statistics(snap: Snapshot, args: Args) -> Output:
    if snap.node.features.get("load_balancing") != "tlb":
        return error("traffic-load-balance is not configured")
    status = parse_status(snap.status.get(MXLB_STATUS), MxlbStatus)
    config = snap.status.get(MXLB_CONFIG) or {}
    if status is None:
        return error("the traffic-load-balance subsystem is not running")
    connected = snap.now - status.updated_at < 3.5
    members = status.members
    loopbacks = {m["name"]: m.get("loopback", "") for s in config.get("selectors", []) for m in s.get("members", [])}
    health = config.get("health", {})
    profiles = health.get("profiles") or [health] if health else []
    probe = ",".join(str(p.get("type", "icmp")).upper() for p in profiles) or "ICMP"
    active = sum(1 for m in members if m.alive)
    sent = sum(c.packets for m in members for c in m.counters.values())
    sent_bytes = sum(c.bytes for m in members for c in m.counters.values())
    lines = ["Traffic load balance instance name     : srx_mnha_group_tlb",
             f"Network monitor RE daemon connection   : {'Established' if connected else 'Not established'}",
             f"Active real service count              : {active}",
             f"Total real service count               : {len(members)}",
             "Traffic Statistics:",
             f"  Total packet sent count              : {sent}",
             f"  Total byte sent count                : {sent_bytes}",
             "",
             "Real service          Address          Sts   Packet Sent      Byte Sent        Probe  Probe Sts",
             ]
    rows = []
    for member in members:
        packets = sum(c.packets for c in member.counters.values())
        size = sum(c.bytes for c in member.counters.values())
        sts = "UP" if member.alive else "DOWN"
        probe_sts = "UP" if member.health is not None and member.health.up else "DOWN"
        lines.append(f"{member.name:<22}{loopbacks.get(member.name, '-'):<17}{sts:<6}{packets:<17}"
                     f"{size:<17}{probe:<7}{probe_sts}")
        rows.append({"real-service-name": member.name, "real-service-address": loopbacks.get(member.name),
                     "real-service-state": sts, "packet-sent": packets, "byte-sent": size,
                     "probe-type": probe, "probe-state": probe_sts,
                     "probe-last-result": None if member.health is None else member.health.last_result,
                     "buckets": member.buckets})
    data = {"tlb-statistics-information": {
        "instance-name": "srx_mnha_group_tlb", "network-monitor-connection": "Established" if connected else "Down",
        "active-real-service-count": active, "total-real-service-count": len(members),
        "total-packet-sent": sent, "real-service": rows}}
    return Output("".join(line + "\n" for line in lines), data)


def _srg0_monitoring(srg0: MnhaSrg0) -> list[str]:
    """SRG0's monitor-object, its BFD-liveliness destinations and the failure signal route."""
    monitor = srg0.monitor
    signal = srg0.signal_route
    lines: list[str] = []
    if monitor is not None:
        lines += ["        Monitoring Information:",
                  f"          SRG Threshold: {monitor.srg_threshold}   Current SRG Weight: {monitor.srg_weight}",
                  f"          BFD Liveliness: minimum-interval {monitor.interval_ms} ms, multiplier "
                  f"{monitor.multiplier}"]
        for obj in monitor.objects:
            lines.append(f"          Monitor Object: {obj.name:<10} State: {obj.state:<5} Weight: "
                         f"{obj.weight}/{obj.threshold}   Object Threshold: {obj.object_threshold}")
            for dest in obj.destinations:
                lines.append(f"            BFD Destination: {dest.ip:<16} Src: {dest.src_ip:<16} "
                             f"Interface: {dest.interface:<12} Weight: {dest.weight:<5} State: {dest.state}")
    lines.append(f"        Install On Failure Route: {signal.prefix} routing-instance MNHA-VR "
                 f"({'INSTALLED' if signal.installed else 'not installed'})")
    if srg0.events:
        lines.append("        Failure Events:")
        for event in srg0.events[-8:]:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(event.at))
            lines.append(f"          {when}  {event.what}")
    return lines


def _cold_sync_status(sync: dict[str, object]) -> str:
    """How this node's last wait for its peer's table went: a wait that ran out is no complete cold sync
    (the node carries traffic without the peer's sessions), nor is one that had no peer to hear."""
    waited = sync.get("awaited_s")
    if sync.get("awaiting_peer"):
        return "IN PROGRESS (activeness held until the peer's sessions have arrived)"
    if waited is None:
        return "NOT NEEDED"
    ended = sync.get("cold_sync_ended")
    if ended == "timed out":
        return f"TIMED OUT after {waited} s (activeness taken without the peer's sessions)"
    if ended == "no peer":
        return f"NOT NEEDED (no peer heard in {waited} s)"
    return f"COMPLETE, took {waited} s"


def _session_sync(sync: object) -> list[str]:
    """The pair's session sync: the cold sync (this node waiting for its peer's table, the last
    one sent to the peer) and conntrackd's counters; a sync daemon not answering is shown as such."""
    if not isinstance(sync, dict):
        return []

    def num(key: str) -> str:
        value = sync.get(key)
        return "-" if value is None else str(value)

    lines = [
        "",
        f"  Cold Synchronization Status: {_cold_sync_status(sync)}",
        f"    Sent to the peer: {num('cold_syncs')} cold syncs"
        + (f", last {sync['last_cold_sync_sessions']} sessions in {sync['last_cold_sync_s']} s"
           if sync.get("last_cold_sync_s") is not None else "")
        + (" (one running)" if sync.get("sending") else ""),
        f"  Session Synchronization: {'RUNNING' if sync.get('daemon_answering') else 'NOT RUNNING'}",
        f"    Sessions: {num('sessions')} in the table, {num('cache')} opened or carried here (synced to the peer)",
        f"    From the peer: {num('injected')} written, {num('removed')} removed",
        f"    Messages: sent {num('sent_packets')}, received {num('received_packets')}, "
        f"unacknowledged {num('resend_queue')}, lost {num('lost')}, stale {num('stale')}, errors {num('errors')}",
        f"    Bytes over the ICL: sent {num('sent_bytes')}, received {num('received_bytes')}",
        f"    Refresh: every {sync.get('refresh_s', '-')} s (TCP {sync.get('refresh_tcp_s', '-')} s), "
        f"{num('refreshes')} windows",
    ]
    return lines


def show_chassis_ha(snap: Snapshot, args: Args) -> Output:
    """MNHA (`dataplane.daemons.mnhad` writes nodes/NODE/mnha-status.json) in Junos's layout."""
    status = parse_status(snap.status.get(MNHA_STATUS), MnhaStatus)
    if "mnha" not in snap.node.features:
        return error("Chassis high availability is not configured")
    if status is None:
        return error("the chassis high-availability subsystem is not running")
    fresh = snap.now - status.updated_at < 5.0
    mnha = snap.node.features["mnha"]
    pair = list(mnha.get("nodes", [])) if isinstance(mnha, dict) else []
    local_id = pair.index(snap.node.name) + 1 if snap.node.name in pair else 1
    peer_id = 3 - local_id
    icl = status.icl
    icl_if = "lo0.0" if icl.device == "lo" else next(
        (f"{p.alias}.0" for p in snap.node.ports if p.name == icl.device), icl.device)
    beat = status.heartbeat
    srg1 = status.srg1
    conn = "UP" if icl.up and beat.peer_alive else "DOWN"
    healthy = status.healthy
    lines = [
        "Node failure codes:",
        "    HW  Hardware monitoring    LB  Loopback monitoring",
        "    MB  Mbuf monitoring        SP  SPU monitoring",
        "    CS  Cold Sync monitoring   SU  Software Upgrade",
        "",
        f"Node Status: {'ONLINE' if fresh and healthy else 'OFFLINE'}",
        f"Local-id: {local_id}",
        f"Local-IP: {snap.node.loopbacks.get('', '-')}",
        "HA Peer Information:",
        "",
        f"  Peer Id: {peer_id}        IP address: {icl.peer_ip}    Interface: {icl_if}",
        "    Routing Instance: default",
        f"    Encrypted: NO       Conn State: {conn}",
        f"    Heartbeats: sent {beat.sent}, received {beat.received}, "
        f"errors {beat.errors}, interval {beat.interval_ms} ms, "
        f"threshold {beat.threshold}",
    ]
    lines += _session_sync(status.sync.model_dump() if status.sync is not None else None)
    lines += [
        "",
        "Services Redundancy Group: 0",
        f"        Current State: {'ONLINE' if status.srg0.role == 'active' else 'OFFLINE'}",
        "        Peer Information:",
        f"          Peer Id: {peer_id}",
    ]
    lines += _srg0_monitoring(status.srg0)
    if status.mode in ("srg1", "srg1+srg2"):
        lines += [
            "",
            "Services Redundancy Group: 1",
            "        Deployment Type: ROUTING",
            f"        Status: {srg1.role.upper()}",
            f"        Activeness Priority: {srg1.priority}",
            f"        Preemption: {'ENABLED' if srg1.preempt else 'DISABLED'}",
            "        Process Packet In Backup State: NO",
            f"        Control Plane State: {'READY' if fresh else 'NOT READY'}",
            f"        System Integrity Check: {'PASSED' if healthy else 'FAILED'}",
            "        Peer Information:",
            f"          Peer Id: {peer_id}",
            f"          Status : {srg1.peer_role.upper()}",
            f"          Health Status: {'HEALTHY' if beat.peer_alive else 'UNKNOWN'}",
        ]
    srg2 = status.srg2
    if srg2 is not None:
        lines += [
            "",
            "Services Redundancy Group: 2",
            "        Deployment Type: ROUTING",
            f"        Status: {srg2.role.upper()}",
            f"        Activeness Priority: {srg2.priority}",
            "        Peer Information:",
            f"          Peer Id: {peer_id}",
            f"          Status : {srg2.peer_role.upper()}",
        ]
    return Output("".join(line + "\n" for line in lines), {"mnha-information": status.to_dict()})


# ---------------------------------------------------------------------- SRD (MX)
def show_services_redundancy_group(snap: Snapshot, args: Args) -> Output:
    """Services Redundancy (`dataplane.daemons.srdd` writes nodes/MX/srd-status.json) in a Junos-like layout."""
    srd = snap.node.features.get("srd")
    if not isinstance(srd, dict):
        return error("services redundancy is not configured")
    status = parse_status(snap.status.get(SRD_STATUS), SrdStatus)
    if status is None:
        return error("the services redundancy daemon is not running")
    wanted = args.get("id")
    if wanted is not None and str(wanted) != "1":
        return error(f"redundancy-group {wanted} is not configured")
    fresh = snap.now - status.updated_at < 5.0
    beat, signal = status.heartbeat, status.signal_route
    role, peer_role = status.role.upper(), status.peer_role.upper()
    last = status.transitions[-1] if status.transitions else None
    lines = [
        "Redundancy Set: 1",
        "  Redundancy Group: 1",
        f"    Current State        : {role}",
        f"    Preferred Master     : {srd.get('master', '-')}",
        f"    Priority             : {status.priority}",
        f"    Preemption           : {'ENABLED' if status.preempt else 'DISABLED'}",
        f"    Health               : {'HEALTHY' if status.healthy and fresh else 'UNHEALTHY'}",
        f"    Signal Route         : {signal.prefix} ({'installed' if signal.installed else 'not installed'})",
        f"    Routes Advertised    : {'as is' if role == 'MASTER' else 'with AS-path prepend'}",
        "  Peer Information:",
        f"    Peer                 : {status.peer}",
        f"    Peer State           : {peer_role}",
        f"    Peer Status          : {'ALIVE' if beat.peer_alive else 'NOT RESPONDING'}",
        f"    Heartbeats           : sent {beat.sent}, received {beat.received}, errors {beat.errors}",
    ]
    if last:
        lines.append(f"  Last Transition        : to {last.role.upper()} ({last.why})")
    if role == "MASTER" and not beat.peer_alive:
        lines.append("  Warning                : peer not heard: mastership taken without it; if the peer is "
                     "alive (inter-MX link down), both MX are master (no split-brain protection)")
    return Output("".join(line + "\n" for line in lines), {"services-redundancy-group-information": status.to_dict()})
