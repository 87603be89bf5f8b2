"""IOS-like exec commands: pure functions from a Snapshot (and arguments) to an Output."""

from __future__ import annotations

import os
import re
from ipaddress import IPv4Network
from typing import Any

from labkit.contracts import HSRP_STATUS, IKEV2_STATUS
from labkit.flexstatus import GatewayStatus, HsrpPeer, HsrpStatus, parse_ikev2
from labkit.status import parse_status

from . import rib
from .common import bird_version, ios_address, ios_age, ios_name, natural_key
from .gather import Snapshot
from .pipes import Output
from .state import BgpProtocol, Instance

Args = dict[str, Any]
INVALID = "% Invalid input detected at '^' marker.\n"
IOS_DISTANCE = {"BGP": 20, "Static": 1, "Direct": 0, "Local": 0}
IOS_CODE = {"BGP": "B", "Static": "S", "Direct": "C", "Local": "L"}
CODES = """Codes: L - local, C - connected, S - static, R - RIP, M - mobile, B - BGP
       D - EIGRP, EX - EIGRP external, O - OSPF, IA - OSPF inter area
       N1 - OSPF NSSA external type 1, N2 - OSPF NSSA external type 2
       E1 - OSPF external type 1, E2 - OSPF external type 2, m - OMP
       n - NAT, Ni - NAT inside, No - NAT outside, Nd - NAT DIA
       i - IS-IS, su - IS-IS summary, L1 - IS-IS level-1, L2 - IS-IS level-2
       ia - IS-IS inter area, * - candidate default, U - per-user static route
       H - NHRP, G - NHRP registered, g - NHRP registration summary
       o - ODR, P - periodic downloaded static route, l - LISP
       a - application route
       + - replicated route, % - next hop override, p - overrides from PfR
       & - replicated local route overrides by connected
"""


def error(text: str) -> Output:
    return Output(f"% {text}\n", status=1)


def master_instance(snap: Snapshot) -> Instance | None:
    return next((i for i in snap.instances if i.name == ""), None)


# ---------------------------------------------------------------------- version, clock
def show_version(snap: Snapshot, args: Args) -> Output:
    inst = master_instance(snap)
    version = bird_version(inst) if inst else ""
    uptime = _uptime(snap.now - snap.lab_created) if snap.lab_created else "unknown"
    lines = [
        "Cisco IOS XE Software, Version 17.09.01a (emulated)",
        f"Cisco IOS Software, lab_orchestrator emulation in Linux {os.uname().release} "
        f"network namespace {snap.node.master_ns}",
        f"Routing: {version or 'static routes only'}",
        "",
        f"{snap.node.name} uptime is {uptime}",
        f"Lab {snap.lab}: {snap.load_balancing}, {snap.use_case}",
    ]
    return Output("".join(line + "\n" for line in lines),
                  {"hostname": snap.node.name, "version": "17.09.01a (emulated)", "routing": version})


def _uptime(seconds: float) -> str:
    """IOS: "1 week, 2 days, 3 hours, 4 minutes"."""
    total = int(seconds) // 60
    parts: list[str] = []
    for unit, size in (("week", 10080), ("day", 1440), ("hour", 60), ("minute", 1)):
        count, total = divmod(total, size)
        if count or (unit == "minute" and not parts):
            parts.append(f"{count} {unit}{'' if count == 1 else 's'}")
    return ", ".join(parts)


def show_clock(snap: Snapshot, args: Args) -> Output:
    import time

    stamp = time.localtime(snap.now)
    millis = int((snap.now % 1) * 1000)
    return Output(time.strftime(f"*%H:%M:%S.{millis:03d} %Z %a %b %d %Y", stamp) + "\n")


# ---------------------------------------------------------------------- interfaces
def _links(snap: Snapshot) -> list[tuple[str, Any, str | None]]:
    inst = master_instance(snap)
    if inst is None:
        return []
    rows = []
    for link in inst.links:
        addresses = [a for a in inst.addresses if a.ifname == link.name and not a.address.startswith("127.")]
        name = ios_name(link.name, inst.aliases)
        rows.append((name, link, addresses[0].address if addresses else None))
    return sorted(rows, key=lambda r: natural_key(r[0]))


