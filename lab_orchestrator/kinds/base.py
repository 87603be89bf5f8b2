"""What every node kind says about itself (see kinds/<kind>.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from ..model.schema import Node

# IPv6 off: the lab is IPv4 (as the JVD), and link-local chatter would pollute packet counters.
NO_IPV6 = (
    ("net.ipv6.conf.all.disable_ipv6", "1"),
    ("net.ipv6.conf.default.disable_ipv6", "1"),
)
# Dual stack (addressing.v6): IPv6 on, addresses usable at once (no duplicate address detection: every
# address is planned unique), no router advertisements or solicitations (routes come from BGP and the plan),
# and an interface that goes down keeps its IPv6 addresses, as it keeps its IPv4 ones and as a router keeps
# its configured addresses (Linux drops them by default: a failed link would come back without IPv6).
IPV6_ON = (
    ("net.ipv6.conf.all.keep_addr_on_down", "1"),
    ("net.ipv6.conf.default.keep_addr_on_down", "1"),
    ("net.ipv6.conf.all.disable_ipv6", "0"),
    ("net.ipv6.conf.default.disable_ipv6", "0"),
    ("net.ipv6.conf.all.accept_dad", "0"),
    ("net.ipv6.conf.default.accept_dad", "0"),
    ("net.ipv6.conf.all.dad_transmits", "0"),
    ("net.ipv6.conf.default.dad_transmits", "0"),
    ("net.ipv6.conf.all.accept_ra", "0"),
    ("net.ipv6.conf.default.accept_ra", "0"),
    ("net.ipv6.conf.all.router_solicitations", "0"),
    ("net.ipv6.conf.default.router_solicitations", "0"),
)
IPV6_FORWARDING = (
    ("net.ipv6.conf.all.forwarding", "1"),
    ("net.ipv6.conf.default.forwarding", "1"),
)


# A host sends from any address of its prefixes6 (AnyIP `local` routes): IPv6 binds to such an address
# only with non-local binds allowed (IPv4 accepts an address of a local route as its own).
IPV6_ANYIP = (("net.ipv6.ip_nonlocal_bind", "1"),)


def dual_stack_sysctls(sysctls: tuple[tuple[str, str], ...], forwarding: bool) -> tuple[tuple[str, str], ...]:
    """SYSCTLS of a kind with IPv6 switched on (and forwarding for a router, AnyIP binds for a host)
    instead of off."""
    kept = tuple(kv for kv in sysctls if kv not in NO_IPV6)
    return IPV6_ON + (IPV6_FORWARDING if forwarding else IPV6_ANYIP) + kept


# The JVD names a BGP group of IPv6 sessions as its IPv4 twin, prefixed (`IPv6_MX-to-MNHA-pair_1_A`).
IPV6_GROUP_PREFIX = "IPv6_"

ROUTER_SYSCTLS = NO_IPV6 + (
    ("net.ipv4.ip_forward", "1"),
    ("net.ipv4.conf.all.rp_filter", "0"),
    ("net.ipv4.conf.default.rp_filter", "0"),
)


def originated_only(protocol: str, zone: str | None, local_as: int, use_case: str,
                    nat_sources: tuple[str, ...] = ()) -> str:
    """The default BGP export: what the node itself originates."""
    return "where proto = \"originated\""


class ExportPolicy(Protocol):
    """(protocol, zone of its link, local AS, the lab's use case, the client prefixes a mixed lab
    translates) -> the BIRD export of that session."""

    def __call__(self, protocol: str, zone: str | None, local_as: int, use_case: str,
                 nat_sources: tuple[str, ...] = ()) -> str: ...


# a problem of a node's own settings: (YAML path below the node, message, hint or None)
NodeProblem = tuple[tuple[str, ...], str, "str | None"]


def no_bgp_as_instances(node: Node) -> Iterable[NodeProblem]:
    """Kinds without routing instances take `bgp.as`, not one AS per instance."""
    if node.bgp and (node.bgp.trust_as or node.bgp.untrust_as):
        yield ("bgp",), f"trust_as/untrust_as apply to an mx, not to {node.kind}", None


@dataclass(frozen=True)
class Kind:
    name: str
    sysctls: tuple[tuple[str, str], ...]  # in every namespace of the node
    mgmt_port: str  # the management interface's name inside the node
    routes: bool  # a router: loopbacks, BIRD, static routes (a host only has prefixes and a gateway)
    # zone of a link -> the routing instance (own namespace) its interface lands in
    zone_instances: Mapping[str, str] = field(default_factory=dict)
    firewall: bool = False  # zones, sessions (conntrack), NAT pool, nft policy
    gateway: bool = False  # originates host prefixes (statics to hosts, announce, default_originate)
    device_config: tuple[str, str] | None = None  # (file name in nodes/NODE/, template)
    ssh_vendor: str | None = None  # the SSH CLI's dialect: "junos" | "ios" | None (no SSH)
    flexvpn: bool = False  # runs Cisco's FlexVPN features: HSRP, IKEv2 cluster and gateway, FlexVPN client
    # BIRD protocol names carry the role, so export filters can say "from the SRXs" by name:
    # "role": fw_PEER toward a firewall, core_PEER otherwise; "zone": ZONE_PEER; "peer": peer_PEER
    bgp_naming: str = "peer"
    # routing instance ("" = master) -> the field of the node's `bgp:` holding its AS
    as_fields: Mapping[str, str] = field(default_factory=dict)
    # the scale-out load balancer in front of the firewalls: the selector (mxlb) and SRD run on it
    load_balancer: bool = False
    bgp_export: ExportPolicy = originated_only  # which routes each session announces (the JVD's exchange)
    graph_shape: str = "box"  # Graphviz shape in `lab graph`
    # `lab graph` of a scale-out lab: columns from the lab's edge (0: hosts, 1: gateways) on the
    # side of its link to the load balancer; None: placed by its role (load balancer, firewall)
    graph_column: int | None = None
    clab_kinds: tuple[str, ...] = ()  # containerlab kinds that can stand in for it (`lab export --vendor`)
    # the kind's own rules for a node's settings (validate adds file, line and YAML path)
    check_node: Callable[[Node], Iterable[NodeProblem]] = no_bgp_as_instances

    def as_field(self, instance: str | None) -> str:
        return self.as_fields.get(instance or "", "as_")

    def protocol_name(self, remote: Kind, zone: str | None, peer: str) -> str:
        """The BIRD protocol name of a session toward PEER (a node of kind REMOTE) on a ZONE link."""
        name = peer.replace("-", "_")
        if zone == "icl":  # the MNHA ICL routed through an MX: the MNHA-VR's session
            return f"icl_{name}"
        if self.bgp_naming == "role":
            return f"fw_{name}" if remote.firewall else f"core_{name}"
        if self.bgp_naming == "zone":
            return f"{zone}_{name}"
        return f"peer_{name}"

    @property
    def end_host(self) -> bool:
        """A host at the edge of the lab: no routing, prefixes and a default gateway only."""
        return not self.routes

    @property
    def config_file(self) -> str:
        """The device configuration's file name in nodes/NODE/ (IOS-like name when it has none)."""
        return self.device_config[0] if self.device_config else "running-config"

    def peer_group(self, protocol: str, zone: str | None, family: int = 4) -> str:
        """The BGP group a session belongs to, in the rendered configuration and the SSH CLI (the JVD's
        group names); an IPv6 session's group is its IPv4 twin's with the JVD's `IPv6_` prefix."""
        if zone == "icl":
            return "MNHA-ICL"
        side = (zone or "core").upper()
        if self.bgp_naming == "role":
            name = f"SRX-{side}" if protocol.startswith("fw_") else f"GW-{side}"
        elif self.bgp_naming == "zone":
            name = f"MX-{side}"
        else:
            return ""
        return f"{IPV6_GROUP_PREFIX}{name}" if family == 6 else name

    @property
    def instances(self) -> tuple[str, ...]:
        """Routing instances beyond the master one, in a fixed order."""
        return tuple(dict.fromkeys(self.zone_instances.values()))

    @property
    def bgp_instances(self) -> tuple[str | None, ...]:
        """Where BIRD runs: each routing instance, or the master namespace (None)."""
        return self.instances or (None,)
