"""The SSH CLI's renderers: pure functions from a gathered snapshot to Junos-like / IOS-like text."""

from __future__ import annotations

import datetime
import json
from typing import Any

import pytest
from statusdata import gateway_status, hsrp_group, hsrp_status, mnha_status, mxlb_health, mxlb_member, mxlb_status

from lab_orchestrator.cli_ssh import common, ios, junos, rib
from lab_orchestrator.cli_ssh.birdparse import parse_protocols, parse_routes
from lab_orchestrator.cli_ssh.gather import Snapshot, parse_conntrack
from lab_orchestrator.cli_ssh.state import Address, BgpProtocol, BirdRoute, KernelRoute, Link, NextHop
from lab_orchestrator.cli_ssh.state import Instance as LiveInstance
from lab_orchestrator.plan.sshconfig import Bird, Instance, Node, Peer, Port

NOW = datetime.datetime(2026, 11, 30, 10, 5, 0).timestamp()
UPTIME = 10000.0  # seconds since boot at NOW; addresses below were made at boot + 9700 s (5 min ago)


def link(index: int, name: str, alias: str = "", up: bool = True) -> Link:
    return Link(index, name, alias or name, up, up, 1500, f"02:00:00:00:00:{index:02x}", "veth", 10, 20, 1000, 2000)


def kroute(dst: str, *hops: tuple[str | None, str], proto: str = "bird", table: int = 254, kind: str = "unicast",
           prefsrc: str | None = None) -> KernelRoute:
    return KernelRoute(table, dst, kind, proto, 253 if proto == "kernel" else 0, 32 if proto == "bird" else 0,
                       tuple(NextHop(g, d) for g, d in hops), prefsrc)


def local(address: str, dev: str) -> KernelRoute:
    return KernelRoute(255, f"{address}/32", "local", "kernel", 254, 0, (NextHop(None, dev),), address)


def bird(prefix: str, protocol: str, path: tuple[int, ...], gateway: str, dev: str, primary: bool = True,
         since: str = "10:00:00.000", source: str = "BGP") -> BirdRoute:
    return BirdRoute(prefix, protocol, source, primary, since, 100, (NextHop(gateway, dev),), False, path, "IGP",
                     100 if source == "BGP" else None)


def bgp(name: str, info: str = "Established", imported: int = 2, preferred: int = 2,
        fields: dict[str, str] | None = None) -> BgpProtocol:
    return BgpProtocol(name, "up" if info == "Established" else "start", "10:00:00.000", info,
                       fields or {"Neighbor ID": "198.18.128.5", "Hold timer": "2.1/3", "Keepalive timer": "0.3/1",
                                  "Route refresh": "", "Restart time": "120"},
                       imported, 0, 1, preferred, imported, imported, 1)


def mx_node(load_balancing: str = "ecmp-chash") -> Node:
    return Node(
        name="mx1", kind="mx", vendor="junos", master_ns="t-mx1", mgmt_if="fxp0", mgmt_address="198.19.0.4/24",
        instances=(Instance("", "t-mx1", "inet.0"),
                   Instance("TRUST-VR", "t-mx1-trust-vr", "TRUST-VR.inet.0",
                            {"101": "TRUST-VR.selector-srx1.inet.0", "199": "TRUST-VR.selector-none.inet.0"})),
        birds=(Bird("TRUST-VR", "bird-trust-vr", "/nonexistent.ctl"),),
        peers=(Peer("core_gw_trust", "TRUST-VR", "GW-TRUST", "gw-trust", "10.0.0.1", 65010, "10.0.0.0", 65100),
               Peer("fw_srx1", "TRUST-VR", "SRX-TRUST", "srx1", "10.0.0.3", 65001, "10.0.0.2", 65100),
               Peer("fw_srx2", "TRUST-VR", "SRX-TRUST", "srx2", "10.0.0.5", 65002, "10.0.0.4", 65100)),
        ports=(Port("ge-0-0-0", "ge-0/0/0", "TRUST-VR", "trust", "trust: to gw-trust Gi0/1"),
               Port("ge-0-1-1", "ge-0/1/1", "TRUST-VR", "trust", "trust: to srx1 ge-0/0/0"),
               Port("ge-0-1-2", "ge-0/1/2", "TRUST-VR", "trust", "trust: to srx2 ge-0/0/0")),
        loopbacks={"": "198.18.128.2", "TRUST-VR": "198.18.128.3"}, config_file="/x/juniper.conf",
        status_dir="/x", host_key="/x/key", features={"load_balancing": load_balancing},
    )


