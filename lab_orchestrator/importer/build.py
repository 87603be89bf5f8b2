"""From the facts of every configuration to one topology of the lab's schema.

Links come from subnets: two or more interfaces of different files in one IPv4 subnet are a link
(a LAN from three). Kinds come from what each configuration holds: an SRX has `security` or MNHA, an
MX has TLB or consistent hashing or routing instances toward SRXs, any other Junos device is a
gateway whose BGP-speaking routing instances become the lab's routers, an IOS configuration is an
ios-router. What the configurations imply but do not contain (client and server hosts, the router
northbound of a FlexVPN cluster) is added and said so in the report."""

from __future__ import annotations

import re
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

from . import bgp as bgpmod
from . import implied, usecase
from . import junos as junosmod
from .devices import GATEWAY, MX, ROUTER, SRX, Device, End, Result, instance_node
from .parse import Statement

PLATFORM = re.compile(r"[-_](mx|srx|vsrx|ptx|qfx|ex|acx|csr|isr|asr|c)\d*[a-z]*$")


def node_name(file: str, configured: str | None) -> str:
    base = configured or Path(file).stem
    base = base.lower()
    if not configured:
        base = PLATFORM.sub("", base) or base
    base = re.sub(r"[^a-z0-9-]+", "-", base).strip("-")
    if not base or not base[0].isalpha():
        base = "n" + base
    return base


