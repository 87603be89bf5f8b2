"""A Linux host: subscriber or server prefixes (AnyIP) and a default gateway; no routing daemon."""

from __future__ import annotations

from .base import NO_IPV6, Kind

KIND = Kind(
    name="host",
    sysctls=NO_IPV6 + (
        ("net.ipv4.conf.all.rp_filter", "0"),
        ("net.ipv4.conf.default.rp_filter", "0"),
    ),
    mgmt_port="mgmt0",
    routes=False,
    graph_shape="ellipse",
    graph_column=0,
)
