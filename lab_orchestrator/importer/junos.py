"""What a Junos configuration says, in the terms the lab can use: addresses, routing instances, BGP,
MNHA, SRG0 monitoring, prepends, NAT pools, TLB, CHASH. Every statement read is marked with what the
lab does with it; build.py decides the rest once the other files are known."""

from __future__ import annotations

from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Interface, IPv4Network, ip_interface

from . import secpolicy
from .parse import Statement
from .secpolicy import NatRule, Policy

MASTER = "master"  # the default routing instance


@dataclass
class IfAddress:
    iface: str  # vendor name with unit: ae1.0, et-0/0/2.0
    address: IPv4Interface
    stmt: Statement


@dataclass
class BgpPeer:
    instance: str
    group: str
    neighbor: IPv4Address
    local_as: int | None
    peer_as: int | None
    stmts: list[Statement]


@dataclass
class Srg0Monitor:
    object_name: str = ""
    object_threshold: int | None = None
    threshold: int | None = None
    srg_threshold: int | None = None
    weight: int | None = None
    interval_ms: int | None = None
    multiplier: int | None = None
    interfaces: list[str] = field(default_factory=list)
    stmts: list[Statement] = field(default_factory=list)


@dataclass
class Mnha:
    local_id: int | None = None
    local_ip: IPv4Address | None = None
    peer_id: int | None = None
    peer_ip: IPv4Address | None = None
    instance: str | None = None  # the routing instance of the ICL
    interval_ms: int | None = None
    multiplier: int | None = None
    signal_route: IPv4Address | None = None
    monitor: Srg0Monitor | None = None
    srg1: bool = False
    srg1_priority: int | None = None
    stmts: list[Statement] = field(default_factory=list)


@dataclass
class Probe:
    name: str
    type: str = "icmp"
    port: int | None = None
    interval_s: int | None = None
    failures: int | None = None
    recoveries: int | None = None


@dataclass
class Junos:
    """The facts of one Junos configuration."""

    statements: list[Statement]
    host_name: str | None = None
    addresses: list[IfAddress] = field(default_factory=list)
    instance_of: dict[str, str] = field(default_factory=dict)  # interface unit -> routing instance
    instance_type: dict[str, str] = field(default_factory=dict)
    instance_as: dict[str, int] = field(default_factory=dict)  # routing-options autonomous-system
    bgp: list[BgpPeer] = field(default_factory=list)
    zone_of: dict[str, str] = field(default_factory=dict)  # interface unit -> security zone
    from_zones: set[str] = field(default_factory=set)
    to_zones: set[str] = field(default_factory=set)
    nat_pools: dict[str, list[IPv4Network]] = field(default_factory=dict)
    nat_rule_pools: list[str] = field(default_factory=list)  # pools used by source-nat rules, in order
    nat_rules: list[NatRule] = field(default_factory=list)  # source-NAT rules, in order
    policies: list[Policy] = field(default_factory=list)  # zone-pair security policies, in order
    address_book: dict[str, list[str]] = field(default_factory=dict)  # address or address-set -> its values
    default_policy: str | None = None  # security policies default-policy (permit-all, deny-all)
    mnha: Mnha | None = None
    prepend_counts: list[int] = field(default_factory=list)  # as-path-prepend lengths, in order
    tlb_addresses: list[IPv4Address] = field(default_factory=list)  # real-service addresses (IPv4)
    tlb_profiles: list[str] = field(default_factory=list)
    probes: dict[str, Probe] = field(default_factory=dict)
    chash: bool = False
    security: bool = False
    aggregate_of: dict[str, str] = field(default_factory=dict)  # member port -> aeN

    @property
    def tlb(self) -> bool:
        return bool(self.tlb_addresses)

    def resolve(self, word: str) -> list[IPv4Network] | None:
        """The IPv4 prefixes a policy or NAT rule's source word stands for (see secpolicy.resolve)."""
        return secpolicy.resolve(self.address_book, word)

    def zone_side(self, zone: str) -> str | None:
        """trust or untrust for a security zone: the from-zone of the policies is trust, their to-zone
        untrust; otherwise by its name."""
        if zone in self.from_zones and zone not in self.to_zones:
            return "trust"
        if zone in self.to_zones and zone not in self.from_zones:
            return "untrust"
        low = zone.lower()
        return "untrust" if "untrust" in low else "trust" if "trust" in low else None


