"""Plan SRX Multi Node High Availability pairs: session sync (conntrackd) and the MNHA daemon.

Routing mode (L3), as in the JVD: each SRX keeps its own addresses and BGP sessions; the pair
talks over its Inter Chassis Link. Sessions (conntrack entries, NAT bindings included) are synced
both ways by conntrackd in FTFW mode over the ICL. See docs/mnha.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Interface
from pathlib import Path

from dataplane.core.mnha import COLD_SYNC_WAIT_NOTE, refresh_windows
from labkit.configs import MnhaConfig
from labkit.contracts import CONNTRACKD_SYNC_PORT, MNHA_CONFIG, MNHA_STATUS

from ....model.schema import Topology
from ...plantypes import LabPlan, Process
from ...templating import environment


@dataclass(frozen=True)
class Icl:
    """How NODE reaches its MNHA peer. Routed (the JVD's): from its lo0.0 to the peer's lo0.0 through
    the MNHA-VR of the MXs it has ICL links to (eBGP there); direct: a veth between the two nodes."""

    dev: str  # Linux device the MNHA traffic is bound to: the direct link, or lo (routed)
    interface: str  # as Junos names it: ge-0/0/4.0, or lo0.0
    local_ip: str
    peer_ip: str
    routed_devs: tuple[str, ...] = ()  # routed: the node's ICL links to the MXs


def _ip(address: str | None) -> str:
    return str(IPv4Interface(address or "0.0.0.0/32").ip)


def icl_of(plan: LabPlan, node: str, peer: str) -> Icl:
    for veth in plan.veths:
        if {veth.a.node, veth.b.node} == {node, peer} and veth.a.zone == "icl":
            local, remote = (veth.a, veth.b) if veth.a.node == node else (veth.b, veth.a)
            return Icl(local.name, f"{local.alias}.0", _ip(local.address), _ip(remote.address))
    routed = sorted((i for i in plan.interfaces() if i.node == node and i.zone == "icl"), key=lambda i: i.alias)
    if not routed:
        raise KeyError(f"no ICL between {node} and {peer}")
    return Icl("lo", "lo0.0", plan.node(node).loopbacks.get("", ""), plan.node(peer).loopbacks.get("", ""),
               tuple(i.name for i in routed))


ACTIVE_PRIORITY, BACKUP_PRIORITY = 200, 100


def role_file(plan: LabPlan, node: str) -> str:
    return f"nodes/{node}/mnha-role.conf"


SIGNAL_TABLE = 50  # the MNHA-VR routing instance's table on the SRX (holds the signal route)


def srg1_initially_active(topo: Topology, node: str) -> bool | None:
    """None: the node is not in an SRG1 pair (its routes are never prepended)."""
    for pair in topo.mnha:
        if node in pair.nodes and pair.mode in ("srg1", "srg1+srg2"):
            return node == (pair.srg1_active or pair.nodes[0])
    return None


def in_pair(topo: Topology, node: str) -> bool:
    return any(node in pair.nodes for pair in topo.mnha)


def role_defines(srg1_active: bool, srg2_active: bool, signal: bool, note: str = "") -> str:
    """The BIRD include the MNHA daemon rewrites: which groups are active here, and whether the
    SRG0 failure signal route exists (the JVD's `condition srg_sig_route_exist`)."""
    return (f"define SRG1_ACTIVE = {int(srg1_active)};\ndefine SRG2_ACTIVE = {int(srg2_active)};\n"
            f"define SRG0_SIGNAL = {int(signal)};{f'  # {note}' if note else ''}\n")


def boot_role(plan: LabPlan, node: str) -> str | None:
    """The role include NODE powers on with when its pair syncs sessions: no group active and every
    route prepended (the signal-route branch; the signal route itself not installed) until its
    MNHA daemon has its peer's session table (cold sync) and rewrites it. BIRD starts before that
    daemon: with the include left as it was at the power-off, the node would draw traffic (BGP, and
    the MX's TLB, which follows BGP's route to the pair) before it holds the sessions that traffic
    needs. None: NODE is in no such pair (its include is left alone). The daemon's configuration
    is the plan's, or, for a running lab's plan (read back without its files), the one it runs with."""
    name = f"nodes/{node}/{MNHA_CONFIG}"
    text = plan.files.get(name)
    if text is None and Path(plan.state_dir, name).is_file():
        text = Path(plan.state_dir, name).read_text()
    if text is None or not MnhaConfig.model_validate_json(text).sync_config:
        return None
    return role_defines(False, False, True, COLD_SYNC_WAIT_NOTE)


def monitor_config(topo: Topology, plan: LabPlan, node: str) -> dict[str, object] | None:
    """The SRG0 monitor of NODE: one BFD-liveliness destination per link of the monitored zone, the
    MX-side address (the JVD's monitor-object trust)."""
    pair = next(p for p in topo.mnha if node in p.nodes)
    if pair.monitor is None:
        return None
    m = pair.monitor
    destinations = []
    for iface in sorted(plan.interfaces(), key=lambda i: i.alias):
        if iface.node != node or iface.zone != m.zone or not iface.address:
            continue
        peer = next((i for i in plan.interfaces() if i.node == iface.peer_node and i.peer_node == node
                     and i.peer_alias == iface.alias), None)
        if peer is None or not peer.address:
            continue
        destinations.append({"ip": str(IPv4Interface(peer.address).ip), "src_ip": str(IPv4Interface(iface.address).ip),
                             "dev": iface.name, "interface": f"{iface.alias}.0", "weight": m.weight,
                             "peer_node": peer.node})
    return {"object": m.zone, "threshold": m.threshold, "object_threshold": m.object_threshold,
            "srg_threshold": m.srg_threshold, "interval_ms": m.interval_ms, "multiplier": m.multiplier,
            "destinations": destinations}


# A node receiving its peer's table (cold sync) writes every session into its kernel, and the kernel
# reports each write to conntrackd's event socket too (conntrackd skips its own changes only once it
# has read them). A socket that overflows loses events, and conntrackd then reads the whole kernel
# table back as its own sessions and sends them to the peer again: at 300,000 sessions a power-on
# overflowed the 8 MiB buffer in seconds. The buffer holds a whole table's events instead: the kernel
# charges about 1,280 bytes per queued event and doubles the size asked (SO_RCVBUFFORCE); memory is
# used only while events wait, never reserved.
SYNC_SOCKET_BUFFER = 64 << 20  # conntrackd's ICL socket, each way (SO_SNDBUFFORCE / SO_RCVBUFFORCE)
NETLINK_EVENT_BYTES = 1280
NETLINK_BUFFER_MIN = 8 << 20
NETLINK_BUFFER_MAX = (1 << 30) - 1  # the kernel takes at most INT_MAX / 2 and doubles it


def netlink_buffer(max_sessions: int) -> int:
    """conntrackd's NetlinkBufferSize for a table of MAX_SESSIONS: every event of it queued at once."""
    return max(NETLINK_BUFFER_MIN, min(NETLINK_BUFFER_MAX, max_sessions * NETLINK_EVENT_BYTES // 2))


def plan_mnha(topo: Topology, plan: LabPlan, python: str = "python3") -> None:
    env = environment()
    for pair in topo.mnha:
        # conntrackd first: a node that powers on runs its daemons in this order, and its peer sends
        # it the whole session table (cold sync) once its MNHA daemon is heard
        for node, peer in (pair.nodes, pair.nodes[::-1]) if pair.sync else ():
            icl = icl_of(plan, node, peer)
            node_plan = plan.node(node)
            own = sorted({str(IPv4Interface(i.address).ip) for i in plan.interfaces()
                          if i.node == node and i.address} | {node_plan.loopbacks.get("", "")} - {""})
            name = f"nodes/{node}/conntrackd.conf"
            plan.files[name] = env.get_template("mnha/conntrackd.conf.j2").render(
                node=node, peer=peer, icl_dev=icl.dev, state_dir=plan.state_dir,
                local_ip=icl.local_ip, peer_ip=icl.peer_ip, own_addresses=own,
                # the kernel drops the events conntrackd would ignore (no copy to user space); its
                # filter program holds at most 127 IPv4 addresses (127.0.0.1 is one of them)
                filter_from="Kernelspace" if len(own) < 127 else "Userspace",
                sync_port=CONNTRACKD_SYNC_PORT, hash_limit=topo.services.max_sessions,
                hash_size=max(8192, topo.services.max_sessions // 4),
                resend_queue=max(131072, topo.services.max_sessions // 4),
                netlink_buffer=netlink_buffer(topo.services.max_sessions), sync_socket_buffer=SYNC_SOCKET_BUFFER,
            )
            node_plan.files.append(name)
            # conntrackd refuses to start while its lock file exists, and a killed one leaves it.
            plan.processes.append(Process(node, node_plan.master_ns, "conntrackd",
                                          ("conntrackd", "-C", f"{plan.state_dir}/{name}"),
                                          stale_files=(f"{plan.state_dir}/nodes/{node}/conntrackd.lock",)))
        for node, peer in (pair.nodes, pair.nodes[::-1]):
            _plan_daemon(topo, plan, pair.mode, node, peer, python)


def _plan_daemon(topo: Topology, plan: LabPlan, mode: str, node: str, peer: str, python: str) -> None:
    icl = icl_of(plan, node, peer)
    node_plan = plan.node(node)
    pair = next(p for p in topo.mnha if node in p.nodes)
    refresh = refresh_windows(topo.services.udp_timeout, topo.services.tcp_timeout)
    active = srg1_initially_active(topo, node)
    srg2 = pair.mode == "srg1+srg2" and active is False
    config = MnhaConfig.model_validate({
        "node": node, "peer": peer, "mode": mode,
        "priority": ACTIVE_PRIORITY if active or (active is None and node == pair.nodes[0]) else BACKUP_PRIORITY,
        "preempt": pair.preempt, "heartbeat_ms": pair.heartbeat_ms, "heartbeat_threshold": pair.heartbeat_threshold,
        "icl_dev": icl.dev, "local_ip": icl.local_ip, "peer_ip": icl.peer_ip, "icl_routed": list(icl.routed_devs),
        "peer_loopback": plan.node(peer).loopbacks.get("", ""),
        "monitored": sorted(i.name for i in plan.interfaces() if i.node == node and i.zone in ("trust", "untrust")),
        "role_file": f"{plan.state_dir}/{role_file(plan, node)}",
        "bird_socket": f"{plan.state_dir}/nodes/{node}/bird.ctl",
        "status_file": f"{plan.state_dir}/nodes/{node}/{MNHA_STATUS}",
        "monitor": monitor_config(topo, plan, node),
        "signal_route": str(pair.signal_route), "signal_table": SIGNAL_TABLE,
        "srg2_priority": BACKUP_PRIORITY if active else ACTIVE_PRIORITY,
        # session sync: conntrackd's events, refreshed once per window; a returning peer's cold sync
        "sync_config": f"{plan.state_dir}/nodes/{node}/conntrackd.conf" if pair.sync else None,
        "refresh_s": refresh[0], "refresh_tcp_s": refresh[1],
    })
    name = f"nodes/{node}/{MNHA_CONFIG}"
    plan.files[name] = config.to_json()
    plan.files[role_file(plan, node)] = role_defines(active is not False, srg2, False)
    node_plan.files += [name, role_file(plan, node)]
    plan.processes.append(Process(node, node_plan.master_ns, "mnhad",
                                  (python, "-m", "dataplane.daemons.mnhad", f"{plan.state_dir}/{name}")))


def srg1_peers(state_dir: str) -> dict[str, str]:
    """SRX -> its MNHA peer, for the pairs of a running lab with an SRG1 (one of the two is backup,
    out of the MXs' ECMP routes), from the daemons' configurations in its state folder."""
    peers = {}
    for path in Path(state_dir, "nodes").glob(f"*/{MNHA_CONFIG}"):
        try:
            config = MnhaConfig.read(str(path))
        except (OSError, ValueError):
            continue
        if config.mode != "srg0":
            peers[config.node] = config.peer
    return peers
