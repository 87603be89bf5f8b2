"""Junos-like `show bgp summary|neighbor` and `show route advertising-protocol|receive-protocol bgp`."""

from __future__ import annotations

from ipaddress import ip_address
from typing import Any

from .. import rib
from ..common import (
    egress,
    junos_logical,
    junos_updown,
)
from ..gather import Snapshot
from ..pipes import Output
from ..state import BgpProtocol, Instance
from .base import ROUTING_DOWN, Args, bird_down, error
from .routes import rib_tables, route_origin


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
    rows.sort(key=lambda r: rib.address_key(r[0].peer_address))
    return rows


def same_address(a: str, b: str) -> bool:
    """Whether A and B are one address however written (an IPv6 address has many spellings)."""
    try:
        return ip_address(a) == ip_address(b)
    except ValueError:
        return a == b


def family_of(peer: Any) -> int:
    """A session's address family: that of its peer's address (a dual-stack lab has one of each)."""
    return 6 if ":" in peer.peer_address else 4


def peer_table(peer: Any, inst: Instance) -> str:
    """The table a session's routes go to: the instance's inet.0, or its inet6.0 for an IPv6 session."""
    return rib.family_table(inst.table, family_of(peer))


def _no_bgp(snap: Snapshot) -> Output | None:
    if bird_down(snap):
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
        for family in (4, 6):  # a table per family that has a session (inet6.0: a dual-stack lab's)
            here = [(peer, proto) for peer, proto, i in rows if i is inst and family_of(peer) == family]
            if not here:
                continue
            protos = [proto for _, proto in here if proto is not None]
            total = sum(p.imported for p in protos)
            active = sum(p.preferred for p in protos)
            name = rib.family_table(inst.table, family)
            out.append(name)
            out.append(f"{'':14}{total:>10}{active:>11}{0:>11}{0:>11}{0:>11}{0:>11}")
            tables.append({"name": name, "total-prefix-count": total, "active-prefix-count": active})
    out.append("Peer                     AS      InPkt     OutPkt    OutQ   Flaps Last Up/Dwn "
               "State|#Active/Received/Accepted/Damped...")
    peers = []
    for peer, proto, inst in rows:
        state = _bgp_state(proto) if proto else "Idle"
        updown = junos_updown(_age_of(snap, proto.since)) if proto else "-"
        if len(peer.peer_address) > 16:  # a long (IPv6) address pushes the row right, as Junos prints it
            out.append(f"{peer.peer_address} {peer.peer_as:>10}{'-':>11}{'-':>11}{0:>8}{'-':>8}{updown:>12} {state}")
        else:
            out.append(f"{peer.peer_address:<16}{peer.peer_as:>11}{'-':>11}{'-':>11}{0:>8}{'-':>8}{updown:>12} "
                       f"{state}")
        entry: dict[str, Any] = {"peer-address": peer.peer_address, "peer-as": peer.peer_as,
                                 "peer-state": "Established" if state == "Establ" else state,
                                 "elapsed-time": updown, "description": peer.peer_node}
        if proto is not None and state == "Establ":
            received = proto.imported + proto.filtered
            table = peer_table(peer, inst)
            out.append(f"  {table}: {proto.preferred}/{received}/{proto.imported}/0")
            entry["bgp-rib"] = {"name": table, "active-prefix-count": proto.preferred,
                                "received-prefix-count": received, "accepted-prefix-count": proto.imported,
                                "suppressed-prefix-count": 0}
        peers.append(entry)
    data = {"bgp-information": {"group-count": len(groups), "peer-count": len(rows), "down-peer-count": down,
                                "bgp-rib": tables, "bgp-peer": peers}}
    return Output("".join(line + "\n" for line in out), data)


def show_bgp_neighbor(snap: Snapshot, args: Args) -> Output:
    problem = _no_bgp(snap)
    if problem:
        return problem
    wanted = args.get("address")
    rows = [r for r in _bgp_rows(snap, args.get("instance")) if not wanted or same_address(r[0].peer_address, wanted)]
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
        nlri = "inet6-unicast" if family_of(peer) == 6 else "inet-unicast"
        table = peer_table(peer, inst)
        if proto is not None and state == "Established":
            out.append(f"  NLRI for restart configured on peer: {nlri}")
            out.append(f"  NLRI advertised by peer: {nlri}")
            out.append(f"  NLRI for this session: {nlri}")
            if "Route refresh" in fields:
                out.append("  Peer supports Refresh capability (2)")
            if "Restart time" in fields:
                out.append(f"  Restart time configured on the peer: {fields['Restart time']}")
            out.append(f"  Table {table}")
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
                     "bgp-rib": {"name": table, "active-prefix-count": proto.preferred if proto else 0,
                                 "received-prefix-count": (proto.imported + proto.filtered) if proto else 0,
                                 "accepted-prefix-count": proto.imported if proto else 0,
                                 "advertised-prefix-count": proto.exported if proto else 0}})
    return Output("".join(line + "\n" for line in out), {"bgp-information": {"bgp-peer": data}})


# ---------------------------------------------------------------------- BGP: what a peer is sent / sent us
def _peer_for(snap: Snapshot, address: str) -> tuple[Any, Instance] | None:
    peer = next((p for p in snap.node.peers if same_address(p.peer_address, address)), None)
    if peer is None:
        return None
    inst = next((i for i in snap.instances if i.name == peer.instance), None)
    return (peer, inst) if inst is not None else None


def _adv_header(snap: Snapshot, inst: Instance, name: str) -> list[str]:
    table = next((t for t in rib_tables(snap) if t.name == name), None)
    counts = (f"{table.destinations} destinations, {len(table.entries)} routes ({table.active} active, 0 holddown, "
              f"0 hidden)") if table else "0 destinations, 0 routes (0 active, 0 holddown, 0 hidden)"
    return ["", f"{name}: {counts}",
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
        learned = (inst.bird_routes6 if family_of(peer) == 6 else inst.bird_routes) or []
        routes = [r for r in learned if r.protocol == peer.protocol and r.source == "BGP"]
    routes = sorted(routes, key=lambda r: rib.sort_key(r.prefix))
    table_name = peer_table(peer, inst)
    lines = _adv_header(snap, inst, table_name)
    rows = []
    for route in routes:
        path = " ".join(str(a) for a in route.as_path)
        origin = route_origin(route.origin)
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
    data = {"route-information": {"route-table": [{"table-name": table_name, "rt": rows}],
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