def _int(word: str) -> int | None:
    try:
        return int(word)
    except ValueError:
        return None


def read(statements: list[Statement]) -> Junos:
    j = Junos(statements)
    for s in statements:
        if s.inactive:
            s.mark("ignored", "inactive: configured but not in effect")
            continue
        _interfaces(j, s) or _instances(j, s) or _security(j, s) or _ha(j, s) or _services(j, s) \
            or _policy(j, s) or _other(j, s)
    if j.mnha is not None and j.mnha.monitor is not None:
        mon = j.mnha.monitor
        mon.interval_ms = mon.interval_ms or j.mnha.interval_ms
        mon.multiplier = mon.multiplier or j.mnha.multiplier
    return j


def _interfaces(j: Junos, s: Statement) -> bool:
    rest = s.at("interfaces", "*")
    if rest is None:
        return False
    port = s.path[1]
    if rest[:2] == ("gigether-options", "802.3ad") and len(rest) == 3:
        j.aggregate_of[port] = rest[2]
        s.mark("approximated", f"member of {rest[2]}: an aggregate is one link per unit (no LACP, no bundle)")
    elif len(rest) >= 2 and rest[0] == "unit":
        unit = f"{port}.{rest[1]}"
        tail = rest[2:]
        if tail[:3] == ("family", "inet", "address") and len(tail) >= 4:
            try:
                addr = IPv4Interface(tail[3])
            except ValueError:
                s.mark("unsupported", "not an IPv4 address")
                return True
            if len(tail) > 4:
                s.mark("ignored", f"address option '{' '.join(tail[4:])}' (the lab has one address per interface)")
            j.addresses.append(IfAddress(unit, addr, s))
        elif tail[:2] == ("family", "inet6"):
            s.mark("ignored", "IPv6: the lab is IPv4-only")
        elif tail[:1] == ("vlan-id",):
            s.mark("approximated", f"VLAN {tail[1] if len(tail) > 1 else ''}: the unit is a point-to-point link "
                                   "of its own (untagged veth, vendor name kept)")
        elif tail[:1] == ("description",):
            s.mark("ignored", "description (the lab describes a link by its peer)")
        elif tail[:3] == ("family", "inet", "filter"):
            s.mark("approximated", "input filter: the lab's TLB steering stands for the filter-based forwarding "
                                   "(services.load_balancing tlb)")
        elif tail == ("family", "inet"):
            s.mark("ignored", "family inet without an address")
    elif rest[:1] in (("vlan-tagging",), ("flexible-vlan-tagging",), ("encapsulation",)):
        s.mark("approximated", "VLAN tagging: each unit is a point-to-point link of its own")
    elif rest[:1] == ("aggregated-ether-options",):
        s.mark("approximated", "LACP/aggregate options: an aggregate is one link per unit, no LACP")
    elif rest[:1] in (("mtu",),):
        s.mark("approximated", "MTU: the lab's links carry 1500 (the link mtu field; jumbo frames not set)")
    elif rest[:1] == ("description",):
        s.mark("ignored", "description (the lab describes a link by its peer)")
    return True


def _instances(j: Junos, s: Statement) -> bool:
    if s.path[:1] == ("routing-instances",) and len(s.path) >= 2:
        inst, rest = s.path[1], s.path[2:]
    elif s.path[:1] in (("protocols",), ("routing-options",)):
        inst, rest = MASTER, s.path
    else:
        return False
    if rest[:1] == ("instance-type",) and len(rest) == 2:
        j.instance_type[inst] = rest[1]
        s.tags.append("instance-type")
    elif rest[:1] == ("interface",) and len(rest) == 2:
        j.instance_of[rest[1]] = inst
        s.tags.append("instance-interface")
    elif rest[:2] == ("routing-options", "autonomous-system") and len(rest) >= 3:
        if (n := _int(rest[2])) is not None:
            j.instance_as[inst] = n
        s.tags.append("instance-as")
    elif rest[:2] == ("protocols", "bgp"):
        _bgp(j, inst, rest[2:], s)
    elif rest[:2] == ("routing-options", "static") or rest[:2] == ("routing-options", "rib"):
        s.tags.append("static")
    return True