def show_ip_interface_brief(snap: Snapshot, args: Args) -> Output:
    lines = ["Interface              IP-Address      OK? Method Status                Protocol"]
    data = []
    for name, link, address in _links(snap):
        status = "up" if link.admin_up and link.oper_up else "administratively down" if not link.admin_up else "down"
        protocol = "up" if link.oper_up else "down"
        method = "manual" if address else "unset"
        lines.append(f"{name:<23}{address or 'unassigned':<16}{'YES':<4}{method:<7}{status:<22}{protocol}")
        data.append({"interface": name, "ip-address": address, "status": status, "protocol": protocol})
    return Output("".join(line + "\n" for line in lines), data)


# ---------------------------------------------------------------------- routes
def _classful(prefix: IPv4Network) -> int:
    first = int(str(prefix.network_address).split(".")[0])
    return 8 if first < 128 else 16 if first < 192 else 24


def _route_lines(snap: Snapshot, inst: Instance, entry: rib.Entry, shown: str, indent: int) -> list[str]:
    code = IOS_CODE[entry.protocol] + ("*" if entry.prefix == "0.0.0.0/0" else "")
    lead = f"{code:<{indent}}{shown}"
    aliases = inst.aliases
    if entry.discard:
        return [f"{lead} is directly connected, Null0"]
    if entry.protocol in ("Direct", "Local"):
        hop = entry.hops[0] if entry.hops else None
        name = ios_name(hop.ifname, aliases) if hop and hop.ifname else "unknown"
        return [f"{lead} is directly connected, {name}"]
    distance = f"[{IOS_DISTANCE[entry.protocol]}/{entry.med or 0}]"
    age = f", {ios_age(entry.age)}" if entry.protocol == "BGP" else ""
    lines = []
    for i, hop in enumerate(entry.hops or [rib.Hop(None, None)]):
        if hop.gateway:
            target = f"via {hop.gateway}{age}"
            if entry.protocol == "Static" and hop.ifname and not hop.gateway:
                target = f"is directly connected, {ios_name(hop.ifname, aliases)}"
        else:
            target = f"is directly connected, {ios_name(hop.ifname, aliases) if hop.ifname else 'Null0'}"
        if i == 0:
            lines.append(f"{lead} {distance} {target}")
        else:
            lines.append(f"{'':<{len(lead) + 1}}{distance} {target}")
    return lines


ROUTE_SOURCES = {"bgp": "BGP", "static": "Static", "connected": "Direct", "local": "Local"}  # keyword -> protocol


def active_routes(snap: Snapshot, family: int) -> tuple[Instance, list[rib.Entry]] | Output:
    """The node's active routes of one family (`show ip route`, `show ipv6 route`), or the error IOS gives."""
    inst = master_instance(snap)
    if inst is None:
        return error("routing table not available")
    if inst.bird_error:
        return error("BGP is not running (routing process restarting)")
    tables = rib.build(snap.node, inst, snap.now, snap.address_ages, snap.lab_created, family=family)
    return inst, [e for e in (tables[0].entries if tables else []) if e.active]


