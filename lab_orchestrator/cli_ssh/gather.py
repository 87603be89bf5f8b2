"""Read a node's live state at the moment of a command: netlink, BIRD, conntrack, status files.

Only what the command needs is read (`Needs`). Netlink sockets are opened inside the namespace by
the calling thread (`netnsutil.entered`) and closed at once: the server holds nothing that would keep
a powered-off node's namespace alive between commands.
"""

from __future__ import annotations

import json
import re
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import birdctl, netnsutil
from . import birdparse
from .config import Node, ServerConfig
from .state import Address, FlowSession, Instance, KernelRoute, Link, NextHop

IFF_UP = 0x1
IFF_LOWER_UP = 0x10000
_ROUTE_TYPES = {1: "unicast", 2: "local", 3: "broadcast", 6: "blackhole", 7: "unreachable", 8: "prohibit"}
_PROTOS = {2: "kernel", 3: "boot", 4: "static", 12: "bird", 186: "bgp", 188: "ospf"}
# Status files other features write into nodes/NODE/ (docs/ssh-cli.md lists them).
STATUS_FILES = ("mxlb-status.json", "mnha-status.json", "srd-status.json", "hsrp-status.json",
                "ikev2-status.json")


@dataclass(frozen=True)
class Needs:
    links: bool = False
    routes: bool = False
    bird_routes: bool = False
    bgp: bool = False
    bird_status: bool = False  # BIRD's `show status`: version, start time
    sessions: bool = False
    status: tuple[str, ...] = ()  # status file names under the node's folder
    config: bool = False


@dataclass
class Snapshot:
    """Everything a renderer may look at, read at one moment (`now`)."""

    lab: str
    node: Node
    instances: list[Instance]
    now: float
    uptime: float  # seconds since boot at `now` (kernel address timestamps count from boot)
    lab_created: float = 0.0
    load_balancing: str = ""
    use_case: str = ""
    sessions: list[FlowSession] | None = None
    sessions_error: str | None = None
    conntrack_max: int = 0
    status: dict[str, Any] = field(default_factory=dict)  # file name -> parsed JSON
    config_text: str | None = None
    address_ages: dict[str, float] = field(default_factory=dict)  # "ns/address" -> seconds


def boot_uptime() -> float:
    try:
        return float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0


def _attr(msg: Any, name: str) -> Any:
    return msg.get_attr(name)


def _links(ipr: Any) -> list[Link]:
    out = []
    for msg in ipr.get_links():
        info = _attr(msg, "IFLA_LINKINFO")
        kind = ""
        if info:
            kind = next((v for k, v in info.get("attrs", []) if k == "IFLA_INFO_KIND"), "") or ""
        stats = _attr(msg, "IFLA_STATS64") or {}
        name = _attr(msg, "IFLA_IFNAME") or ""
        flags = int(msg["flags"])
        operstate = _attr(msg, "IFLA_OPERSTATE") or ""
        oper = operstate == "UP" or (operstate == "UNKNOWN" and bool(flags & IFF_LOWER_UP))
        out.append(Link(
            index=int(msg["index"]), name=name, alias=_attr(msg, "IFLA_IFALIAS") or "",
            admin_up=bool(flags & IFF_UP), oper_up=oper and bool(flags & IFF_UP),
            mtu=int(_attr(msg, "IFLA_MTU") or 0), mac=_attr(msg, "IFLA_ADDRESS") or "",
            kind="loopback" if name == "lo" else kind,
            rx_packets=int(stats.get("rx_packets", 0)), tx_packets=int(stats.get("tx_packets", 0)),
            rx_bytes=int(stats.get("rx_bytes", 0)), tx_bytes=int(stats.get("tx_bytes", 0)),
        ))
    return sorted(out, key=lambda link: link.index)


def _addresses(ipr: Any, names: dict[int, str]) -> tuple[list[Address], dict[str, float]]:
    out, created = [], {}
    for msg in ipr.get_addr(family=socket.AF_INET):
        address = _attr(msg, "IFA_LOCAL") or _attr(msg, "IFA_ADDRESS")
        if not address:
            continue
        out.append(Address(names.get(int(msg["index"]), str(msg["index"])), address, int(msg["prefixlen"])))
        cache = _attr(msg, "IFA_CACHEINFO") or {}
        if "cstamp" in cache:
            created[address] = int(cache["cstamp"]) / 100.0
    return out, created


def _routes(ipr: Any, names: dict[int, str]) -> list[KernelRoute]:
    out = []
    for msg in ipr.get_routes(family=socket.AF_INET):
        table = _attr(msg, "RTA_TABLE") or int(msg["table"])
        dst = _attr(msg, "RTA_DST") or "0.0.0.0"
        hops: list[NextHop] = []
        multipath = _attr(msg, "RTA_MULTIPATH")
        if multipath:
            for hop in multipath:
                gateway = next((v for k, v in hop.get("attrs", []) if k == "RTA_GATEWAY"), None)
                hops.append(NextHop(gateway, names.get(int(hop["oif"])), int(hop.get("hops", 0)) + 1))
        else:
            oif = _attr(msg, "RTA_OIF")
            gateway = _attr(msg, "RTA_GATEWAY")
            if oif is not None or gateway:
                hops.append(NextHop(gateway, names.get(int(oif)) if oif is not None else None))
        out.append(KernelRoute(
            table=int(table), dst=f"{dst}/{msg['dst_len']}", type=_ROUTE_TYPES.get(int(msg["type"]), "other"),
            proto=_PROTOS.get(int(msg["proto"]), str(msg["proto"])), scope=int(msg["scope"]),
            metric=int(_attr(msg, "RTA_PRIORITY") or 0), nexthops=tuple(hops), prefsrc=_attr(msg, "RTA_PREFSRC"),
        ))
    return out


