"""Helpers shared by the Junos and IOS renderers: interface names, ages, address lookups."""

from __future__ import annotations

import re
import time
from ipaddress import ip_address, ip_network

from .gather import Snapshot
from .state import Instance, Link

_NUMBERS = re.compile(r"(\d+)")
JUNOS_TYPE_ORDER = ("ge", "xe", "et", "ae", "reth", "irb", "st", "lt", "fxp", "em", "lo")


def natural_key(name: str) -> tuple[object, ...]:
    return tuple(int(part) if part.isdigit() else part for part in _NUMBERS.split(name))


def junos_sort_key(name: str) -> tuple[object, ...]:
    kind = re.match(r"[a-z]+", name)
    rank = JUNOS_TYPE_ORDER.index(kind.group(0)) if kind and kind.group(0) in JUNOS_TYPE_ORDER else 5
    return (rank, *natural_key(name))


def instance_unit(snap: Snapshot, instance: str) -> int:
    """lo0.N of a routing instance: 0 master, then one per instance in plan order (as the config)."""
    names = [i.name for i in snap.node.instances]
    return names.index(instance) if instance in names else 0


def junos_physical(link: Link) -> str:
    if link.name == "lo":
        return "lo0"
    return link.alias or link.name


def junos_logical(snap: Snapshot, instance: str, ifname: str | None, inst: Instance | None = None) -> str:
    """`ge-0/0/0.0`, `lo0.1` (lo of TRUST-VR), `fxp0.0` for a Linux interface of an instance."""
    if ifname is None:
        return ""
    if ifname == "lo":
        return f"lo0.{instance_unit(snap, instance)}"
    alias = (inst.aliases if inst is not None else {}).get(ifname) or ifname
    return f"{alias}.0"


def ios_address(address: str) -> str:
    """An address as IOS prints it: IPv6 in capitals (2001:DB8:1::A)."""
    return address.upper() if ":" in address else address


def ios_name(link_name: str, aliases: dict[str, str]) -> str:
    if link_name == "lo":
        return "Loopback0"
    return aliases.get(link_name) or link_name


def _parts(seconds: float) -> tuple[int, int, int, int, int]:
    """Whole weeks, days, hours, minutes and seconds of a duration (what the ages below print)."""
    weeks, rest = divmod(int(seconds), 604800)
    days, rest = divmod(rest, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return weeks, days, hours, minutes, secs


def junos_age(seconds: float | None) -> str:
    """Route age as Junos prints it: 00:05:12, 2d 03:04:05, 1w2d 03:04:05."""
    if seconds is None:
        return "-"
    weeks, days, hours, minutes, secs = _parts(seconds)
    clock = f"{hours:02}:{minutes:02}:{secs:02}"
    if weeks:
        return f"{weeks}w{days}d {clock}"
    if days:
        return f"{days}d {clock}"
    return clock


def junos_updown(seconds: float | None) -> str:
    """BGP Last Up/Dwn: 5:12, 1:05:12, 2d 1:05:12, 1w2d 1:05:12."""
    if seconds is None:
        return "-"
    weeks, days, hours, minutes, secs = _parts(seconds)
    if not weeks and not days:
        return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes}:{secs:02}"
    clock = f"{hours}:{minutes:02}:{secs:02}"
    return f"{weeks}w{days}d {clock}" if weeks else f"{days}d {clock}"


def ios_age(seconds: float | None) -> str:
    """IOS route and BGP age: 00:05:12 under a day, then 1d02h, then 2w3d."""
    if seconds is None:
        return "never"
    weeks, days, hours, minutes, secs = _parts(seconds)
    if weeks:
        return f"{weeks}w{days}d"
    if days:
        return f"{days}d{hours:02}h"
    return f"{hours:02}:{minutes:02}:{secs:02}"


def clock(now: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %Z", time.localtime(now))


def local_addresses(inst: Instance) -> set[str]:
    return {a.address for a in inst.addresses}


class Egress:
    """Longest-prefix match over an instance's main table: which interface an address is sent out of."""

    def __init__(self, inst: Instance, family: int = 4):
        table = []
        for route in inst.routes if family == 4 else inst.routes6:
            if route.table != 254 or route.type != "unicast":
                continue
            net = ip_network(route.dst)
            table.append((net.prefixlen, int(net.network_address), int(net.netmask),
                          route.nexthops[0].ifname if route.nexthops else None))
        self.table = sorted(table, reverse=True)  # longest prefix first

    def __call__(self, address: str) -> str | None:
        target = int(ip_address(address))
        for _length, network, mask, ifname in self.table:
            if target & mask == network:
                return ifname
        return None


def egress(inst: Instance, address: str) -> str | None:
    """The Linux interface the main table sends ADDRESS (of either family) out of (longest match), None if none."""
    return Egress(inst, 6 if ":" in address else 4)(address)


def bird_version(inst: Instance) -> str:
    for line in inst.bird_status or []:
        if line.startswith("BIRD "):
            return line
    return ""


def bird_started(inst: Instance) -> str:
    for line in inst.bird_status or []:
        if line.startswith("Last reboot on "):
            return line[len("Last reboot on "):]
    return ""
