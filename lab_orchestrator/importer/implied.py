"""Hosts and routers the configurations imply but do not contain, and the IOS node fields."""

from __future__ import annotations

import re
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from typing import Any

from . import usecase
from .devices import GATEWAY, HOST, MX, ROUTER, Added, Device, End, Result, zone_of_node
from .parse import Statement


def hosts(devices: list[Device], ends: list[End], by_net: dict[IPv4Network, list[End]],
          nodes: dict[str, dict[str, Any]], links: list[dict[str, Any]], result: Result) -> None:
    """Client and server hosts: a gateway's static routes into a subnet no other file has put a host
    there; prefixes an MX originates toward its untrust-side gateway are a server's, unless a trust-side
    gateway routes them to its client too and an SRX policy permits them as sources (the route back to
    untranslated clients); a server with no prefix of the files answers for a documentation prefix."""
    gateways = [d for d in devices if d.kind == GATEWAY and d.junos is not None]
    originated: list[tuple[IPv4Network, Statement]] = []
    for d in devices:
        if d.kind != MX or d.junos is None:
            continue
        for s in d.junos.statements:
            if "static" in s.tags and s.path[0] == "routing-instances" and "discard" in s.path:
                inst = s.path[1]
                side = next((e.zone for e in ends if e.device is d and e.instance == inst and e.zone), None)
                net = net_in(s.path)
                if side == "untrust" and net is not None and net.prefixlen > 0:
                    originated.append((net, s))
                elif net is not None:
                    s.mark("approximated", "a discard route of the MX: the lab's MX routes what BGP brings")
    routes: dict[tuple[str, IPv4Network], list[tuple[IPv4Network, Statement]]] = {}
    for d in gateways:
        j = d.junos
        assert j is not None
        for s in j.statements:
            if "static" not in s.tags or "next-hop" not in s.path:
                continue
            net = net_in(s.path)
            try:
                hop = IPv4Address(s.path[s.path.index("next-hop") + 1])
            except (ValueError, IndexError):
                s.mark("ignored", "IPv6 route: the lab is IPv4-only")
                continue
            stub = next((e for e in ends if e.device is d and hop in e.address.network
                         and len(by_net[e.address.network]) == 1), None)
            if stub is None or net is None:
                continue
            routes.setdefault((stub.node, stub.address.network), []).append((net, s))
    to_clients = {n for (node, _), nets in routes.items() if (zone_of_node(ends, node) or "trust") == "trust"
                  for n, _ in nets}
    permitted = usecase.permitted_sources(devices)
    server_prefixes: list[IPv4Network] = []
    for net, s in originated:
        policy = next((n for n in permitted if net.subnet_of(n.net)), None)
        if net in to_clients and policy is not None:
            s.mark("approximated", f"{net} originated toward the untrust gateway: the route back to a client prefix "
                                   f"the SRXs pass untranslated ({policy.stmt.where}: policy "
                                   f"{policy.policy.name if policy.policy else ''}); the lab announces it on the "
                                   "untrust side")
            result.notes.append(f"{net}: a client prefix, not a server's: {s.where} originates it toward the untrust "
                                f"gateway, a trust-side gateway routes it to the client, and {policy.where()} "
                                "permits it as a source")
        else:
            server_prefixes.append(net)
            s.mark("approximated", f"{net} originated toward the untrust gateway: served by an added "
                                   "server host behind that gateway")
    for (node, subnet), nets in routes.items():
        side = zone_of_node(ends, node) or "trust"
        prefixes = [n for n, _ in nets if n not in server_prefixes]
        if not prefixes:
            continue
        role = "client" if side == "trust" else "server"
        host = role if role not in nodes else f"{role}-{node}"
        stub = next(e for e in ends if e.node == node and e.address.network == subnet)
        hop = IPv4Address(nets[0][1].path[nets[0][1].path.index("next-hop") + 1])
        nodes[host] = {"kind": HOST, "prefixes": [str(p) for p in prefixes],
                       "source": [f"added: {node}'s static routes send {', '.join(map(str, prefixes))} to {hop}"]}
        if role == "client":
            result.clients.append(host)
        links.append({"endpoints": [f"{host}:eth1", f"{node}:{stub.iface}"],
                      "addresses": [f"{hop}/{subnet.prefixlen}", str(stub.address)]})
        stub.stmt.mark("emulated", f"address of the link to the added host {host}")
        result.added.append(Added(f"host {host} ({', '.join(map(str, prefixes))}) on {subnet} behind {node}",
                                  f"{node}'s static routes send these prefixes to {hop}, which no file has"))
        for n, s in nets:
            if n in prefixes:
                s.mark("emulated", f"route to the added host {host}: nodes.{host}.prefixes")
            else:
                s.mark("approximated", f"{n}: a server prefix (the MX originates it toward the untrust "
                                       "gateway): the lab serves it from the added server host instead")
    has_server = any(n.get("kind") == HOST and name not in result.clients for name, n in nodes.items())
    if server_prefixes or (result.clients and not has_server):
        gw = next((e for e in ends if e.device.kind == GATEWAY and e.zone == "untrust"), None)
        if gw is not None:
            if server_prefixes:
                prefixes, why = server_prefixes, "the MX originates these prefixes toward the untrust gateway"
            else:
                prefixes = [_free_prefix(devices, ends, nodes)]
                why = ("no file routes a prefix to a server: the lab's server behind the untrust gateway answers "
                       "for a documentation prefix")
            stubs = [e for e in ends if e.node == gw.node and len(by_net[e.address.network]) == 1]
            host = "server" if "server" not in nodes else f"server-{gw.node}"
            nodes[host] = {"kind": HOST, "prefixes": [str(p) for p in prefixes], "source": [f"added: {why}"]}
            if stubs:
                stub = stubs[0]
                peer = next(h for h in stub.address.network.hosts() if h != stub.address.ip)
                links.append({"endpoints": [f"{gw.node}:{stub.iface}", f"{host}:eth1"],
                              "addresses": [str(stub.address), f"{peer}/{stub.address.network.prefixlen}"]})
                stub.stmt.mark("emulated", f"address of the link to the added host {host}")
            else:
                links.append({"endpoints": [f"{gw.node}:eth9", f"{host}:eth1"]})
            result.added.append(Added(f"host {host} ({', '.join(map(str, prefixes))}) behind {gw.node}", why))