def read_instance(node: Node, name: str, needs: Needs) -> tuple[Instance, dict[str, float]]:
    """One routing instance of NODE: its namespace's links, addresses, routes, and its BIRD."""
    spec = node.instance(name)
    assert spec is not None
    inst = Instance(name, spec.table)
    created: dict[str, float] = {}
    if needs.links or needs.routes:
        from pyroute2 import IPRoute  # imported on first use: the server starts without it

        with netnsutil.entered(spec.ns):
            ipr = IPRoute()
        try:
            inst.links = _links(ipr)
            names = {link.index: link.name for link in inst.links}
            inst.addresses, created = _addresses(ipr, names)
            if needs.routes:
                inst.routes = _routes(ipr, names)
        finally:
            ipr.close()
    bird = next((b for b in node.birds if b.instance == name), None)
    if bird is not None and (needs.bird_routes or needs.bgp or needs.bird_status):
        try:
            if needs.bird_status:
                inst.bird_status = birdctl.command(bird.socket, "show status")
            if needs.bird_routes:
                inst.bird_routes = birdparse.parse_routes(birdctl.command(bird.socket, "show route all"))
            if needs.bgp:
                inst.bgp = birdparse.parse_protocols(birdctl.command(bird.socket, "show protocols all"))
        except (birdctl.BirdError, OSError) as exc:
            inst.bird_error = str(exc)
    return inst, created


_CT_FIELD = re.compile(r"(\w+)=(\S+)")


def parse_conntrack(text: str) -> list[FlowSession]:
    """`conntrack -L -o id`: original and reply tuple, per-direction counters, the entry id last."""
    out = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 4 or not parts[1].isdigit() or not parts[2].isdigit():
            continue
        pairs = _CT_FIELD.findall(line)
        values: dict[str, list[str]] = {}
        for key, value in pairs:
            values.setdefault(key, []).append(value)
        src, dst = values.get("src", []), values.get("dst", [])
        if len(src) < 2 or len(dst) < 2:
            continue
        sport, dport = values.get("sport", []), values.get("dport", [])
        packets, size = values.get("packets", []), values.get("bytes", [])
        ids = values.get("id", [])
        state = parts[3] if "=" not in parts[3] else ""
        if parts[0] == "icmp" and len(ids) >= 3:  # ICMP has no ports: its echo id stands in for them
            sport, dport = [ids[0], ids[1]], [ids[0], ids[1]]
        out.append(FlowSession(
            id=int(ids[-1]) if ids else 0, protocol=parts[0], state=state, timeout=int(parts[2]),
            source=src[0], destination=dst[0], source_port=int(sport[0]) if sport else 0,
            destination_port=int(dport[0]) if dport else 0, reply_source=src[1], reply_destination=dst[1],
            reply_source_port=int(sport[1]) if len(sport) > 1 else 0,
            reply_destination_port=int(dport[1]) if len(dport) > 1 else 0,
            packets_in=int(packets[0]) if packets else 0, bytes_in=int(size[0]) if size else 0,
            packets_out=int(packets[1]) if len(packets) > 1 else 0, bytes_out=int(size[1]) if len(size) > 1 else 0,
            assured="[ASSURED]" in line,
        ))
    return out


def read_sessions(ns: str) -> tuple[list[FlowSession], str | None, int]:
    from ..backends.netns import run_in_namespace

    try:
        result = run_in_namespace(ns, ["conntrack", "-L", "-o", "id"], timeout=5.0)
    except (OSError, TimeoutError) as exc:
        return [], f"cannot read the session table: {exc}", 0
    if result.returncode != 0:
        return [], f"cannot read the session table: {result.stderr.strip()}", 0
    maximum = 0
    try:
        with netnsutil.entered(ns):
            maximum = int(Path("/proc/sys/net/netfilter/nf_conntrack_max").read_text())
    except (OSError, ValueError):
        pass
    return parse_conntrack(result.stdout), None, maximum


def read_status(node: Node, name: str) -> Any:
    try:
        return json.loads((Path(node.status_dir) / name).read_text())
    except (OSError, ValueError):
        return None


def lab_created(config: ServerConfig) -> float:
    try:
        return float(json.loads((Path(config.state_dir) / "state.json").read_text()).get("created_at", 0.0))
    except (OSError, ValueError, AttributeError):
        return 0.0


def snapshot(config: ServerConfig, node: Node, needs: Needs) -> Snapshot:
    snap = Snapshot(config.lab, node, [], time.time(), boot_uptime(), lab_created(config),
                    config.load_balancing, config.use_case)
    if needs.links or needs.routes or needs.bird_routes or needs.bgp or needs.bird_status:
        for spec in node.instances:
            inst, created = read_instance(node, spec.name, needs)
            snap.instances.append(inst)
            for address, stamp in created.items():
                snap.address_ages[f"{spec.name}/{address}"] = max(0.0, snap.uptime - stamp)
    if needs.sessions:
        snap.sessions, snap.sessions_error, snap.conntrack_max = read_sessions(node.master_ns)
    for name in needs.status:
        value = read_status(node, name)
        if value is not None:
            snap.status[name] = value
    if needs.config:
        try:
            snap.config_text = Path(node.config_file).read_text()
        except OSError:
            snap.config_text = None
    return snap
