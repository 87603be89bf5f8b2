"""Juniper SRX: zones and sessions (conntrack, per-session counters), CGNAT pool, MNHA."""

from __future__ import annotations

from .base import ROUTER_SYSCTLS, Kind

KIND = Kind(
    name="srx",
    # per-session packet and byte counters (`show security flow session`)
    sysctls=ROUTER_SYSCTLS + (("net.netfilter.nf_conntrack_acct", "1"),),
    mgmt_port="fxp0",
    routes=True,
    firewall=True,
    device_config=("juniper.conf", "junos-srx.conf.j2"),
    ssh_vendor="junos",
    bgp_naming="zone",
)
