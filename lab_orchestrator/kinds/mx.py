"""Juniper MX (the JVD's load balancer): TRUST-VR and UNTRUST-VR routing instances, each a namespace."""

from __future__ import annotations

from .base import ROUTER_SYSCTLS, Kind

KIND = Kind(
    name="mx",
    sysctls=ROUTER_SYSCTLS,
    mgmt_port="fxp0",
    routes=True,
    zone_instances={"trust": "TRUST-VR", "untrust": "UNTRUST-VR"},
    device_config=("juniper.conf", "junos-mx.conf.j2"),
    ssh_vendor="junos",
    bgp_naming="role",
    as_fields={"TRUST-VR": "trust_as", "UNTRUST-VR": "untrust_as", "": "untrust_as"},
)