def show_ip_route(snap: Snapshot, args: Args) -> Output:
    found = active_routes(snap, 4)
    if isinstance(found, Output):
        return found
    inst, entries = found
    address = args.get("address")
    if address:
        return _route_detail(snap, inst, entries, address)
    protocol = ROUTE_SOURCES
    wanted = [protocol[k] for k in protocol if args.get(k)]
    if wanted:
        entries = [e for e in entries if e.protocol in wanted or (e.protocol == "Local" and "Direct" in wanted)]
    default = next((e for e in entries if e.prefix == "0.0.0.0/0"), None)
    out = [CODES, "\n"]
    if default is None:
        out.append("Gateway of last resort is not set\n")
    else:
        gateway = next((h.gateway for h in default.hops if h.gateway), None) or "0.0.0.0"
        out.append(f"Gateway of last resort is {gateway} to network 0.0.0.0\n")
    out.append("\n")
    groups: dict[IPv4Network, list[rib.Entry]] = {}
    top: list[tuple[IPv4Network, rib.Entry | None]] = []
    for entry in entries:  # subnets of a classful network go under its header, as IOS shows them
        net = entry.network
        assert isinstance(net, IPv4Network)  # `show ip route`: the IPv4 table
        length = _classful(net)
        if net.prefixlen >= length:
            groups.setdefault(IPv4Network(f"{net.network_address}/{length}", strict=False), []).append(entry)
        else:
            top.append((net, entry))
    for major, members in groups.items():
        if len(members) == 1 and members[0].network.prefixlen == major.prefixlen:
            top.append((major, members[0]))
        else:
            top.append((major, None))
    top.sort(key=lambda item: (int(item[0].network_address), item[0].prefixlen, item[1] is not None))
    data = []
    for net, item in top:
        if item is not None:
            out += [line + "\n" for line in _route_lines(snap, inst, item, item.prefix, 6)]
            data.append(route_data(item))
            continue
        members = groups[net]
        masks = sorted({e.network.prefixlen for e in members})
        subnets = len({e.prefix for e in members})
        if len(masks) == 1 and masks[0] != net.prefixlen:
            out.append(f"{'':6}{net.network_address}/{masks[0]} is subnetted, {subnets} subnets\n")
        else:
            out.append(f"{'':6}{net} is variably subnetted, {subnets} subnets, {len(masks)} masks\n")
        for member in sorted(members, key=lambda e: rib.sort_key(e.prefix)):
            shown = str(member.network.network_address) if len(masks) == 1 else member.prefix
            out += [line + "\n" for line in _route_lines(snap, inst, member, shown, 9)]
            data.append(route_data(member))
    return Output("".join(out), data)


def route_data(entry: rib.Entry) -> dict[str, Any]:
    return {"prefix": entry.prefix, "protocol": entry.protocol, "distance": IOS_DISTANCE[entry.protocol],
            "next-hops": [{"gateway": h.gateway, "interface": h.ifname} for h in entry.hops],
            "age": ios_age(entry.age) if entry.age is not None else None}


def _route_detail(snap: Snapshot, inst: Instance, entries: list[rib.Entry], address: str) -> Output:
    matches = rib.lookup(entries, address, "exact" if "/" in address else "best")
    if not matches:
        return Output("% Network not in table\n", status=1)
    entry: rib.Entry = matches[0]
    local_as = snap.node.peers[0].local_as if snap.node.peers else 0
    source = {"BGP": f"bgp {local_as}", "Static": "static", "Direct": "connected", "Local": "connected"}
    lines = [f"Routing entry for {entry.prefix}",
             f"  Known via \"{source[entry.protocol]}\", distance {IOS_DISTANCE[entry.protocol]}, "
             f"metric {entry.med or 0}" + (", candidate default path" if entry.prefix == "0.0.0.0/0" else "")]
    if entry.protocol == "BGP":
        if entry.as_path:
            lines.append(f"  Tag {entry.as_path[0]}, type external")
        first = next((h.gateway for h in entry.hops if h.gateway), "")
        lines.append(f"  Last update from {first} {ios_age(entry.age)} ago")
    lines.append("  Routing Descriptor Blocks:")
    for i, hop in enumerate(entry.hops or [rib.Hop(None, None)]):
        star = "*" if i == 0 else " "
        if entry.discard:
            lines.append(f"  {star} directly connected, via Null0")
        elif hop.gateway:
            origin = f", from {hop.gateway}, {ios_age(entry.age)} ago" if entry.protocol == "BGP" else ""
            via = f", via {ios_name(hop.ifname, inst.aliases)}" if hop.ifname and entry.protocol != "BGP" else ""
            lines.append(f"  {star} {hop.gateway}{origin}{via}")
        else:
            name = ios_name(hop.ifname, inst.aliases) if hop.ifname else "Null0"
            lines.append(f"  {star} directly connected, via {name}")
        lines.append(f"      Route metric is {entry.med or 0}, traffic share count is 1")
        if entry.protocol == "BGP":
            lines.append(f"      AS Hops {len(entry.as_path)}")
    return Output("".join(line + "\n" for line in lines), route_data(entry))


# ---------------------------------------------------------------------- BGP
def _state(proto: BgpProtocol | None) -> str:
    if proto is None:
        return "Idle"
    if proto.info.startswith("Established"):
        return "Established"
    return (proto.info.split()[0] if proto.info else "") or "Idle"


def show_ip_bgp_summary(snap: Snapshot, args: Args) -> Output:
    """`show ip bgp summary`: the IPv4 unicast sessions (the IPv6 ones: `show bgp ipv6 unicast summary`)."""
    return _bgp_summary(snap, 4)


