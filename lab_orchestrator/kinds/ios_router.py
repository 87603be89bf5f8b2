"""Cisco IOS router: the gateways around the MX (and the FlexVPN routers)."""

from __future__ import annotations

from .base import ROUTER_SYSCTLS, Kind

KIND = Kind(
    name="ios-router",
    sysctls=ROUTER_SYSCTLS,
    mgmt_port="mgmt0",
    routes=True,
    gateway=True,
    device_config=("running-config", "ios.conf.j2"),
    ssh_vendor="ios",
    graph_column=1,
    clab_kinds=("cisco_iol",),
    flexvpn=True,
)
