"""Junos-like operational commands: pure functions from a Snapshot (and arguments) to an Output.

Text follows Junos's layout; `data` is the same content for `| display json`, with Junos's key names
but plain values (not Junos's `[{"data": ...}]` wrapping). Values the emulation cannot know are "-"
(e.g. BGP message counts: BIRD does not count messages); nothing is invented.
"""

from __future__ import annotations

import json
import os
import time
from ipaddress import IPv4Interface, IPv4Network
from typing import Any

from labkit.contracts import MNHA_STATUS, MXLB_CONFIG, MXLB_STATUS, SRD_STATUS

from . import junosconf, rib
from .common import (
    Egress,
    bird_started,
    bird_version,
    clock,
    egress,
    junos_age,
    junos_logical,
    junos_physical,
    junos_sort_key,
    junos_updown,
    local_addresses,
)
from .gather import Snapshot
from .pipes import Output
from .state import BgpProtocol, FlowSession, Instance, KernelRoute, Link, NextHop

Args = dict[str, Any]
ROUTING_DOWN = "error: the routing subsystem is not running\n"
NAT_POOL, NAT_RULE_SET, NAT_RULE = "SRC-POOL", "TRUST-TO-UNTRUST", "cgnat"  # names in srx.nft's comments


def error(text: str) -> Output:
    return Output(f"error: {text}\n", status=1)


def _bird_down(snap: Snapshot) -> bool:
    return any(i.bird_error for i in snap.instances)


# ---------------------------------------------------------------------- show version / system
def show_version(snap: Snapshot, args: Args) -> Output:
    node = snap.node
    versions = sorted({bird_version(i) for i in snap.instances if bird_version(i)})
    model = {"mx": "mx-emulated", "srx": "srx-emulated"}.get(node.kind, node.kind)
    namespaces = ", ".join(i.ns for i in node.instances)
    lines = [
        f"Hostname: {node.name}",
        f"Model: {model}",
        "Junos: 24.2R1 (emulated)",
        f"JUNOS Kernel: Linux {os.uname().release}, network namespaces {namespaces}",
        f"JUNOS Routing Software Suite: {', '.join(versions) if versions else 'not running'}",
        f"Lab: {snap.lab} (lab_orchestrator), {snap.load_balancing}, {snap.use_case}",
    ]
    data = {"software-information": {"host-name": node.name, "product-model": model,
                                     "junos-version": "24.2R1 (emulated)", "kernel": os.uname().release,
                                     "routing-software": versions, "lab": snap.lab}}
    return Output("".join(line + "\n" for line in lines), data)


def show_system_uptime(snap: Snapshot, args: Args) -> Output:
    up = snap.now - snap.lab_created if snap.lab_created else None
    started = next((bird_started(i) for i in snap.instances if bird_started(i)), "")
    lines = [f"Current time: {clock(snap.now)}"]
    if snap.lab_created:
        lines.append(f"System booted: {clock(snap.lab_created)} ({junos_age(up)} ago)")
    if started:
        lines.append(f"Protocols started: {started}")
    lines.append(f"Last configured: {clock(snap.lab_created) if snap.lab_created else '-'} by lab")
    load = os.getloadavg()
    lines.append(f"up {junos_age(up)}, load averages: {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}")
    data = {"system-uptime-information": {"current-time": clock(snap.now),
                                          "system-booted-time": clock(snap.lab_created) if snap.lab_created else None,
                                          "protocols-started-time": started or None}}
    return Output("".join(line + "\n" for line in lines), data)


# ---------------------------------------------------------------------- interfaces
def _interface_rows(snap: Snapshot) -> list[tuple[Link, list[tuple[str, Instance, list[str]]]]]:
    """Physical interfaces (one lo0 for all instances) with their logical units and addresses."""
    physical: dict[str, tuple[Link, list[tuple[str, Instance, list[str]]]]] = {}
    for inst in snap.instances:
        for link in inst.links:
            name = junos_physical(link)
            addresses = [f"{a.address}/{a.prefixlen}" if link.name != "lo" else a.address
                         for a in inst.addresses if a.ifname == link.name and not a.address.startswith("127.")]
            logical = junos_logical(snap, inst.name, link.name, inst)
            if name not in physical:
                physical[name] = (link, [])
            if addresses or link.name != "lo":
                physical[name][1].append((logical, inst, addresses))
    return [physical[name] for name in sorted(physical, key=junos_sort_key)]


def _state(up: bool) -> str:
    return "up" if up else "down"


def show_interfaces_terse(snap: Snapshot, args: Args) -> Output:
    wanted = args.get("interface")
    lines = ["Interface               Admin Link Proto    Local                 Remote"]
    data = []
    for link, units in _interface_rows(snap):
        name = junos_physical(link)
        if wanted and not (name == wanted or name.startswith(wanted) or any(u[0] == wanted for u in units)):
            continue
        lines.append(f"{name:<24}{_state(link.admin_up):<6}{_state(link.oper_up)}")
        logical_data = []
        for logical, _inst, addresses in units:
            if wanted and wanted != name and logical != wanted:
                continue
            admin, oper = _state(link.admin_up), _state(link.oper_up)
            if not addresses:
                lines.append(f"{logical:<24}{admin:<6}{oper}")
            for i, address in enumerate(addresses):
                remote = "--> 0/0" if link.name == "lo" else ""
                local = f"{address:<22}{remote}".rstrip() if remote else address
                if i == 0:
                    lines.append(f"{logical:<24}{admin:<6}{oper:<5}{'inet':<9}{local}")
                else:
                    lines.append(f"{'':<44}{local}")
            logical_data.append({"name": logical, "admin-status": admin, "oper-status": oper,
                                 "address-family": [{"address-family-name": "inet",
                                                     "interface-address": [{"ifa-local": a} for a in addresses]}]})
        data.append({"name": name, "admin-status": _state(link.admin_up), "oper-status": _state(link.oper_up),
                     "logical-interface": logical_data})
    if wanted and len(lines) == 1:
        return error(f"device {wanted} not found")
    return Output("".join(line + "\n" for line in lines), {"interface-information": {"physical-interface": data}})