def show_bgp_ipv6_unicast_summary(snap: Snapshot, args: Args) -> Output:
    """`show bgp ipv6 unicast summary`: a dual-stack lab's IPv6 sessions, addresses as IOS prints them."""
    return _bgp_summary(snap, 6)


def _bgp_summary(snap: Snapshot, family: int) -> Output:
    inst = master_instance(snap)
    if inst is None or not snap.node.peers:
        return error("BGP not active")
    if inst.bird_error:
        return error("BGP not active (routing process restarting)")
    peers = [p for p in snap.node.peers if (":" in p.peer_address) == (family == 6)]
    if not peers:
        return error("BGP not active" if family == 4 else "No IPv6 Unicast neighbors")
    router_id = snap.node.loopbacks.get("", "")
    local_as = snap.node.peers[0].local_as
    learned = (inst.bird_routes if family == 4 else inst.bird_routes6) or []
    lines = [f"BGP router identifier {router_id}, local AS number {local_as}",
             f"{len({r.prefix for r in learned if r.source == 'BGP'})} network entries "
             "learned by BGP", "",
             "Neighbor        V           AS MsgRcvd MsgSent   TblVer  InQ OutQ Up/Down  State/PfxRcd"]
    data = []
    for peer in sorted(peers, key=lambda p: rib.address_key(p.peer_address)):
        proto = next((p for p in inst.bgp or [] if p.name == peer.protocol), None)
        state = _state(proto)
        updown = ios_age(rib.parse_since(proto.since, snap.now)) if proto and proto.since else "never"
        shown = str(proto.imported) if proto and state == "Established" else state
        address = ios_address(peer.peer_address)
        row = f"4{peer.peer_as:>13}{'-':>8}{'-':>8}{'-':>9}{0:>5}{0:>5} {updown:<8}{shown:>13}"
        if len(address) > 15:  # IOS puts a long (IPv6) neighbor on a line of its own
            lines += [address, f"{'':16}{row}"]
        else:
            lines.append(f"{address:<16}{row}")
        data.append({"neighbor": peer.peer_address, "remote-as": peer.peer_as, "state": state,
                     "up-down": updown, "prefixes-received": proto.imported if proto else 0,
                     "description": peer.peer_node, "address-family": "IPv4 Unicast" if family == 4 else
                     "IPv6 Unicast"})
    return Output("".join(line + "\n" for line in lines), data)


# ---------------------------------------------------------------------- configuration
def _interface_block(text: str, wanted: str) -> str | None:
    match = re.match(r"^([A-Za-z-]+)\s*([0-9][0-9/.:]*)$", wanted)
    if not match:
        return None
    letters, numbers = match.group(1).lower(), match.group(2)
    lines = text.splitlines()
    for i, line in enumerate(lines):
        head = re.match(r"^interface ([A-Za-z-]+)([0-9][0-9/.:]*)$", line)
        if head and head.group(1).lower().startswith(letters) and head.group(2) == numbers:
            block = [line]
            for rest in lines[i + 1:]:
                if not rest.startswith(" "):
                    break
                block.append(rest)
            return "\n".join(block) + "\n"
    return None


def show_running_config(snap: Snapshot, args: Args) -> Output:
    if snap.config_text is None:
        return error("configuration not available")
    interface = args.get("interface")
    if interface:
        block = _interface_block(snap.config_text, interface)
        if block is None:
            return Output(INVALID, status=1)
        body = block + "end\n"
        return Output(f"Building configuration...\n\nCurrent configuration : {len(body)} bytes\n!\n{body}")
    text = snap.config_text
    return Output(f"Building configuration...\n\nCurrent configuration : {len(text)} bytes\n{text}")


# ---------------------------------------------------------------------- features (HSRP, FlexVPN)
# dataplane.daemons.flexvpnd writes nodes/NODE/hsrp-status.json and ikev2-status.json; dataplane.core.hsrp,
# dataplane.core.clb and dataplane.ikev2.gateway turn them into IOS text (the same functions
# `lab_orchestrator.cli_ssh.flexshow` uses).
def _not_there(configured: bool, what: str) -> Output:
    if not configured:
        return error(f"{what} is not configured")
    return error(f"{what} is not running (its daemon has not written its status yet)")