def _bgp(j: Junos, inst: str, rest: tuple[str, ...], s: Statement) -> None:
    if rest[:1] != ("group",) or len(rest) < 3:
        if rest == ("multipath",):
            s.mark("emulated", "multipath: the lab's BGP speakers install every equal path (ECMP)")
        else:
            s.tags.append("bgp-other")
        return
    group, tail = rest[1], rest[2:]
    peers = [p for p in j.bgp if p.instance == inst and p.group == group]
    key = ("bgp", inst, group)
    s.tags.append("bgp:" + inst + ":" + group)
    if tail[:1] == ("neighbor",) and len(tail) >= 2:
        try:
            neighbor = IPv4Address(tail[1])
        except ValueError:
            s.mark("ignored", "IPv6 BGP neighbor: the lab is IPv4-only")
            s.tags.append("bgp6")
            return
        peer = next((p for p in peers if p.neighbor == neighbor), None)
        if peer is None:
            peer = BgpPeer(inst, group, neighbor, None, None, [])
            j.bgp.append(peer)
        peer.stmts.append(s)
        if tail[2:3] == ("peer-as",) and len(tail) >= 4:
            peer.peer_as = _int(tail[3])
        elif tail[2:3] == ("local-as",) and len(tail) >= 4:
            peer.local_as = _int(tail[3])
    else:
        del key
        s.tags.append("bgp-group-setting")


def group_setting(j: Junos, peer: BgpPeer, name: str) -> int | None:
    """peer-as / local-as of a peer's group (the neighbor's own setting wins)."""
    for s in j.statements:
        if f"bgp:{peer.instance}:{peer.group}" in s.tags:
            rest = s.path[s.path.index("group") + 2:]
            if rest[:1] == (name,) and len(rest) >= 2:
                return _int(rest[1])
    return None


def _security(j: Junos, s: Statement) -> bool:
    if s.path[:1] != ("security",):
        return False
    j.security = True
    rest = s.path[1:]
    if rest[:2] == ("zones", "security-zone") and len(rest) >= 5 and rest[3] == "interfaces":
        j.zone_of[rest[4]] = rest[2]
        s.tags.append("zone-interface")
    elif rest[:1] == ("policies",) and len(rest) >= 5 and rest[1] == "from-zone" and rest[3] == "to-zone":
        j.from_zones.add(rest[2])
        j.to_zones.add(rest[4])
        s.tags.append("policy")
        if rest[5:6] == ("policy",) and len(rest) >= 8:
            secpolicy.policy_statement(j.policies, rest, s)
    elif rest[:1] == ("address-book",) and len(rest) >= 5 and rest[2] in ("address", "address-set"):
        secpolicy.address_book_statement(j.address_book, rest[2:])
    elif rest[:2] == ("zones", "security-zone") and rest[3:4] == ("address-book",) and len(rest) >= 7 \
            and rest[4] in ("address", "address-set"):
        secpolicy.address_book_statement(j.address_book, rest[4:])
    elif rest[:2] == ("policies", "default-policy") and len(rest) == 3:
        j.default_policy = rest[2]
        s.tags.append("default-policy")
    elif rest[:3] == ("nat", "source", "pool") and len(rest) >= 6 and rest[4] == "address":
        try:
            j.nat_pools.setdefault(rest[3], []).append(IPv4Network(rest[5], strict=False))
            s.tags.append("nat-pool")
        except ValueError:
            s.mark("ignored", "IPv6 pool: the lab is IPv4-only")
    elif rest[:3] == ("nat", "source", "rule-set") and len(rest) >= 7 and rest[4] == "rule":
        secpolicy.nat_rule_statement(j.nat_rules, j.nat_rule_pools, rest, s)
    else:
        s.tags.append("security-other")
    return True


