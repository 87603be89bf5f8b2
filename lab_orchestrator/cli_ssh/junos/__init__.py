"""Junos-like operational commands: pure functions from a Snapshot (and arguments) to an Output.

Text follows Junos's layout; `data` is the same content for `| display json`, with Junos's key names
but plain values (not Junos's `[{"data": ...}]` wrapping). Values the emulation cannot know are "-"
(e.g. BGP message counts: BIRD does not count messages); nothing is invented.

One module per command family: system, interfaces, routes, bgp, security (SRX flow/policy/NAT),
ha (TLB, MNHA, SRD); `base` holds what they share.
"""

from __future__ import annotations

from .base import ROUTING_DOWN, Args, error
from .bgp import show_bgp_neighbor, show_bgp_summary, show_route_advertising_protocol, show_route_receive_protocol
from .ha import show_chassis_ha, show_services_redundancy_group, show_tlb_statistics
from .interfaces import show_interfaces, show_interfaces_descriptions, show_interfaces_terse
from .routes import show_route, show_route_forwarding_table
from .security import (
    show_flow_session,
    show_flow_session_summary,
    show_nat_source_pool,
    show_nat_source_rule,
    show_nat_source_summary,
    show_security_policies,
    show_security_zones,
)
from .system import show_arp, show_configuration, show_system_uptime, show_version

__all__ = [
    "ROUTING_DOWN", "Args", "error",
    "show_arp", "show_bgp_neighbor", "show_bgp_summary", "show_chassis_ha", "show_configuration",
    "show_flow_session", "show_flow_session_summary", "show_interfaces", "show_interfaces_descriptions",
    "show_interfaces_terse", "show_nat_source_pool", "show_nat_source_rule", "show_nat_source_summary",
    "show_route", "show_route_advertising_protocol", "show_route_forwarding_table", "show_route_receive_protocol",
    "show_security_policies", "show_security_zones", "show_services_redundancy_group", "show_system_uptime",
    "show_tlb_statistics", "show_version",
]