def mx_snapshot(**changes: Any) -> Snapshot:
    master = LiveInstance("", "inet.0", links=[link(1, "lo", "lo"), link(13, "fxp0")],
                          addresses=[Address("lo", "127.0.0.1", 8), Address("lo", "198.18.128.2", 32),
                                     Address("fxp0", "198.19.0.4", 24)],
                          routes=[kroute("198.19.0.0/24", (None, "fxp0"), proto="kernel", prefsrc="198.19.0.4"),
                                  local("198.18.128.2", "lo"), local("198.19.0.4", "fxp0"),
                                  local("127.0.0.1", "lo"),
                                  KernelRoute(255, "198.19.0.255/32", "broadcast", "kernel", 253, 0,
                                              (NextHop(None, "fxp0"),))])
    trust = LiveInstance(
        "TRUST-VR", "TRUST-VR.inet.0",
        links=[link(1, "lo", "lo"), link(20, "ge-0-0-0", "ge-0/0/0"), link(21, "ge-0-1-1", "ge-0/1/1"),
               link(22, "ge-0-1-2", "ge-0/1/2")],
        addresses=[Address("lo", "198.18.128.3", 32), Address("ge-0-0-0", "10.0.0.0", 31),
                   Address("ge-0-1-1", "10.0.0.2", 31), Address("ge-0-1-2", "10.0.0.4", 31)],
        routes=[kroute("0.0.0.0/0", ("10.0.0.3", "ge-0-1-1"), ("10.0.0.5", "ge-0-1-2")),
                kroute("100.64.0.0/16", ("10.0.0.1", "ge-0-0-0")),
                kroute("10.0.0.0/31", (None, "ge-0-0-0"), proto="kernel", prefsrc="10.0.0.0"),
                kroute("10.0.0.2/31", (None, "ge-0-1-1"), proto="kernel", prefsrc="10.0.0.2"),
                kroute("10.0.0.4/31", (None, "ge-0-1-2"), proto="kernel", prefsrc="10.0.0.4"),
                local("10.0.0.0", "ge-0-0-0"), local("10.0.0.2", "ge-0-1-1"), local("10.0.0.4", "ge-0-1-2"),
                local("198.18.128.3", "lo"),
                kroute("0.0.0.0/0", ("10.0.0.3", "ge-0-1-1"), proto="static", table=101),
                KernelRoute(199, "0.0.0.0/0", "blackhole", "static", 0, 4294967295)],
        bird_routes=[bird("0.0.0.0/0", "fw_srx1", (65001, 65200, 65020), "10.0.0.3", "ge-0-1-1"),
                     bird("0.0.0.0/0", "fw_srx2", (65002, 65200, 65020), "10.0.0.5", "ge-0-1-2", primary=False),
                     bird("100.64.0.0/16", "core_gw_trust", (65010,), "10.0.0.1", "ge-0-0-0"),
                     BirdRoute("198.18.128.3/32", "loopback", "device", True, "10:00:00", 240,
                               (NextHop(None, "lo"),))],
        bgp=[bgp("core_gw_trust", imported=1, preferred=1), bgp("fw_srx1"),
             bgp("fw_srx2", info="Active        Socket: Connection refused", imported=0, preferred=0)],
        bird_status=["BIRD 2.0.12", "Last reboot on 2026-11-30 10:00:00.000"],
    )
    snap = Snapshot("t", mx_node(changes.pop("load_balancing", "ecmp-chash")), [master, trust], NOW, UPTIME,
                    NOW - 400, "ecmp-chash", "sfw")
    snap.address_ages = {f"{inst.name}/{a.address}": 300.0 for inst in snap.instances for a in inst.addresses}
    for key, value in changes.items():
        setattr(snap, key, value)
    return snap


# ---------------------------------------------------------------------- ages and times
def test_age_formats() -> None:
    assert common.junos_age(312) == "00:05:12"
    assert common.junos_age(2 * 86400 + 3 * 3600 + 4 * 60 + 5) == "2d 03:04:05"
    assert common.junos_age(9 * 86400 + 5) == "1w2d 00:00:05"
    assert common.junos_updown(312) == "5:12"
    assert common.junos_updown(3 * 3600 + 312) == "3:05:12"
    assert common.junos_updown(86400 + 312) == "1d 0:05:12"
    assert common.ios_age(312) == "00:05:12"
    assert common.ios_age(86400 + 2 * 3600) == "1d02h"
    assert common.ios_age(15 * 86400) == "2w1d"


def test_bird_timestamps() -> None:
    assert rib.parse_since("10:00:00.000", NOW) == 300.0
    assert rib.parse_since("2026-11-30 09:05:00", NOW) == 3600.0
    assert rib.parse_since("23:59:00", NOW) == 10 * 3600 + 6 * 60  # yesterday, not the future
    assert rib.parse_since("garbage", NOW) is None


# ---------------------------------------------------------------------- BIRD replies
BIRD_ROUTES = """Table master4:
0.0.0.0/0            unicast [fw_srx1 09:44:30.264] * (100) [AS65020i]
\tvia 198.18.0.9 on ge-0-1-1
\tType: BGP univ
\tBGP.origin: IGP
\tBGP.as_path: 65001 65200 65020
\tBGP.next_hop: 198.18.0.9
\tBGP.local_pref: 100
                     unicast [fw_srx3 09:44:30.203] (100) [AS65020i]
\tvia 198.18.0.17 on ge-0-1-3
\tType: BGP univ
\tBGP.origin: IGP
\tBGP.as_path: 65003 65200 65020
\tBGP.med: 7
198.51.100.0/28      blackhole [originated 09:44:29.456] * (200)
\tType: static univ
198.18.128.3/32      unicast [loopback 09:44:29.379] * (240)
\tdev lo
\tType: device univ
""".splitlines()
BIRD_PROTOCOLS = """Name       Proto      Table      State  Since         Info
device1    Device     ---        up     09:44:29.378
fw_srx1    BGP        ---        up     09:44:30.250  Established
  BGP state:          Established
    Neighbor address: 198.18.0.9
    Neighbor AS:      65001
    Local AS:         65100
    Neighbor ID:      198.18.128.5
    Local capabilities
      Graceful restart
        Restart time: 120
    Hold timer:       2.128/3
  Channel ipv4
    State:          UP
    Routes:         4 imported, 1 filtered, 2 exported, 3 preferred
    Route change stats:     received   rejected   filtered    ignored   accepted
      Import updates:              5          0          1          0          4
      Export updates:             12          4          6        ---          2
fw_srx2    BGP        ---        start  09:44:31.000  Active        Socket: Connection refused
  BGP state:          Active
    Neighbor address: 198.18.0.13
""".splitlines()


def test_bird_routes_are_parsed() -> None:
    routes = parse_routes(BIRD_ROUTES)
    assert [(r.prefix, r.protocol, r.primary, r.source) for r in routes] == [
        ("0.0.0.0/0", "fw_srx1", True, "BGP"), ("0.0.0.0/0", "fw_srx3", False, "BGP"),
        ("198.51.100.0/28", "originated", True, "static"), ("198.18.128.3/32", "loopback", True, "device")]
    assert routes[0].as_path == (65001, 65200, 65020) and routes[0].local_pref == 100
    assert routes[0].nexthops == (NextHop("198.18.0.9", "ge-0-1-1"),)
    assert routes[1].med == 7 and routes[2].blackhole and routes[3].nexthops == (NextHop(None, "lo"),)