def _ha(j: Junos, s: Statement) -> bool:
    rest = s.at("chassis", "high-availability")
    if rest is None:
        return False
    ha = j.mnha = j.mnha or Mnha()
    ha.stmts.append(s)
    if rest[:1] == ("local-id",) and len(rest) == 2:
        ha.local_id = _int(rest[1])
        s.mark("emulated", "MNHA local-id: this node's place in its pair (mnha[].nodes order)")
    elif rest[:2] == ("local-id", "local-ip") and len(rest) == 3:
        ha.local_ip = IPv4Address(rest[2])
        s.mark("approximated", "MNHA local-ip: the lab uses the node's loopback for the ICL heartbeat")
    elif rest[:1] == ("peer-id",) and len(rest) >= 3:
        ha.peer_id = _int(rest[1])
        tail = rest[2:]
        if tail[:1] == ("peer-ip",):
            ha.peer_ip = IPv4Address(tail[1])
            s.mark("emulated", "MNHA peer: the pair is mnha[].nodes (the peer found by its local-ip)")
        elif tail[:1] == ("routing-instance",):
            ha.instance = tail[1]  # marked once the links show whether the ICL is routed through an MX
        elif tail[:2] == ("liveness-detection", "minimum-interval"):
            ha.interval_ms = _int(tail[2])
            s.mark("emulated", "ICL liveness interval: mnha[].heartbeat_ms")
        elif tail[:2] == ("liveness-detection", "multiplier"):
            ha.multiplier = _int(tail[2])
            s.mark("emulated", "ICL liveness multiplier: mnha[].heartbeat_threshold")
        elif tail[:1] == ("interface",):
            pass  # marked with the routing instance
        else:
            s.mark("approximated", "ICL liveness detail: the lab's heartbeat uses interval and threshold only")
    elif rest[:2] == ("services-redundancy-group", "0"):
        _srg0(ha, rest[2:], s)
    elif rest[:1] == ("services-redundancy-group",) and len(rest) >= 2:
        ha.srg1 = True
        if rest[2:3] == ("activeness-priority",) and len(rest) >= 4:
            ha.srg1_priority = _int(rest[3])
            s.mark("emulated", "SRG activeness priority: mnha[].srg1_active is the higher one")
        elif rest[2:3] == ("preemption",):
            s.mark("emulated", "SRG preemption: mnha[].preempt")
        else:
            s.mark("approximated", f"SRG{rest[1]}: the lab's mnha[].mode srg1 (active/backup by activeness)")
    return True


def _srg0(ha: Mnha, rest: tuple[str, ...], s: Statement) -> None:
    mon = ha.monitor = ha.monitor or Srg0Monitor()
    if rest[:1] == ("peer-id",):
        s.mark("emulated", "SRG0 peer: the MNHA pair (mode srg0: both nodes active)")
    elif rest[:1] == ("install-on-failure-route",) and len(rest) == 2:
        ha.signal_route = IPv4Address(rest[1])
        s.mark("emulated", "SRG0 install-on-failure-route: mnha[].signal_route")
    elif rest[:2] == ("install-on-failure-route", "routing-instance"):
        s.mark("emulated", "signal route table: the lab's MNHA-VR (mnha daemon)")
    elif rest[:1] == ("monitor",):
        mon.stmts.append(s)
        tail = rest[1:]
        if tail[:1] == ("srg-threshold",):
            mon.srg_threshold = _int(tail[1])
            s.mark("emulated", "srg-threshold: mnha[].monitor.srg_threshold")
        elif tail[:1] == ("monitor-object",) and len(tail) >= 3:
            mon.object_name = tail[1]
            obj = tail[2:]
            if obj[:1] == ("object-threshold",):
                mon.object_threshold = _int(obj[1])
                s.mark("emulated", "object-threshold: mnha[].monitor.object_threshold")
            elif obj[:2] == ("bfd-liveliness", "threshold"):
                mon.threshold = _int(obj[2])
                s.mark("emulated", "bfd-liveliness threshold: mnha[].monitor.threshold")
            elif obj[:2] == ("bfd-liveliness", "destination-ip") and len(obj) >= 4:
                leaf = obj[3:]
                if leaf[:1] == ("weight",):
                    mon.weight = _int(leaf[1])
                    s.mark("emulated", "destination weight: mnha[].monitor.weight")
                elif leaf[:1] == ("interface",):
                    mon.interfaces.append(leaf[1])
                    s.mark("emulated", "monitored interface: its zone is mnha[].monitor.zone (one BFD "
                                       "destination per link of that zone toward the MX)")
                elif leaf[:1] == ("minimum-interval",):
                    mon.interval_ms = _int(leaf[1])
                    s.mark("emulated", "BFD interval: mnha[].monitor.interval_ms")
                elif leaf[:1] == ("multiplier",):
                    mon.multiplier = _int(leaf[1])
                    s.mark("emulated", "BFD multiplier: mnha[].monitor.multiplier")
                else:
                    s.mark("emulated", "BFD destination: the MX-side address of each monitored link")
            else:
                s.mark("unsupported", "monitor object kind not modelled (the lab monitors BFD liveliness)")
        else:
            s.mark("unsupported", "SRG0 monitor setting not modelled")
    else:
        s.mark("unsupported", "SRG0 setting not modelled")


