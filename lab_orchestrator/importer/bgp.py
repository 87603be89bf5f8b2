"""BGP of the imported lab: every session of the files that runs on a link of the lab, the AS of each
node (an MX: one per side and one for its ICL sessions; an SRX: one for all its sessions), and the
report's status of each BGP statement."""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Any

from . import junos as junosmod
from .devices import GATEWAY, MX, SRX, Device, End, Result, instance_node


def _int_or_none(text: str) -> int | None:
    return int(text) if text.isdigit() else None


def sessions(devices: list[Device], ends: list[End], by_net: dict[IPv4Network, list[End]],
             nodes: dict[str, dict[str, Any]], result: Result) -> None:
    owner = {e.address.ip: e for e in ends}
    # every session of the files on a link of the lab: (device, peer, node, AS field, local AS, peer AS, peer end)
    sessions: list[tuple[Device, junosmod.BgpPeer, str, str, int, int | None, End]] = []
    for d in devices:
        j = d.junos
        if j is None:
            continue
        for peer in j.bgp:
            node = instance_node(d, peer.instance)
            la = peer.local_as or junosmod.group_setting(j, peer, "local-as") or j.instance_as.get(peer.instance)
            pa = peer.peer_as or junosmod.group_setting(j, peer, "peer-as")
            there = owner.get(peer.neighbor)
            here = next((e for e in ends if e.device is d and peer.neighbor in e.address.network), None)
            # a session over the ICL is on a link when that link is routed, SRX to MX (not SRX to SRX)
            routed_icl = here is not None and there is not None and here.zone == there.zone == "icl" \
                and {d.kind, there.device.kind} == {MX, SRX}
            on_link = there is not None and here is not None and (
                routed_icl or (here.zone != "icl" and there.zone != "icl"))
            if on_link and la and here is not None and there is not None:
                key = f"{here.zone}_as" if d.kind == MX else "as"
                sessions.append((d, peer, node, key, la, pa, there))
            else:
                icl = (here is not None and here.zone == "icl") or (there is not None and there.zone == "icl")
                why = ("the lab's ICL is a direct SRX link (the peer's loopback is reached without BGP)" if icl
                       else "no file has the neighbor's address")
                status = "approximated" if "ICL" in why else "unsupported"
                for s in peer.stmts:
                    s.mark(status, f"BGP neighbor {peer.neighbor}: {why}")
    # One AS per node and field. An SRX has one AS for all its sessions (the model's bgp.as): with its ICL
    # routed, its MNHA-VR's (the JVD: 65001 on node A, 65002 on node B), since the MX passes each node's
    # lo0.0 to its peer and a peer in the same AS would refuse it (AS-path loop); the JVD's SRXs share
    # one AS (65000) toward the MX's TRUST_VR and UNTRUST_VR.
    lab_as: dict[tuple[str, str], int] = {}
    for d, _, node, key, la, _, there in sessions:
        if d.kind == SRX and there.zone == "icl":
            lab_as[(node, key)] = la
    for _, _, node, key, la, _, _ in sessions:
        lab_as.setdefault((node, key), la)
    for (node, key), asn in lab_as.items():
        if node in nodes:
            nodes[node].setdefault("bgp", {})[key] = asn

    def peer_lab_as(there: End) -> int | None:
        key = f"{there.zone}_as" if there.device.kind == MX else "as"
        return lab_as.get((there.node, key))

    for _, peer, node, key, la, pa, there in sessions:
        mine, theirs = lab_as[(node, key)], peer_lab_as(there)
        session = f"eBGP session {node} (AS {mine}) - {there.node} (AS {theirs})"
        if there.zone == "icl":
            session += " over the ICL: the SRX announces its lo0.0, the MX's MNHA-VR passes it on"
        differ = [f"the file's {what} {asn}" for what, asn, lab in (("local AS", la, mine), ("peer AS", pa, theirs))
                  if asn and lab and asn != lab]
        for s in peer.stmts:
            if differ:
                s.mark("approximated", f"{session}; {', '.join(differ)}: an SRX has one AS in the lab, its "
                                       "MNHA-VR's when the ICL is routed through the MX")
            else:
                s.mark("emulated", session)
    by_peer = {id(peer): (node, key, there) for _, peer, node, key, _, _, there in sessions}
    for d in devices:
        j = d.junos
        if j is None:
            continue
        for s in j.statements:
            tag = next((t for t in s.tags if t.startswith("bgp:")), None)
            if tag is None or s.status:
                continue
            inst = tag.split(":")[1]
            rest = s.path[s.path.index("group") + 2:]
            node = instance_node(d, inst)
            group_peers = [p for p in j.bgp if f"bgp:{p.instance}:{p.group}" == tag]
            on_lab = [by_peer[id(p)] for p in group_peers if id(p) in by_peer]
            emulated_group = bool(on_lab)
            v6_only = not group_peers and any(tag in x.tags and "bgp6" in x.tags for x in j.statements)
            icl_group = any(p.stmts and "ICL" in p.stmts[0].note for p in group_peers)
            over_icl = any(there.zone == "icl" for _, _, there in on_lab)
            value = _int_or_none(rest[1]) if len(rest) >= 2 else None
            if v6_only:
                s.mark("ignored", "setting of an IPv6 BGP group: the lab is IPv4-only")
            elif icl_group and not emulated_group:
                s.mark("approximated", "BGP over the ICL (reachability of the peer's loopback): the lab's ICL is "
                                       "a direct link, no BGP needed")
            elif not emulated_group:
                s.mark("unsupported", "setting of a BGP group the lab does not run")
            elif rest[:1] in (("peer-as",), ("local-as",)):
                found = [lab_as.get((node_, key_)) for node_, key_, _ in on_lab] if rest[0] == "local-as" \
                    else [peer_lab_as(there) for _, _, there in on_lab]
                labs = sorted({asn for asn in found if asn is not None})
                if labs == [value]:
                    s.mark("emulated", f"{rest[0]}: the eBGP session of {node}")
                else:
                    s.mark("approximated", f"{rest[0]} {value}: the lab's is {'/'.join(map(str, labs))} (an SRX "
                                           "has one AS in the lab, its MNHA-VR's when the ICL is routed through "
                                           "the MX)")
            elif rest[:1] == ("type",):
                s.mark("emulated", f"{rest[0]}: the eBGP session of {node}")
            elif rest[:1] == ("multipath",):
                s.mark("emulated", "multipath: the lab's BGP installs every equal path")
            elif rest[:1] == ("export",) and over_icl:
                s.mark("approximated", "export policy over the ICL: each SRX announces its lo0.0 and the MX's "
                                       "MNHA-VR passes every SRX's on, next hop itself")
            elif rest[:1] == ("export",):
                s.mark("approximated", "export policy: the lab's templates announce the equivalent routes "
                                       "(host prefixes, pair addresses, NAT pools, defaults)")
            elif rest[:1] == ("bfd-liveness-detection",):
                s.mark("approximated", "BFD on BGP sessions: services.bfd runs it; off in an imported lab (BIRD "
                                       "has no nonstop routing: a routing restart would drop the peers' sessions)")
            else:
                s.mark("unsupported", "BGP group setting not modelled")
    for d in devices:
        j = d.junos
        if j is None:
            continue
        # gateway: a default route discarded and exported = default_originate
        if d.kind == GATEWAY:
            for s in j.statements:
                if "static" in s.tags and "0.0.0.0/0" in s.path and "discard" in s.path:
                    inst = s.path[1] if s.path[0] == "routing-instances" else junosmod.MASTER
                    node = instance_node(d, inst)
                    if node in nodes and "bgp" in nodes[node]:
                        nodes[node]["bgp"]["default_originate"] = True
                        s.mark("emulated", "default route (discard) announced: bgp.default_originate")
    for d in devices:
        if d.ios is not None and d.ios.bgp_as:
            nodes[d.name]["bgp"] = {"as": d.ios.bgp_as}
            if d.ios.bgp_networks:
                nodes[d.name]["bgp"]["announce"] = [str(n) for n in d.ios.bgp_networks]
    del by_net, result
