"""Plan the dual-MX Services Redundancy (SRD): one srdd per MX, its role file and signal route."""

from __future__ import annotations

from ipaddress import IPv4Interface

from labkit.configs import SrdConfig
from labkit.contracts import SRD_STATUS

from ...model.schema import Topology
from ..plantypes import LabPlan, Process

MASTER_PRIORITY, STANDBY_PRIORITY = 200, 100


def role_file(node: str) -> str:
    return f"nodes/{node}/srd-role.conf"


def initially_master(topo: Topology, node: str) -> bool | None:
    """None: the node is not in an SRD pair (it never prepends)."""
    if topo.srd is None or node not in topo.srd.nodes:
        return None
    return node == (topo.srd.master or topo.srd.nodes[0])


def signal_route(topo: Topology) -> str:
    """The last address of the loopback pool: never handed to a node (pools fill from the start)."""
    return str(topo.addressing.loopback.broadcast_address)


def plan_srd(topo: Topology, plan: LabPlan, python: str) -> None:
    if topo.srd is None:
        return
    srd = topo.srd
    for node, peer in (srd.nodes, srd.nodes[::-1]):
        icl = next(((v.a, v.b) if v.a.node == node else (v.b, v.a) for v in plan.veths
                    if {v.a.node, v.b.node} == {node, peer} and v.a.zone == "icl"), None)
        if icl is None:
            continue  # validation reports the missing inter-MX link
        local, remote = icl
        node_plan = plan.node(node)
        instances = [ns for ns in node_plan.namespaces if ns != node_plan.master_ns]
        master = bool(initially_master(topo, node))
        config = SrdConfig(
            node=node, peer=peer, priority=MASTER_PRIORITY if master else STANDBY_PRIORITY,
            preempt=srd.preempt, heartbeat_ms=srd.heartbeat_ms, heartbeat_threshold=srd.heartbeat_threshold,
            icl_dev=local.name, local_ip=str(IPv4Interface(local.address or "0.0.0.0/32").ip),
            peer_ip=str(IPv4Interface(remote.address or "0.0.0.0/32").ip),
            monitored={ns: sorted(i.name for i in plan.interfaces() if i.ns == ns) for ns in instances},
            # the BIRDs of its trust and untrust instances (its MNHA-VR, the master, is never prepended)
            bird_sockets=[p.control_socket for p in plan.processes
                          if p.node == node and p.control_socket and p.ns != plan.node(node).master_ns],
            role_file=f"{plan.state_dir}/{role_file(node)}",
            signal_namespaces=instances, signal_route=signal_route(topo),
            control_socket=f"{plan.state_dir}/nodes/{node}/srd.sock",
            status_file=f"{plan.state_dir}/nodes/{node}/{SRD_STATUS}",
        )
        name = f"nodes/{node}/srd.json"
        plan.files[name] = config.to_json()
        plan.files[role_file(node)] = f"define SRD_MASTER = {1 if master else 0};\n"
        node_plan.files += [name, role_file(node)]
        plan.processes.append(Process(node, node_plan.master_ns, "srdd",
                                      (python, "-m", "dataplane.daemons.srdd", f"{plan.state_dir}/{name}")))