def test_bird_protocols_are_parsed() -> None:
    protocols = parse_protocols(BIRD_PROTOCOLS)
    assert [p.name for p in protocols] == ["fw_srx1", "fw_srx2"]
    first, second = protocols
    assert (first.imported, first.filtered, first.exported, first.preferred) == (4, 1, 2, 3)
    assert (first.import_received, first.import_accepted, first.export_accepted) == (5, 4, 2)
    assert first.fields["Neighbor address"] == "198.18.0.9" and first.fields["Hold timer"] == "2.128/3"
    assert second.info.startswith("Active") and second.state == "start"


def test_conntrack_lines_are_parsed_per_direction() -> None:
    text = ("tcp      6 431999 ESTABLISHED src=10.0.0.2 dst=10.0.0.3 sport=37069 dport=179 packets=88 bytes=5541 "
            "src=10.0.0.3 dst=10.0.0.2 sport=179 dport=37069 packets=85 bytes=5424 [ASSURED] mark=0 use=1 id=8650\n"
            "icmp     1 28 src=100.64.1.1 dst=203.0.113.9 type=8 code=0 id=13072 packets=1 bytes=84 "
            "src=203.0.113.9 dst=198.51.100.3 type=0 code=0 id=13072 packets=1 bytes=84 mark=0 use=1 id=99\n"
            "conntrack v1.4.7 (conntrack-tools): 2 flow entries have been shown.\n")
    tcp, icmp = parse_conntrack(text)
    assert (tcp.id, tcp.state, tcp.packets_in, tcp.packets_out, tcp.bytes_out, tcp.assured) == \
        (8650, "ESTABLISHED", 88, 85, 5424, True)
    assert (tcp.reply_source_port, tcp.reply_destination_port) == (179, 37069)
    assert (icmp.id, icmp.source_port, icmp.destination_port, icmp.reply_destination) == \
        (99, 13072, 13072, "198.51.100.3")


# ---------------------------------------------------------------------- Junos: routes
def test_show_route_explains_kernel_routes_with_bird() -> None:
    out = junos.show_route(mx_snapshot(), {})
    assert out.status == 0
    text = out.text
    assert "inet.0: 3 destinations, 3 routes (3 active, 0 holddown, 0 hidden)" in text
    assert "TRUST-VR.inet.0: 9 destinations, 10 routes (9 active, 0 holddown, 0 hidden)" in text
    lines = text.splitlines()
    start = lines.index("0.0.0.0/0          *[BGP/170] 00:05:00, localpref 100")
    assert lines[start + 1] == "                      AS path: 65001 65200 65020 I, validation-state: unverified"
    assert lines[start + 2] == "                    >  to 10.0.0.3 via ge-0/1/1.0"
    assert lines[start + 3] == "                    >  to 10.0.0.5 via ge-0/1/2.0"  # ECMP: both in the kernel
    assert lines[start + 4] == "                    [BGP/170] 00:05:00, localpref 100"  # the other path, inactive
    assert "198.18.128.2/32    *[Direct/0] 00:05:00" in text and "                    >  via lo0.0" in text
    assert "198.18.128.3/32    *[Direct/0] 00:05:00" in text and "                    >  via lo0.1" in text
    assert "10.0.0.2/32        *[Local/0] 00:05:00" in text
    assert "                       Local via ge-0/1/1.0" in text
    assert "127.0.0.1" not in text and "198.19.0.255" not in text
    assert "TRUST-VR.selector-srx1.inet.0: 1 destinations" in text
    assert "0.0.0.0/0          *[Static/5] 00:06:40" in text  # planned static: the lab's age
    assert "                       Discard" in text


def test_show_route_destination_table_protocol() -> None:
    snap = mx_snapshot()
    text = junos.show_route(snap, {"destination": "100.64.9.9", "table": "TRUST-VR.inet.0"}).text
    assert "100.64.0.0/16      *[BGP/170]" in text and "0.0.0.0/0" not in text and "inet.0: 3" not in text
    text = junos.show_route(snap, {"destination": "0.0.0.0/0", "exact": True, "table": "TRUST-VR"}).text
    assert text.count("0.0.0.0/0") == 3  # main table and both selector tables
    text = junos.show_route(snap, {"protocol": "local"}).text
    assert "[Local/0]" in text and "[BGP/170]" not in text and "[Direct/0]" not in text
    out = junos.show_route(snap, {"table": "NOPE"})
    assert out.status == 1 and out.text == "error: routing table NOPE does not exist\n"


def test_show_route_json() -> None:
    data = junos.show_route(mx_snapshot(), {"table": "TRUST-VR.inet.0"}).data
    table = data["route-information"]["route-table"][0]
    assert table["table-name"] == "TRUST-VR.inet.0" and table["total-route-count"] == 10
    default = table["rt"][0]
    assert default["rt-destination"] == "0.0.0.0/0"
    assert [e["active-tag"] for e in default["rt-entry"]] == ["*", ""]
    assert default["rt-entry"][0]["as-path"] == "65001 65200 65020"
    assert default["rt-entry"][0]["learned-from"] == "10.0.0.3"
    assert [h["to"] for h in default["rt-entry"][0]["nh"]] == ["10.0.0.3", "10.0.0.5"]
    json.dumps(data)


def test_routing_daemon_down() -> None:
    snap = mx_snapshot()
    snap.instances[1].bird_error = "cannot reach BIRD"
    out = junos.show_route(snap, {})
    assert out.status == 1 and out.text == "error: the routing subsystem is not running\n"
    assert junos.show_bgp_summary(snap, {}).text == "error: the routing subsystem is not running\n"
    assert "Routing table: TRUST-VR.inet" in junos.show_route_forwarding_table(snap, {}).text  # the FIB stays