def build(devices: list[Device], lab_name: str, client_lan: IPv4Network | None = None) -> Result:
    result = Result({}, devices)
    taken: set[str] = set()
    for d in devices:
        configured = (d.junos.host_name if d.junos else d.ios.hostname if d.ios else None)
        name = node_name(d.file, configured)
        while name in taken:
            name += "-2"
        taken.add(name)
        d.name = name
        if d.junos is not None:
            j = d.junos
            d.kind = SRX if (j.security or j.mnha) else MX if (j.tlb or j.chash) else ""
        else:
            d.kind = ROUTER
    ends = _ends(devices)
    # a Junos device without security, TLB or CHASH: an MX if its instances reach SRXs, else a gateway
    by_net = _by_net(ends)
    for d in devices:
        if d.kind == "":
            reaches_srx = any(o.device.kind == SRX for e in ends if e.device is d
                              for o in by_net.get(e.address.network, []) if o.device is not d)
            d.kind = MX if reaches_srx else GATEWAY
    ends = _ends(devices)  # gateways: one node per routing instance
    by_net = _by_net(ends)
    _zones(devices, ends, by_net)
    topo: dict[str, Any] = {"name": lab_name, "description": "imported from " + ", ".join(
        Path(d.file).name for d in devices)}
    nodes: dict[str, dict[str, Any]] = {}
    links: list[dict[str, Any]] = []
    mx = [d for d in devices if d.kind == MX]
    srx = [d for d in devices if d.kind == SRX]
    # ---- nodes
    for d in devices:
        if d.kind in (MX, SRX):
            nodes[d.name] = {"kind": d.kind}
        elif d.kind == GATEWAY:
            for node in sorted({e.node for e in ends if e.device is d}):
                nodes[node] = {"kind": ROUTER}
        else:
            nodes[d.name] = {"kind": ROUTER}
    # ---- links
    icl_pairs: list[tuple[End, End]] = []
    for net, group in by_net.items():
        devs = {id(e.device) for e in group}
        if len(devs) < 2 or net.prefixlen == 32:
            continue
        mx_icl = [e for e in group if e.device.kind == MX and e.zone == "icl"]
        routed = len(group) == 2 and len(mx_icl) == 1 and any(e.device.kind == SRX and e.zone == "icl"
                                                              for e in group)
        if mx_icl and not routed:  # an ICL subnet the model cannot route (a LAN, two MXs): the direct link
            for e in group:
                e.stmt.mark("approximated", "ICL routed through the MX: the lab links the two SRXs of the pair "
                                            "directly (zone icl)")
            continue
        zone = next((e.zone for e in group if e.zone), None)
        ordered = sorted(group, key=lambda e: (e.device.kind != ROUTER or e.zone != "trust", e.address.ip))
        ordered = sorted(group, key=lambda e: e.address.ip)
        link: dict[str, Any] = {"endpoints": [f"{e.node}:{e.iface}" for e in ordered],
                                "addresses": [str(e.address) for e in ordered]}
        if zone and any(e.device.kind in (MX, SRX) for e in group):
            link["zone"] = zone
        if len(group) == 2 and all(e.device.kind == SRX for e in group):
            link["zone"] = "icl"
            icl_pairs.append((group[0], group[1]))
        links.append(link)
        for e in group:
            e.stmt.mark("emulated", f"address of link {' - '.join(link['endpoints'])}"
                                    + (f" (zone {link['zone']})" if link.get("zone") else "")
                                    + (f": the ICL routed through {mx_icl[0].node}'s MNHA-VR" if routed else ""))
    for d in devices:
        for s in d.statements:
            if d.kind == GATEWAY and ("instance-type" in s.tags or "instance-interface" in s.tags):
                inst = s.path[1] if s.path[:1] == ("routing-instances",) else junosmod.MASTER
                s.mark("approximated", f"routing instance {inst}: a router node of its own ({instance_node(d, inst)})")
            elif s.path[:4] == ("interfaces", "lo0", "unit", "0") and s.path[4:6] == ("family", "inet"):
                s.mark("approximated", "loopback address: the lab allocates loopbacks from addressing.loopback")
            elif d.kind == MX and s.path[:2] == ("interfaces", "lo0") and s.path[4:6] == ("family", "inet"):
                s.mark("approximated", "health-check source address: the lab's MX probes from its own addresses")
    # ---- BGP
    bgpmod.sessions(devices, ends, by_net, nodes, result)
    # ---- MNHA
    mnha = _mnha(srx, ends, links, result)
    # ---- services
    services: dict[str, Any] = {}
    if mx:
        m = mx[0].junos
        assert m is not None
        if m.tlb:
            services["load_balancing"] = "tlb"
            checks = []
            for name in m.tlb_profiles:
                p = m.probes.get(name)
                if p is None:
                    continue
                check: dict[str, Any] = {"type": p.type}
                if p.port:
                    check["port"] = p.port
                if p.interval_s:
                    check["interval_ms"] = p.interval_s * 1000
                if p.failures:
                    check["failures"] = p.failures
                if p.recoveries:
                    check["recoveries"] = p.recoveries
                checks.append(check)
            if checks:
                services["health_checks"] = checks
        elif m.chash:
            services["load_balancing"] = "ecmp-chash"
        else:
            services["load_balancing"] = "ecmp"
    # ---- hosts the configurations imply
    implied.hosts(devices, ends, by_net, nodes, links, result)
    # ---- the SRXs' use case: their NAT rules and policies against the client prefixes
    services.update(usecase.decide(srx, nodes, result))
    if services.get("use_case") in ("cgnat", "mixed"):
        _nat_pools(srx, mnha, nodes, result, services)
    _default_policy(srx, services)
    implied.flexvpn(devices, ends, by_net, nodes, links, result, client_lan)
    for d in devices:
        if d.ios is not None:
            implied.ios_node(d, nodes[d.name])
    if services:
        topo["services"] = services
    topo["nodes"] = nodes
    topo["links"] = links
    if mnha:
        topo["mnha"] = mnha
    result.topology = topo
    return result


def _ends(devices: list[Device]) -> list[End]:
    out: list[End] = []
    for d in devices:
        if d.junos is not None:
            for a in d.junos.addresses:
                inst = d.junos.instance_of.get(a.iface, junosmod.MASTER)
                if a.iface.startswith(("lo0.", "fxp0", "em0", "re0:mgmt", "me0")):
                    continue
                out.append(End(d, instance_node(d, inst), a.iface, a.address, a.stmt, inst))
        elif d.ios is not None:
            for iface, (addr, stmt) in d.ios.addresses.items():
                if iface.lower().startswith(("loopback", "virtual-template", "tunnel")):
                    continue
                out.append(End(d, d.name, iface, addr, stmt))
    return out


