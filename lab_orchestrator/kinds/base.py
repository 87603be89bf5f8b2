"""What every node kind says about itself (see kinds/<kind>.py)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# IPv6 off: the lab is IPv4 (as the JVD), and link-local chatter would pollute packet counters.
NO_IPV6 = (
    ("net.ipv6.conf.all.disable_ipv6", "1"),
    ("net.ipv6.conf.default.disable_ipv6", "1"),
)
ROUTER_SYSCTLS = NO_IPV6 + (
    ("net.ipv4.ip_forward", "1"),
    ("net.ipv4.conf.all.rp_filter", "0"),
    ("net.ipv4.conf.default.rp_filter", "0"),
)


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
    # BIRD protocol names carry the role, so export filters can say "from the SRXs" by name:
    # "role": fw_PEER toward a firewall, core_PEER otherwise; "zone": ZONE_PEER; "peer": peer_PEER
    bgp_naming: str = "peer"
    # routing instance ("" = master) -> the field of the node's `bgp:` holding its AS
    as_fields: Mapping[str, str] = field(default_factory=dict)

    def as_field(self, instance: str | None) -> str:
        return self.as_fields.get(instance or "", "as_")

    def protocol_name(self, remote: Kind, zone: str | None, peer: str) -> str:
        """The BIRD protocol name of a session toward PEER (a node of kind REMOTE) on a ZONE link."""
        name = peer.replace("-", "_")
        if self.bgp_naming == "role":
            return f"fw_{name}" if remote.firewall else f"core_{name}"
        if self.bgp_naming == "zone":
            return f"{zone}_{name}"
        return f"peer_{name}"

    @property
    def instances(self) -> tuple[str, ...]:
        """Routing instances beyond the master one, in a fixed order."""
        return tuple(dict.fromkeys(self.zone_instances.values()))

    @property
    def bgp_instances(self) -> tuple[str | None, ...]:
        """Where BIRD runs: each routing instance, or the master namespace (None)."""
        return self.instances or (None,)