def show_standby(snap: Snapshot, args: Args) -> Output:
    status = parse_status(snap.status.get(HSRP_STATUS), HsrpStatus)
    if status is None or not status.groups:
        return _not_there("hsrp" in snap.node.features, "HSRP")
    from dataplane.core import hsrp

    data = status.to_dict()
    if args.get("brief"):
        lines = ["                     P indicates configured to preempt.",
                 "                     |",
                 "Interface   Grp  Pri P State   Active          Standby         Virtual IP"]
        for g in status.groups:
            lines.append(f"{g.interface[:11]:<12}{g.group:<5}{g.priority:<4}"
                         f"{'P' if g.preempt else ' '} {g.state:<8}{_who(g.active):<16}"
                         f"{_who(g.standby):<16}{g.vip or ''}")
        return Output("".join(line + "\n" for line in lines), data)
    return Output(hsrp.show_standby(status.groups, snap.now), data)


def _who(peer: HsrpPeer | None) -> str:
    return "unknown" if peer is None else peer.address


def show_crypto_ikev2_cluster(snap: Snapshot, args: Args) -> Output:
    status = parse_ikev2(snap.status.get(IKEV2_STATUS))
    configured = snap.node.features.get("ikev2_cluster")
    if not isinstance(status, GatewayStatus):
        if isinstance(configured, dict) and configured.get("shutdown"):
            return Output("Cluster is shutdown\n")
        return _not_there(configured is not None, "IKEv2 cluster")
    from dataplane.core import clb

    cluster = None if status.cluster is None else status.cluster.to_dict()
    return Output(clb.show_cluster(status.cluster, snap.now), cluster)


def show_crypto_ikev2_sa(snap: Snapshot, args: Args) -> Output:
    status = parse_ikev2(snap.status.get(IKEV2_STATUS))
    if status is None:
        return _not_there(bool({"ikev2", "ikev2_cluster", "flexvpn_client"} & set(snap.node.features)), "IKEv2")
    from dataplane.ikev2.showsa import show_sa

    return Output(show_sa(status.sas), [sa.to_dict() for sa in status.sas])


def show_crypto_ipsec_sa(snap: Snapshot, args: Args) -> Output:
    status = parse_ikev2(snap.status.get(IKEV2_STATUS))
    if status is None:
        return _not_there(bool({"ikev2", "flexvpn_client"} & set(snap.node.features)), "IPsec")
    if isinstance(status, GatewayStatus) and status.ike is None:
        return error("IPsec is not running (the gateway's status has no IPsec SAs yet)")
    lines: list[str] = []
    for sa in status.ipsec_sas:
        local, remote = sa.local or "-", sa.remote
        spi_in, spi_out = int(sa.spi_in, 16), int(sa.spi_out, 16)
        encaps, decaps = sa.encaps, sa.decaps
        lines += [f"interface: {sa.interface}",
                  f"    Crypto map tag: {sa.interface}-head-0, local addr {local}", "",
                  "   protected vrf: (none)",
                  *(f"   local  ident (addr/mask/prot/port): ({_ident(n)}/0/0)" for n in sa.local_ident),
                  *(f"   remote ident (addr/mask/prot/port): ({_ident(n)}/0/0)" for n in sa.remote_ident),
                  f"   current_peer {remote} port {sa.port}",
                  "     PERMIT, flags={origin_is_acl,}",
                  f"    #pkts encaps: {encaps}, #pkts encrypt: {encaps}, #pkts digest: {encaps}",
                  f"    #pkts decaps: {decaps}, #pkts decrypt: {decaps}, #pkts verify: {decaps}",
                  f"    #pkts verify failed: {sa.verify_failed}, #pkts replay failed: {sa.replay_failed}",
                  f"    #send errors 0, #recv errors {sa.malformed}", "",
                  f"     local crypto endpt.: {local}, remote crypto endpt.: {remote}",
                  f"     current outbound spi: 0x{spi_out:08X}({spi_out})", "",
                  "     inbound esp sas:",
                  f"      spi: 0x{spi_in:08X}({spi_in})",
                  f"        transform: {sa.transform} ,",
                  "        in use settings ={Tunnel UDP-Encaps, }", "",
                  "     outbound esp sas:",
                  f"      spi: 0x{spi_out:08X}({spi_out})",
                  f"        transform: {sa.transform} ,",
                  "        in use settings ={Tunnel UDP-Encaps, }", ""]
    return Output("".join(line + "\n" for line in lines), [sa.to_dict() for sa in status.ipsec_sas])