def _by_net(ends: list[End]) -> dict[IPv4Network, list[End]]:
    out: dict[IPv4Network, list[End]] = {}
    for e in ends:
        out.setdefault(e.address.network, []).append(e)
    return out


def _srx_zone(j: junosmod.Junos, iface: str) -> str | None:
    inst = j.instance_of.get(iface, junosmod.MASTER)
    if j.mnha is not None and j.mnha.instance and inst == j.mnha.instance:
        return "icl"
    zone = j.zone_of.get(iface)
    return None if zone is None else j.zone_side(zone)


def _zones(devices: list[Device], ends: list[End], by_net: dict[IPv4Network, list[End]]) -> None:
    for e in ends:
        if e.device.kind == SRX and e.device.junos is not None:
            e.zone = _srx_zone(e.device.junos, e.iface)
    # an MX instance takes the side of the SRX interfaces it reaches
    side: dict[tuple[int, str], str] = {}
    for e in ends:
        if e.device.kind != MX:
            continue
        for o in by_net.get(e.address.network, []):
            if o.device.kind == SRX and o.zone:
                side[(id(e.device), e.instance)] = o.zone
    for e in ends:
        if e.device.kind == MX:
            e.zone = side.get((id(e.device), e.instance))
    for e in ends:
        if e.device.kind in (GATEWAY, ROUTER):
            for o in by_net.get(e.address.network, []):
                if o.device.kind == MX and o.zone in ("trust", "untrust"):
                    e.zone = o.zone


