"""A Linux host: subscriber or server prefixes (AnyIP) and a default gateway; no routing daemon."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from .base import NO_IPV6, Kind, NodeProblem

if TYPE_CHECKING:
    from ..model.schema import Node


def check(node: Node) -> Iterable[NodeProblem]:
    if node.bgp is not None:
        yield ("bgp",), "a host does not speak BGP", "use kind ios-router for a gateway"

KIND = Kind(
    name="host",
    sysctls=NO_IPV6 + (
        ("net.ipv4.conf.all.rp_filter", "0"),
        ("net.ipv4.conf.default.rp_filter", "0"),
    ),
    mgmt_port="mgmt0",
    routes=False,
    check_node=check,
    graph_shape="ellipse",
    graph_column=0,
)
