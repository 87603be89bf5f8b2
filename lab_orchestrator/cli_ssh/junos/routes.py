"""Junos-like `show route` and `show route forwarding-table` (BIRD's tables and the kernel's FIB)."""

from __future__ import annotations

from ipaddress import IPv4Network, IPv6Network, ip_network
from typing import Any

from .. import rib
from ..common import (
    junos_age,
    junos_logical,
)
from ..gather import Snapshot
from ..parser import is_prefix46
from ..pipes import Output
from ..state import Instance, KernelRoute, NextHop
from .base import ROUTING_DOWN, Args, bird_down, error


# ---------------------------------------------------------------------- routes
def rib_tables(snap: Snapshot) -> list[rib.Table]:
    """Every instance's tables, as Junos orders them: an instance's inet tables, then its inet6 ones."""
    tables = []
    for inst in snap.instances:
        for family in (4, 6):
            tables += rib.build(snap.node, inst, snap.now, snap.address_ages, snap.lab_created, family)
    return tables


def _selected_tables(snap: Snapshot, wanted: str | None) -> list[rib.Table]:
    tables = rib_tables(snap)
    if wanted:
        tables = [t for t in tables if t.name == wanted or t.name.startswith(wanted)]
    return tables


def route_origin(origin: str) -> str:
    return {"IGP": "I", "EGP": "E", "Incomplete": "?"}.get(origin, "I")


def _peer_address(snap: Snapshot, protocol: str) -> str | None:
    return next((p.peer_address for p in snap.node.peers if p.protocol == protocol), None)


def _entry_lines(snap: Snapshot, table: rib.Table, entry: rib.Entry, first: bool) -> tuple[list[str], dict[str, Any]]:
    inst = next(i for i in snap.instances if i.name == table.instance)
    flag = "*" if entry.active else " "
    preference = rib.JUNOS_PREFERENCE[entry.protocol]
    head = f"{entry.prefix:<19}" if first else " " * 19
    lead: list[str] = []
    if first and len(entry.prefix) >= 19:  # a long (IPv6) prefix: on a line of its own, as Junos prints it
        lead, head = [entry.prefix], " " * 19
    detail = ""
    if entry.protocol == "BGP":
        detail = f", localpref {entry.local_pref if entry.local_pref is not None else 100}"
        if entry.med is not None:
            detail = f", MED {entry.med}" + detail
    lines = [*lead, f"{head}{flag}[{entry.protocol}/{preference}] {junos_age(entry.age)}{detail}"]
    if entry.protocol == "BGP":
        path = " ".join(str(a) for a in entry.as_path)
        lines.append(f"{'':22}AS path: {path + ' ' if path else ''}{route_origin(entry.origin)}, "
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
                     "origin": route_origin(entry.origin), "learned-from": _peer_address(snap, entry.peer_protocol)})
    if entry.discard:
        data["nh-type"] = "Discard"
    return lines, data


def _protocol_match(entry: rib.Entry, protocol: str | None) -> bool:
    return protocol is None or entry.protocol.lower() == protocol.lower()


def show_route(snap: Snapshot, args: Args) -> Output:
    if bird_down(snap):
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
# (family, Junos's family keyword, its heading): IPv4 first, as Junos lists them
_FIB_FAMILIES = ((4, "inet", "Internet"), (6, "inet6", "Internet6"))
_COLUMN = 18  # width of the destination and next-hop columns


def _fib_routes(inst: Instance, number: int, family: int) -> list[KernelRoute]:
    """The kernel's routes of table NUMBER in FAMILY, as its forwarding table: the main table also
    lists the node's own addresses (the kernel keeps them in its local table). IPv6: without the
    link-local and multicast routes every IPv6 interface has (no view of the CLI shows them), and a
    loopback's /128, which IPv6 puts in both tables, once (as the local address it is)."""
    if family == 4:
        routes = [r for r in inst.routes if r.table == number]
        if number == rib.MAIN:
            routes += [r for r in inst.routes if r.table == rib.LOCAL and r.type in ("local", "broadcast")
                       and not r.dst.startswith("127.")]
        return routes
    visible = [r for r in inst.routes6 if not rib.hidden6(r.dst)]
    routes = [r for r in visible if r.table == number]
    if number == rib.MAIN:
        own = [r for r in visible if r.table == rib.LOCAL and r.type == "local"]
        routes = [r for r in routes if r.dst not in {o.dst for o in own}] + own
    return routes


def _fib_line(dest: str, rtype: str, rtref: str, gateway: str, nh_type: str, netif: str | None) -> list[str]:
    """One forwarding entry's line(s) in Junos's columns (NETIF None: the column is left off). A
    destination or next hop wider than its column (IPv6) is printed on a line of its own and the row
    goes on below it, under the columns that follow, as Junos prints it."""
    lines = []
    if len(dest) > _COLUMN:
        lines.append(dest)
        dest = ""
    head = f"{dest:<{_COLUMN}} {rtype:<4} {rtref:>5} "
    if len(gateway) > _COLUMN:
        lines.append(head + gateway)
        head, gateway = " " * len(head), ""
    tail = f"{gateway:<{_COLUMN}} {nh_type:<4} {'-':>5} {'-':>8}"
    lines.append(head + tail + (f" {netif}" if netif is not None else ""))
    return lines


