"""The command tables: every command of each vendor, what state it reads, which function renders it.

Data-driven on purpose: a feature that starts writing a status file into nodes/NODE/ gets its `show`
command by adding one `Command` (words, help, parameters) and one `Impl` (the status files it reads
and a renderer in junos/ / ios.py). `run` keys starting with `action:` are commands that change
state (actions.py); the others are `Impl`s here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from labkit.contracts import HSRP_STATUS, IKEV2_STATUS, MNHA_STATUS, MXLB_CONFIG, MXLB_STATUS, SRD_STATUS

from .. import kinds
from . import ios, ios6, junos
from .gather import Needs, Snapshot
from .parser import Command, Grammar, Param, is_address, is_address46, is_number, is_prefix, is_prefix46, is_word
from .pipes import Output

# which node kinds offer a command: the load balancer (MX), the firewall (SRX), by CLI dialect
MX, SRX = kinds.names(lambda k: k.load_balancer), kinds.names(lambda k: k.firewall)
IOS, JUNOS_KINDS = kinds.names(lambda k: k.ssh_vendor == "ios"), kinds.names(lambda k: k.ssh_vendor == "junos")
Renderer = Callable[[Snapshot, dict[str, Any]], Output]


@dataclass(frozen=True)
class Impl:
    needs: Needs
    render: Renderer


# ---------------------------------------------------------------------- Junos
JUNOS_WORDS: dict[tuple[str, ...], str] = {
    ("show",): "Show system information",
    ("show", "bgp"): "Show Border Gateway Protocol information",
    ("show", "chassis"): "Show chassis information",
    ("show", "chassis", "high-availability"): "Show Multi Node High Availability information",
    ("show", "interfaces"): "Show interface information",
    ("show", "route"): "Show routing table information",
    ("show", "security"): "Show security information",
    ("show", "security", "flow"): "Show flow information",
    ("show", "security", "flow", "session"): "Show session information",
    ("show", "security", "nat"): "Show Network Address Translation information",
    ("show", "security", "nat", "source"): "Show source NAT information",
    ("show", "services"): "Show services information",
    ("show", "services", "traffic-load-balance"): "Show traffic load balancer information",
    ("show", "system"): "Show system information",
    ("show", "route", "advertising-protocol"): "Show routing table information for a protocol",
    ("show", "route", "receive-protocol"): "Show routing table information for a protocol",
    ("show", "security", "policies"): "Show security firewall policies",
    ("show", "security", "zones"): "Show security zones",
    ("show", "services", "redundancy-group"): "Show services redundancy group information",
    ("request",): "Make system-level requests",
    ("request", "system"): "Perform system-level operations",
    ("request", "chassis"): "Perform chassis-specific operations",
    ("request", "chassis", "routing-engine"): "Perform routing engine operations",
    ("request", "chassis", "routing-engine", "master"): "Change routing engine mastership",
    ("request", "services"): "Perform service-related operations",
    ("restart",): "Restart software process",
    ("set",): "Set CLI properties, date/time, craft interface message",
    ("set", "cli"): "Set CLI properties",
}
_TABLE = Param("table", "Name of routing table", "value", "<table-name>")
_INSTANCE = Param("instance", "Name of routing instance", "value", "<instance-name>")
JUNOS_COMMANDS: list[Command] = [
    Command(("show", "version"), "Show software process revision levels", "version"),
    Command(("show", "system", "uptime"), "Show time since the system rebooted and processes started", "uptime"),
    Command(("show", "interfaces"), "Show interface information", "interfaces", (
        Param("terse", "Display terse output"),
        Param("descriptions", "Display interface description strings"),
        Param("brief", "Display brief output"),
        Param("detail", "Display detailed output"),
        Param("extensive", "Display extensive output"),
        Param("interface", "Name of physical or logical interface", "positional", check=is_word),
    )),
    Command(("show", "interfaces", "terse"), "Display terse output", "interfaces-terse", (
        Param("interface", "Name of physical or logical interface", "positional", check=is_word),
    )),
    Command(("show", "interfaces", "descriptions"), "Display interface description strings", "interfaces-descr"),
    Command(("show", "route"), "Show routing table information", "route", (
        _TABLE,
        Param("exact", "Show exactly matching route"),
        Param("longer", "Show longer prefixes of the destination"),
        Param("protocol", "Name of protocol", "value", "<protocol>", choices=("bgp", "direct", "local", "static")),
        Param("destination", "IP address and optional prefix length of destination", "positional",
              check=is_prefix46),
    )),
    Command(("show", "route", "forwarding-table"), "Show forwarding table information", "forwarding-table", (
        _TABLE,
        Param("destination", "Destination address or prefix", "value", "<destination>"),
        Param("family", "Protocol family", "value", "<family>", choices=("inet", "inet6")),
    )),
    Command(("show", "bgp", "summary"), "Show overview of BGP information", "bgp-summary", (_INSTANCE,)),
    Command(("show", "bgp", "neighbor"), "Show BGP neighbors", "bgp-neighbor", (
        _INSTANCE,
        Param("address", "IP address of a peer", "positional", check=is_address46),
    )),
    Command(("show", "configuration"), "Show current configuration", "configuration", rest=True),
    Command(("show", "security", "flow", "session"), "Show session information", "flow-session", (
        Param("source-prefix", "Source IP prefix or address", "value", "<source-prefix>"),
        Param("destination-prefix", "Destination IP prefix or address", "value", "<destination-prefix>"),
        Param("protocol", "IP protocol name", "value", "<protocol>", choices=("tcp", "udp", "icmp")),
        Param("source-port", "Source port", "value", "<source-port>"),
        Param("destination-port", "Destination port", "value", "<destination-port>"),
    ), kinds=SRX),
    Command(("show", "security", "flow", "session", "summary"), "Show summary of sessions", "flow-summary",
            kinds=SRX),
    Command(("show", "security", "nat", "source", "summary"), "Show Summary of source NAT information",
            "nat-summary", kinds=SRX),
    Command(("show", "security", "nat", "source", "pool"), "Show source NAT pools", "nat-pool", (
        Param("name", "Name of source NAT pool or all", "positional", check=is_word),
    ), kinds=SRX),
    Command(("show", "security", "nat", "source", "rule"), "Show source NAT rules", "nat-rule", (
        Param("name", "Name of source NAT rule or all", "positional", check=is_word),
    ), kinds=SRX),
    Command(("show", "security", "policies"), "Show security firewall policies", "security-policies", (
        Param("hit-count", "Show policy hit count"),
    ), kinds=SRX),
    Command(("show", "security", "zones"), "Show security zones", "security-zones", (
        Param("zone", "Name of security zone", "positional", check=is_word),
    ), kinds=SRX),
    Command(("show", "route", "advertising-protocol", "bgp"), "Border Gateway Protocol", "bgp-advertising", (
        Param("neighbor", "IP address of BGP peer", "positional", check=is_address46, required=True),
    )),
    Command(("show", "route", "receive-protocol", "bgp"), "Border Gateway Protocol", "bgp-receive", (
        Param("neighbor", "IP address of BGP peer", "positional", check=is_address46, required=True),
    )),
    Command(("show", "arp"), "Show system Address Resolution Protocol table entries", "arp", (
        Param("no-resolve", "Don't attempt to print addresses symbolically"),
        Param("interface", "Name of interface", "value", "<interface-name>"),
    )),
    Command(("show", "services", "redundancy-group"), "Show services redundancy group information", "srd", (
        Param("id", "Redundancy group identifier", "positional", check=is_number),
    ), kinds=MX),
    Command(("ping",), "Ping remote target", "action:ping", (
        Param("host", "Hostname or IP address of remote host", "positional", check=is_address),
        Param("count", "Number of ping requests to send (1..100, default 5)", "value", "<count>"),
        Param("routing-instance", "Routing instance for ping attempt", "value", "<routing-instance>"),
        Param("source", "Source address of echo request", "value", "<source>"),
        Param("size", "Size of request packets (0..1472 bytes)", "value", "<size>"),
        Param("ttl", "IP time-to-live value (IPv6 hop-limit value) (hops)", "value", "<ttl>"),
        Param("wait", "Delay after sending last packet (seconds)", "value", "<wait>"),
        Param("rapid", "Send requests rapidly (default count of 5)"),
    )),
    Command(("traceroute",), "Trace route to remote host", "action:traceroute", (
        Param("host", "Hostname or IP address of remote host", "positional", check=is_address),
        Param("routing-instance", "Name of routing instance for traceroute attempt", "value", "<routing-instance>"),
        Param("source", "Source address to use in outgoing traceroute packets", "value", "<source>"),
        Param("ttl", "Maximum IP time-to-live value (hops)", "value", "<ttl>"),
        Param("wait", "Number of seconds to wait for response", "value", "<wait>"),
        Param("no-resolve", "Don't attempt to print addresses symbolically"),
    )),
    Command(("show", "services", "traffic-load-balance", "statistics"),
            "Show traffic load balance statistics", "tlb-statistics", kinds=MX),
    Command(("show", "chassis", "high-availability", "information"),
            "Show Multi Node High Availability information", "chassis-ha"),
    Command(("request", "system", "reboot"), "Reboot the system", "action:reboot", privileged=True),
    Command(("restart", "routing"), "Routing protocol daemon", "action:restart-routing", (
        Param("gracefully", "Gracefully restart the software process"),
        Param("immediately", "Immediately restart (SIGKILL) the software process"),
    ), privileged=True),
    Command(("request", "chassis", "routing-engine", "master", "switch"),
            "Toggle mastership between routing engines", "action:gres", privileged=True),
    Command(("request", "services", "redundancy-set"), "Services redundancy set operations",
            "action:srd-switchover", (
                Param("id", "Redundancy set identifier", "value", "<id>"),
                Param("switchover", "Switch the redundancy set to the other router"),
            ), privileged=True, kinds=MX),
    Command(("set", "cli", "screen-length"), "Set number of lines on screen", "noop", rest=True),
    Command(("set", "cli", "screen-width"), "Set number of characters on a line", "noop", rest=True),
    Command(("set", "cli", "complete-on-space"), "Set whether typing space completes current word", "noop",
            rest=True),
    Command(("set", "cli", "timestamp"), "Timestamp CLI output", "noop", rest=True),
    Command(("exit",), "Exit the management session", "exit"),
    Command(("quit",), "Exit the management session", "exit"),
    Command(("configure",), "Manipulate software configuration information", "configure", rest=True),
]
JUNOS_PIPES = {
    "count": ("Count occurrences", 0),
    "display": ("Show additional kinds of information (json, set)", 1),
    "except": ("Show only text that does not match a pattern", 1),
    "find": ("Search for first occurrence of pattern", 1),
    "last": ("Display end of output only", 1),
    "match": ("Show only text that matches a pattern", 1),
    "no-more": ("Don't paginate output", 0),
    "trim": ("Trim specified number of columns from start of line", 1),
}
_ROUTES = Needs(links=True, routes=True, bird_routes=True)
JUNOS_IMPLS: dict[str, Impl] = {
    "version": Impl(Needs(bird_status=True), junos.show_version),
    "uptime": Impl(Needs(bird_status=True), junos.show_system_uptime),
    "interfaces": Impl(Needs(links=True), junos.show_interfaces),
    "interfaces-terse": Impl(Needs(links=True), junos.show_interfaces_terse),
    "interfaces-descr": Impl(Needs(links=True), junos.show_interfaces_descriptions),
    "route": Impl(_ROUTES, junos.show_route),
    "forwarding-table": Impl(Needs(links=True, routes=True), junos.show_route_forwarding_table),
    "bgp-summary": Impl(Needs(bgp=True), junos.show_bgp_summary),
    "bgp-neighbor": Impl(Needs(bgp=True, links=True, routes=True), junos.show_bgp_neighbor),
    "configuration": Impl(Needs(config=True), junos.show_configuration),
    "flow-session": Impl(Needs(sessions=True, links=True, routes=True, config=True), junos.show_flow_session),
    "flow-summary": Impl(Needs(sessions=True), junos.show_flow_session_summary),
    "nat-summary": Impl(Needs(sessions=True), junos.show_nat_source_summary),
    "tlb-statistics": Impl(Needs(status=(MXLB_STATUS, MXLB_CONFIG)), junos.show_tlb_statistics),
    "chassis-ha": Impl(Needs(status=(MNHA_STATUS,)), junos.show_chassis_ha),
    "nat-pool": Impl(Needs(sessions=True, ruleset=True), junos.show_nat_source_pool),
    "nat-rule": Impl(Needs(ruleset=True), junos.show_nat_source_rule),
    "security-policies": Impl(Needs(ruleset=True), junos.show_security_policies),
    "security-zones": Impl(Needs(config=True), junos.show_security_zones),
    "bgp-advertising": Impl(Needs(links=True, routes=True, bird_routes=True, bgp=True, bird_exports=True),
                            junos.show_route_advertising_protocol),
    "bgp-receive": Impl(Needs(links=True, routes=True, bird_routes=True, bgp=True),
                        junos.show_route_receive_protocol),
    "arp": Impl(Needs(links=True, neighbors=True), junos.show_arp),
    "srd": Impl(Needs(status=(SRD_STATUS,)), junos.show_services_redundancy_group),
}

# ---------------------------------------------------------------------- IOS
IOS_WORDS: dict[tuple[str, ...], str] = {
    ("show",): "Show running system information",
    ("show", "ip"): "IP information",
    ("show", "ip", "interface"): "IP interface status and configuration",
    ("show", "ip", "bgp"): "BGP information",
    ("show", "ipv6"): "IPv6 information",
    ("show", "bgp"): "BGP information",
    ("show", "bgp", "ipv6"): "Address family",
    ("show", "bgp", "ipv6", "unicast"): "Address Family modifier",
    ("show", "crypto"): "Encryption module",
    ("show", "crypto", "ikev2"): "Shows ikev2 information",
    ("show", "crypto", "ipsec"): "Show IPSEC information",
    ("terminal",): "Set terminal line parameters",
}
IOS_COMMANDS: list[Command] = [
    Command(("show", "version"), "System hardware and software status", "version"),
    Command(("show", "clock"), "Display the system clock", "clock"),
    Command(("show", "running-config"), "Current operating configuration", "running-config", (
        Param("interface", "Show interface configuration", "value", "<interface>"),
    )),
    Command(("show", "ip", "interface", "brief"), "Brief summary of IP status and configuration",
            "ip-interface-brief"),
    Command(("show", "ip", "route"), "IP routing table", "ip-route", (
        Param("bgp", "Border Gateway Protocol (BGP)"),
        Param("static", "Static routes"),
        Param("connected", "Connected networks"),
        Param("local", "Local routes"),
        Param("address", "Network to display information about or hostname", "positional", check=is_prefix),
    )),
    Command(("show", "ip", "bgp", "summary"), "Summary of BGP neighbor status", "ip-bgp-summary"),
    Command(("show", "ipv6", "route"), "Show IPv6 route table entries", "ipv6-route", (
        Param("bgp", "Border Gateway Protocol (BGP)"),
        Param("static", "Static routes"),
        Param("connected", "Connected networks"),
        Param("local", "Local routes"),
    )),
    Command(("show", "bgp", "ipv6", "unicast", "summary"), "Summary of BGP neighbor status",
            "bgp-ipv6-summary"),
    Command(("show", "ip", "bgp", "neighbors"), "Detailed information on TCP and BGP neighbor connections",
            "ip-bgp-neighbors", (
                Param("address", "Neighbor to display information about", "positional", check=is_address),
            )),
    Command(("ping",), "Send echo messages", "action:ping", (
        Param("host", "Ping destination address or hostname", "positional", check=is_address),
        Param("repeat", "specify repeat count (1..100, default 5)", "value", "<count>"),
        Param("size", "specify datagram size", "value", "<size>"),
        Param("source", "specify source address", "value", "<address>"),
        Param("timeout", "specify timeout interval (seconds)", "value", "<seconds>"),
    )),
    Command(("traceroute",), "Trace route to destination", "action:traceroute", (
        Param("host", "Trace route to destination address or hostname", "positional", check=is_address),
        Param("source", "specify source address", "value", "<address>"),
        Param("ttl", "specify maximum time to live", "value", "<ttl>"),
        Param("timeout", "specify timeout interval", "value", "<seconds>"),
    )),
    Command(("show", "standby"), "Hot standby protocol information", "standby", (
        Param("brief", "Brief output"),
    )),
    Command(("show", "crypto", "ikev2", "cluster"), "Show IKEv2 cluster information", "ikev2-cluster"),
    Command(("show", "crypto", "ikev2", "sa"), "Shows ikev2 SAs", "ikev2-sa"),
    Command(("show", "crypto", "ipsec", "sa"), "IPSEC SA table", "ipsec-sa"),
    Command(("show", "crypto", "session"), "Show crypto sessions currently established", "crypto-session"),
    Command(("terminal", "length"), "Set number of lines on a screen", "noop", (
        Param("lines", "Number of lines on screen (0 for no pausing)", "positional", check=is_number),
    )),
    Command(("terminal", "width"), "Set width of the display terminal", "noop", (
        Param("columns", "Number of characters on a screen line", "positional", check=is_number),
    )),
    Command(("reload",), "Halt and perform a cold restart", "action:reboot", privileged=True),
    Command(("enable",), "Turn on privileged commands", "enable"),
    Command(("configure",), "Enter configuration mode", "configure", rest=True),
    Command(("exit",), "Exit from the EXEC", "exit"),
    Command(("logout",), "Exit from the EXEC", "exit"),
]
IOS_PIPES = {
    "begin": ("Begin with the line that matches", -1),
    "count": ("Count number of lines which match regexp", -1),
    "exclude": ("Exclude lines that match", -1),
    "include": ("Include lines that match", -1),
    "section": ("Filter a section of output", -1),
}
IOS_IMPLS: dict[str, Impl] = {
    "version": Impl(Needs(bird_status=True), ios.show_version),
    "clock": Impl(Needs(), ios.show_clock),
    "running-config": Impl(Needs(config=True), ios.show_running_config),
    "ip-interface-brief": Impl(Needs(links=True), ios.show_ip_interface_brief),
    "ip-route": Impl(_ROUTES, ios.show_ip_route),
    "ip-bgp-summary": Impl(Needs(bgp=True, bird_routes=True), ios.show_ip_bgp_summary),
    "ipv6-route": Impl(_ROUTES, ios6.show_ipv6_route),
    "bgp-ipv6-summary": Impl(Needs(bgp=True, bird_routes=True), ios.show_bgp_ipv6_unicast_summary),
    "ip-bgp-neighbors": Impl(Needs(bgp=True), ios.show_ip_bgp_neighbors),
    "standby": Impl(Needs(status=(HSRP_STATUS,)), ios.show_standby),
    "ikev2-cluster": Impl(Needs(status=(IKEV2_STATUS,)), ios.show_crypto_ikev2_cluster),
    "ikev2-sa": Impl(Needs(status=(IKEV2_STATUS,)), ios.show_crypto_ikev2_sa),
    "ipsec-sa": Impl(Needs(status=(IKEV2_STATUS,)), ios.show_crypto_ipsec_sa),
    "crypto-session": Impl(Needs(status=(IKEV2_STATUS,)), ios.show_crypto_session),
}


def commands_for(vendor: str, kind: str) -> list[Command]:
    table = JUNOS_COMMANDS if vendor == "junos" else IOS_COMMANDS
    return [c for c in table if kind in c.kinds]


def grammar(vendor: str, kind: str) -> Grammar:
    if vendor == "junos":
        return Grammar(commands_for(vendor, kind), JUNOS_WORDS, JUNOS_PIPES)
    return Grammar(commands_for(vendor, kind), IOS_WORDS, IOS_PIPES)


def implementation(vendor: str, run: str) -> Impl | None:
    return (JUNOS_IMPLS if vendor == "junos" else IOS_IMPLS).get(run)