def show_interfaces_descriptions(snap: Snapshot, args: Args) -> Output:
    ports = {p.name: p for p in snap.node.ports}
    lines = ["Interface       Admin Link Description"]
    data = []
    for link, _units in _interface_rows(snap):
        port = ports.get(link.name)
        if port is None:
            continue
        lines.append(f"{junos_physical(link):<16}{_state(link.admin_up):<6}{_state(link.oper_up):<5}"
                     f"{port.description}")
        data.append({"name": junos_physical(link), "admin-status": _state(link.admin_up),
                     "oper-status": _state(link.oper_up), "description": port.description})
    return Output("".join(line + "\n" for line in lines), {"interface-information": {"physical-interface": data}})


def show_interfaces(snap: Snapshot, args: Args) -> Output:
    if args.get("terse"):
        return show_interfaces_terse(snap, args)
    if args.get("descriptions"):
        return show_interfaces_descriptions(snap, args)
    wanted = args.get("interface")
    ports = {p.name: p for p in snap.node.ports}
    out: list[str] = []
    data = []
    for link, units in _interface_rows(snap):
        name = junos_physical(link)
        if wanted and not (name == wanted or any(u[0] == wanted for u in units)):
            continue
        enabled = "Enabled" if link.admin_up else "Administratively down"
        out.append(f"Physical interface: {name}, {enabled}, Physical link is {'Up' if link.oper_up else 'Down'}")
        out.append(f"  Interface index: {link.index}, SNMP ifIndex: {link.index}")
        port = ports.get(link.name)
        if port is not None:
            out.append(f"  Description: {port.description}")
        kind = "Unspecified" if link.name == "lo" else "Ethernet"
        out.append(f"  Type: {kind}, Link-level type: {kind}, MTU: {link.mtu}")
        if link.mac and link.name != "lo":
            out.append(f"  Current address: {link.mac}, Hardware address: {link.mac}")
        out.append(f"  Input packets : {link.rx_packets}")
        out.append(f"  Output packets: {link.tx_packets}")
        for logical, inst, addresses in units:
            out.append("")
            out.append(f"  Logical interface {logical} (Index {link.index})")
            out.append(f"    Flags: {'Up' if link.admin_up else 'Down'} SNMP-Traps Encapsulation: ENET2")
            if inst.name:
                out.append(f"    Routing instance: {inst.name}")
            out.append(f"    Input packets : {link.rx_packets}")
            out.append(f"    Output packets: {link.tx_packets}")
            out.append(f"    Protocol inet, MTU: {link.mtu}")
            for address in addresses:
                iface = IPv4Interface(address if "/" in address else f"{address}/32")
                out.append("      Addresses, Flags: Is-Preferred Is-Primary")
                out.append(f"        Destination: {iface.network}, Local: {iface.ip}")
        out.append("")
        data.append({"name": name, "admin-status": _state(link.admin_up), "oper-status": _state(link.oper_up),
                     "local-index": link.index, "mtu": link.mtu, "current-physical-address": link.mac,
                     "description": port.description if port else None,
                     "traffic-statistics": {"input-packets": link.rx_packets, "output-packets": link.tx_packets,
                                            "input-bytes": link.rx_bytes, "output-bytes": link.tx_bytes},
                     "logical-interface": [{"name": u[0], "address": u[2]} for u in units]})
    if wanted and not data:
        return error(f"device {wanted} not found")
    return Output("".join(line + "\n" for line in out), {"interface-information": {"physical-interface": data}})


# ---------------------------------------------------------------------- routes
def _tables(snap: Snapshot) -> list[rib.Table]:
    tables = []
    for inst in snap.instances:
        tables += rib.build(snap.node, inst, snap.now, snap.address_ages, snap.lab_created)
    return tables


def _selected_tables(snap: Snapshot, wanted: str | None) -> list[rib.Table]:
    tables = _tables(snap)
    if wanted:
        tables = [t for t in tables if t.name == wanted or t.name.startswith(wanted)]
    return tables


def _origin(origin: str) -> str:
    return {"IGP": "I", "EGP": "E", "Incomplete": "?"}.get(origin, "I")


def _peer_address(snap: Snapshot, protocol: str) -> str | None:
    return next((p.peer_address for p in snap.node.peers if p.protocol == protocol), None)


def _entry_lines(snap: Snapshot, table: rib.Table, entry: rib.Entry, first: bool) -> tuple[list[str], dict[str, Any]]:
    inst = next(i for i in snap.instances if i.name == table.instance)
    flag = "*" if entry.active else " "
    preference = rib.JUNOS_PREFERENCE[entry.protocol]
    head = f"{entry.prefix:<19}" if first else " " * 19
    if first and len(entry.prefix) >= 19:
        head = entry.prefix + " "
    detail = ""
    if entry.protocol == "BGP":
        detail = f", localpref {entry.local_pref if entry.local_pref is not None else 100}"
        if entry.med is not None:
            detail = f", MED {entry.med}" + detail
    lines = [f"{head}{flag}[{entry.protocol}/{preference}] {junos_age(entry.age)}{detail}"]
    if entry.protocol == "BGP":
        path = " ".join(str(a) for a in entry.as_path)
        lines.append(f"{'':22}AS path: {path + ' ' if path else ''}{_origin(entry.origin)}, "
                     f"validation-state: unverified")
    hops: list[dict[str, Any]] = []
    if entry.discard:
        lines.append(f"{'':23}Discard")
    elif entry.reject:
        lines.append(f"{'':23}Reject")
    elif entry.protocol == "Local":
        via = junos_logical(snap, table.instance, entry.hops[0].ifname if entry.hops else None, inst)
        lines.append(f"{'':23}Local via {via}")
        hops.append({"via": via, "nh-local-interface": via})
    else:
        for hop in entry.hops:
            via = junos_logical(snap, table.instance, hop.ifname, inst)
            mark = ">" if hop.selected else " "
            target = f"to {hop.gateway} via {via}" if hop.gateway else f"via {via}"
            lines.append(f"{'':20}{mark}  {target}")
            hops.append({"selected-next-hop": hop.selected, "to": hop.gateway, "via": via})
    data: dict[str, Any] = {"active-tag": flag.strip(), "protocol-name": entry.protocol, "preference": preference,
                            "age": junos_age(entry.age), "nh": hops}
    if entry.protocol == "BGP":
        data.update({"local-preference": entry.local_pref, "as-path": " ".join(str(a) for a in entry.as_path),
                     "origin": _origin(entry.origin), "learned-from": _peer_address(snap, entry.peer_protocol)})
    if entry.discard:
        data["nh-type"] = "Discard"
    return lines, data


