"""Junos-like SRX security commands: flow sessions, policies, zones, source NAT (from conntrack and the nft
ruleset).
"""

from __future__ import annotations

from ipaddress import IPv4Network
from typing import Any

from ...kinds.srx import NFT_TABLE
from .. import junosconf
from ..common import (
    Egress,
    junos_logical,
    junos_sort_key,
    local_addresses,
)
from ..gather import Snapshot
from ..pipes import Output
from ..state import FlowSession, Instance
from .base import NAT_POOL, NAT_RULE, NAT_RULE_SET, Args, error


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
    port_zones = _port_zones(snap)  # once per command: sessions may be many
    for session in sessions:
        in_dev = None if session.source in own else route(session.source)
        out_dev = None if session.reply_source in own else route(session.reply_source)
        in_if = ".local..0" if session.source in own else junos_logical(snap, "", in_dev, inst)
        out_if = ".local..0" if session.reply_source in own else junos_logical(snap, "", out_dev, inst)
        in_zone, out_zone = port_zones.get(in_dev or ""), port_zones.get(out_dev or "")
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
    """(policies from the forward chain's `policy FROM->TO NAME` rules, the default-policy rule)."""
    policies, default = [], None
    for rule in _rules(snap, "inet", NFT_TABLE, "forward"):
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
    if not any(r.get("table", {}).get("name") == NFT_TABLE for r in snap.ruleset or [] if "table" in r):
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
            action = "Permit" if default["name"] == "permit-all" else "Deny"
            lines.append(f" {'':<8}{'any':<17}{'any':<18}{'default-policy':<22}{default['packets']:<14}{action}")
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


def _configured_zones(snap: Snapshot) -> dict[str, list[str]] | None:
    """The zones and their interfaces as the node's configuration binds them (None: no readable one)."""
    if not snap.config_text:
        return None
    try:
        block = junosconf.subtree(junosconf.parse(snap.config_text), ["security", "zones"])
    except junosconf.ConfigError:
        return None
    if not block:
        return None
    zones: dict[str, list[str]] = {}
    for zone in block:
        if zone.words[:1] != ["security-zone"] or len(zone.words) != 2 or zone.children is None:
            continue
        bound = next((s for s in zone.children if s.words == ["interfaces"]), None)
        zones[zone.words[1]] = [s.words[0] for s in (bound.children or [])] if bound else []
    return zones


def _planned_zones(snap: Snapshot) -> dict[str, list[str]]:
    """The zones as the plan binds the node's ports (a node without a readable configuration)."""
    zones: dict[str, list[str]] = {}
    for port in snap.node.ports:
        if port.zone:
            zones.setdefault(port.zone, []).append(f"{port.alias}.0")
    return zones


def _port_zones(snap: Snapshot) -> dict[str, str]:
    """Each port's zone (by its Linux name), as `show security zones` lists it."""
    bound = {member: zone for zone, members in (_configured_zones(snap) or {}).items() for member in members}
    if not bound:
        bound = {member: zone for zone, members in _planned_zones(snap).items() for member in members}
    return {p.name: bound[f"{p.alias}.0"] for p in snap.node.ports if f"{p.alias}.0" in bound}


def show_security_zones(snap: Snapshot, args: Args) -> Output:
    # The zones of the configuration the node shows (`show configuration`): lo0 units and the MNHA zone
    # included; a node without one binds each port to the zone it was planned in.
    zones = _configured_zones(snap)
    if zones is None:
        zones = _planned_zones(snap)
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


def _nat_object_problem(snap: Snapshot, args: Args, known: str, what: str) -> Output | None:
    """None when source NAT is configured and ARGS name KNOWN (or all), else the error to print."""
    problem = _nat_configured(snap)
    if problem:
        return problem
    name = args.get("name", "all")
    if name not in ("all", known):
        return error(f"source NAT {what} {name} does not exist")
    return None


def show_nat_source_pool(snap: Snapshot, args: Args) -> Output:
    problem = _nat_object_problem(snap, args, NAT_POOL, "pool")
    if problem:
        return problem
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
    problem = _nat_object_problem(snap, args, NAT_RULE, "rule")
    if problem:
        return problem
    hits = _nat_hits(snap)
    # a mixed lab's rule matches its NAT prefixes (services.nat_sources); a CGNAT lab's every source
    sources = [IPv4Network(p) for p in snap.node.features.get("nat_sources", [])] or [IPv4Network("0.0.0.0/0")]
    ranges = [f"{str(n.network_address):<15} - {n.broadcast_address}" for n in sources]
    lines = ["Total rules: 1", f"Total referenced IPv4/IPv6 ip-prefixes: {len(sources) + 1}/0",
             f"source NAT rule: {NAT_RULE:<23}Rule-set: {NAT_RULE_SET}", "  Rule-Id                    : 1",
             "  Rule position              : 1", "  From zone                  : trust",
             "  To zone                    : untrust", "  Match",
             f"    Source addresses         : {ranges[0]}", *(f"{'':<31}{r}" for r in ranges[1:]),
             "    Destination addresses    : 0.0.0.0         - 255.255.255.255",
             f"  Action                        : {NAT_POOL}", "    Persistent NAT type         : N/A",
             f"  Translation hits           : {hits}", f"    Successful sessions      : {hits}",
             "    Failed sessions          : 0"]
    data = {"source-nat-rule-detail-information": {
        "rule-name": NAT_RULE, "rule-set-name": NAT_RULE_SET, "rule-from-zone-name": "trust",
        "rule-to-zone-name": "untrust", "source-nat-rule-action-entry": {"source-nat-rule-action": NAT_POOL},
        "rule-translation-hits": hits}}
    if snap.node.features.get("nat_sources"):
        data["source-nat-rule-detail-information"]["source-address-range-entry"] = [
            {"rule-source-address-low-range": str(n.network_address),
             "rule-source-address-high-range": str(n.broadcast_address)} for n in sources]
    return Output("".join(line + "\n" for line in lines), data)
