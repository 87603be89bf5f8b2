"""IOS-like `show ipv6 route`: a dual-stack lab's IPv6 table as IOS prints it (the IPv4 views and the
BGP summaries of both families are in `ios`)."""

from __future__ import annotations

from . import rib
from .common import ios_address, ios_name
from .gather import Snapshot
from .ios import IOS_CODE, IOS_DISTANCE, ROUTE_SOURCES, Args, active_routes, route_data
from .pipes import Output

CODES6 = """Codes: C - Connected, L - Local, S - Static, U - Per-user Static route
       B - BGP, HA - Home Agent, MR - Mobile Router, R - RIP
       H - NHRP, I1 - ISIS L1, I2 - ISIS L2, IA - ISIS interarea
       IS - ISIS summary, D - EIGRP, EX - EIGRP external, NM - NEMO
       ND - ND Default, NDp - ND Prefix, DCE - Destination, NDr - Redirect
       O - OSPF Intra, OI - OSPF Inter, OE1 - OSPF ext 1, OE2 - OSPF ext 2
       ON1 - OSPF NSSA ext 1, ON2 - OSPF NSSA ext 2, la - LISP alt
       lr - LISP site-registrations, ld - LISP dyn-eid, a - Application
"""


def show_ipv6_route(snap: Snapshot, args: Args) -> Output:
    """`show ipv6 route [bgp|static|connected|local]`: the IPv6 table of a dual-stack lab, one entry per
    prefix and a `via` line per next hop, as IOS prints it (the loopback's own address `LC`)."""
    found = active_routes(snap, 6)
    if isinstance(found, Output):
        return found
    inst, entries = found
    wanted = [ROUTE_SOURCES[k] for k in ROUTE_SOURCES if args.get(k)]
    if wanted:
        entries = [e for e in entries if e.protocol in wanted]
    out = [f"IPv6 Routing Table - default - {len(entries)} entries\n", CODES6]
    data = []
    for entry in entries:
        loopback = entry.protocol == "Direct" and any(h.ifname == "lo" for h in entry.hops)
        code = "LC" if loopback else IOS_CODE[entry.protocol]
        distance = IOS_DISTANCE[entry.protocol]
        out.append(f"{code:<4}{ios_address(entry.prefix)} [{distance}/{entry.med or 0}]\n")
        for hop in entry.hops or [rib.Hop(None, None)]:
            name = ios_name(hop.ifname, inst.aliases) if hop.ifname else "Null0"
            if entry.discard or entry.reject:
                out.append(f"{'':5}via Null0, directly connected\n")
            elif loopback or entry.protocol == "Local":
                out.append(f"{'':5}via {name}, receive\n")
            elif hop.gateway:
                out.append(f"{'':5}via {ios_address(hop.gateway)}" + (f", {name}" if hop.ifname else "") + "\n")
            else:
                out.append(f"{'':5}via {name}, directly connected\n")
        data.append(route_data(entry))
    return Output("".join(out), data)
