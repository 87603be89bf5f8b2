"""Junos-like high-availability commands: TLB statistics (the MX selector), MNHA
`show chassis high-availability`, SRD `show services redundancy-group` (from the daemons' status files).
"""

from __future__ import annotations

import time
from typing import Any

from labkit.contracts import MNHA_STATUS, MXLB_CONFIG, MXLB_STATUS, SRD_STATUS
from labkit.status import SrdStatus, parse_status

from ..gather import Snapshot
from ..pipes import Output
from .base import Args, error


# ---------------------------------------------------------------------- services (MX)
def show_tlb_statistics(snap: Snapshot, args: Args) -> Output:
    if snap.node.features.get("load_balancing") != "tlb":
        return error("traffic-load-balance is not configured")
    status = snap.status.get(MXLB_STATUS)
    config = snap.status.get(MXLB_CONFIG) or {}
    if not isinstance(status, dict):
        return error("the traffic-load-balance subsystem is not running")
    connected = snap.now - float(status.get("updated_at", 0.0)) < 3.5
    members = status.get("members", [])
    loopbacks = {m["name"]: m.get("loopback", "") for s in config.get("selectors", []) for m in s.get("members", [])}
    health = config.get("health", {})
    profiles = health.get("profiles") or [health] if health else []
    probe = ",".join(str(p.get("type", "icmp")).upper() for p in profiles) or "ICMP"
    active = sum(1 for m in members if m.get("alive"))
    sent = sum(c.get("packets", 0) for m in members for c in m.get("counters", {}).values())
    sent_bytes = sum(c.get("bytes", 0) for m in members for c in m.get("counters", {}).values())
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
        packets = sum(c.get("packets", 0) for c in member.get("counters", {}).values())
        size = sum(c.get("bytes", 0) for c in member.get("counters", {}).values())
        probe_state = member.get("health") or {}
        sts = "UP" if member.get("alive") else "DOWN"
        probe_sts = "UP" if probe_state.get("up") else "DOWN"
        lines.append(f"{member['name']:<22}{loopbacks.get(member['name'], '-'):<17}{sts:<6}{packets:<17}"
                     f"{size:<17}{probe:<7}{probe_sts}")
        rows.append({"real-service-name": member["name"], "real-service-address": loopbacks.get(member["name"]),
                     "real-service-state": sts, "packet-sent": packets, "byte-sent": size,
                     "probe-type": probe, "probe-state": probe_sts,
                     "probe-last-result": probe_state.get("last_result"), "buckets": member.get("buckets")})
    data = {"tlb-statistics-information": {
        "instance-name": "srx_mnha_group_tlb", "network-monitor-connection": "Established" if connected else "Down",
        "active-real-service-count": active, "total-real-service-count": len(members),
        "total-packet-sent": sent, "real-service": rows}}
    return Output("".join(line + "\n" for line in lines), data)


def _srg0_monitoring(srg0: dict[str, Any]) -> list[str]:
    """SRG0's monitor-object, its BFD-liveliness destinations and the failure signal route."""
    monitor = srg0.get("monitor")
    signal = srg0.get("signal_route") or {}
    lines: list[str] = []
    if monitor:
        lines += ["        Monitoring Information:",
                  f"          SRG Threshold: {monitor.get('srg_threshold')}   Current SRG Weight: "
                  f"{monitor.get('srg_weight')}",
                  f"          BFD Liveliness: minimum-interval {monitor.get('interval_ms')} ms, multiplier "
                  f"{monitor.get('multiplier')}"]
        for obj in monitor.get("objects", []):
            lines.append(f"          Monitor Object: {obj['name']:<10} State: {obj['state']:<5} Weight: "
                         f"{obj['weight']}/{obj['threshold']}   Object Threshold: {obj['object_threshold']}")
            for dest in obj.get("destinations", []):
                lines.append(f"            BFD Destination: {dest['ip']:<16} Src: {dest['src_ip']:<16} "
                             f"Interface: {dest['interface']:<12} Weight: {dest['weight']:<5} State: {dest['state']}")
    if signal:
        lines.append(f"        Install On Failure Route: {signal.get('prefix')} routing-instance MNHA-VR "
                     f"({'INSTALLED' if signal.get('installed') else 'not installed'})")
    events = srg0.get("events") or []
    if events:
        lines.append("        Failure Events:")
        for event in events[-8:]:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(event.get("at", 0.0))))
            lines.append(f"          {when}  {event.get('what', '')}")
    return lines