def _protocol_match(entry: rib.Entry, protocol: str | None) -> bool:
    return protocol is None or entry.protocol.lower() == protocol.lower()


def show_route(snap: Snapshot, args: Args) -> Output:
    if _bird_down(snap):
        return Output(ROUTING_DOWN, status=1)
    tables = _selected_tables(snap, args.get("table"))
    if args.get("table") and not tables:
        return error(f"routing table {args['table']} does not exist")
    destination = args.get("destination")
    mode = "exact" if args.get("exact") else "longer" if args.get("longer") else "best"
    protocol = args.get("protocol")
    out: list[str] = []
    data = []
    for table in tables:
        entries = rib.lookup(table.entries, destination, mode) if destination else table.entries
        entries = [e for e in entries if _protocol_match(e, protocol)]
        if (destination or protocol) and not entries:
            continue
        out.append("")
        out.append(f"{table.name}: {table.destinations} destinations, {len(table.entries)} routes "
                   f"({table.active} active, 0 holddown, 0 hidden)")
        out.append("+ = Active Route, - = Last Active, * = Both")
        out.append("")
        rts: list[dict[str, Any]] = []
        previous = None
        for entry in entries:
            lines, entry_data = _entry_lines(snap, table, entry, entry.prefix != previous)
            if entry.prefix != previous:
                rts.append({"rt-destination": entry.prefix, "rt-entry": []})
            rts[-1]["rt-entry"].append(entry_data)
            previous = entry.prefix
            out += lines
        data.append({"table-name": table.name, "destination-count": table.destinations,
                     "total-route-count": len(table.entries), "active-route-count": table.active, "rt": rts})
    return Output("".join(line + "\n" for line in out), {"route-information": {"route-table": data}})


_NH_TYPE = {"blackhole": "dscd", "unreachable": "rjct", "prohibit": "rjct", "broadcast": "bcst", "local": "locl"}


def show_route_forwarding_table(snap: Snapshot, args: Args) -> Output:
    """The kernel's forwarding tables (what is programmed, whatever the routing daemon's state)."""
    destination = args.get("destination")
    wanted = args.get("table")
    out: list[str] = []
    data = []
    for inst in snap.instances:
        spec = snap.node.instance(inst.name)
        numbers = {254: (inst.name or "default") + ".inet"}
        if spec is not None:
            numbers.update({int(n): name.removesuffix(".0") for n, name in spec.tables.items()})
        for number, name in numbers.items():
            if wanted and not name.startswith(wanted):
                continue
            routes: list[KernelRoute] = [r for r in inst.routes if r.table == number]
            if number == 254:  # the kernel keeps own addresses in its local table
                routes += [r for r in inst.routes if r.table == 255 and r.type in ("local", "broadcast")
                           and not r.dst.startswith("127.")]
            if destination:
                net = IPv4Network(destination if "/" in destination else f"{destination}/32", strict=False)
                covering = [r for r in routes if net.subnet_of(IPv4Network(r.dst))]
                longest = max((IPv4Network(r.dst).prefixlen for r in covering), default=-1)
                routes = [r for r in covering if IPv4Network(r.dst).prefixlen == longest]
                if not routes:
                    continue
            routes.sort(key=lambda r: (rib.sort_key(r.dst), r.table))
            out += [f"Routing table: {name}", "Internet:",
                    "Destination        Type RtRef Next hop           Type Index    NhRef Netif"]
            rows = []
            for route in routes:
                dest = "default" if route.dst == "0.0.0.0/0" else route.dst
                rtype = "user" if route.proto in ("bird", "static", "boot") else "intf"
                if route.table == 255 and route.type == "broadcast":
                    rtype = "dest"
                nh_type = _NH_TYPE.get(route.type, "ucst")
                hops = route.nexthops
                if route.type == "unicast" and len(hops) == 1 and hops[0].gateway is None:
                    nh_type = "rslv"
                if route.type == "unicast" and len(hops) > 1:
                    out.append(f"{dest:<18} {rtype:<4} {'-':>5} {'':<18} {'ulst':<4} {'-':>5} {'-':>8}")
                    for hop in hops:
                        netif = junos_logical(snap, inst.name, hop.ifname, inst)
                        out.append(f"{'':<18} {'':<4} {'':>5} {hop.gateway or '':<18} {'ucst':<4} {'-':>5} "
                                   f"{'-':>8} {netif}")
                    rows.append({"rt-destination": dest, "rt-entry-type": rtype, "nh-type": "ulst",
                                 "nh": [{"to": h.gateway, "via": junos_logical(snap, inst.name, h.ifname, inst)}
                                        for h in hops]})
                    continue
                first: NextHop | None = hops[0] if hops else None
                gateway = (first.gateway if first else None) or (route.dst.split("/")[0] if nh_type == "locl" else "")
                netif = "" if nh_type in ("locl", "dscd", "rjct") or first is None else \
                    junos_logical(snap, inst.name, first.ifname, inst)
                out.append(f"{dest:<18} {rtype:<4} {'-':>5} {gateway:<18} {nh_type:<4} {'-':>5} {'-':>8} {netif}"
                           .rstrip())
                rows.append({"rt-destination": dest, "rt-entry-type": rtype, "nh-type": nh_type,
                             "nh": [{"to": gateway or None, "via": netif or None}]})
            out.append("")
            data.append({"table-name": name, "address-family": "Internet", "rt-entry": rows})
    if not data and (destination or wanted):
        return error("no matching forwarding table entry") if destination else \
            error(f"forwarding table {wanted} does not exist")
    return Output("".join(line + "\n" for line in out), {"forwarding-table-information": {"route-table": data}})


# ---------------------------------------------------------------------- BGP
def _bgp_state(proto: BgpProtocol) -> str:
    if proto.info.startswith("Established"):
        return "Establ"
    word = proto.info.split()[0] if proto.info else ""
    return word or ("Idle" if proto.state in ("down", "start") else proto.state)