def show_crypto_session(snap: Snapshot, args: Args) -> Output:
    """`show crypto session`: a FlexVPN client's tunnel (where it was redirected) or a gateway's sessions."""
    status = parse_ikev2(snap.status.get(IKEV2_STATUS))
    if status is None:
        return _not_there(bool({"ikev2", "flexvpn_client"} & set(snap.node.features)), "IKEv2")
    from dataplane.core import flexclient

    data = status.to_dict()
    return Output(flexclient.show_session(status), data.get("client") or data["sas"])


def show_ip_bgp_neighbors(snap: Snapshot, args: Args) -> Output:
    """`show ip bgp neighbors [ADDRESS]`: BIRD's `show protocols all` in IOS's layout."""
    inst = master_instance(snap)
    if inst is None or not snap.node.peers:
        return error("BGP not active")
    if inst.bird_error:
        return error("BGP not active (routing process restarting)")
    wanted = args.get("address")
    peers = [p for p in sorted(snap.node.peers, key=lambda p: rib.address_key(p.peer_address))
             if not wanted or p.peer_address == wanted]
    if wanted and not peers:
        return error(f"No such neighbor {wanted}")  # IOS: "% No such neighbor or address family"
    lines: list[str] = []
    data = []
    for peer in peers:
        proto = next((p for p in inst.bgp or [] if p.name == peer.protocol), None)
        state = _state(proto)
        fields = proto.fields if proto else {}
        age = rib.parse_since(proto.since, snap.now) if proto and proto.since else None
        hold = fields.get("Hold timer", "").split("/")[-1] or "3"
        keepalive = fields.get("Keepalive timer", "").split("/")[-1] or "1"
        lines += [f"BGP neighbor is {peer.peer_address},  remote AS {peer.peer_as}, external link",
                  f" Description: {peer.peer_node}",
                  f"  BGP version 4, remote router ID {fields.get('Neighbor ID', '0.0.0.0')}",
                  f"  BGP state = {state}" + (f", up for {ios_age(age)}" if state == "Established" else ""),
                  f"  Hold time is {hold}, keepalive interval is {keepalive} seconds"]
        if state == "Established" and proto is not None:
            lines += ["  Neighbor capabilities:",
                      "    Route refresh: advertised and received(new)" if "Route refresh" in fields
                      else "    Route refresh: advertised",
                      "    Graceful Restart Capability: advertised and received" if "Restart time" in fields
                      else "    Graceful Restart Capability: advertised",
                      "    Address family IPv4 Unicast: advertised and received", "",
                      " For address family: IPv4 Unicast",
                      f"  Session: {peer.peer_address}",
                      "                                 Sent       Rcvd",
                      "  Prefix activity:               ----       ----",
                      f"    Prefixes Current:           {proto.exported:>4}       {proto.imported:>4} "
                      f"({proto.preferred} best)",
                      f"    Prefixes Total:             {proto.export_accepted:>4}       {proto.import_received:>4}"]
        else:
            lines.append(f"  Last reset: {fields.get('Last error', 'never')}")
        lines += ["", f"Local host: {peer.local_address}, Local port: -",  # BIRD does not say which side connected
                  f"Foreign host: {peer.peer_address}, Foreign port: -", ""]
        data.append({"neighbor": peer.peer_address, "remote-as": peer.peer_as, "local-address": peer.local_address,
                     "local-as": peer.local_as, "state": state, "router-id": fields.get("Neighbor ID"),
                     "hold-time": hold, "keepalive": keepalive, "description": peer.peer_node,
                     "prefixes-received": proto.imported if proto else 0,
                     "prefixes-sent": proto.exported if proto else 0})
    return Output("".join(line + "\n" for line in lines), data)


def _ident(network: str) -> str:
    """`172.16.2.1/32` as IOS writes an ident: `172.16.2.1/255.255.255.255`."""
    from ipaddress import IPv4Network

    net = IPv4Network(network)
    return f"{net.network_address}/{net.netmask}"
