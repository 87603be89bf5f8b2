"""SSH CLI commands that prove the design: what a BGP peer is sent / sent us (the backup's prepend),
security policies and zones, source NAT pool and rule, ARP, SRD state, IOS BGP neighbors, and the
ping / traceroute layouts. Rendered from hand-made snapshots and compared with golden files
(tests/golden/cli/; UPDATE_GOLDEN=1 rewrites them), plus the facts a reader checks."""

from __future__ import annotations

import re
import struct
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_cli_render import NOW, ios_snapshot, mx_node, mx_snapshot, srx_snapshot

from lab_orchestrator.cli_ssh import actions, commands, ios, junos, probe
from lab_orchestrator.cli_ssh.birdparse import parse_routes
from lab_orchestrator.cli_ssh.gather import parse_neighbors
from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden" / "cli"

# BIRD's `show route export fw_srx1 all` on the SRD standby MX's TRUST-VR (captured on a running topology2):
# the export filter prepends the local AS three times.
EXPORTED = """Table master4:
198.18.128.3/32      unicast [loopback 15:25:07.586] * (240)
\tdev lo
\tType: device univ
\tBGP.as_path: 65100 65100 65100
100.64.0.0/16        unicast [core_gw_trust 15:25:08.488] * (100) [AS65010i]
\tvia 10.0.0.1 on ge-0-0-0
\tType: BGP univ
\tBGP.origin: IGP
\tBGP.as_path: 65100 65100 65100 65010
\tBGP.next_hop: 10.0.0.1
\tBGP.local_pref: 100
""".splitlines()


def _mx(**changes: Any) -> Any:
    snap = mx_snapshot(**changes)
    snap.instances[1].bird_exports = {"fw_srx1": parse_routes(EXPORTED), "fw_srx2": [], "core_gw_trust": []}
    return snap


def test_advertising_protocol_shows_the_prepend(golden: Any) -> None:
    out = junos.show_route_advertising_protocol(_mx(), {"neighbor": "10.0.0.3"})
    golden(GOLDEN / "junos-advertising-protocol.txt", out.text)
    lines = out.text.splitlines()
    assert lines[1].startswith("TRUST-VR.inet.0: ")
    assert lines[2] == "  Prefix                  Nexthop              MED     Lclpref    AS path"
    assert "* 100.64.0.0/16           Self" in out.text
    assert out.text.count("[65100] 65100 65100 65100 65010 I") == 1
    assert "[65100] 65100 65100 65100 I" in out.text  # the loopback, originated here
    assert out.data["route-information"]["route-table"][0]["rt"][0]["rt-destination"] == "100.64.0.0/16"


def test_advertising_protocol_errors() -> None:
    assert junos.show_route_advertising_protocol(_mx(), {"neighbor": "10.9.9.9"}).text == \
        "error: BGP peer 10.9.9.9 not found\n"
    # fw_srx2's session is not Established: nothing is advertised to it
    down = junos.show_route_advertising_protocol(_mx(), {"neighbor": "10.0.0.5"})
    assert down.text.count("\n") == 3 and down.status == 0


def test_receive_protocol_lists_active_and_inactive(golden: Any) -> None:
    one = junos.show_route_receive_protocol(_mx(), {"neighbor": "10.0.0.3"})
    two = junos.show_route_receive_protocol(_mx(), {"neighbor": "10.0.0.5"})
    golden(GOLDEN / "junos-receive-protocol.txt", one.text + two.text)
    assert "* 0.0.0.0/0               10.0.0.3" in one.text and "65001 65200 65020 I" in one.text
    assert "  0.0.0.0/0               10.0.0.5" in two.text  # received, not active
    assert "[" not in two.text.splitlines()[-1]


SRX_RULESET: list[dict[str, Any]] = [
    {"metainfo": {"version": "1.0.6", "json_schema_version": 1}},
    {"table": {"family": "inet", "name": "srx", "handle": 1}},
    {"rule": {"family": "inet", "table": "srx", "chain": "forward", "handle": 4, "comment": "existing session",
              "expr": [{"counter": {"packets": 900, "bytes": 72000}}, {"accept": None}]}},
    {"rule": {"family": "inet", "table": "srx", "chain": "forward", "handle": 6,
              "comment": "policy trust->untrust permit-outbound",
              "expr": [{"counter": {"packets": 42, "bytes": 2520}}, {"accept": None}]}},
    {"rule": {"family": "inet", "table": "srx", "chain": "forward", "handle": 7, "comment": "default-policy deny-all",
              "expr": [{"counter": {"packets": 3, "bytes": 180}}]}},
    {"table": {"family": "ip", "name": "srx_nat", "handle": 2}},
    {"rule": {"family": "ip", "table": "srx_nat", "chain": "postrouting", "handle": 3,
              "comment": "rule-set TRUST-TO-UNTRUST rule cgnat pool SRC-POOL",
              "expr": [{"counter": {"packets": 40, "bytes": 2400}}, {"snat": {"addr": {"range": ["a", "b"]}}}]}},
]