def _bgp_rows(snap: Snapshot, instance: str | None) -> list[tuple[Any, BgpProtocol | None, Instance]]:
    """(planned peer, BIRD's protocol or None, instance) for every planned session."""
    rows = []
    for peer in snap.node.peers:
        if instance and peer.instance != instance:
            continue
        inst = next((i for i in snap.instances if i.name == peer.instance), None)
        if inst is None:
            continue
        proto = next((p for p in inst.bgp or [] if p.name == peer.protocol), None)
        rows.append((peer, proto, inst))
    rows.sort(key=lambda r: rib.sort_key(r[0].peer_address + "/32"))
    return rows


def _no_bgp(snap: Snapshot) -> Output | None:
    if _bird_down(snap):
        return Output(ROUTING_DOWN, status=1)
    if not snap.node.peers:
        return error("BGP is not running")
    return None


def _age_of(snap: Snapshot, since: str) -> float | None:
    return rib.parse_since(since, snap.now) if since else None


def show_bgp_summary(snap: Snapshot, args: Args) -> Output:
    problem = _no_bgp(snap)
    if problem:
        return problem
    rows = _bgp_rows(snap, args.get("instance"))
    down = sum(1 for _, proto, _ in rows if proto is None or _bgp_state(proto) != "Establ")
    groups = {peer.group for peer, _, _ in rows}
    out = ["Threading mode: BGP I/O", "Default eBGP mode: advertise - accept, receive - accept",
           f"Groups: {len(groups)} Peers: {len(rows)} Down peers: {down}",
           "Table          Tot Paths  Act Paths Suppressed    History Damp State    Pending"]
    tables = []
    for inst in snap.instances:
        protos = [proto for peer, proto, i in rows if i is inst and proto is not None]
        if not any(peer.instance == inst.name for peer, _, _ in rows):
            continue
        total = sum(p.imported for p in protos)
        active = sum(p.preferred for p in protos)
        out.append(inst.table)
        out.append(f"{'':14}{total:>10}{active:>11}{0:>11}{0:>11}{0:>11}{0:>11}")
        tables.append({"name": inst.table, "total-prefix-count": total, "active-prefix-count": active})
    out.append("Peer                     AS      InPkt     OutPkt    OutQ   Flaps Last Up/Dwn "
               "State|#Active/Received/Accepted/Damped...")
    peers = []
    for peer, proto, inst in rows:
        state = _bgp_state(proto) if proto else "Idle"
        updown = junos_updown(_age_of(snap, proto.since)) if proto else "-"
        out.append(f"{peer.peer_address:<16}{peer.peer_as:>11}{'-':>11}{'-':>11}{0:>8}{'-':>8}{updown:>12} {state}")
        entry: dict[str, Any] = {"peer-address": peer.peer_address, "peer-as": peer.peer_as,
                                 "peer-state": "Established" if state == "Establ" else state,
                                 "elapsed-time": updown, "description": peer.peer_node}
        if proto is not None and state == "Establ":
            received = proto.imported + proto.filtered
            out.append(f"  {inst.table}: {proto.preferred}/{received}/{proto.imported}/0")
            entry["bgp-rib"] = {"name": inst.table, "active-prefix-count": proto.preferred,
                                "received-prefix-count": received, "accepted-prefix-count": proto.imported,
                                "suppressed-prefix-count": 0}
        peers.append(entry)
    data = {"bgp-information": {"group-count": len(groups), "peer-count": len(rows), "down-peer-count": down,
                                "bgp-rib": tables, "bgp-peer": peers}}
    return Output("".join(line + "\n" for line in out), data)


def _capabilities(proto: BgpProtocol) -> list[str]:
    return [key for key in ("Graceful restart", "Route refresh", "Enhanced refresh", "Long-lived graceful restart")
            if key in proto.fields] if proto.fields else []


def show_bgp_neighbor(snap: Snapshot, args: Args) -> Output:
    problem = _no_bgp(snap)
    if problem:
        return problem
    wanted = args.get("address")
    rows = [r for r in _bgp_rows(snap, args.get("instance")) if not wanted or r[0].peer_address == wanted]
    if wanted and not rows:
        return error(f"Peer {wanted} not found")
    out: list[str] = []
    data = []
    for peer, proto, inst in rows:
        fields = proto.fields if proto else {}
        state = "Established" if proto and _bgp_state(proto) == "Establ" else (_bgp_state(proto) if proto else "Idle")
        hold = fields.get("Hold timer", "").split("/")[-1] or "3"
        keepalive = fields.get("Keepalive timer", "").split("/")[-1] or "1"
        local_id = snap.node.loopbacks.get(peer.instance, "")
        local_if = egress(inst, peer.peer_address)
        out.append(f"Peer: {peer.peer_address} AS {peer.peer_as}  Local: {peer.local_address} AS {peer.local_as}")
        out.append(f"  Description: {peer.peer_node}")
        group = peer.group or "-"
        out.append(f"  Group: {group:<22}Routing-Instance: {peer.instance or 'master'}")
        out.append(f"  Type: External    State: {state}    Flags: <{'Sync' if state == 'Established' else ''}>")
        last_error = fields.get("Last error", "None")
        out.append(f"  Last Error: {last_error}")
        options = ["Preference", "LocalAddress", "HoldTime", "GracefulRestart", "PeerAS", "Refresh"]
        out.append(f"  Options: <{' '.join(options)}>")
        out.append(f"  Local Address: {peer.local_address} Holdtime: {hold} Preference: 170")
        out.append(f"  Peer ID: {fields.get('Neighbor ID', '-'):<16} Local ID: {local_id:<16} Active Holdtime: {hold}")
        out.append(f"  Keepalive Interval: {keepalive}")
        if local_if:
            out.append(f"  Local Interface: {junos_logical(snap, inst.name, local_if, inst)}")
        if proto is not None and state == "Established":
            out.append("  NLRI for restart configured on peer: inet-unicast")
            out.append("  NLRI advertised by peer: inet-unicast")
            out.append("  NLRI for this session: inet-unicast")
            if "Route refresh" in fields:
                out.append("  Peer supports Refresh capability (2)")
            if "Restart time" in fields:
                out.append(f"  Restart time configured on the peer: {fields['Restart time']}")
            out.append(f"  Table {inst.table}")
            out.append(f"    Active prefixes:              {proto.preferred}")
            out.append(f"    Received prefixes:            {proto.imported + proto.filtered}")
            out.append(f"    Accepted prefixes:            {proto.imported}")
            out.append("    Suppressed due to damping:    0")
            out.append(f"    Advertised prefixes:          {proto.exported}")
            out.append(f"  Last State Change: {junos_updown(_age_of(snap, proto.since))} ago")
        out.append("")
        data.append({"peer-address": peer.peer_address, "peer-as": peer.peer_as,
                     "local-address": peer.local_address, "local-as": peer.local_as,
                     "description": peer.peer_node, "peer-group": peer.group, "peer-cfg-rti": peer.instance or "master",
                     "peer-state": state, "peer-id": fields.get("Neighbor ID"), "local-id": local_id,
                     "holdtime": hold, "keepalive-interval": keepalive, "last-error": last_error,
                     "bgp-rib": {"name": inst.table, "active-prefix-count": proto.preferred if proto else 0,
                                 "received-prefix-count": (proto.imported + proto.filtered) if proto else 0,
                                 "accepted-prefix-count": proto.imported if proto else 0,
                                 "advertised-prefix-count": proto.exported if proto else 0}})
    return Output("".join(line + "\n" for line in out), {"bgp-information": {"bgp-peer": data}})


