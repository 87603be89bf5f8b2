"""Plan the MX load-balancing selector (ECMP CHASH / plain ECMP): nft map, marks, tables, daemon.

The kernel forwards: a prerouting rule hashes the subscriber address (source on the trust side,
destination on the untrust side, same seed and bucket count) into a bucket, an nftables map turns
the bucket into a mark (one mark per SRX, by SRX order = the JVD's unilist order), and a policy
rule per mark sends the packet to that SRX's routing table. `dataplane.mxlb` only rewrites the map.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from ipaddress import IPv4Interface

from dataplane.chash import build_initial

from .model import Topology
from .plan import LabPlan, NodePlan, Process, Route, Rule, Ruleset

MARK_TABLE_BASE = 100
RULE_PRIORITY_BASE = 1000
SIDES = (("TRUST-VR", "trust", "saddr"), ("UNTRUST-VR", "untrust", "daddr"))


@dataclass(frozen=True)
class Member:
    name: str
    mark: int
    dev: str
    nexthop: str


@dataclass(frozen=True)
class Selector:
    side: str  # trust | untrust
    ns: str
    hash_field: str  # saddr | daddr
    ingress: tuple[str, ...]  # core-facing interfaces whose traffic is steered
    watch_prefixes: tuple[str, ...]  # routes whose BGP next hops say an SRX is alive
    members: tuple[Member, ...]


@dataclass(frozen=True)
class SelectorConfig:
    node: str
    mode: str  # chash | ecmp
    buckets: int
    seed: int
    order: tuple[str, ...]
    selectors: tuple[Selector, ...]
    status_file: str

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"


def srx_order(topo: Topology) -> list[str]:
    return [name for name, node in topo.nodes.items() if node.kind == "srx"]


def plan_selectors(topo: Topology, plan: LabPlan, python: str) -> None:
    if topo.services.load_balancing not in ("ecmp-chash", "ecmp"):
        return
    order = srx_order(topo)
    marks = {name: index + 1 for index, name in enumerate(order)}
    client_prefixes = [str(p) for n in topo.nodes.values() if n.kind == "host" for p in n.prefixes
                       if str(p).startswith("100.64.")] or ["0.0.0.0/0"]
    for node in plan.nodes:
        if node.kind != "mx":
            continue
        selectors = []
        for instance, side, field in SIDES:
            if side == "untrust" and topo.services.use_case == "cgnat":
                continue  # return traffic follows each SRX's NAT pool route, not a hash
            selector = _selector(plan, node, instance, side, field, marks,
                                 ("0.0.0.0/0",) if side == "trust" else tuple(client_prefixes))
            if selector.members:
                selectors.append(selector)
                _kernel_side(plan, node, selector, topo, order)
        config = SelectorConfig(
            node=node.name, mode="chash" if topo.services.load_balancing == "ecmp-chash" else "ecmp",
            buckets=topo.services.buckets, seed=topo.services.hash_seed,
            order=tuple(order), selectors=tuple(selectors),
            status_file=f"{plan.state_dir}/nodes/{node.name}/mxlb-status.json",
        )
        conf = f"nodes/{node.name}/mxlb.json"
        plan.files[conf] = config.to_json()
        node.files.append(conf)
        plan.processes.append(Process(node.name, node.master_ns, "mxlb",
                                      (python, "-m", "dataplane.mxlb", f"{plan.state_dir}/{conf}")))


def _selector(plan: LabPlan, node: NodePlan, instance: str, side: str, field: str,
              marks: dict[str, int], watch: tuple[str, ...]) -> Selector:
    ns = next(n for n in node.namespaces if n.endswith("-" + instance.lower()))
    members, ingress = [], []
    for iface in plan.interfaces():
        if iface.ns != ns or iface.peer_node is None:
            continue
        peer = next(i for i in plan.interfaces() if i.node == iface.peer_node and i.peer_node == node.name
                    and i.peer_alias == iface.alias)
        if iface.peer_node in marks:
            members.append(Member(iface.peer_node, marks[iface.peer_node], iface.name,
                                  str(IPv4Interface(peer.address).ip) if peer.address else ""))
        else:
            ingress.append(iface.name)
    members.sort(key=lambda m: m.mark)
    return Selector(side, ns, field, tuple(sorted(ingress)), watch, tuple(members))


def _kernel_side(plan: LabPlan, node: NodePlan, selector: Selector, topo: Topology, order: list[str]) -> None:
    """The static part: nft table with the initial map, one rule and one table per SRX.

    Packets for the MX itself (BGP from the gateway) are marked too, harmlessly: the `local` table
    is looked up before the fwmark rules, so no `fib daddr type local` test is needed on the hot path.
    """
    initial = build_initial([m.name for m in selector.members], topo.services.buckets)
    mark_of = {m.name: m.mark for m in selector.members}
    elements = ", ".join(f"{b} : {mark_of[name]}" for b, name in enumerate(initial.buckets))
    ingress = ", ".join(f'"{i}"' for i in selector.ingress)
    name = f"nodes/{node.name}/selector-{selector.side}.nft"
    plan.files[name] = (
        f"# MX {node.name} {selector.side} selector ({topo.services.load_balancing}): bucket = jhash(ip "
        f"{selector.hash_field}) mod {topo.services.buckets} seed {topo.services.hash_seed:#x}; bucket -> mark -> "
        f"table {MARK_TABLE_BASE}+mark (one per SRX). dataplane.mxlb rewrites the map; nothing else changes.\n"
        f"table ip mxlb\ndelete table ip mxlb\n"
        f"table ip mxlb {{\n"
        f"    map sel {{\n"
        f"        typeof numgen inc mod {topo.services.buckets} : meta mark\n"
        f"        elements = {{ {elements} }}\n"
        f"    }}\n\n"
        f"    chain prerouting {{\n"
        f"        type filter hook prerouting priority mangle; policy accept;\n"
        f"        iifname {{ {ingress} }} meta mark set jhash ip {selector.hash_field} "
        f"mod {topo.services.buckets} seed {topo.services.hash_seed:#x} map @sel\n"
        f"    }}\n"
        f"}}\n"
    )
    node.files.append(name)
    plan.rulesets.append(Ruleset(node.name, selector.ns, name))
    for member in selector.members:
        table = MARK_TABLE_BASE + member.mark
        plan.rules.append(Rule(selector.ns, member.mark, table, RULE_PRIORITY_BASE + member.mark))
        plan.routes.append(Route(selector.ns, "0.0.0.0/0", "unicast", via=member.nexthop, dev=member.dev,
                                 table=table))