# the documentation prefixes (RFC 5737), for a server no file gives a prefix
DOCUMENTATION = [IPv4Network("203.0.113.0/24"), IPv4Network("198.51.100.0/24"), IPv4Network("192.0.2.0/24")]


def _free_prefix(devices: list[Device], ends: list[End], nodes: dict[str, dict[str, Any]]) -> IPv4Network:
    """The first documentation prefix no address, host prefix or NAT pool of the files overlaps."""
    taken = [e.address.network for e in ends] + [IPv4Network(p) for n in nodes.values() for p in n.get("prefixes", [])]
    taken += [net for d in devices if d.junos is not None for nets in d.junos.nat_pools.values() for net in nets]
    return next((p for p in DOCUMENTATION if not any(p.overlaps(t) for t in taken)), DOCUMENTATION[0])


def net_in(path: tuple[str, ...]) -> IPv4Network | None:
    for w in path:
        if "/" in w:
            try:
                return IPv4Network(w, strict=False)
            except ValueError:
                return None
    return None


def ios_node(d: Device, node: dict[str, Any]) -> None:
    i = d.ios
    assert i is not None
    for iface, sb in i.standby.items():
        if "ip" in sb:
            node.setdefault("interfaces", {}).setdefault(iface, {})["standby"] = {
                k: v for k, v in sb.items() if v is not None}
    if i.cluster is not None:
        cluster = {k: v for k, v in i.cluster.items() if v is not None}
        if i.cluster_shutdown:
            cluster["shutdown"] = True
        node["ikev2_cluster"] = cluster
    if i.redirect or i.pools:
        ikev2: dict[str, Any] = {"redirect": i.redirect or "none"}
        pool = i.pools.get(i.auth_pool or "") or (next(iter(i.pools.values())) if i.pools else None)
        if pool is not None:
            ikev2["pool"] = str(pool)
        node["ikev2"] = ikev2
    for net, via, s in i.routes:
        try:
            hop = IPv4Address(via)
        except ValueError:
            if via.lower().startswith("tunnel") and i.client is not None:
                routes = i.client.setdefault("routes", [])
                assert isinstance(routes, list)
                routes.append(str(net))
                s.mark("emulated", "route through the tunnel: flexvpn_client.routes")
            else:
                s.mark("unsupported", "route to an interface: the lab's static routes need a next hop")
            continue
        node.setdefault("routes", []).append({"prefix": str(net), "via": str(hop)})
        s.mark("emulated", "static route: routes[]")
    if i.client is not None and i.client.get("peers"):
        c = dict(i.client)
        tunnel = str(c.pop("tunnel_if", "Tunnel1"))
        src = i.tunnel_source.get(tunnel) or next(iter(i.addresses), "Ethernet0/0")
        out: dict[str, Any] = {"peers": c.pop("peers"), "source": src}
        digits = re.sub(r"\D", "", tunnel)
        if digits:
            out["tunnel"] = int(digits)
        for key in ("name", "routes", "max_redirects", "dpd_interval", "dpd_retry"):
            if c.get(key) is not None:
                out[key] = c[key]
        if out.get("name") == "flex_client":
            out.pop("name")
        node["flexvpn_client"] = out
        for s in d.statements:
            if s.path[:2] == ("interface", tunnel):
                s.mark("emulated", f"client tunnel {tunnel}: flexvpn_client (source, dynamic destination, "
                                   "negotiated address)")