def test_forwarding_table() -> None:
    text = junos.show_route_forwarding_table(mx_snapshot(), {}).text
    assert "Routing table: default.inet\nInternet:\n" in text
    assert "Routing table: TRUST-VR.inet\n" in text and "Routing table: TRUST-VR.selector-none.inet\n" in text
    lines = text.splitlines()
    index = lines.index("default            user     -                    ulst     -        -")
    assert lines[index + 1].split() == ["10.0.0.3", "ucst", "-", "-", "ge-0/1/1.0"]
    assert lines[index + 2].split() == ["10.0.0.5", "ucst", "-", "-", "ge-0/1/2.0"]
    assert any(line.split() == ["10.0.0.2/31", "intf", "-", "rslv", "-", "-", "ge-0/1/1.0"] for line in lines)
    assert any(line.split() == ["10.0.0.2/32", "intf", "-", "10.0.0.2", "locl", "-", "-"] for line in lines)
    assert any(line.split() == ["198.19.0.255/32", "dest", "-", "bcst", "-", "-", "fxp0.0"] for line in lines)
    assert any(line.split() == ["default", "user", "-", "dscd", "-", "-"] for line in lines)
    one = junos.show_route_forwarding_table(mx_snapshot(), {"destination": "100.64.0.1", "table": "TRUST-VR.inet"})
    assert [line.split()[0] for line in one.text.splitlines()[3:] if line] == ["100.64.0.0/16"]
    selectors = junos.show_route_forwarding_table(mx_snapshot(), {"destination": "100.64.0.1"}).text
    assert "Routing table: TRUST-VR.selector-srx1.inet" in selectors  # their default route covers it


# ---------------------------------------------------------------------- Junos: interfaces, BGP, version
def test_interfaces_terse() -> None:
    lines = junos.show_interfaces_terse(mx_snapshot(), {}).text.splitlines()
    assert lines[0] == "Interface               Admin Link Proto    Local                 Remote"
    assert lines[1:3] == ["ge-0/0/0                up    up", "ge-0/0/0.0              up    up   inet     10.0.0.0/31"]
    assert "fxp0.0                  up    up   inet     198.19.0.4/24" in lines
    assert lines.index("lo0                     up    up") > lines.index("fxp0                    up    up")
    assert "lo0.0                   up    up   inet     198.18.128.2          --> 0/0" in lines
    assert "lo0.1                   up    up   inet     198.18.128.3          --> 0/0" in lines
    assert sum(1 for line in lines if line.startswith("lo0 ")) == 1
    one = junos.show_interfaces_terse(mx_snapshot(), {"interface": "ge-0/1/2"}).text.splitlines()
    assert len(one) == 3
    assert junos.show_interfaces_terse(mx_snapshot(), {"interface": "xe-9/9/9"}).status == 1


def test_interfaces_detail_and_descriptions() -> None:
    text = junos.show_interfaces(mx_snapshot(), {"interface": "ge-0/1/1"}).text
    assert text.startswith("Physical interface: ge-0/1/1, Enabled, Physical link is Up\n")
    assert "  Description: trust: to srx1 ge-0/0/0\n" in text
    assert "    Routing instance: TRUST-VR\n" in text and "Destination: 10.0.0.2/31, Local: 10.0.0.2" in text
    descr = junos.show_interfaces(mx_snapshot(), {"descriptions": True}).text.splitlines()
    assert descr[1].split()[:3] == ["ge-0/0/0", "up", "up"]


def test_bgp_summary() -> None:
    out = junos.show_bgp_summary(mx_snapshot(), {})
    lines = out.text.splitlines()
    assert "Groups: 2 Peers: 3 Down peers: 1" in lines
    assert lines[lines.index("TRUST-VR.inet.0") + 1].split() == ["3", "3", "0", "0", "0", "0"]
    established = next(i for i, line in enumerate(lines) if line.startswith("10.0.0.3 "))
    assert lines[established].split() == ["10.0.0.3", "65001", "-", "-", "0", "-", "5:00", "Establ"]
    assert lines[established + 1] == "  TRUST-VR.inet.0: 2/2/2/0"
    assert next(line for line in lines if line.startswith("10.0.0.5 ")).split()[-1] == "Active"
    assert out.data["bgp-information"]["down-peer-count"] == 1


def test_bgp_neighbor() -> None:
    text = junos.show_bgp_neighbor(mx_snapshot(), {"address": "10.0.0.3"}).text
    assert text.startswith("Peer: 10.0.0.3 AS 65001  Local: 10.0.0.2 AS 65100\n")
    assert "  Group: SRX-TRUST             Routing-Instance: TRUST-VR\n" in text
    assert "State: Established" in text and "Local Interface: ge-0/1/1.0" in text
    assert "    Received prefixes:            2\n" in text and "Restart time configured on the peer: 120" in text
    assert junos.show_bgp_neighbor(mx_snapshot(), {"address": "9.9.9.9"}).status == 1


def test_version_and_uptime() -> None:
    text = junos.show_version(mx_snapshot(), {}).text
    assert "Hostname: mx1\n" in text and "BIRD 2.0.12" in text
    assert "Protocols started: 2026-11-30 10:00:00.000" in junos.show_system_uptime(mx_snapshot(), {}).text


# ---------------------------------------------------------------------- Junos: services
TLB_STATUS = mxlb_status(mode="tlb", updated_at=NOW - 0.5, members=[
    mxlb_member("srx1", alive=True, buckets=32, health=mxlb_health(True, "echo reply"),
                counters={"trust": {"packets": 10, "bytes": 1000}, "untrust": {"packets": 5, "bytes": 500}}),
    mxlb_member("srx2", alive=False, buckets=0, health=mxlb_health(False, "no echo reply"),
                counters={"trust": {"packets": 0, "bytes": 0}})])