# ---------------------------------------------------------------------- configuration
def show_configuration(snap: Snapshot, args: Args) -> Output:
    if snap.config_text is None:
        return error("configuration database is not available")
    try:
        statements = junosconf.parse(snap.config_text)
    except junosconf.ConfigError as exc:
        return error(f"configuration cannot be parsed: {exc}")
    path = str(args.get("rest", "")).split()
    if not path:
        return Output(snap.config_text, config=statements)
    found = junosconf.locate(statements, path)
    if found is None:
        return Output("", config=[])
    sub, above = found
    nested: list[junosconf.Statement] = sub  # for `| display set` and json: the blocks above the subtree
    for words in reversed(above):
        nested = [junosconf.Statement(words, nested)]
    return Output(junosconf.render(sub), config=nested)


# ---------------------------------------------------------------------- security (SRX)
def _zone(snap: Snapshot, ifname: str | None) -> str | None:
    return next((p.zone for p in snap.node.ports if p.name == ifname), None)


def _session_matches(session: FlowSession, args: Args) -> bool:
    def inside(address: str, prefix: str) -> bool:
        return IPv4Network(f"{address}/32").subnet_of(IPv4Network(prefix if "/" in prefix else f"{prefix}/32",
                                                                   strict=False))

    if args.get("source-prefix") and not inside(session.source, args["source-prefix"]):
        return False
    if args.get("destination-prefix") and not inside(session.destination, args["destination-prefix"]):
        return False
    if args.get("protocol") and session.protocol != str(args["protocol"]).lower():
        return False
    if args.get("source-port") and str(session.source_port) != args["source-port"]:
        return False
    return not (args.get("destination-port") and str(session.destination_port) != args["destination-port"])


def show_flow_session(snap: Snapshot, args: Args) -> Output:
    if snap.sessions_error:
        return error(snap.sessions_error)
    inst = snap.instances[0] if snap.instances else Instance("", "inet.0")
    own = local_addresses(inst)
    route = Egress(inst)
    out: list[str] = []
    data = []
    sessions = [s for s in snap.sessions or [] if _session_matches(s, args)]
    for session in sessions:
        in_dev = None if session.source in own else route(session.source)
        out_dev = None if session.reply_source in own else route(session.reply_source)
        in_if = ".local..0" if session.source in own else junos_logical(snap, "", in_dev, inst)
        out_if = ".local..0" if session.reply_source in own else junos_logical(snap, "", out_dev, inst)
        in_zone, out_zone = _zone(snap, in_dev), _zone(snap, out_dev)
        if session.destination in own or session.source in own:
            policy = "self-traffic-policy/1"
        elif in_zone == "trust" and out_zone == "untrust":
            policy = "permit-outbound/1"
        else:
            policy = f"{in_zone or 'junos-host'}-to-{out_zone or 'junos-host'}/1"
        proto = session.protocol
        out.append(f"Session ID: {session.id}, Policy name: {policy}, Timeout: {session.timeout}, Valid")
        out.append(f"  In: {session.source}/{session.source_port} --> {session.destination}/"
                   f"{session.destination_port};{proto}, Conn Tag: 0x0, If: {in_if or '-'}, "
                   f"Pkts: {session.packets_in}, Bytes: {session.bytes_in},")
        out.append(f"  Out: {session.reply_source}/{session.reply_source_port} --> {session.reply_destination}/"
                   f"{session.reply_destination_port};{proto}, Conn Tag: 0x0, If: {out_if or '-'}, "
                   f"Pkts: {session.packets_out}, Bytes: {session.bytes_out},")
        out.append("")
        data.append({"session-identifier": session.id, "policy": policy, "timeout": session.timeout,
                     "sess-state": "Valid", "conntrack-state": session.state,
                     "flow-information": [
                         {"direction": "In", "source-address": session.source, "source-port": session.source_port,
                          "destination-address": session.destination, "destination-port": session.destination_port,
                          "protocol": proto, "interface-name": in_if, "pkt-cnt": session.packets_in,
                          "byte-cnt": session.bytes_in},
                         {"direction": "Out", "source-address": session.reply_source,
                          "source-port": session.reply_source_port, "destination-address": session.reply_destination,
                          "destination-port": session.reply_destination_port, "protocol": proto,
                          "interface-name": out_if, "pkt-cnt": session.packets_out,
                          "byte-cnt": session.bytes_out}]})
    out.append(f"Total sessions: {len(sessions)}")
    return Output("".join(line + "\n" for line in out),
                  {"flow-session-information": {"flow-session": data, "displayed-session-count": len(sessions)}})