def flexvpn(devices: list[Device], ends: list[End], by_net: dict[IPv4Network, list[End]],
             nodes: dict[str, dict[str, Any]], links: list[dict[str, Any]], result: Result,
             client_lan: IPv4Network | None) -> None:
    """FlexVPN gateways on one segment and nothing northbound of them: add the router that knows the
    members' pools and a LAN of remote-access clients behind it (Cisco's load balancer example)."""
    gws = [d for d in devices if d.ios is not None and d.ios.gateway]
    if not gws:
        return
    seg_ends = [e for e in ends if e.device in gws and any(e.iface in (d.ios.standby if d.ios else {}) for d in gws)]
    if not seg_ends:
        return
    segment = seg_ends[0].address.network
    others = [e for e in by_net.get(segment, []) if e.device not in gws]
    if others:
        return
    wan_ip = segment.broadcast_address - 1
    # the gateways' routes through an address of the segment no file has: that router's LANs
    lans = [net for d in gws for net, via, _ in (d.ios.routes if d.ios else []) if via == str(wan_ip)]
    lan = client_lan or (lans[0] if lans else None)
    if lan is None:
        lan = IPv4Network((int(segment.network_address) + 10 * 256, 24))
    wan: dict[str, Any] = {"kind": ROUTER, "routes": [],
                          "source": ["added: the router northbound of the cluster, with a route to each member's pool"]}
    for d in gws:
        i = d.ios
        assert i is not None
        pool = i.pools.get(i.auth_pool or "") or (next(iter(i.pools.values())) if i.pools else None)
        member = next((e for e in seg_ends if e.device is d), None)
        if pool is not None and member is not None:
            wan["routes"].append({"prefix": str(pool), "via": str(member.address.ip)})
        if not any(net == lan for net, _, _ in i.routes):
            nodes[d.name].setdefault("routes", []).append({"prefix": str(lan), "via": str(wan_ip)})
    nodes["wan"] = wan
    seg_link = next((link for link in links if f"{seg_ends[0].node}:{seg_ends[0].iface}" in link["endpoints"]), None)
    if seg_link is None:  # one member: the segment is a link only once the added router is on it
        seg_link = {"endpoints": [f"{e.node}:{e.iface}" for e in seg_ends],
                    "addresses": [str(e.address) for e in seg_ends]}
        links.append(seg_link)
        for e in seg_ends:
            e.stmt.mark("emulated", "address on the segment of the added router wan")
    seg_link["endpoints"].append("wan:Ethernet0/0")
    seg_link["addresses"].append(f"{wan_ip}/{segment.prefixlen}")
    hosts = list(lan.hosts())
    wan_lan_ip = hosts[0]
    # FlexVPN clients of the files (branch routers) on that LAN join it; added hosts fill it up
    branches = [e for e in ends if e.device not in gws and e.address.network == lan]
    lan_link = next((link for link in links if link.get("addresses")
                     and IPv4Interface(link["addresses"][0]).network == lan), None)
    if lan_link is None:
        lan_link = {"endpoints": [f"{e.node}:{e.iface}" for e in branches],
                    "addresses": [str(e.address) for e in branches]}
        links.append(lan_link)
        for e in branches:
            e.stmt.mark("emulated", f"address on the client LAN {lan} behind the added router wan")
    lan_link["endpoints"].insert(0, "wan:Ethernet0/1")
    lan_link["addresses"].insert(0, f"{wan_lan_ip}/{lan.prefixlen}")
    used = {IPv4Interface(a).ip for a in lan_link["addresses"]}
    free = [h for h in hosts[5:] if h not in used]
    added_hosts = [f"client{n}" for n in range(1, 2 if branches else 3)]
    for name, address in zip(added_hosts, free, strict=False):
        nodes[name] = {"kind": HOST, "source": [f"added: a remote-access client on {lan}"]}
        lan_link["endpoints"].append(f"{name}:eth1")
        lan_link["addresses"].append(f"{address}/{lan.prefixlen}")
    result.added.append(Added(f"router wan ({wan_ip} on {segment}, {wan_lan_ip} on {lan}) with a route to each "
                              "member's pool", "the router northbound of the cluster must know the address pools "
                              "(return traffic to the clients); no file has it"))
    result.added.append(Added(f"host(s) {', '.join(added_hosts)} on {lan}", "remote-access clients of the cluster VIP"))
    del by_net