TLB_CONFIG = {"health": {"type": "icmp"}, "selectors": [{"members": [{"name": "srx1", "loopback": "198.18.128.5"},
                                                                      {"name": "srx2", "loopback": "198.18.128.6"}]}]}


def test_tlb_statistics() -> None:
    snap = mx_snapshot(load_balancing="tlb", status={"mxlb-status.json": TLB_STATUS, "mxlb.json": TLB_CONFIG})
    out = junos.show_tlb_statistics(snap, {})
    assert "Network monitor RE daemon connection   : Established" in out.text
    assert "Active real service count              : 1" in out.text
    assert "Total packet sent count              : 15" in out.text
    rows = [line.split() for line in out.text.splitlines() if line.startswith("srx")]
    assert rows == [["srx1", "198.18.128.5", "UP", "15", "1500", "ICMP", "UP"],
                    ["srx2", "198.18.128.6", "DOWN", "0", "0", "ICMP", "DOWN"]]
    stale = mx_snapshot(load_balancing="tlb", status={"mxlb-status.json": {**TLB_STATUS, "updated_at": NOW - 30}})
    assert "Not established" in junos.show_tlb_statistics(stale, {}).text
    assert junos.show_tlb_statistics(mx_snapshot(), {}).text == "error: traffic-load-balance is not configured\n"
    assert "not running" in junos.show_tlb_statistics(mx_snapshot(load_balancing="tlb"), {}).text


def srx_snapshot(mnha: dict[str, Any] | None = None, nat_pool: str | None = None, **changes: Any) -> Snapshot:
    node = Node(
        name="srx1", kind="srx", vendor="junos", master_ns="t-srx1", mgmt_if="fxp0", mgmt_address="198.19.0.5/24",
        instances=(Instance("", "t-srx1", "inet.0"),), birds=(Bird("", "bird", "/nonexistent.ctl"),),
        peers=(Peer("trust_mx1", "", "MX-TRUST", "mx1", "10.0.0.2", 65100, "10.0.0.3", 65001),),
        ports=(Port("ge-0-0-0", "ge-0/0/0", "", "trust", "trust: to mx1 ge-0/1/1"),
               Port("ge-0-0-1", "ge-0/0/1", "", "untrust", "untrust: to mx1 ge-0/2/1"),
               Port("ge-0-0-4", "ge-0/0/4", "", "icl", "icl: to srx2 ge-0/0/4")),
        loopbacks={"": "198.18.128.5"}, config_file="/x/juniper.conf", status_dir="/x", host_key="/x/key",
        nat_pool=nat_pool, features={"mnha": mnha} if mnha else {},
    )
    inst = LiveInstance("", "inet.0", links=[link(1, "lo", "lo"), link(20, "ge-0-0-0", "ge-0/0/0"),
                                             link(21, "ge-0-0-1", "ge-0/0/1")],
                        addresses=[Address("ge-0-0-0", "10.0.0.3", 31), Address("ge-0-0-1", "10.0.1.3", 31),
                                   Address("lo", "198.18.128.5", 32)],
                        routes=[kroute("0.0.0.0/0", ("10.0.1.2", "ge-0-0-1")),
                                kroute("100.64.0.0/16", ("10.0.0.2", "ge-0-0-0")),
                                kroute("10.0.0.2/31", (None, "ge-0-0-0"), proto="kernel"),
                                kroute("10.0.1.2/31", (None, "ge-0-0-1"), proto="kernel")])
    sessions = parse_conntrack(
        "udp      17 29 src=100.64.1.1 dst=203.0.113.9 sport=41000 dport=7000 packets=2 bytes=120 "
        "src=203.0.113.9 dst=198.51.100.3 sport=7000 dport=1025 packets=1 bytes=60 mark=0 use=1 id=7\n"
        "tcp      6 431999 ESTABLISHED src=10.0.0.2 dst=10.0.0.3 sport=37069 dport=179 packets=88 bytes=5541 "
        "src=10.0.0.3 dst=10.0.0.2 sport=179 dport=37069 packets=85 bytes=5424 [ASSURED] mark=0 use=1 id=8\n")
    snap = Snapshot("t", node, [inst], NOW, UPTIME, NOW - 400, "tlb", "cgnat", sessions=sessions,
                    conntrack_max=262144)
    for key, value in changes.items():
        setattr(snap, key, value)
    return snap


def test_flow_sessions() -> None:
    out = junos.show_flow_session(srx_snapshot(), {})
    lines = out.text.splitlines()
    assert lines[0] == "Session ID: 7, Policy name: permit-outbound/1, Timeout: 29, Valid"
    assert lines[1] == ("  In: 100.64.1.1/41000 --> 203.0.113.9/7000;udp, Conn Tag: 0x0, If: ge-0/0/0.0, "
                        "Pkts: 2, Bytes: 120,")
    assert lines[2] == ("  Out: 203.0.113.9/7000 --> 198.51.100.3/1025;udp, Conn Tag: 0x0, If: ge-0/0/1.0, "
                        "Pkts: 1, Bytes: 60,")
    assert "Session ID: 8, Policy name: self-traffic-policy/1" in out.text and "If: .local..0" in out.text
    assert lines[-1] == "Total sessions: 2"
    udp_only = junos.show_flow_session(srx_snapshot(), {"protocol": "udp", "destination-port": "7000"})
    assert udp_only.text.splitlines()[-1] == "Total sessions: 1"
    assert junos.show_flow_session(srx_snapshot(), {"source-prefix": "100.64.0.0/16"}).data[
        "flow-session-information"]["displayed-session-count"] == 1
    summary = junos.show_flow_session_summary(srx_snapshot(), {}).text
    assert "Unicast-sessions: 2\n" in summary and "Maximum-sessions: 262144\n" in summary
    broken = srx_snapshot(sessions_error="cannot read the session table: boom")
    assert junos.show_flow_session(broken, {}).text == "error: cannot read the session table: boom\n"


