"""Juniper MX (the JVD's load balancer): TRUST-VR and UNTRUST-VR routing instances, each a namespace."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from .base import ROUTER_SYSCTLS, Kind, NodeProblem

if TYPE_CHECKING:
    from ..model.schema import Node


def check(node: Node) -> Iterable[NodeProblem]:
    if node.bgp is None or node.bgp.trust_as is None or node.bgp.untrust_as is None:
        yield ("bgp",), "an mx needs bgp.trust_as and bgp.untrust_as", \
            "one AS per routing instance: TRUST-VR and UNTRUST-VR"
    elif node.bgp.as_ is not None:
        yield ("bgp", "as"), "an mx takes trust_as/untrust_as, not as", None


def exports(protocol: str, zone: str | None, local_as: int, use_case: str, nat_sources: tuple[str, ...] = ()) -> str:
    """Toward the SRXs (fw_*): what the cores announce; toward the cores: what the SRXs announce."""
    if protocol.startswith("fw_"):
        # SRX loopbacks are passed between SRXs too: an MNHA node tells a dead ICL from a
        # dead peer by whether it still has a route to the peer's loopback.
        return 'where proto ~ "core_*" || proto = "loopback" || (proto ~ "fw_*" && net.len = 32)'
    return 'where proto ~ "fw_*" || proto = "loopback"'


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
    load_balancer=True,
    check_node=check,
    bgp_export=exports,
    graph_shape="box3d",
    clab_kinds=("juniper_vjunosrouter", "juniper_crpd"),
)