def show_flow_session_summary(snap: Snapshot, args: Args) -> Output:
    if snap.sessions_error:
        return error(snap.sessions_error)
    sessions = snap.sessions or []
    count = len(sessions)
    lines = [f"Unicast-sessions: {count}", "Multicast-sessions: 0", "Services-offload-sessions: 0",
             f"Sessions-in-use: {count}", f"  Valid sessions: {count}", "  Pending sessions: 0",
             "  Invalidated sessions: 0", "  Sessions in other states: 0",
             f"Maximum-sessions: {snap.conntrack_max}"]
    data = {"flow-session-summary-information": {"active-unicast-sessions": count, "active-sessions": count,
                                                 "active-valid-sessions": count,
                                                 "max-sessions": snap.conntrack_max}}
    return Output("".join(line + "\n" for line in lines), data)


def _translated(session: FlowSession) -> bool:
    return session.reply_destination != session.source


def show_nat_source_summary(snap: Snapshot, args: Args) -> Output:
    pool = snap.node.nat_pool
    if pool is None:
        lines = ["Total port number usage for port translation pool: 0",
                 "Maximum port number for port translation pool: 0", "Total pools: 0", "", "Total rules: 0"]
        return Output("".join(line + "\n" for line in lines),
                      {"source-nat-summary-information": {"total-pools": 0, "total-rules": 0}})
    net = IPv4Network(pool)
    used = sum(1 for s in snap.sessions or [] if _translated(s))
    maximum = net.num_addresses * (65535 - 1024 + 1)
    address_range = f"{net.network_address}-{net.broadcast_address}"
    lines = [f"Total port number usage for port translation pool: {used}",
             f"Maximum port number for port translation pool: {maximum}",
             "Total pools: 1",
             "Pool name          Address                  Routing              PAT  Total",
             "                   Range                    Instance                  Address",
             f"{NAT_POOL:<19}{address_range:<25}{'default':<21}{'yes':<5}{net.num_addresses}",
             "",
             "Total rules: 1",
             "Rule name          Rule set       From              To                   Action",
             f"{NAT_RULE:<19}{NAT_RULE_SET:<15}{'trust':<18}{'untrust':<21}{NAT_POOL}"]
    data = {"source-nat-summary-information": {
        "port-usage": used, "max-port-usage": maximum, "total-pools": 1, "total-rules": 1,
        "source-nat-pool-info": [{"pool-name": NAT_POOL, "pool-address-range": address_range,
                                  "routing-instance": "default", "pat": True, "total-address": net.num_addresses}],
        "source-nat-rule-info": [{"rule-name": NAT_RULE, "rule-set-name": NAT_RULE_SET, "from-zone": "trust",
                                  "to-zone": "untrust", "pool-name": NAT_POOL}]}}
    return Output("".join(line + "\n" for line in lines), data)


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


def feature_status(snap: Snapshot, file: str, configured: bool, what: str) -> Output:
    """A feature whose own issue has not landed yet: not configured, not running, or (once it writes
    its status file and before a renderer of its own is added here) its status as key: value lines."""
    status = snap.status.get(file)
    if status is None:
        if not configured:
            return error(f"{what} is not configured")
        return error(f"{what} is not running (not available in this lab yet)")
    text = json.dumps(status, indent=2, sort_keys=True)
    return Output(text + "\n", status)


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
    """MNHA (`dataplane.mnhad` writes nodes/NODE/mnha-status.json) in Junos's layout."""
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


# ---------------------------------------------------------------------- BGP: what a peer is sent / sent us
def _peer_for(snap: Snapshot, address: str) -> tuple[Any, Instance] | None:
    peer = next((p for p in snap.node.peers if p.peer_address == address), None)
    if peer is None:
        return None
    inst = next((i for i in snap.instances if i.name == peer.instance), None)
    return (peer, inst) if inst is not None else None


def _adv_header(snap: Snapshot, inst: Instance) -> list[str]:
    table = next((t for t in _tables(snap) if t.name == inst.table), None)
    counts = (f"{table.destinations} destinations, {len(table.entries)} routes ({table.active} active, 0 holddown, "
              f"0 hidden)") if table else "0 destinations, 0 routes (0 active, 0 holddown, 0 hidden)"
    return ["", f"{inst.table}: {counts}",
            "  Prefix                  Nexthop              MED     Lclpref    AS path"]


def _adv_line(flag: str, prefix: str, nexthop: str, med: int | None, path: str) -> str:
    return f"{flag} {prefix:<24}{nexthop:<21}{'' if med is None else str(med):<8}{'':<11}{path}"


def _bgp_protocol_view(snap: Snapshot, args: Args, advertising: bool) -> Output:
    problem = _no_bgp(snap)
    if problem:
        return problem
    found = _peer_for(snap, str(args["neighbor"]))
    if found is None:
        return error(f"BGP peer {args['neighbor']} not found")
    peer, inst = found
    if inst.bird_error:
        return Output(ROUTING_DOWN, status=1)
    proto = next((p for p in inst.bgp or [] if p.name == peer.protocol), None)
    established = proto is not None and _bgp_state(proto) == "Establ"
    if advertising:
        routes = (inst.bird_exports or {}).get(peer.protocol, []) if established else []
    else:
        routes = [r for r in inst.bird_routes or [] if r.protocol == peer.protocol and r.source == "BGP"]
    routes = sorted(routes, key=lambda r: rib.sort_key(r.prefix))
    lines = _adv_header(snap, inst)
    rows = []
    for route in routes:
        path = " ".join(str(a) for a in route.as_path)
        origin = _origin(route.origin)
        if advertising:  # eBGP puts the local AS in front on the wire: Junos shows it in brackets
            shown = f"[{peer.local_as}] {path + ' ' if path else ''}{origin}"
            nexthop, flag = "Self", "*"
        else:
            shown = f"{path + ' ' if path else ''}{origin}"
            nexthop = route.bgp_next_hop or (route.nexthops[0].gateway if route.nexthops else "") or "-"
            flag = "*" if route.primary else " "
        lines.append(_adv_line(flag, route.prefix, nexthop, route.med, shown))
        rows.append({"rt-destination": route.prefix, "active-tag": flag.strip(), "rt-entry": {
            "nh": {"to": nexthop}, "med": route.med, "as-path": shown, "origin": origin,
            "local-as": peer.local_as if advertising else None}})
    data = {"route-information": {"route-table": [{"table-name": inst.table, "rt": rows}],
                                  "neighbor": peer.peer_address, "protocol-name": peer.protocol,
                                  "direction": "advertising" if advertising else "receive"}}
    return Output("".join(line + "\n" for line in lines), data)