def test_security_policies_and_hit_count(golden: Any) -> None:
    snap = srx_snapshot(ruleset=SRX_RULESET)
    plain = junos.show_security_policies(snap, {})
    hits = junos.show_security_policies(snap, {"hit-count": True})
    golden(GOLDEN / "junos-security-policies.txt", plain.text + "\n" + hits.text)
    assert plain.text.startswith("Default policy: deny-all\n")
    assert "From zone: trust, To zone: untrust\n  Policy: permit-outbound, State: enabled" in plain.text
    assert " 1       trust            untrust           permit-outbound       42            Permit" in hits.text
    assert "default-policy        3             Deny" in hits.text
    assert junos.show_security_policies(srx_snapshot(ruleset=[]), {}).status == 1
    assert junos.show_security_policies(srx_snapshot(ruleset_error="cannot read: x"), {}).text == \
        "error: cannot read: x\n"


def test_security_policies_under_a_permit_all_default_policy() -> None:
    # services.default_policy permit-all: srx.nft's last forward rule accepts, commented so
    ruleset = [dict(item) for item in SRX_RULESET]
    ruleset[4] = {"rule": {**ruleset[4]["rule"], "comment": "default-policy permit-all",
                           "expr": [{"counter": {"packets": 5, "bytes": 300}}, {"accept": None}]}}
    snap = srx_snapshot(ruleset=ruleset)
    plain = junos.show_security_policies(snap, {})
    hits = junos.show_security_policies(snap, {"hit-count": True})
    assert plain.text.startswith("Default policy: permit-all\n")
    assert plain.data["default-policy"] == "permit-all"
    assert "default-policy        5             Permit" in hits.text
    assert hits.data["default-policy-hit-count"] == 5


def test_security_zones(golden: Any) -> None:
    out = junos.show_security_zones(srx_snapshot(), {})
    golden(GOLDEN / "junos-security-zones.txt", out.text)
    assert "Security zone: trust\n  Zone ID: 4\n" in out.text
    assert "Security zone: untrust\n" in out.text and "    ge-0/0/1.0\n" in out.text
    assert "Security zone: icl\n" in out.text
    only = junos.show_security_zones(srx_snapshot(), {"zone": "untrust"}).text
    assert "trust\n" not in only.replace("untrust\n", "")
    assert junos.show_security_zones(srx_snapshot(), {"zone": "dmz"}).status == 1


def test_nat_source_pool_and_rule(golden: Any) -> None:
    snap = srx_snapshot(nat_pool="198.51.100.0/28", ruleset=SRX_RULESET)
    pool = junos.show_nat_source_pool(snap, {"name": "all"})
    rule = junos.show_nat_source_rule(snap, {})
    golden(GOLDEN / "junos-nat-source.txt", pool.text + "\n" + rule.text)
    assert "Pool name          : SRC-POOL\n" in pool.text and "Translation hits   : 40\n" in pool.text
    assert " 198.51.100.0 - 198.51.100.15         1" in pool.text  # one translated session
    assert "source NAT rule: cgnat" in rule.text and "Rule-set: TRUST-TO-UNTRUST" in rule.text
    assert "  Translation hits           : 40\n" in rule.text
    assert junos.show_nat_source_pool(srx_snapshot(ruleset=SRX_RULESET), {}).text == \
        "error: source NAT is not configured\n"
    assert junos.show_nat_source_rule(snap, {"name": "other"}).status == 1


IP_NEIGH = ('[{"dst":"10.0.0.2","dev":"ge-0-0-0","lladdr":"02:00:00:00:00:14","state":["REACHABLE"]},'
            '{"dst":"10.0.1.2","dev":"ge-0-0-1","lladdr":"02:00:00:00:00:15","state":["STALE"]},'
            '{"dst":"10.0.1.9","dev":"ge-0-0-1","state":["FAILED"]}]')


def test_arp(golden: Any) -> None:
    snap = srx_snapshot()
    snap.instances[0].neighbors = parse_neighbors(IP_NEIGH)
    out = junos.show_arp(snap, {})
    golden(GOLDEN / "junos-arp.txt", out.text)
    assert out.text.splitlines()[1] == ("02:00:00:00:00:14 10.0.0.2        10.0.0.2                  ge-0/0/0.0"
                                        "              none")
    assert out.text.endswith("Total entries: 2\n")  # the failed entry has no MAC: not shown
    assert junos.show_arp(snap, {"interface": "ge-0/0/1"}).text.endswith("Total entries: 1\n")


