"""What this host must offer before a lab goes up: root, tools, kernel features, free addresses."""

from __future__ import annotations

import os
import shutil
from ipaddress import IPv4Network, IPv6Network, ip_network
from pathlib import Path

from .. import kinds
from ..model.diagnostics import LabError
from ..model.schema import Topology

# tool -> (what it is for, Debian package)
TOOLS = {
    "nft": ("nftables rulesets", "nftables"),
    "bird": ("BGP", "bird2"),
    "conntrack": ("session tables", "conntrack"),
}

INSTALL_HINT = "run `make deps` (apt-get install -y {pkgs}); `lab doctor` checks every feature the labs use"


def missing_tools(tools: dict[str, tuple[str, str]] = TOOLS) -> list[str]:
    return [name for name in tools if shutil.which(name) is None]


def require_tools(tools: dict[str, tuple[str, str]] = TOOLS) -> None:
    missing = missing_tools(tools)
    if missing:
        pkgs = " ".join(sorted({tools[m][1] for m in missing}))
        what = ", ".join(f"{m} ({tools[m][0]})" for m in missing)
        raise LabError(f"missing on this host: {what}; {INSTALL_HINT.format(pkgs=pkgs)}")


def require_root() -> None:
    if os.geteuid() != 0:
        raise LabError("this command creates network namespaces and needs root: run it with sudo")


def require_kernel() -> None:
    """Namespaces and veth are the minimum; say so in one sentence when absent."""
    if not Path("/proc/self/ns/net").exists():
        raise LabError("this kernel has no network namespaces (CONFIG_NET_NS); the lab cannot run here")


def require_nat64(topo: Topology) -> None:
    """`services.nat64` needs the tayga translator and a TUN device on this host."""
    if topo.services.nat64 is None:
        return
    if shutil.which("tayga") is None:
        raise LabError("services.nat64 needs tayga (the NAT64 translator); " + INSTALL_HINT.format(pkgs="tayga"))
    if not Path("/dev/net/tun").exists():
        raise LabError("services.nat64 needs TUN devices (/dev/net/tun), which this kernel does not offer")


def require_selector(topo: Topology) -> None:
    """`services.selector: ebpf` needs bpf(2), cls_bpf and tc on this host: refuse the lab before
    anything is built, naming what is missing."""
    if topo.services.selector != "ebpf" or not any(kinds.get(n.kind).load_balancer for n in topo.nodes.values()):
        return
    from dataplane.kernel import tcsel

    hint = "use `services.selector: nftables` (the default) on this host"
    if shutil.which("tc") is None:
        raise LabError(f"services.selector: ebpf needs the `tc` tool (apt-get install -y iproute2); {hint}")
    reason = tcsel.probe()
    if reason is not None:
        raise LabError(f"services.selector: ebpf: {reason}; {hint}")


def root_routes(exclude_devices: tuple[str, ...] = ()) -> list[IPv4Network | IPv6Network]:
    """Every IPv4 and IPv6 route and address of the root namespace, all tables, except on
    EXCLUDE_DEVICES (a running lab's own management bridge is not a conflict with itself); without the
    host's own plumbing (127/8, ::1, link-local, multicast)."""
    from pyroute2 import IPRoute

    nets: set[IPv4Network | IPv6Network] = set()
    with IPRoute() as ipr:
        skip = {i for name in exclude_devices for i in ipr.link_lookup(ifname=name)}
        for family, default in ((2, "0.0.0.0"), (10, "::")):
            for route in ipr.get_routes(family=family, table=0):
                if route.get("type", 1) not in (1, 2, 6, 7):  # unicast, local, blackhole, unreachable
                    continue
                if route.get_attr("RTA_OIF") in skip:
                    continue
                dst = route.get_attr("RTA_DST") or default
                try:
                    nets.add(ip_network(f"{dst}/{route['dst_len']}", strict=False))
                except ValueError:
                    continue
            for addr in ipr.get_addr(family=family):
                if addr["index"] in skip:
                    continue
                nets.add(ip_network(f"{addr.get_attr('IFA_ADDRESS')}/{addr['prefixlen']}", strict=False))
    own = (IPv4Network("127.0.0.0/8"), IPv6Network("::1/128"), IPv6Network("fe80::/10"), IPv6Network("ff00::/8"))
    return sorted((n for n in nets if not any(n.version == o.version and n.subnet_of(o) for o in own)),  # type: ignore[arg-type]
                  key=lambda n: (n.version, n))