def show_route_advertising_protocol(snap: Snapshot, args: Args) -> Output:
    """What BIRD exports to the session after the export policy (an SRG1 backup's or SRD standby's prepend
    included): `show route export PROTOCOL all`."""
    return _bgp_protocol_view(snap, args, advertising=True)


def show_route_receive_protocol(snap: Snapshot, args: Args) -> Output:
    """What the session brought in, active or not (`show route all`, routes of that BGP protocol)."""
    return _bgp_protocol_view(snap, args, advertising=False)


# ---------------------------------------------------------------------- security policies, zones, NAT (SRX)
def _rules(snap: Snapshot, family: str, table: str, chain: str) -> list[dict[str, Any]]:
    """Rules of one nft chain in the live ruleset: {'comment': ..., 'packets': N, 'bytes': N}."""
    found = []
    for item in snap.ruleset or []:
        rule = item.get("rule")
        if not rule or rule.get("family") != family or rule.get("table") != table or rule.get("chain") != chain:
            continue
        counter: dict[str, Any] = next(
            (e["counter"] for e in rule.get("expr", []) if isinstance(e, dict) and "counter" in e), {})
        found.append({"comment": rule.get("comment", ""), "packets": int(counter.get("packets", 0)),
                      "bytes": int(counter.get("bytes", 0))})
    return found


def _policies(snap: Snapshot) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """(policies from the forward chain's `policy FROM->TO NAME` rules, the default-deny rule)."""
    policies, default = [], None
    for rule in _rules(snap, "inet", "srx", "forward"):
        words = str(rule["comment"]).split()
        if len(words) == 3 and words[0] == "policy" and "->" in words[1]:
            source, target = words[1].split("->", 1)
            policies.append({"from": source, "to": target, "name": words[2], **rule})
        elif words[:1] == ["default-policy"]:
            default = {"name": words[1] if len(words) > 1 else "deny-all", **rule}
    return policies, default


def _security_state(snap: Snapshot) -> Output | None:
    if snap.ruleset_error:
        return error(snap.ruleset_error)
    if not any(r.get("table", {}).get("name") == "srx" for r in snap.ruleset or [] if "table" in r):
        return error("the security subsystem is not running (no security ruleset loaded)")
    return None


def show_security_policies(snap: Snapshot, args: Args) -> Output:
    problem = _security_state(snap)
    if problem:
        return problem
    policies, default = _policies(snap)
    if args.get("hit-count"):
        lines = ["Logical system: root-logical-system",
                 " Index   From zone        To zone           Name                  Policy count  Action"]
        for index, policy in enumerate(policies, 1):
            lines.append(f" {index:<8}{policy['from']:<17}{policy['to']:<18}{policy['name']:<22}"
                         f"{policy['packets']:<14}Permit")
        if default is not None:
            lines.append(f" {'':<8}{'any':<17}{'any':<18}{'default-policy':<22}{default['packets']:<14}Deny")
        lines.append("")
        lines.append(f"Number of policy: {len(policies)}")
        data = {"policy-hit-count": [{"policy-name": p["name"], "from-zone": p["from"], "to-zone": p["to"],
                                      "policy-hit-count-count": p["packets"], "policy-action": "permit"}
                                     for p in policies],
                "default-policy-hit-count": default["packets"] if default else 0}
        return Output("".join(line + "\n" for line in lines), data)
    lines = [f"Default policy: {default['name'] if default else 'deny-all'}", "Pre ID default policy: permit-all"]
    for index, policy in enumerate(policies, 1):
        lines += [f"From zone: {policy['from']}, To zone: {policy['to']}",
                  f"  Policy: {policy['name']}, State: enabled, Index: {index + 3}, Scope Policy: 0, "
                  f"Sequence number: {index}",
                  "    Source addresses: any", "    Destination addresses: any", "    Applications: any",
                  "    Action: permit"]
    data = {"security-policies": [{"from-zone": p["from"], "to-zone": p["to"], "policy-name": p["name"],
                                   "policy-state": "enabled", "policy-action": "permit", "hit-count": p["packets"]}
                                  for p in policies],
            "default-policy": default["name"] if default else "deny-all"}
    return Output("".join(line + "\n" for line in lines), data)


def show_security_zones(snap: Snapshot, args: Args) -> Output:
    zones: dict[str, list[str]] = {}
    for port in snap.node.ports:
        if port.zone:
            zones.setdefault(port.zone, []).append(f"{port.alias}.0")
    wanted = args.get("zone")
    if wanted and wanted not in zones and wanted != "junos-host":
        return error(f"security zone {wanted} does not exist")
    lines: list[str] = []
    data = []
    names = ["junos-host", *sorted(zones)]
    for zone_id, name in enumerate(names, 2):
        if wanted and name != wanted:
            continue
        members = sorted(zones.get(name, []), key=junos_sort_key)
        lines += ["", f"Security zone: {name}", f"  Zone ID: {zone_id}",
                  "  Send reset for non-SYN session TCP packets: Off", "  Policy configurable: Yes",
                  f"  Interfaces bound: {len(members)}", "  Interfaces:"]
        lines += [f"    {m}" for m in members]
        data.append({"zone-name": name, "zone-id": zone_id, "interfaces-bound": len(members), "interfaces": members})
    return Output("".join(line + "\n" for line in lines), {"zones-information": {"zones-security": data}})


def _nat_configured(snap: Snapshot) -> Output | None:
    if snap.node.nat_pool is None:
        return error("source NAT is not configured")
    return _security_state(snap)


def _nat_hits(snap: Snapshot) -> int:
    return sum(r["packets"] for r in _rules(snap, "ip", "srx_nat", "postrouting"))


