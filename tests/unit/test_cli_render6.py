"""The SSH CLI's views of a dual-stack lab: IPv6 routes and sessions beside the IPv4 ones, as Junos
(`show route`, `show route table inet6.0`, `show bgp summary`) and IOS (`show ipv6 route`,
`show bgp ipv6 unicast summary`) print them; rootless, from a hand-made snapshot."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from test_cli_render import bgp, ios_snapshot, kroute, mx_snapshot

from lab_orchestrator.cli_ssh import ios, ios6, junos, rib
from lab_orchestrator.cli_ssh.birdparse import parse_routes
from lab_orchestrator.cli_ssh.commands import grammar
from lab_orchestrator.cli_ssh.gather import Snapshot
from lab_orchestrator.cli_ssh.parser import is_address46, is_prefix, is_prefix46
from lab_orchestrator.cli_ssh.state import Address, BirdRoute, KernelRoute, NextHop
from lab_orchestrator.plan.sshconfig import Peer

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "cli"

BIRD_ROUTES = """Table master4:
0.0.0.0/0            unicast [fw_srx1 09:44:30.264] * (100) [AS65020i]
\tvia 10.0.0.3 on ge-0-1-1
\tType: BGP univ
\tBGP.as_path: 65001 65200 65020
Table master6:
::/0                 unicast [fw_srx1_v6 09:44:30.264] * (100) [AS65020i]
\tvia 2001:db8:1::3 on ge-0-1-1
\tType: BGP univ
\tBGP.origin: IGP
\tBGP.as_path: 65001 65200 65020
\tBGP.next_hop: 2001:db8:1::3 fe80::1
                     unicast [fw_srx2_v6 09:44:30.203] (100) [AS65020i]