SRD_STATUS = {"node": "mx2", "peer": "mx1", "pid": 4242, "updated_at": NOW - 0.5, "role": "standby", "priority": 100,
              "preempt": False, "healthy": True, "signal_route": {"prefix": "198.18.255.1/32", "installed": False},
              "peer_role": "master", "heartbeat": {"sent": 120, "received": 119, "errors": 0, "peer_alive": True},
              "resumed": None, "transitions": [{"at": NOW - 100, "role": "backup", "why": "peer is master"}]}


def test_services_redundancy_group(golden: Any) -> None:
    snap = mx_snapshot()
    snap.node = mx_node().__class__(**{**mx_node().__dict__, "features": {"srd": {"nodes": ["mx1", "mx2"],
                                                                                    "master": "mx1"}}})
    snap.status = {"srd-status.json": SRD_STATUS}
    out = junos.show_services_redundancy_group(snap, {})
    golden(GOLDEN / "junos-services-redundancy-group.txt", out.text)
    assert "    Current State        : STANDBY\n" in out.text
    assert "    Routes Advertised    : with AS-path prepend\n" in out.text
    assert "    Peer State           : MASTER\n" in out.text
    assert junos.show_services_redundancy_group(mx_snapshot(), {}).text == \
        "error: services redundancy is not configured\n"
    snap.status = {}
    assert "not running" in junos.show_services_redundancy_group(snap, {}).text


def test_ios_bgp_neighbors(golden: Any) -> None:
    out = ios.show_ip_bgp_neighbors(ios_snapshot(), {})
    golden(GOLDEN / "ios-bgp-neighbors.txt", out.text)
    assert out.text.startswith("BGP neighbor is 198.18.0.5,  remote AS 65100, external link\n")
    assert "  BGP state = Established, up for 00:05:00\n" in out.text
    assert "    Prefixes Current:              1          7 (7 best)\n" in out.text
    assert ios.show_ip_bgp_neighbors(ios_snapshot(), {"address": "1.2.3.4"}).status == 1


# ---------------------------------------------------------------------- ping / traceroute layouts
def _ping(*rtts: float | None) -> probe.PingResult:
    return probe.PingResult("203.0.113.9", 56, [probe.Echo(i, rtt, 61, 64) for i, rtt in enumerate(rtts)])


def test_junos_ping_layout(golden: Any) -> None:
    text, status = probe.junos_ping(_ping(0.5, 0.25, None, 0.25))
    golden(GOLDEN / "junos-ping.txt", text)
    assert status == 0
    assert text.splitlines()[0] == "PING 203.0.113.9 (203.0.113.9): 56 data bytes"
    assert "64 bytes from 203.0.113.9: icmp_seq=1 ttl=61 time=0.250 ms" in text
    assert "4 packets transmitted, 3 packets received, 25% packet loss" in text
    assert "round-trip min/avg/max/stddev = 0.250/0.333/0.500/0.118 ms" in text
    assert probe.junos_ping(_ping(None, None))[1] == 1


def test_ios_ping_layout(golden: Any) -> None:
    text, status = probe.ios_ping(_ping(1.4, None, 2.6, 1.0, 1.0), 2.0)
    golden(GOLDEN / "ios-ping.txt", text)
    assert "Sending 5, 84-byte ICMP Echos to 203.0.113.9, timeout is 2 seconds:\n!.!!!\n" in text
    assert "Success rate is 80 percent (4/5), round-trip min/avg/max = 1/2/3 ms" in text
    assert status == 0


def test_traceroute_layouts(golden: Any) -> None:
    trace = probe.TraceResult("203.0.113.9", 30, [
        probe.Hop(1, [("10.0.0.1", 0.2), ("10.0.0.1", 0.1), ("10.0.0.1", 0.1)]),
        probe.Hop(2, [(None, None), ("10.0.1.1", 0.3), (None, None)]),
        probe.Hop(3, [("203.0.113.9", 0.4)] * 3, reached=True)])
    junos_text, status = probe.junos_traceroute(trace)
    ios_text, _ = probe.ios_traceroute(trace)
    golden(GOLDEN / "traceroute.txt", junos_text + "\n" + ios_text)
    assert status == 0
    assert junos_text.splitlines()[1] == " 1  10.0.0.1 (10.0.0.1)  0.200 ms  0.100 ms  0.100 ms"
    assert junos_text.splitlines()[2] == " 2  *  10.0.1.1 (10.0.1.1)  0.300 ms  *"
    assert " 3 203.0.113.9 1 msec 1 msec 1 msec" in ios_text
    trace.hops[-1].reached = False
    assert probe.junos_traceroute(trace)[1] == 1