def show_nat_source_pool(snap: Snapshot, args: Args) -> Output:
    problem = _nat_configured(snap)
    if problem:
        return problem
    name = args.get("name", "all")
    if name not in ("all", NAT_POOL):
        return error(f"source NAT pool {name} does not exist")
    net = IPv4Network(str(snap.node.nat_pool))
    used = sum(1 for s in snap.sessions or [] if _translated(s))
    hits = _nat_hits(snap)
    first, last = net.network_address, net.broadcast_address
    lines = ["Total pools: 1", "",
             f"Pool name          : {NAT_POOL}", "Pool id            : 4", "Routing instance   : default",
             "Host address base  : 0.0.0.0", "Port               : [1024, 65535]", "port overloading   : 1",
             f"Total addresses    : {net.num_addresses}", f"Translation hits   : {hits}",
             "Address range                        Single Ports   Twin Ports",
             f" {f'{first} - {last}':<37}{used:<15}0"]
    data = {"source-nat-pool-detail-information": {
        "pool-name": NAT_POOL, "routing-instance-name": "default", "total-pool-address": net.num_addresses,
        "source-pool-address-range": {"address-range-low": str(first), "address-range-high": str(last),
                                      "single-port": used, "twin-port": 0},
        "source-pool-port-translation": "[1024, 65535]", "pool-translation-hits": hits}}
    return Output("".join(line + "\n" for line in lines), data)


def show_nat_source_rule(snap: Snapshot, args: Args) -> Output:
    problem = _nat_configured(snap)
    if problem:
        return problem
    name = args.get("name", "all")
    if name not in ("all", NAT_RULE):
        return error(f"source NAT rule {name} does not exist")
    hits = _nat_hits(snap)
    lines = ["Total rules: 1", "Total referenced IPv4/IPv6 ip-prefixes: 2/0",
             f"source NAT rule: {NAT_RULE:<23}Rule-set: {NAT_RULE_SET}", "  Rule-Id                    : 1",
             "  Rule position              : 1", "  From zone                  : trust",
             "  To zone                    : untrust", "  Match",
             "    Source addresses         : 0.0.0.0         - 255.255.255.255",
             "    Destination addresses    : 0.0.0.0         - 255.255.255.255",
             f"  Action                        : {NAT_POOL}", "    Persistent NAT type         : N/A",
             f"  Translation hits           : {hits}", f"    Successful sessions      : {hits}",
             "    Failed sessions          : 0"]
    data = {"source-nat-rule-detail-information": {
        "rule-name": NAT_RULE, "rule-set-name": NAT_RULE_SET, "rule-from-zone-name": "trust",
        "rule-to-zone-name": "untrust", "source-nat-rule-action-entry": {"source-nat-rule-action": NAT_POOL},
        "rule-translation-hits": hits}}
    return Output("".join(line + "\n" for line in lines), data)


# ---------------------------------------------------------------------- ARP
def show_arp(snap: Snapshot, args: Args) -> Output:
    wanted = args.get("interface")
    lines = ["MAC Address       Address         Name                      Interface               Flags"]
    data = []
    for inst in snap.instances:
        for entry in sorted(inst.neighbors or [], key=lambda n: rib.sort_key(n.address + "/32")):
            shown = junos_logical(snap, inst.name, entry.ifname, inst)
            if wanted and shown != wanted and not shown.startswith(f"{wanted}."):
                continue
            flags = "permanent" if "PERMANENT" in entry.state else "none"
            name = entry.address
            lines.append(f"{entry.mac:<18}{entry.address:<16}{name:<26}{shown:<24}{flags}")
            data.append({"mac-address": entry.mac, "ip-address": entry.address, "hostname": name,
                         "interface-name": shown, "arp-table-entry-flags": flags,
                         "routing-instance": inst.name or "default"})
    lines.append(f"Total entries: {len(data)}")
    return Output("".join(line + "\n" for line in lines), {"arp-table-information": {"arp-table-entry": data}})


# ---------------------------------------------------------------------- SRD (MX)
def show_services_redundancy_group(snap: Snapshot, args: Args) -> Output:
    """Services Redundancy (`dataplane.srdd` writes nodes/MX/srd-status.json) in a Junos-like layout."""
    srd = snap.node.features.get("srd")
    if not isinstance(srd, dict):
        return error("services redundancy is not configured")
    status = snap.status.get(SRD_STATUS)
    if not isinstance(status, dict):
        return error("the services redundancy daemon is not running")
    wanted = args.get("id")
    if wanted is not None and str(wanted) != "1":
        return error(f"redundancy-group {wanted} is not configured")
    fresh = snap.now - float(status.get("updated_at", 0.0)) < 5.0
    beat = status.get("heartbeat", {})
    signal = status.get("signal_route", {})
    role = str(status.get("role", "unknown")).upper()
    peer_role = str(status.get("peer_role", "unknown")).upper()
    transitions = status.get("transitions", [])
    last = transitions[-1] if transitions else None
    lines = [
        "Redundancy Set: 1",
        "  Redundancy Group: 1",
        f"    Current State        : {role}",
        f"    Preferred Master     : {srd.get('master', '-')}",
        f"    Priority             : {status.get('priority', '-')}",
        f"    Preemption           : {'ENABLED' if status.get('preempt') else 'DISABLED'}",
        f"    Health               : {'HEALTHY' if status.get('healthy') and fresh else 'UNHEALTHY'}",
        f"    Signal Route         : {signal.get('prefix', '-')} "
        f"({'installed' if signal.get('installed') else 'not installed'})",
        f"    Routes Advertised    : {'as is' if role == 'MASTER' else 'with AS-path prepend'}",
        "  Peer Information:",
        f"    Peer                 : {status.get('peer', '-')}",
        f"    Peer State           : {peer_role}",
        f"    Peer Status          : {'ALIVE' if beat.get('peer_alive') else 'NOT RESPONDING'}",
        f"    Heartbeats           : sent {beat.get('sent', 0)}, received {beat.get('received', 0)}, "
        f"errors {beat.get('errors', 0)}",
    ]
    if last:
        lines.append(f"  Last Transition        : to {str(last.get('role', '')).upper()} ({last.get('why', '')})")
    if role == "MASTER" and not beat.get("peer_alive"):
        lines.append("  Warning                : peer not heard: mastership taken without it; if the peer is "
                     "alive (inter-MX link down), both MX are master (no split-brain protection)")
    return Output("".join(line + "\n" for line in lines), {"services-redundancy-group-information": status})