def test_nat_source_summary() -> None:
    text = junos.show_nat_source_summary(srx_snapshot(nat_pool="198.51.100.0/28"), {}).text
    assert "Total port number usage for port translation pool: 1\n" in text
    assert "Maximum port number for port translation pool: 1032192\n" in text
    assert "SRC-POOL           198.51.100.0-198.51.100.15" in text
    assert junos.show_nat_source_summary(srx_snapshot(), {}).text.startswith(
        "Total port number usage for port translation pool: 0\n")


MNHA_STATUS = mnha_status(updated_at=NOW - 0.3, heartbeat={"sent": 10, "received": 9})


def test_chassis_high_availability() -> None:
    pair = {"nodes": ["srx1", "srx2"], "mode": "srg1"}
    text = junos.show_chassis_ha(srx_snapshot(mnha=pair, status={"mnha-status.json": MNHA_STATUS}), {}).text
    assert "Node Status: ONLINE\nLocal-id: 1\n" in text
    assert "IP address: 10.9.0.1    Interface: ge-0/0/4.0" in text and "Conn State: UP" in text
    assert "Services Redundancy Group: 1\n" in text and "        Status: ACTIVE\n" in text
    assert "          Status : BACKUP\n" in text
    assert junos.show_chassis_ha(srx_snapshot(), {}).text == "error: Chassis high availability is not configured\n"
    assert "not running" in junos.show_chassis_ha(srx_snapshot(mnha=pair), {}).text


# ---------------------------------------------------------------------- IOS
def ios_snapshot(features: dict[str, Any] | None = None, **changes: Any) -> Snapshot:
    node = Node(
        name="gw", kind="ios-router", vendor="ios", master_ns="t-gw", mgmt_if="mgmt0", mgmt_address="198.19.0.3/24",
        instances=(Instance("", "t-gw", "inet.0"),), birds=(Bird("", "bird", "/nonexistent.ctl"),),
        peers=(Peer("peer_mx1", "", "", "mx1", "198.18.0.5", 65100, "198.18.0.4", 65010),),
        ports=(Port("Gi0-0", "GigabitEthernet0/0", "", None, "to client eth1"),
               Port("Gi0-1", "GigabitEthernet0/1", "", "trust", "to mx1 ge-0/0/0")),
        loopbacks={"": "198.18.128.1"}, config_file="/x/running-config", status_dir="/x", host_key="/x/key",
        features=features or {},
    )
    inst = LiveInstance(
        "", "inet.0",
        links=[link(1, "lo", "lo"), link(13, "mgmt0"), link(20, "Gi0-0", "GigabitEthernet0/0"),
               link(21, "Gi0-1", "GigabitEthernet0/1", up=False)],
        addresses=[Address("lo", "127.0.0.1", 8), Address("lo", "198.18.128.1", 32),
                   Address("mgmt0", "198.19.0.3", 24), Address("Gi0-0", "198.18.0.1", 31),
                   Address("Gi0-1", "198.18.0.4", 31)],
        routes=[kroute("0.0.0.0/0", ("198.18.0.5", "Gi0-1"), ("198.18.0.7", "Gi0-1")),
                kroute("100.64.0.0/16", ("198.18.0.0", "Gi0-0")),
                kroute("203.0.113.0/24", ("198.18.0.5", "Gi0-1")),
                kroute("198.18.0.0/31", (None, "Gi0-0"), proto="kernel", prefsrc="198.18.0.1"),
                kroute("198.18.0.4/31", (None, "Gi0-1"), proto="kernel", prefsrc="198.18.0.4"),
                kroute("198.19.0.0/24", (None, "mgmt0"), proto="kernel", prefsrc="198.19.0.3"),
                local("198.18.0.1", "Gi0-0"), local("198.18.0.4", "Gi0-1"), local("198.19.0.3", "mgmt0"),
                local("198.18.128.1", "lo")],
        bird_routes=[bird("0.0.0.0/0", "peer_mx1", (65100, 65001), "198.18.0.5", "Gi0-1"),
                     bird("100.64.0.0/16", "originated", (), "198.18.0.0", "Gi0-0", source="static"),
                     bird("203.0.113.0/24", "peer_mx1", (65100, 65001, 65200, 65020), "198.18.0.5", "Gi0-1")],
        bgp=[bgp("peer_mx1", imported=7, preferred=7)],
        bird_status=["BIRD 2.0.12"],
    )
    snap = Snapshot("t", node, [inst], NOW, UPTIME, NOW - 4000, "ecmp-chash", "sfw")
    snap.address_ages = {f"/{a.address}": 300.0 for a in inst.addresses}
    for key, value in changes.items():
        setattr(snap, key, value)
    return snap


def test_ios_ip_route() -> None:
    text = ios.show_ip_route(ios_snapshot(), {}).text
    assert text.startswith("Codes: L - local, C - connected, S - static")
    assert "Gateway of last resort is 198.18.0.5 to network 0.0.0.0\n" in text
    lines = text.splitlines()
    index = lines.index("B*    0.0.0.0/0 [20/0] via 198.18.0.5, 00:05:00")
    assert lines[index + 1] == "                [20/0] via 198.18.0.7, 00:05:00"
    assert "      100.0.0.0/16 is subnetted, 1 subnets" in lines
    assert "S        100.64.0.0 [1/0] via 198.18.0.0" in lines
    assert "      198.18.0.0/24 is variably subnetted, 4 subnets, 2 masks" in lines
    assert "C        198.18.0.0/31 is directly connected, GigabitEthernet0/0" in lines
    assert "L        198.18.0.1/32 is directly connected, GigabitEthernet0/0" in lines
    assert "      198.18.128.0/32 is subnetted, 1 subnets" in lines
    assert "C        198.18.128.1 is directly connected, Loopback0" in lines
    assert "B     203.0.113.0/24 [20/0] via 198.18.0.5, 00:05:00" in lines
    bgp_only = ios.show_ip_route(ios_snapshot(), {"bgp": True}).text
    assert "203.0.113.0/24" in bgp_only and "directly connected" not in bgp_only