\tvia 2001:db8:1::5 on ge-0-1-2
\tType: BGP univ
\tBGP.as_path: 65002 65200 65020
2001:db8:172:80::/64 unicast [core_gw_trust_v6 09:44:30.100] * (100) [AS65010i]
\tvia 2001:db8:1::1 on ge-0-0-0
\tType: BGP univ
\tBGP.as_path: 65010
""".splitlines()


def local6(address: str, dev: str) -> KernelRoute:
    return KernelRoute(255, f"{address}/128", "local", "kernel", 0, 0, (NextHop(None, dev),))


def bird6(prefix: str, protocol: str, path: tuple[int, ...], gateway: str, dev: str, primary: bool = True) -> BirdRoute:
    return BirdRoute(prefix, protocol, "BGP", primary, "10:00:00.000", 100, (NextHop(gateway, dev),), False, path,
                     "IGP", 100)


def dual_mx() -> Snapshot:
    """The IPv4 MX of test_cli_render with IPv6 beside: a session per SRX and to the gateway, IPv6
    addresses on the same interfaces, the kernel's IPv6 routes (link-local ones too) and BIRD's."""
    snap = mx_snapshot()
    node = snap.node
    snap.node = dataclasses.replace(node, peers=(
        *node.peers,
        Peer("core_gw_trust_v6", "TRUST-VR", "IPv6_GW-TRUST", "gw-trust", "2001:db8:1::1", 65010, "2001:db8:1::",
             65100),
        Peer("fw_srx1_v6", "TRUST-VR", "IPv6_SRX-TRUST", "srx1", "2001:db8:1::3", 65001, "2001:db8:1::2", 65100),
        Peer("fw_srx2_v6", "TRUST-VR", "IPv6_SRX-TRUST", "srx2", "2001:db8:1::5", 65002, "2001:db8:1::4", 65100)))
    trust = snap.instances[1]
    trust.addresses6 = [Address("lo", "2001:db8:1:255::3", 128), Address("ge-0-0-0", "2001:db8:1::", 126),
                        Address("ge-0-1-1", "2001:db8:1::2", 126), Address("ge-0-1-1", "fe80::2", 64)]
    trust.routes6 = [
        kroute("::/0", ("2001:db8:1::3", "ge-0-1-1"), ("2001:db8:1::5", "ge-0-1-2")),
        kroute("2001:db8:172:80::/64", ("2001:db8:1::1", "ge-0-0-0")),
        kroute("2001:db8:1::/126", (None, "ge-0-0-0"), proto="kernel"),
        kroute("2001:db8:1:255::3/128", (None, "lo"), proto="kernel"),
        kroute("fe80::/64", (None, "ge-0-1-1"), proto="kernel"),
        local6("2001:db8:1::", "ge-0-0-0"), local6("2001:db8:1::2", "lo"), local6("2001:db8:1:255::3", "lo"),
        local6("fe80::2", "ge-0-1-1"),
        KernelRoute(255, "ff00::/8", "other", "kernel", 0, 256, (NextHop(None, "ge-0-1-1"),)),
        kroute("::/0", ("2001:db8:1::3", "ge-0-1-1"), proto="static", table=101)]
    trust.bird_routes6 = [bird6("::/0", "fw_srx1_v6", (65001, 65200, 65020), "2001:db8:1::3", "ge-0-1-1"),
                          bird6("::/0", "fw_srx2_v6", (65002, 65200, 65020), "2001:db8:1::5", "ge-0-1-2", False),
                          bird6("2001:db8:172:80::/64", "core_gw_trust_v6", (65010,), "2001:db8:1::1", "ge-0-0-0")]
    assert trust.bgp is not None
    trust.bgp += [bgp("core_gw_trust_v6", imported=1, preferred=1), bgp("fw_srx1_v6", imported=1, preferred=1),
                  bgp("fw_srx2_v6", info="Active        Socket: Connection refused", imported=0, preferred=0)]
    for address in trust.addresses6:
        snap.address_ages[f"TRUST-VR/{address.address}"] = 300.0
    return snap


def test_bird_routes_of_both_tables_are_parsed_apart() -> None:
    routes = parse_routes(BIRD_ROUTES)
    assert [(r.prefix, r.protocol, r.primary) for r in routes] == [
        ("0.0.0.0/0", "fw_srx1", True), ("::/0", "fw_srx1_v6", True), ("::/0", "fw_srx2_v6", False),
        ("2001:db8:172:80::/64", "core_gw_trust_v6", True)]
    assert routes[1].nexthops == (NextHop("2001:db8:1::3", "ge-0-1-1"),)
    assert routes[1].bgp_next_hop == "2001:db8:1::3" and routes[2].as_path == (65002, 65200, 65020)
    # a route of the IPv6 table never continues the last IPv4 prefix
    assert [r.prefix for r in parse_routes(["Table master4:", "10.0.0.0/8  unicast [a 10:00:00] * (100)",
                                            "Table master6:", "     unicast [b 10:00:00] (100)"])] == ["10.0.0.0/8"]


def test_show_route_lists_the_inet6_tables_after_each_instance_s_inet_ones() -> None:
    text = junos.show_route(dual_mx(), {}).text
    names = [line.split(":")[0] for line in text.splitlines() if "destinations" in line]
    assert names == ["inet.0", "TRUST-VR.inet.0", "TRUST-VR.selector-srx1.inet.0", "TRUST-VR.selector-none.inet.0",
                     "TRUST-VR.inet6.0", "TRUST-VR.selector-srx1.inet6.0"]
    assert "TRUST-VR.inet6.0: 6 destinations, 7 routes (6 active, 0 holddown, 0 hidden)" in text
    assert "fe80" not in text and "ff00" not in text  # link-local and multicast: not listed


def test_show_route_table_inet6_prints_ipv6_as_junos_does() -> None:
    out = junos.show_route(dual_mx(), {"table": "TRUST-VR.inet6.0"})
    lines = out.text.splitlines()
    start = lines.index("::/0               *[BGP/170] 00:05:00, localpref 100")
    assert lines[start + 1] == "                      AS path: 65001 65200 65020 I, validation-state: unverified"
    assert lines[start + 2] == "                    >  to 2001:db8:1::3 via ge-0/1/1.0"
    assert lines[start + 3] == "                    >  to 2001:db8:1::5 via ge-0/1/2.0"
    assert lines[start + 4] == "                    [BGP/170] 00:05:00, localpref 100"
    # a prefix of 19 characters or more stands on a line of its own, the route under it
    wrapped = lines.index("2001:db8:172:80::/64")
    assert lines[wrapped + 1] == "                   *[BGP/170] 00:05:00, localpref 100"
    loopback = lines.index("2001:db8:1:255::3/128")
    assert lines[loopback + 1] == "                   *[Direct/0] 00:05:00"
    assert lines[loopback + 2] == "                    >  via lo0.1"
    assert text_count(out.text, "2001:db8:1:255::3/128") == 1  # the local and the main table's entry are one
    local = lines.index("2001:db8:1::2/128  *[Local/0] 00:05:00")  # on lo in the kernel, of ge-0/1/1
    assert lines[local + 1] == "                       Local via ge-0/1/1.0"
    assert "2001:db8:1::/126   *[Direct/0] 00:05:00" in lines
    table = out.data["route-information"]["route-table"][0]
    assert table["table-name"] == "TRUST-VR.inet6.0" and table["rt"][0]["rt-destination"] == "::/0"
    assert table["rt"][0]["rt-entry"][0]["learned-from"] == "2001:db8:1::3"
    json.dumps(out.data)
    # a destination of either family finds its table's route
    one = junos.show_route(dual_mx(), {"destination": "2001:db8:172:80::7"}).text
    assert "TRUST-VR.inet6.0" in one and "2001:db8:172:80::/64" in one and "inet.0:" not in one
    assert "100.64.0.0/16" in junos.show_route(dual_mx(), {"destination": "100.64.0.1"}).text


def text_count(text: str, word: str) -> int:
    return sum(1 for line in text.splitlines() if line.split() and line.split()[0] == word)


def test_an_ipv4_lab_shows_no_inet6_table() -> None:
    snap = mx_snapshot()
    snap.instances[1].routes6 = [kroute("fe80::/64", (None, "ge-0-1-1"), proto="kernel"),
                                 local6("fe80::2", "ge-0-1-1")]
    assert "inet6" not in junos.show_route(snap, {}).text


def test_bgp_summary_has_the_inet6_table_and_its_sessions() -> None:
    out = junos.show_bgp_summary(dual_mx(), {})
    lines = out.text.splitlines()
    assert "Groups: 4 Peers: 6 Down peers: 2" in lines  # the IPv6 sessions' own groups (IPv6_SRX-TRUST, ...)
    assert lines[lines.index("TRUST-VR.inet.0") + 1].split() == ["3", "3", "0", "0", "0", "0"]
    assert lines[lines.index("TRUST-VR.inet6.0") + 1].split() == ["2", "2", "0", "0", "0", "0"]
    peers = [line.split()[0] for line in lines if line[:1].isalnum() and line.split()[0].count(":") >= 2]
    assert peers == ["2001:db8:1::1", "2001:db8:1::3", "2001:db8:1::5"]  # IPv6 after IPv4, in address order
    established = next(i for i, line in enumerate(lines) if line.startswith("2001:db8:1::3 "))
    assert lines[established].split() == ["2001:db8:1::3", "65001", "-", "-", "0", "-", "5:00", "Establ"]
    assert lines[established + 1] == "  TRUST-VR.inet6.0: 1/1/1/0"
    ipv4 = next(i for i, line in enumerate(lines) if line.startswith("10.0.0.3 "))
    assert lines[ipv4 + 1] == "  TRUST-VR.inet.0: 2/2/2/0"
    ribs = {p["peer-address"]: p.get("bgp-rib", {}).get("name") for p in out.data["bgp-information"]["bgp-peer"]}
    assert ribs["2001:db8:1::3"] == "TRUST-VR.inet6.0" and ribs["10.0.0.3"] == "TRUST-VR.inet.0"
    assert [t["name"] for t in out.data["bgp-information"]["bgp-rib"]] == ["TRUST-VR.inet.0", "TRUST-VR.inet6.0"]


def test_bgp_neighbor_of_an_ipv6_session() -> None:
    text = junos.show_bgp_neighbor(dual_mx(), {"address": "2001:DB8:1:0::3"}).text
    assert text.startswith("Peer: 2001:db8:1::3 AS 65001  Local: 2001:db8:1::2 AS 65100\n")
    assert "  NLRI for this session: inet6-unicast\n" in text and "  Table TRUST-VR.inet6.0\n" in text
    assert "  Group: IPv6_SRX-TRUST        Routing-Instance: TRUST-VR\n" in text
    received = junos.show_route_receive_protocol(dual_mx(), {"neighbor": "2001:db8:1::3"})
    assert received.text.splitlines()[1].startswith("TRUST-VR.inet6.0: ")
    assert [r["rt-destination"] for r in received.data["route-information"]["route-table"][0]["rt"]] == ["::/0"]


# ---------------------------------------------------------------------- the kernel's IPv6 forwarding tables
def test_forwarding_table_lists_the_inet6_tables_after_every_inet_one(golden: Any) -> None:
    """Junos's `show route forwarding-table`: every instance's inet tables, then the inet6 ones; IPv6 rows
    in the same columns, a destination too long for its column on a line of its own."""
    out = junos.show_route_forwarding_table(dual_mx(), {})
    ipv4 = junos.show_route_forwarding_table(mx_snapshot(), {}).text
    assert out.text.startswith(ipv4)  # the IPv4 tables as before, the IPv6 ones after them
    ipv6 = out.text[len(ipv4):]
    golden(GOLDEN / "junos-forwarding-table6.txt", ipv6)
    lines = ipv6.splitlines()
    assert [line for line in lines if line.startswith("Routing table: ")] == [
        "Routing table: TRUST-VR.inet6", "Routing table: TRUST-VR.selector-srx1.inet6"]
    assert lines[1] == "Internet6:"
    assert lines[3:6] == ["default            user     -                    ulst     -        -",
                          "                              2001:db8:1::3      ucst     -        - ge-0/1/1.0",
                          "                              2001:db8:1::5      ucst     -        - ge-0/1/2.0"]
    assert "2001:db8:1::/126   intf     -                    rslv     -        - ge-0/0/0.0" in lines
    assert "2001:db8:1::2/128  intf     - 2001:db8:1::2      locl     -        -" in lines
    wrapped = lines.index("2001:db8:172:80::/64")
    assert lines[wrapped + 1] == "                   user     - 2001:db8:1::1      ucst     -        - ge-0/0/0.0"
    # a loopback's /128 (in the kernel's main and local tables) is one local entry
    assert lines.count("2001:db8:1:255::3/128") == 1
    assert lines[lines.index("2001:db8:1:255::3/128") + 1].split() == ["intf", "-", "2001:db8:1:255::3", "locl", "-",
                                                                       "-"]
    assert "fe80" not in ipv6 and "ff00" not in ipv6  # link-local and multicast: not listed, as in `show route`
    tables = out.data["forwarding-table-information"]["route-table"]
    assert [(t["table-name"], t["address-family"]) for t in tables][-2:] == [
        ("TRUST-VR.inet6", "Internet6"), ("TRUST-VR.selector-srx1.inet6", "Internet6")]
    assert tables[-2]["rt-entry"][0] == {"rt-destination": "default", "rt-entry-type": "user", "nh-type": "ulst",
                                         "nh": [{"to": "2001:db8:1::3", "via": "ge-0/1/1.0"},
                                                {"to": "2001:db8:1::5", "via": "ge-0/1/2.0"}]}
    json.dumps(out.data)


def test_forwarding_table_family_and_destination_choose_the_family() -> None:
    snap = dual_mx()
    inet = junos.show_route_forwarding_table(snap, {"family": "inet"}).text
    assert inet == junos.show_route_forwarding_table(mx_snapshot(), {}).text
    inet6 = junos.show_route_forwarding_table(snap, {"family": "inet6"}).text
    assert "Internet:" not in inet6 and inet6.startswith("Routing table: TRUST-VR.inet6\nInternet6:\n")
    assert junos.show_route_forwarding_table(snap, {"family": "inet7"}).status == 1
    one = junos.show_route_forwarding_table(snap, {"destination": "2001:db8:172:80::9"}).text
    assert [line for line in one.splitlines() if line and line[0] not in " D"] == [
        "Routing table: TRUST-VR.inet6", "Internet6:", "2001:db8:172:80::/64",
        "Routing table: TRUST-VR.selector-srx1.inet6", "Internet6:",
        "default            user     - 2001:db8:1::3      ucst     -        - ge-0/1/1.0"]
    assert "Internet:" not in one
    assert junos.show_route_forwarding_table(snap, {"destination": "2001:db8:1:255::3"}).text.count("locl") == 1
    assert junos.show_route_forwarding_table(snap, {"destination": "100.64.0.1", "family": "inet6"}).status == 1
    assert junos.show_route_forwarding_table(snap, {"destination": "2001:db8::zz"}).status == 1
    # `table X.inet` is that table only; `table X` is the instance's tables of both families
    only4 = junos.show_route_forwarding_table(snap, {"table": "TRUST-VR.inet"}).text
    assert "Routing table: TRUST-VR.inet\n" in only4 and "inet6" not in only4
    both = junos.show_route_forwarding_table(snap, {"table": "TRUST-VR"}).text
    assert "Routing table: TRUST-VR.inet\n" in both and "Routing table: TRUST-VR.inet6\n" in both
    only6 = junos.show_route_forwarding_table(snap, {"table": "TRUST-VR.inet6"}).text
    assert "Routing table: TRUST-VR.inet6\n" in only6 and "Internet:" not in only6


def test_forwarding_table_of_an_ipv4_lab_has_no_inet6_table() -> None:
    """Every interface has a link-local address and the multicast route even with IPv6 unused: no table."""
    snap = mx_snapshot()
    snap.instances[1].routes6 = [kroute("fe80::/64", (None, "ge-0-1-1"), proto="kernel"), local6("fe80::2", "ge-0-1-1"),
                                 KernelRoute(255, "ff00::/8", "other", "kernel", 0, 256, (NextHop(None, "ge-0-1-1"),)),
                                 local6("::1", "lo")]
    assert junos.show_route_forwarding_table(snap, {}).text == junos.show_route_forwarding_table(mx_snapshot(), {}).text
    assert junos.show_route_forwarding_table(snap, {"family": "inet6"}).text == ""


def test_forwarding_table_wraps_a_next_hop_too_long_for_its_column() -> None:
    snap = dual_mx()
    snap.instances[1].routes6.append(kroute("2001:db8:99::/48", ("2001:db8:1:0:abcd::3", "ge-0-1-1")))
    lines = junos.show_route_forwarding_table(snap, {"family": "inet6"}).text.splitlines()
    start = lines.index("2001:db8:99::/48   user     - 2001:db8:1:0:abcd::3")
    assert lines[start + 1] == " " * 49 + "ucst     -        - ge-0/1/1.0"


def dual_gw() -> Snapshot:
    snap = ios_snapshot()
    snap.node = dataclasses.replace(snap.node, peers=(
        *snap.node.peers, Peer("peer_mx1_v6", "", "", "mx1", "2001:db8:1:1:1::a", 65100, "2001:db8:1:1:1::9", 65010)))
    inst = snap.instances[0]
    inst.addresses6 = [Address("lo", "2001:db8:1:255::1", 128), Address("Gi0-1", "2001:db8:1::9", 126)]
    inst.routes6 = [kroute("::/0", ("2001:db8:1::a", "Gi0-1")),
                    kroute("2001:db8:1::8/126", (None, "Gi0-1"), proto="kernel"),
                    kroute("2001:db8:172:80::/64", (None, "Gi0-0"), proto="static", kind="blackhole"),
                    local6("2001:db8:1::9", "Gi0-1"), local6("2001:db8:1:255::1", "lo"),
                    kroute("fe80::/64", (None, "Gi0-1"), proto="kernel")]
    inst.bird_routes6 = [bird6("::/0", "peer_mx1_v6", (65100, 65001), "2001:db8:1::a", "Gi0-1")]
    assert inst.bgp is not None
    inst.bgp += [bgp("peer_mx1_v6", imported=3, preferred=3)]
    snap.address_ages.update({f"/{a.address}": 300.0 for a in inst.addresses6})
    return snap


def test_ios_show_ipv6_route() -> None:
    out = ios6.show_ipv6_route(dual_gw(), {})
    lines = out.text.splitlines()
    assert lines[0] == "IPv6 Routing Table - default - 5 entries"
    assert lines[1].startswith("Codes: C - Connected, L - Local, S - Static")
    body = lines[lines.index("       lr - LISP site-registrations, ld - LISP dyn-eid, a - Application") + 1:]
    assert body == ["B   ::/0 [20/0]", "     via 2001:DB8:1::A, GigabitEthernet0/1",
                    "C   2001:DB8:1::8/126 [0/0]", "     via GigabitEthernet0/1, directly connected",
                    "L   2001:DB8:1::9/128 [0/0]", "     via GigabitEthernet0/1, receive",
                    "LC  2001:DB8:1:255::1/128 [0/0]", "     via Loopback0, receive",
                    "S   2001:DB8:172:80::/64 [1/0]", "     via Null0, directly connected"]
    assert [r["prefix"] for r in out.data][0] == "::/0"
    only = ios6.show_ipv6_route(dual_gw(), {"bgp": True}).text
    assert "IPv6 Routing Table - default - 1 entries" in only and "2001:DB8:1::8/126" not in only
    assert "0.0.0.0" not in ios6.show_ipv6_route(dual_gw(), {}).text


def test_ios_bgp_summaries_per_family() -> None:
    v6 = ios.show_bgp_ipv6_unicast_summary(dual_gw(), {})
    lines = v6.text.splitlines()
    assert lines[0] == "BGP router identifier 198.18.128.1, local AS number 65010"
    assert lines[1] == "1 network entries learned by BGP"
    assert lines[-1].split() == ["4", "65100", "-", "-", "-", "0", "0", "00:05:00", "3"]
    assert lines[-2] == "2001:DB8:1:1:1::A"  # a neighbor longer than its column: on a line of its own
    assert [p["neighbor"] for p in v6.data] == ["2001:db8:1:1:1::a"]
    v4 = ios.show_ip_bgp_summary(dual_gw(), {}).text
    assert "2001" not in v4.upper() and "198.18.0.5" in v4
    assert ios.show_bgp_ipv6_unicast_summary(ios_snapshot(), {}).status == 1  # no IPv6 session


def test_grammar_knows_the_ipv6_commands() -> None:
    ios_grammar = grammar("ios", "ios-router")
    assert ios_grammar.parse("show ipv6 route").command.run == "ipv6-route"  # type: ignore[union-attr]
    assert ios_grammar.parse("sh bgp ipv6 unicast summary").command.run == "bgp-ipv6-summary"  # type: ignore[union-attr]
    junos_grammar = grammar("junos", "mx")
    fib = junos_grammar.parse("show route forwarding-table family inet6 destination 2001:db8::1")
    assert fib.args == {"family": "inet6", "destination": "2001:db8::1"}  # type: ignore[union-attr]
    parsed = junos_grammar.parse("show route 2001:db8:172:80::/64")
    assert parsed.args["destination"] == "2001:db8:172:80::/64"  # type: ignore[union-attr]
    assert is_prefix46("2001:db8::/64") and is_prefix46("::") and not is_prefix46("2001:db8::/129")
    assert is_address46("2001:db8::1") and not is_address46("2001:db8::/64") and not is_prefix("2001:db8::1")
    assert rib.family_table("TRUST-VR.selector-srx1.inet.0", 6) == "TRUST-VR.selector-srx1.inet6.0"
