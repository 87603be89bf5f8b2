"""Read a node's live state at the moment of a command: netlink, BIRD, conntrack, status files.

Only what the command needs is read (`Needs`). Netlink sockets (netlink.py) are opened inside the
namespace by the calling thread (`netnsutil.entered`) and closed at once: the server holds nothing
that would keep a powered-off node's namespace alive between commands.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from labkit import birdctl, contracts, netnsutil

from ..plan.sshconfig import Node, ServerConfig
from . import birdparse, netlink
from .state import FlowSession, Instance, Neighbor

# Status files other features write into nodes/NODE/ (docs/ssh-cli.md lists them).
STATUS_FILES = contracts.STATUS_FILES


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
    bird_exports: bool = False  # BIRD's `show route export PROTO all` of every BGP session of the instance
    neighbors: bool = False  # the ARP table (`ip -j neigh`) of every namespace of the node
    ruleset: bool = False  # the live nftables ruleset of the node's master namespace (`nft -j list ruleset`)


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
    ruleset: list[dict[str, Any]] | None = None  # `nft -j list ruleset`'s "nftables" list
    ruleset_error: str | None = None


def boot_uptime() -> float:
    try:
        return float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0.0


def read_instance(node: Node, name: str, needs: Needs) -> tuple[Instance, dict[str, float]]:
    """One routing instance of NODE: its namespace's links, addresses, routes, and its BIRD."""
    spec = node.instance(name)
    assert spec is not None
    inst = Instance(name, spec.table)
    created: dict[str, float] = {}
    if needs.links or needs.routes:
        inst.links, inst.addresses, created, inst.routes = netlink.read(spec.ns, routes=needs.routes)
    if needs.routes:  # IPv6 beside (a dual-stack lab's; elsewhere only link-local, which no view shows)
        inst.addresses6, created6, inst.routes6 = netlink.read6(spec.ns)
        created.update(created6)
    bird = next((b for b in node.birds if b.instance == name), None)
    if bird is not None and (needs.bird_routes or needs.bgp or needs.bird_status):
        try:
            if needs.bird_status:
                inst.bird_status = birdctl.command(bird.socket, "show status")
            if needs.bird_routes:
                learned = birdparse.parse_routes(birdctl.command(bird.socket, "show route all"))
                inst.bird_routes = [r for r in learned if ":" not in r.prefix]
                inst.bird_routes6 = [r for r in learned if ":" in r.prefix]
            if needs.bgp:
                inst.bgp = birdparse.parse_protocols(birdctl.command(bird.socket, "show protocols all"))
            if needs.bird_exports:
                inst.bird_exports = {
                    peer.protocol: birdparse.parse_routes(
                        birdctl.command(bird.socket, f"show route export {peer.protocol} all"))
                    for peer in node.peers if peer.instance == name}
        except (birdctl.BirdError, OSError) as exc:
            inst.bird_error = str(exc)
    if needs.neighbors:
        inst.neighbors = read_neighbors(spec.ns)
    return inst, created


def parse_neighbors(text: str) -> list[Neighbor]:
    """`ip -j neigh show`: IPv4 entries with a link-layer address (complete or stale), not failed ones."""
    try:
        entries = json.loads(text or "[]")
    except ValueError:
        return []
    found = []
    for entry in entries:
        dst, mac = entry.get("dst", ""), entry.get("lladdr")
        if ":" in dst or not mac:
            continue
        found.append(Neighbor(dst, entry.get("dev", ""), mac, tuple(entry.get("state", ()))))
    return found


def read_neighbors(ns: str) -> list[Neighbor]:
    try:
        with netnsutil.entered(ns):
            result = subprocess.run(["ip", "-j", "-4", "neigh", "show"], capture_output=True, text=True, timeout=5.0,
                                    stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return []
    return parse_neighbors(result.stdout) if result.returncode == 0 else []


def read_ruleset(ns: str) -> tuple[list[dict[str, Any]] | None, str | None]:
    """The live nftables ruleset of NS as JSON objects (rules with their counters)."""
    try:
        with netnsutil.entered(ns):
            result = subprocess.run(["nft", "-j", "list", "ruleset"], capture_output=True, text=True, timeout=5.0,
                                    stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"cannot read the security ruleset: {exc}"
    if result.returncode != 0:
        return None, f"cannot read the security ruleset: {result.stderr.strip()}"
    try:
        items: list[dict[str, Any]] = json.loads(result.stdout).get("nftables", [])
    except ValueError as exc:
        return None, f"cannot read the security ruleset: {exc}"
    return items, None


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
    """The conntrack table of NS (`conntrack -L`, run from this thread while it is inside NS: the
    child process starts in the thread's namespace) and nf_conntrack_max there."""
    try:
        with netnsutil.entered(ns):
            result = subprocess.run(["conntrack", "-L", "-o", "id"], capture_output=True, text=True, timeout=5.0,
                                    stdin=subprocess.DEVNULL)
            maximum = int(Path("/proc/sys/net/netfilter/nf_conntrack_max").read_text())
    except (OSError, ValueError, subprocess.TimeoutExpired) as exc:
        return [], f"cannot read the session table: {exc}", 0
    if result.returncode != 0:
        return [], f"cannot read the session table: {result.stderr.strip()}", 0
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
    if (needs.links or needs.routes or needs.bird_routes or needs.bgp or needs.bird_status or needs.bird_exports
            or needs.neighbors):
        for spec in node.instances:
            inst, created = read_instance(node, spec.name, needs)
            snap.instances.append(inst)
            for address, stamp in created.items():
                snap.address_ages[f"{spec.name}/{address}"] = max(0.0, snap.uptime - stamp)
    if needs.ruleset:
        snap.ruleset, snap.ruleset_error = read_ruleset(node.master_ns)
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