def _fib_destination(destination: str | None) -> IPv4Network | IPv6Network | None:
    """The `destination` argument as a network (an address alone: its host route's)."""
    if not destination:
        return None
    if "/" not in destination:
        destination += "/128" if ":" in destination else "/32"
    return ip_network(destination, strict=False)


def show_route_forwarding_table(snap: Snapshot, args: Args) -> Output:
    """The kernel's forwarding tables (what is programmed, whatever the routing daemon's state): every
    instance's IPv4 tables, then (a dual-stack lab) its IPv6 ones; `family inet|inet6` shows one family,
    an IPv6 `destination` is looked up in the IPv6 tables."""
    destination = args.get("destination")
    wanted = args.get("table")
    family_word = args.get("family")
    if family_word is not None and family_word not in {word for _, word, _ in _FIB_FAMILIES}:
        return error(f"family {family_word} is not one of inet, inet6")
    if destination and not is_prefix46(destination):
        return error(f"invalid destination {destination}")
    target = _fib_destination(destination)
    out: list[str] = []
    data = []
    for family, word, heading in _FIB_FAMILIES:
        if family_word not in (None, word) or (target is not None and target.version != family):
            continue
        for inst in snap.instances:
            spec = snap.node.instance(inst.name)
            numbers = {rib.MAIN: (inst.name or "default") + ".inet.0"}
            if spec is not None:
                numbers.update({int(n): name for n, name in spec.tables.items()})
            for number, table_name in numbers.items():
                name = rib.family_table(table_name, family).removesuffix(".0")
                # a name starting with TABLE, but `table X.inet` is not X.inet6
                if wanted and (not name.startswith(wanted) or name[len(wanted):].startswith("6")):
                    continue
                routes = _fib_routes(inst, number, family)
                if family == 6 and not routes:  # an IPv4-only lab has no IPv6 table to show
                    continue
                if target is not None:
                    covering = [r for r in routes if target.subnet_of(ip_network(r.dst))]  # type: ignore[arg-type]
                    longest = max((ip_network(r.dst).prefixlen for r in covering), default=-1)
                    routes = [r for r in covering if ip_network(r.dst).prefixlen == longest]
                    if not routes:
                        continue
                routes.sort(key=lambda r: (rib.sort_key(r.dst), r.table))
                out += [f"Routing table: {name}", f"{heading}:",
                        "Destination        Type RtRef Next hop           Type Index    NhRef Netif"]
                rows = [_fib_entry(snap, inst, route, out) for route in routes]
                out.append("")
                data.append({"table-name": name, "address-family": heading, "rt-entry": rows})
    if not data and (destination or wanted):
        return error("no matching forwarding table entry") if destination else \
            error(f"forwarding table {wanted} does not exist")
    return Output("".join(line + "\n" for line in out), {"forwarding-table-information": {"route-table": data}})


def _fib_entry(snap: Snapshot, inst: Instance, route: KernelRoute, out: list[str]) -> dict[str, Any]:
    """Print one kernel route as forwarding entries (OUT) and return its `display json` form."""
    default = "default" if ip_network(route.dst).prefixlen == 0 else route.dst
    rtype = "user" if route.proto in ("bird", "static", "boot") else "intf"
    if route.table == rib.LOCAL and route.type == "broadcast":
        rtype = "dest"
    nh_type = _NH_TYPE.get(route.type, "ucst")
    hops = route.nexthops
    if route.type == "unicast" and len(hops) == 1 and hops[0].gateway is None:
        nh_type = "rslv"
    if route.type == "unicast" and len(hops) > 1:
        out += _fib_line(default, rtype, "-", "", "ulst", None)
        for hop in hops:
            out += _fib_line("", "", "", hop.gateway or "", "ucst", junos_logical(snap, inst.name, hop.ifname, inst))
        return {"rt-destination": default, "rt-entry-type": rtype, "nh-type": "ulst",
                "nh": [{"to": h.gateway, "via": junos_logical(snap, inst.name, h.ifname, inst)} for h in hops]}
    first: NextHop | None = hops[0] if hops else None
    gateway = (first.gateway if first else None) or (route.dst.split("/")[0] if nh_type == "locl" else "")
    netif = "" if nh_type in ("locl", "dscd", "rjct") or first is None else \
        junos_logical(snap, inst.name, first.ifname, inst)
    lines = _fib_line(default, rtype, "-", gateway, nh_type, netif)
    out += lines[:-1] + [lines[-1].rstrip()]
    return {"rt-destination": default, "rt-entry-type": rtype, "nh-type": nh_type,
            "nh": [{"to": gateway or None, "via": netif or None}]}