def _mnha(srx: list[Device], ends: list[End], links: list[dict[str, Any]], result: Result) -> list[dict[str, Any]]:
    by_ip = {d.junos.mnha.local_ip: d for d in srx if d.junos and d.junos.mnha and d.junos.mnha.local_ip}
    pairs: list[dict[str, Any]] = []
    seen: set[str] = set()
    for d in srx:
        ha = d.junos.mnha if d.junos else None
        if ha is None or d.name in seen:
            continue
        peer = by_ip.get(ha.peer_ip) if ha.peer_ip else None
        if peer is None:
            for s in ha.stmts:
                s.mark("unsupported", "MNHA peer not among the files")
            continue
        seen |= {d.name, peer.name}
        first, second = sorted([d, peer], key=lambda x: (x.junos.mnha.local_id or 0) if x.junos and x.junos.mnha else 0)
        pair: dict[str, Any] = {"nodes": [first.name, second.name]}
        fha = first.junos.mnha if first.junos else None
        assert fha is not None
        if fha.srg1:
            pair["mode"] = "srg1"
            prio = {x.name: (x.junos.mnha.srg1_priority or 0) for x in (first, second) if x.junos and x.junos.mnha}
            pair["srg1_active"] = max(prio, key=lambda n: prio[n])
        if fha.interval_ms:
            pair["heartbeat_ms"] = fha.interval_ms
        if fha.multiplier:
            pair["heartbeat_threshold"] = fha.multiplier
        mon = fha.monitor
        if mon is not None and (mon.interfaces or mon.srg_threshold):
            monitor: dict[str, Any] = {}
            zones = {_srx_zone(first.junos, i) for i in mon.interfaces} if first.junos else set()
            zones.discard(None)
            if zones:
                monitor["zone"] = sorted(z for z in zones if z)[0]
            for key, value in (("weight", mon.weight), ("threshold", mon.threshold),
                               ("object_threshold", mon.object_threshold), ("srg_threshold", mon.srg_threshold)):
                if value:
                    monitor[key] = value
            pair["monitor"] = monitor
        elif mon is None:
            pair["monitor"] = None
        if fha.signal_route:
            pair["signal_route"] = str(fha.signal_route)
        # lo0.1 shared by both nodes: the TLB real-service of the pair
        lo1 = [a.address.ip for a in (first.junos.addresses if first.junos else []) if a.iface == "lo0.1"]
        lo1b = [a.address.ip for a in (second.junos.addresses if second.junos else []) if a.iface == "lo0.1"]
        if lo1 and lo1 == lo1b:
            pair["pair_address"] = str(lo1[0])
            for x in (first, second):
                for a in x.junos.addresses if x.junos else []:
                    if a.iface == "lo0.1":
                        a.stmt.mark("emulated", "lo0.1 pair address: mnha[].pair_address (the TLB real-service)")
        # ICL: routed through an MX both nodes have an icl link to (its MNHA-VR), as the files have it;
        # else the interfaces of the HA routing instance, linked directly
        routers = sorted(_icl_routers(links, ends, first.name) & _icl_routers(links, ends, second.name))
        if routers:
            result.notes.append(f"ICL {first.name} - {second.name}: routed through {', '.join(routers)} "
                                "(MNHA-VR), as the configurations have it")
        elif not any(set(link["endpoints"]) and all(ep.split(":")[0] in (first.name, second.name)
                                                     for ep in link["endpoints"]) for link in links):
            icl = [next((e.iface for e in ends if e.device is x and e.zone == "icl"), None) for x in (first, second)]
            if all(icl):
                links.append({"endpoints": [f"{first.name}:{icl[0]}", f"{second.name}:{icl[1]}"], "zone": "icl"})
                result.notes.append(f"ICL {first.name}:{icl[0]} - {second.name}:{icl[1]}: a direct link (the "
                                    "configurations route it through the MX)")
        for x in (first, second):
            for s in x.junos.mnha.stmts if x.junos and x.junos.mnha else []:
                tail = s.path[4:] if s.path[2:3] == ("peer-id",) else ()
                if tail[:1] == ("routing-instance",):
                    s.mark(*(("emulated", f"ICL routing instance {tail[1]}: the node's ICL link to "
                                          f"{', '.join(routers)} (zone icl), routed by its MNHA-VR") if routers
                             else ("approximated", f"ICL routing instance {tail[1]}: the lab's ICL is a direct "
                                                   "link between the two SRXs (zone icl)")))
                elif tail[:1] == ("interface",):
                    s.mark(*(("emulated", f"ICL source interface {tail[1]}: heartbeats and session sync go from "
                                          "the node's lo0.0 to its peer's") if routers and tail[1] == "lo0.0"
                             else ("approximated", "ICL source interface: the lab's ICL link carries the heartbeat")))
        pairs.append(pair)
        # prepends (mnha[].prepend: a-b): the first node once, three times with the signal route; the
        # second twice, four times
        for x, lab_counts in ((first, [1, 3]), (second, [2, 4])):
            counts = sorted(set(x.junos.prepend_counts)) if x.junos else []
            for s in x.junos.statements if x.junos else []:
                if "prepend" in s.tags:
                    if counts == lab_counts:
                        s.mark("emulated", f"as-path-prepend: {lab_counts[0]}x, {lab_counts[1]}x with the SRG0 "
                                           "signal route (mnha[].prepend: a-b)")
                    else:
                        s.mark("approximated", f"as-path-prepend x{'/'.join(map(str, counts))}: the lab prepends "
                                               f"{lab_counts[0]}x, {lab_counts[1]}x while the signal route exists "
                                               "(the order of preference is the same)")
    return pairs


def _icl_routers(links: list[dict[str, Any]], ends: list[End], srx: str) -> set[str]:
    """The MX nodes SRX has an ICL link to (its ICL routed through their MNHA-VR)."""
    mx = {e.node for e in ends if e.device.kind == MX}
    out: set[str] = set()
    for link in links:
        names = [ep.split(":")[0] for ep in link["endpoints"]]
        if link.get("zone") == "icl" and len(names) == 2 and srx in names:
            out |= set(names) & mx
    return out