def show_chassis_ha(snap: Snapshot, args: Args) -> Output:
    """MNHA (`dataplane.daemons.mnhad` writes nodes/NODE/mnha-status.json) in Junos's layout."""
    status = snap.status.get(MNHA_STATUS)
    if "mnha" not in snap.node.features:
        return error("Chassis high availability is not configured")
    if not isinstance(status, dict):
        return error("the chassis high-availability subsystem is not running")
    fresh = snap.now - float(status.get("updated_at", 0.0)) < 5.0
    mnha = snap.node.features["mnha"]
    pair = list(mnha.get("nodes", [])) if isinstance(mnha, dict) else []
    local_id = pair.index(snap.node.name) + 1 if snap.node.name in pair else 1
    peer_id = 3 - local_id
    icl = status.get("icl", {})
    icl_if = next((f"{p.alias}.0" for p in snap.node.ports if p.name == icl.get("device")), icl.get("device", "-"))
    beat = status.get("heartbeat", {})
    srg1 = status.get("srg1", {})
    conn = "UP" if icl.get("up") and beat.get("peer_alive") else "DOWN"
    healthy = status.get("healthy")
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
        f"  Peer Id: {peer_id}        IP address: {icl.get('peer_ip', '-')}    Interface: {icl_if}",
        "    Routing Instance: default",
        f"    Encrypted: NO       Conn State: {conn}",
        f"    Heartbeats: sent {beat.get('sent', 0)}, received {beat.get('received', 0)}, "
        f"errors {beat.get('errors', 0)}, interval {beat.get('interval_ms', '-')} ms, "
        f"threshold {beat.get('threshold', '-')}",
        "",
        "Services Redundancy Group: 0",
        f"        Current State: {'ONLINE' if status.get('srg0', {}).get('role') == 'active' else 'OFFLINE'}",
        "        Peer Information:",
        f"          Peer Id: {peer_id}",
    ]
    lines += _srg0_monitoring(status.get("srg0", {}))
    if status.get("mode") in ("srg1", "srg1+srg2"):
        role = str(srg1.get("role", "unknown")).upper()
        lines += [
            "",
            "Services Redundancy Group: 1",
            "        Deployment Type: ROUTING",
            f"        Status: {role}",
            f"        Activeness Priority: {srg1.get('priority', '-')}",
            f"        Preemption: {'ENABLED' if srg1.get('preempt') else 'DISABLED'}",
            "        Process Packet In Backup State: NO",
            f"        Control Plane State: {'READY' if fresh else 'NOT READY'}",
            f"        System Integrity Check: {'PASSED' if healthy else 'FAILED'}",
            "        Peer Information:",
            f"          Peer Id: {peer_id}",
            f"          Status : {str(srg1.get('peer_role', 'unknown')).upper()}",
            f"          Health Status: {'HEALTHY' if beat.get('peer_alive') else 'UNKNOWN'}",
        ]
    srg2 = status.get("srg2")
    if isinstance(srg2, dict):
        lines += [
            "",
            "Services Redundancy Group: 2",
            "        Deployment Type: ROUTING",
            f"        Status: {str(srg2.get('role', 'unknown')).upper()}",
            f"        Activeness Priority: {srg2.get('priority', '-')}",
            "        Peer Information:",
            f"          Peer Id: {peer_id}",
            f"          Status : {str(srg2.get('peer_role', 'unknown')).upper()}",
        ]
    return Output("".join(line + "\n" for line in lines), {"mnha-information": status})


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