def test_ios_route_detail_and_null0() -> None:
    detail = ios.show_ip_route(ios_snapshot(), {"address": "203.0.113.77"}).text
    assert detail.startswith("Routing entry for 203.0.113.0/24\n  Known via \"bgp 65010\", distance 20, metric 0")
    assert "AS Hops 4" in detail
    default = ios.show_ip_route(ios_snapshot(), {"address": "0.0.0.0/0"}).text
    assert "  * 198.18.0.5, from 198.18.0.5, 00:05:00 ago\n" in default and "    198.18.0.7, from 198.18.0.7" in default
    snap = ios_snapshot()
    snap.instances[0].routes = [KernelRoute(254, "0.0.0.0/0", "blackhole", "bird", 0, 32)]
    snap.instances[0].bird_routes = [BirdRoute("0.0.0.0/0", "originated", "static", True, "10:00:00", 200, (), True)]
    text = ios.show_ip_route(snap, {}).text
    assert "Gateway of last resort is 0.0.0.0 to network 0.0.0.0" in text
    assert "S*    0.0.0.0/0 is directly connected, Null0" in text


def test_ios_interface_brief_and_bgp() -> None:
    lines = ios.show_ip_interface_brief(ios_snapshot(), {}).text.splitlines()
    assert lines[0] == "Interface              IP-Address      OK? Method Status                Protocol"
    assert lines[1].split() == ["GigabitEthernet0/0", "198.18.0.1", "YES", "manual", "up", "up"]
    assert lines[2].split() == ["GigabitEthernet0/1", "198.18.0.4", "YES", "manual", "administratively", "down",
                                "down"]
    assert lines[3].split()[:2] == ["Loopback0", "198.18.128.1"] and lines[4].split()[:2] == ["mgmt0", "198.19.0.3"]
    summary = ios.show_ip_bgp_summary(ios_snapshot(), {}).text.splitlines()
    assert summary[0] == "BGP router identifier 198.18.128.1, local AS number 65010"
    assert summary[-1].split() == ["198.18.0.5", "4", "65100", "-", "-", "-", "0", "0", "00:05:00", "7"]


def test_ios_running_config_interface_block() -> None:
    config = "hostname gw\n!\ninterface GigabitEthernet0/1\n description x\n ip address 1.1.1.1 255.255.255.0\n!\nend\n"
    text = ios.show_running_config(ios_snapshot(config_text=config), {"interface": "gi0/1"}).text
    assert text.endswith("interface GigabitEthernet0/1\n description x\n ip address 1.1.1.1 255.255.255.0\nend\n")
    assert ios.show_running_config(ios_snapshot(config_text=config), {"interface": "Gi9/9"}).status == 1
    assert "Current configuration : " in ios.show_running_config(ios_snapshot(config_text=config), {}).text


def test_ios_features_not_configured_not_running_running() -> None:
    assert ios.show_standby(ios_snapshot(), {}).text == "% HSRP is not configured\n"
    snap = ios_snapshot(features={"hsrp": [{"interface": "Ethernet0/1", "group": 1}]})
    assert "HSRP is not running" in ios.show_standby(snap, {}).text
    group = hsrp_group(state="Active", active_mac="0000.0c07.ac01", active={"address": "local", "priority": 255},
                       priority=255, name="group1")
    snap = ios_snapshot(features={"hsrp": [{}]}, status={"hsrp-status.json": hsrp_status([group])})
    text = ios.show_standby(snap, {}).text
    assert text.startswith("Ethernet0/1 - Group 1\n  State is Active\n") and "Group name is \"group1\"" in text
    brief = ios.show_standby(snap, {"brief": True}).text.splitlines()
    assert brief[-1].split() == ["Ethernet0/1", "1", "255", "Active", "local", "unknown", "10.10.10.100"]
    assert ios.show_crypto_ikev2_cluster(ios_snapshot(), {}).text == "% IKEv2 cluster is not configured\n"
    shut = ios_snapshot(features={"ikev2_cluster": {"shutdown": True}})
    assert ios.show_crypto_ikev2_cluster(shut, {}).text == "Cluster is shutdown\n"
    assert "not running" in ios.show_crypto_ikev2_sa(ios_snapshot(features={"ikev2": {}}), {}).text
    assert ios.show_crypto_ipsec_sa(ios_snapshot(), {}).text == "% IPsec is not configured\n"


@pytest.mark.parametrize("renderer", [ios.show_version, ios.show_clock, ios.show_ip_interface_brief])
def test_ios_simple_commands_render(renderer: Any) -> None:
    assert renderer(ios_snapshot(), {}).status == 0


def test_chassis_high_availability_shows_srg0_monitoring_and_the_signal_route() -> None:
    pair = {"nodes": ["srx1", "srx2"], "mode": "srg0"}
    dest = {"ip": "198.18.0.8", "src_ip": "198.18.0.9", "interface": "ge-0/0/0.0", "weight": 300, "state": "DOWN"}
    srg0 = {"role": "ineligible",
            "signal_route": {"prefix": "192.168.255.0/32", "table": 50, "installed": True},
            "monitor": {"srg_threshold": 300, "srg_weight": 300, "interval_ms": 300, "multiplier": 3,
                        "objects": [{"name": "trust", "threshold": 300, "object_threshold": 300, "weight": 300,
                                     "state": "DOWN", "destinations": [dest]}]},
            "events": [{"at": 0.0, "what": "trust: bfd-liveliness 198.18.0.8 down via ge-0/0/0.0"}]}
    status = {**MNHA_STATUS, "srg0": srg0}
    text = junos.show_chassis_ha(srx_snapshot(mnha=pair, status={"mnha-status.json": status}), {}).text
    assert "Current State: OFFLINE" in text
    assert "Monitor Object: trust      State: DOWN  Weight: 300/300" in text
    assert "BFD Destination: 198.18.0.8" in text and "State: DOWN" in text
    assert "Install On Failure Route: 192.168.255.0/32 routing-instance MNHA-VR (INSTALLED)" in text
    assert "trust: bfd-liveliness 198.18.0.8 down via ge-0/0/0.0" in text