def _default_policy(srx: list[Device], services: dict[str, Any]) -> None:
    """`security policies default-policy`: the lab has one for all its SRXs (services.default_policy),
    permit-all when every SRX says so; an SRX that says nothing has Junos's deny-all."""
    said = {d.name: (d.junos.default_policy if d.junos and d.junos.default_policy else "deny-all") for d in srx}
    chosen = "permit-all" if said and all(p == "permit-all" for p in said.values()) else "deny-all"
    if chosen != "deny-all":
        services["default_policy"] = chosen
    for d in srx:
        for s in d.junos.statements if d.junos else []:
            if "default-policy" not in s.tags:
                continue
            if said[d.name] not in ("permit-all", "deny-all"):
                s.mark("unsupported", f"default policy {said[d.name]}: the lab's are deny-all and permit-all")
            elif said[d.name] == chosen:
                s.mark("emulated", f"default policy: services.default_policy {chosen}")
            else:
                s.mark("approximated", f"default policy: the lab has one for all its SRXs, {chosen} "
                                       "(some SRX has no permit-all)")


def _one_translator(services: dict[str, Any], pair: dict[str, Any]) -> bool:
    """The lab's rule (model.usecase.one_translator) on the imported services and pair."""
    from pydantic import ValidationError

    from ..model.schema import MnhaPair, Services
    from ..model.usecase import one_translator

    try:
        return one_translator(Services.model_validate(services), MnhaPair.model_validate(pair))
    except ValidationError:
        return False


def _nat_pools(srx: list[Device], mnha: list[dict[str, Any]], nodes: dict[str, dict[str, Any]],
               result: Result, services: dict[str, Any]) -> None:
    """Each SRX's source NAT pool (nodes.NAME.nat_pool). A pool both nodes of an MNHA pair configure
    (the JVD's srx_nat_pool1 on srx1a and srx1b) is the pair's where one node translates at a time (the
    lab's default services.nat_pool_scope); where both translate at once, the lab gives each node half."""
    pool_of: dict[str, IPv4Network] = {}
    stmt_of: dict[str, list[Statement]] = {}
    for d in srx:
        j = d.junos
        if j is None:
            continue
        for name in j.nat_rule_pools:
            nets = j.nat_pools.get(name)
            if nets:
                pool_of[d.name] = nets[0]
                stmt_of[d.name] = [s for s in j.statements if "nat-pool" in s.tags and s.path[4] == name]
                break
    done: set[str] = set()
    for pair in mnha:
        a, b = pair["nodes"]
        if a in pool_of and pool_of.get(b) == pool_of[a] and _one_translator(services, pair):
            for name in (a, b):
                nodes[name]["nat_pool"] = str(pool_of[a])
                for s in stmt_of[name]:
                    s.mark("emulated", f"source NAT pool: nodes.{name}.nat_pool, the pool {a} and {b} share "
                                       "(one of them translates at a time)")
                done.add(name)
        elif a in pool_of and pool_of.get(b) == pool_of[a] and pool_of[a].prefixlen < 32:
            low, high = pool_of[a].subnets(prefixlen_diff=1)
            for name, half in ((a, low), (b, high)):
                nodes[name]["nat_pool"] = str(half)
                for s in stmt_of[name]:
                    s.mark("approximated", f"pool {pool_of[a]} shared by the pair, whose nodes both translate at "
                                           f"once here: the lab gives each SRX its own half ({name}: {half}) so "
                                           "no address and port is given twice; the peer announces it as a "
                                           "backup path")
                done.add(name)
    for name, net in pool_of.items():
        if name not in done:
            nodes[name]["nat_pool"] = str(net)
            for s in stmt_of[name]:
                s.mark("emulated", f"source NAT pool: nodes.{name}.nat_pool")
    del result