def test_echo_request_checksum_and_reply_parsing() -> None:
    packet = probe.echo_request(0x1234, 7, 56)
    assert len(packet) == 64 and probe.checksum(packet) == 0
    ip = bytes([0x45, 0, 0, 84, 0, 0, 0, 0, 61, 1, 0, 0, 203, 0, 113, 9, 10, 0, 0, 1])
    reply = struct.pack("!BBHHH", 0, 0, 0, 0x1234, 7) + packet[8:]
    assert probe.parse_ip(ip + reply) == ("203.0.113.9", 61, reply)


# ---------------------------------------------------------------------- grammar
@pytest.mark.parametrize("vendor, kind, line, run", [
    ("junos", "mx", "show route advertising-protocol bgp 10.0.0.3", "bgp-advertising"),
    ("junos", "srx", "sh ro receive-protocol bgp 10.0.0.2", "bgp-receive"),
    ("junos", "srx", "show security policies hit-count", "security-policies"),
    ("junos", "srx", "show security nat source pool all", "nat-pool"),
    ("junos", "srx", "show security nat source rule all", "nat-rule"),
    ("junos", "mx", "show services redundancy-group", "srd"),
    ("junos", "mx", "ping 203.0.113.9 routing-instance TRUST-VR count 3", "action:ping"),
    ("junos", "srx", "traceroute 203.0.113.9 ttl 5", "action:traceroute"),
    ("junos", "srx", "show arp no-resolve", "arp"),
    ("ios", "ios-router", "show ip bgp neighbors 198.18.0.5", "ip-bgp-neighbors"),
    ("ios", "ios-router", "ping 203.0.113.9 repeat 2", "action:ping"),
])
def test_new_commands_parse(vendor: str, kind: str, line: str, run: str) -> None:
    parsed = commands.grammar(vendor, kind).parse(line)
    assert parsed is not None and parsed.command.run == run


def test_ping_is_open_to_read_only_users() -> None:
    assert {"ping", "traceroute"} <= actions.READ_ONLY_ACTIONS
    assert not next(c for c in commands.JUNOS_COMMANDS if c.run == "action:ping").privileged


def test_nat_source_rule_of_a_mixed_lab_shows_its_source_match() -> None:
    """use_case mixed: the rule translates the NAT prefixes only (the JVD's match source-address)."""
    snap = srx_snapshot(nat_pool="198.51.100.0/28", ruleset=SRX_RULESET)
    snap.node = replace(snap.node, features={"nat_sources": ["100.64.128.0/17", "10.8.0.0/16"]})
    rule = junos.show_nat_source_rule(snap, {})
    assert "    Source addresses         : 100.64.128.0    - 100.64.255.255\n" \
           "                               10.8.0.0        - 10.8.255.255\n" \
           "    Destination addresses    : 0.0.0.0         - 255.255.255.255\n" in rule.text
    assert "Total referenced IPv4/IPv6 ip-prefixes: 3/0\n" in rule.text
    ranges = rule.data["source-nat-rule-detail-information"]["source-address-range-entry"]
    assert ranges[0] == {"rule-source-address-low-range": "100.64.128.0",
                         "rule-source-address-high-range": "100.64.255.255"}


def test_security_zones_follow_the_configuration_the_node_shows() -> None:
    """The zones as `show configuration` binds them: the MNHA zone by its name, lo0 units in their zones."""
    plan = planmod.build(load_topology(REPO / "labs" / "topology3.yml").topology, "labs/topology3.yml", "/run/lab")
    config = plan.files["nodes/srx1/juniper.conf"]
    out = junos.show_security_zones(srx_snapshot(config_text=config), {})
    zones = {z["zone-name"]: z["interfaces"] for z in out.data["zones-information"]["zones-security"]}
    assert set(zones) == {"junos-host", "trust", "untrust", "trust_zone_mnha"}, zones
    assert "lo0.1" in zones["trust"] and "lo0.0" in zones["trust_zone_mnha"]
    for zone, members in zones.items():  # every bound interface is in the configuration's zone block
        for member in members:
            assert re.search(rf"security-zone {zone} \{{.*?{re.escape(member)};", config, re.S), (zone, member)
    assert "Security zone: icl\n" not in out.text


def test_flow_sessions_take_their_zones_from_the_configuration_too() -> None:
    """`show security flow session` names zones as `show security zones` lists them (one source: the configuration)."""
    from lab_orchestrator.cli_ssh.junos.security import _port_zones

    plan = planmod.build(load_topology(REPO / "labs" / "topology3.yml").topology, "labs/topology3.yml", "/run/lab")
    zones = _port_zones(srx_snapshot(config_text=plan.files["nodes/srx1/juniper.conf"]))
    assert zones == {"ge-0-0-0": "trust", "ge-0-0-1": "untrust", "ge-0-0-4": "trust_zone_mnha"}, zones
    assert _port_zones(srx_snapshot())["ge-0-0-4"] == "icl"  # no configuration: the planned zones