def _services(j: Junos, s: Statement) -> bool:
    rest = s.at("services")
    if rest is None:
        return False
    if rest[:1] == ("traffic-load-balance",):
        tail = rest[1:]
        if tail[:1] == ("instance",) and len(tail) >= 4 and tail[2] == "real-service" and tail[4:5] == ("address",):
            try:
                addr = IPv4Address(tail[5])
            except ValueError:
                s.mark("ignored", "IPv6 real-service: the lab is IPv4-only")
                return True
            if addr not in j.tlb_addresses:
                j.tlb_addresses.append(addr)
            s.mark("emulated", "TLB real-service: mnha[].pair_address (services.tlb_real_service pair)")
        elif tail[:1] == ("instance",) and len(tail) >= 4 and tail[2] == "group" and \
                tail[4:5] == ("network-monitoring-profile",):
            for name in tail[5:]:
                if name not in j.tlb_profiles:
                    j.tlb_profiles.append(name)
            s.tags.append("tlb-profiles")
        elif tail[:1] == ("traceoptions",):
            s.mark("ignored", "trace options (diagnostics of the device)")
        else:
            s.tags.append("tlb-other")
    elif rest[:2] == ("network-monitoring", "profile") and len(rest) >= 4:
        probe = j.probes.setdefault(rest[2], Probe(rest[2]))
        tail = rest[3:]
        if tail[:1] in (("icmp",), ("tcp",), ("udp",), ("http",)):
            probe.type = tail[0]
            if tail[1:2] == ("port",):
                probe.port = _int(tail[2])
            s.mark("emulated", f"probe {tail[0]}: services.health_checks[].type/port")
        elif tail[:1] == ("probe-interval",):
            probe.interval_s = _int(tail[1])
            s.mark("emulated", "probe-interval: services.health_checks[].interval_ms")
        elif tail[:1] == ("failure-retries",):
            probe.failures = _int(tail[1])
            s.mark("emulated", "failure-retries: services.health_checks[].failures")
        elif tail[:1] == ("recovery-retries",):
            probe.recoveries = _int(tail[1])
            s.mark("emulated", "recovery-retries: services.health_checks[].recoveries")
        else:
            s.mark("unsupported", "probe setting not modelled")
    else:
        s.tags.append("services-other")
    return True


def _policy(j: Junos, s: Statement) -> bool:
    rest = s.at("policy-options")
    if rest is None:
        return False
    if "as-path-prepend" in rest:
        words = rest[rest.index("as-path-prepend") + 1:]
        j.prepend_counts.append(len(" ".join(words).split()))
        s.tags.append("prepend")
    elif "load-balance" in rest:
        kind = rest[rest.index("load-balance") + 1:] if rest.index("load-balance") + 1 < len(rest) else ()
        if kind[:1] == ("consistent-hash",):
            j.chash = True
            s.mark("emulated", "consistent hashing: services.load_balancing ecmp-chash")
        else:
            s.tags.append("load-balance")
    elif "condition" in rest and "if-route-exists" in rest:
        s.mark("emulated", "signal-route condition: the lab's SRG0 signal prepends 3x (mnha[].signal_route)")
    else:
        s.tags.append("policy")
    return True


def _other(j: Junos, s: Statement) -> bool:
    if s.path[:3] == ("system", "host-name") or s.path[:2] == ("system", "host-name"):
        j.host_name = s.path[2] if len(s.path) > 2 else None
        s.mark("emulated", "host name: the node's name")
    elif s.path[:2] == ("forwarding-options", "enhanced-hash-key"):
        s.tags.append("hash-key")
    return True


def probe_of(j: Junos, name: str) -> Probe | None:
    return j.probes.get(name)


def interface_address(j: Junos, unit: str) -> IfAddress | None:
    return next((a for a in j.addresses if a.iface == unit), None)


def is_ipv4(text: str) -> bool:
    try:
        return ip_interface(text).version == 4
    except ValueError:
        return False