def test_ios_crypto_ipsec_sa_from_live_esp_counters() -> None:
    sa = {"interface": "Virtual-Access1", "local": "10.10.10.2", "remote": "10.10.20.6", "port": 4500,
          "remote_ident": ["172.16.2.1/32"], "local_ident": ["0.0.0.0/0"], "spi_in": "c190e458",
          "spi_out": "5147b0d6", "transform": "esp-gcm 256", "encaps": 7, "decaps": 9, "bytes_out": 700,
          "bytes_in": 900, "verify_failed": 2,
          "replay_failed": 1, "malformed": 0}
    snap = ios_snapshot(features={"ikev2": {}}, status={"ikev2-status.json": gateway_status(ipsec_sas=[sa])})
    lines = ios.show_crypto_ipsec_sa(snap, {}).text.splitlines()
    assert lines[0] == "interface: Virtual-Access1"
    assert "   remote ident (addr/mask/prot/port): (172.16.2.1/255.255.255.255/0/0)" in lines
    assert "   local  ident (addr/mask/prot/port): (0.0.0.0/0.0.0.0/0/0)" in lines
    assert "   current_peer 10.10.20.6 port 4500" in lines
    assert "    #pkts encaps: 7, #pkts encrypt: 7, #pkts digest: 7" in lines
    assert "    #pkts decaps: 9, #pkts decrypt: 9, #pkts verify: 9" in lines
    assert "    #pkts verify failed: 2, #pkts replay failed: 1" in lines
    assert "     current outbound spi: 0x5147B0D6(1363652822)" in lines
    assert lines.count("        transform: esp-gcm 256 ,") == 2
    running = ios_snapshot(features={"ikev2": {}}, status={"ikev2-status.json": {"sas": []}})  # not a status
    assert "not running" in ios.show_crypto_ipsec_sa(running, {}).text


def test_show_interfaces_gives_the_mtus_as_junos_counts_them() -> None:
    """A link of IP MTU 1500: the physical interface says 1514 (Junos counts the Ethernet header), its
    inet family 1500; lo0's physical MTU is unlimited."""
    snap = srx_snapshot()
    port = junos.show_interfaces(snap, {"interface": "ge-0/0/0"})
    assert "Link-level type: Ethernet, MTU: 1514\n" in port.text
    assert "    Protocol inet, MTU: 1500\n" in port.text
    assert port.data["interface-information"]["physical-interface"][0]["mtu"] == 1514
    assert "Link-level type: Unspecified, MTU: Unlimited\n" in junos.show_interfaces(snap, {"interface": "lo0"}).text


def test_chassis_high_availability_shows_the_session_sync_counters_and_icl_bytes() -> None:
    pair = {"nodes": ["srx1", "srx2"], "mode": "srg1"}
    sync = {"sessions": 12, "cache": 7, "sent_packets": 40, "received_packets": 30, "sent_bytes": 4096,
            "received_bytes": 2048, "injected": 5, "removed": 1, "errors": 0, "lost": 0, "stale": 0,
            "resend_queue": 2, "daemon_answering": True, "refresh_s": 15.0, "refresh_tcp_s": 450.0,
            "refreshes": 3, "awaiting_peer": False, "awaited_s": 1.25, "peer_awaiting": False, "sending": False,
            "cold_syncs": 1, "last_cold_sync_s": 0.5, "last_cold_sync_sessions": 9}
    text = junos.show_chassis_ha(srx_snapshot(mnha=pair, status={"mnha-status.json": {**MNHA_STATUS, "sync": sync}}),
                                 {}).text
    assert "  Cold Synchronization Status: COMPLETE, took 1.25 s" in text
    assert "    Sessions: 12 in the table, 7 opened or carried here (synced to the peer)" in text
    assert "    From the peer: 5 written, 1 removed" in text
    assert "    Messages: sent 40, received 30, unacknowledged 2, lost 0, stale 0, errors 0" in text
    assert "    Bytes over the ICL: sent 4096, received 2048" in text
    assert "    Sent to the peer: 1 cold syncs, last 9 sessions in 0.5 s" in text


@pytest.mark.parametrize("ended, shown", [
    ("received", "COMPLETE, took 60.5 s"),
    ("timed out", "TIMED OUT after 60.5 s (activeness taken without the peer's sessions)"),
    ("no peer", "NOT NEEDED (no peer heard in 60.5 s)"),
])
def test_chassis_high_availability_shows_how_the_cold_sync_ended(ended: str, shown: str) -> None:
    pair = {"nodes": ["srx1", "srx2"], "mode": "srg1"}
    sync = {"sessions": 0, "cache": 0, "sent_packets": 0, "received_packets": 0, "sent_bytes": 0,
            "received_bytes": 0, "injected": 0, "removed": 0, "errors": 0, "lost": 0, "resend_queue": 0,
            "daemon_answering": True, "refresh_s": 15.0, "refresh_tcp_s": 450.0, "refreshes": 0,
            "awaiting_peer": False, "awaited_s": 60.5, "cold_sync_ended": ended, "peer_awaiting": False,
            "sending": False, "cold_syncs": 0, "last_cold_sync_s": None, "last_cold_sync_sessions": None}
    output = junos.show_chassis_ha(srx_snapshot(mnha=pair, status={"mnha-status.json": {**MNHA_STATUS, "sync": sync}}),
                                   {})
    assert f"  Cold Synchronization Status: {shown}\n" in output.text
    assert output.data["mnha-information"]["sync"]["cold_sync_ended"] == ended
