"""Addresses, routes and policy rules of a plan, through one namespace's netlink socket (IPv4 and, in a
dual-stack lab, IPv6: addresses added without duplicate address detection, usable at once)."""

from __future__ import annotations

from ipaddress import ip_interface, ip_network

from pyroute2 import IPRoute

from ..plan.plantypes import Interface, Route, Rule

IFA_F_NODAD = 0x02  # linux/if_addr.h: no duplicate address detection (the plan makes every address unique)
FAMILY = {4: 2, 6: 10}  # AF_INET, AF_INET6


def add_address(ipr: IPRoute, index: int, address: str) -> None:
    """ADDRESS ("198.18.0.0/31", "2001:db8:1::1/126", or a bare loopback address) on link INDEX."""
    parsed = ip_interface(address)
    extra = {"flags": IFA_F_NODAD} if parsed.version == 6 else {}
    ipr.addr("add", index=index, address=str(parsed.ip), prefixlen=parsed.network.prefixlen,
             family=FAMILY[parsed.version], **extra)


def configure_interface(ipr: IPRoute, iface: Interface) -> None:
    index = ipr.link_lookup(ifname=iface.name)[0]
    ipr.link("set", index=index, ifalias=iface.alias, mtu=iface.mtu, state="up")
    if iface.address:
        add_address(ipr, index, iface.address)
    if iface.address6:
        add_address(ipr, index, iface.address6)


def add_route(ipr: IPRoute, route: Route) -> None:
    net = ip_network(route.dst)
    where = {"dst": str(net.network_address), "dst_len": net.prefixlen, "family": FAMILY[net.version]}
    if route.kind == "blackhole":
        ipr.route("add", **where, type="blackhole", table=route.table or 254, priority=4294967295)
    elif route.kind == "local":
        ipr.route("add", **where, type="local", oif=1, table=255, scope=254)
    elif route.via:
        extra = {"table": route.table} if route.table else {}
        if route.dev:
            extra["oif"] = ipr.link_lookup(ifname=route.dev)[0]
        ipr.route("add", **where, gateway=route.via, **extra)


def add_rule(ipr: IPRoute, rule: Rule) -> None:
    extra = {"fwmask": rule.mask} if rule.mask is not None else {}
    ipr.rule("add", fwmark=rule.fwmark, table=rule.table, priority=rule.priority, family=FAMILY[rule.family],
             **extra)

