"""Plan SRX Multi Node High Availability pairs: session sync (conntrackd) and the MNHA daemon.

Routing mode (L3), as in the JVD: each SRX keeps its own addresses and BGP sessions; the pair
talks over its Inter Chassis Link. Sessions (conntrack entries, NAT bindings included) are synced
both ways by conntrackd in FTFW mode over the ICL. See docs/mnha.md.
"""

from __future__ import annotations

from ipaddress import IPv4Interface

import jinja2

from .model import Topology
from .plan import Interface, LabPlan, Process


def icl_of(plan: LabPlan, node: str, peer: str) -> tuple[Interface, Interface]:
    for veth in plan.veths:
        if {veth.a.node, veth.b.node} == {node, peer} and veth.a.zone == "icl":
            return (veth.a, veth.b) if veth.a.node == node else (veth.b, veth.a)
    raise KeyError(f"no ICL between {node} and {peer}")


def plan_mnha(topo: Topology, plan: LabPlan, env: jinja2.Environment) -> None:
    for pair in topo.mnha:
        if not pair.sync:
            continue
        for node, peer in (pair.nodes, pair.nodes[::-1]):
            local, remote = icl_of(plan, node, peer)
            node_plan = plan.node(node)
            own = sorted({str(IPv4Interface(i.address).ip) for i in plan.interfaces()
                          if i.node == node and i.address} | {node_plan.loopbacks.get("", "")} - {""})
            name = f"nodes/{node}/conntrackd.conf"
            plan.files[name] = env.get_template("conntrackd.conf.j2").render(
                node=node, peer=peer, icl_dev=local.name, state_dir=plan.state_dir,
                local_ip=IPv4Interface(local.address or "0.0.0.0/32").ip,
                peer_ip=IPv4Interface(remote.address or "0.0.0.0/32").ip, own_addresses=own,
            )
            node_plan.files.append(name)
            plan.processes.append(Process(node, node_plan.master_ns, "conntrackd",
                                          ("conntrackd", "-C", f"{plan.state_dir}/{name}")))
