"""Plan the MX load-balancing selector (ECMP CHASH, plain ECMP, TLB): nft map, marks, tables, daemon.

The kernel forwards. On each side of the MX a prerouting rule hashes the subscriber address (source
on the trust side, destination on the untrust side; same jhash seed and bucket count) into a bucket;
an nftables map turns the bucket into a mark (TLB_BIT | SRX number, SRX number = position in the SRX
order, the JVD's "unilist" order); a policy rule per mark sends the packet to that SRX's table.
A packet that got TLB_BIT but no SRX (empty map: no SRX alive) hits the catch-all rule and the
blackhole of the `srx_mnha_group_tlb-fi`-like table: dropped at the MX, never sent to a dead SRX.

TLB differs from ECMP in what is steered (filter-based forwarding: only the client prefixes, by
source on the trust side and by destination on the untrust side) and in how an SRX is judged alive
(health checks to its loopback instead of BGP next hops). `dataplane.mxlb` only rewrites the map
(and, for TLB, the instance's default route).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from ipaddress import IPv4Interface

from dataplane.chash import build_initial

from .model import Topology
from .plan import LabPlan, NodePlan, Process, Route, Rule, Ruleset

MARK_TABLE_BASE = 100
TLB_BIT = 0x100
FALLBACK_TABLE = 199  # the TLB forwarding instance: blackhole unless an SRX is healthy
RULE_PRIORITY_BASE = 1000
SIDES = (("TRUST-VR", "trust", "saddr"), ("UNTRUST-VR", "untrust", "daddr"))


@dataclass(frozen=True)
class Member:
    name: str
    mark: int
    dev: str
    nexthop: str
    loopback: str  # health-check target (TLB)


@dataclass(frozen=True)
class Selector:
    side: str  # trust | untrust
    ns: str
    hash_field: str  # saddr | daddr
    ingress: tuple[str, ...]  # core-facing interfaces whose traffic is steered
    match_prefixes: tuple[str, ...]  # TLB filter-based forwarding; empty: everything from ingress
    watch_prefixes: tuple[str, ...]  # routes whose BGP next hops say an SRX is alive (ECMP)
    members: tuple[Member, ...]


@dataclass(frozen=True)
class SelectorConfig:
    node: str
    mode: str  # chash | ecmp | tlb
    buckets: int
    seed: int
    order: tuple[str, ...]
    selectors: tuple[Selector, ...]
    status_file: str
    fallback_table: int
    health: dict[str, object]
    peers: dict[str, str]  # MNHA pair peer of each SRX: a failed SRX's buckets go to its peer

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"


def srx_order(topo: Topology) -> list[str]:
    return [name for name, node in topo.nodes.items() if node.kind == "srx"]


def mark_of(position: int) -> int:
    return TLB_BIT | position


def plan_selectors(topo: Topology, plan: LabPlan, python: str) -> None:
    mode = {"ecmp-chash": "chash", "ecmp": "ecmp", "tlb": "tlb"}[topo.services.load_balancing]
    order = srx_order(topo)
    marks = {name: mark_of(index + 1) for index, name in enumerate(order)}
    clients = tuple(str(p) for n in topo.nodes.values() if n.kind == "host" for p in n.prefixes
                    if _is_client_side(topo, plan, n))
    for node in plan.nodes:
        if node.kind != "mx":
            continue
        selectors = []
        for instance, side, field in SIDES:
            if side == "untrust" and topo.services.use_case == "cgnat":
                continue  # return traffic follows each SRX's NAT pool route, not a hash
            watch = ("0.0.0.0/0",) if side == "trust" else clients
            selector = _selector(plan, node, instance, side, field, marks,
                                 clients if mode == "tlb" else (), watch)
            if selector.members:
                selectors.append(selector)
                _kernel_side(plan, node, selector, topo)
        health = topo.services.health_check.model_dump()
        health["timeout_ms"] = health["timeout_ms"] or health["interval_ms"]
        config = SelectorConfig(
            node=node.name, mode=mode, buckets=topo.services.buckets, seed=topo.services.hash_seed,
            order=tuple(order), selectors=tuple(selectors),
            status_file=f"{plan.state_dir}/nodes/{node.name}/mxlb-status.json",
            fallback_table=FALLBACK_TABLE, health=health if mode == "tlb" else {},
            peers={a: b for pair in plan.mnha for a, b in (pair, pair[::-1])},
        )
        conf = f"nodes/{node.name}/mxlb.json"
        plan.files[conf] = config.to_json()
        node.files.append(conf)
        plan.processes.append(Process(node.name, node.master_ns, "mxlb",
                                      (python, "-m", "dataplane.mxlb", f"{plan.state_dir}/{conf}")))


def _is_client_side(topo: Topology, plan: LabPlan, host: object) -> bool:
    """Subscriber prefixes: those of hosts behind the trust-side gateways."""
    names = [name for name, n in topo.nodes.items() if n is host]
    for iface in plan.interfaces():
        if iface.node in names and iface.peer_node:
            gateway = iface.peer_node
            return any(i.node == gateway and i.zone == "trust" for i in plan.interfaces())
    return False


def _selector(plan: LabPlan, node: NodePlan, instance: str, side: str, field: str, marks: dict[str, int],
              match: tuple[str, ...], watch: tuple[str, ...]) -> Selector:
    ns = next(n for n in node.namespaces if n.endswith("-" + instance.lower()))
    loopbacks = {n.name: n.loopbacks.get("", "") for n in plan.nodes}
    members, ingress = [], []
    for iface in plan.interfaces():
        if iface.ns != ns or iface.peer_node is None:
            continue
        peer = next(i for i in plan.interfaces() if i.node == iface.peer_node and i.peer_node == node.name
                    and i.peer_alias == iface.alias)
        if iface.peer_node in marks:
            members.append(Member(iface.peer_node, marks[iface.peer_node], iface.name,
                                  str(IPv4Interface(peer.address).ip) if peer.address else "",
                                  loopbacks[iface.peer_node]))
        else:
            ingress.append(iface.name)
    members.sort(key=lambda m: m.mark)
    return Selector(side, ns, field, tuple(sorted(ingress)), match, watch, tuple(members))


def _kernel_side(plan: LabPlan, node: NodePlan, selector: Selector, topo: Topology) -> None:
    """The static part: nft table with the initial map and per-SRX counters, policy rules, tables.

    Packets for the MX itself (BGP from a gateway) are marked too, harmlessly: the `local` table is
    looked up before the fwmark rules, so no `fib daddr type local` test is needed on the hot path.
    """
    buckets, seed = topo.services.buckets, topo.services.hash_seed
    initial = build_initial([m.name for m in selector.members], buckets)
    by_name = {m.name: m.mark for m in selector.members}
    elements = ", ".join(f"{b} : {by_name[name]:#x}" for b, name in enumerate(initial.buckets))
    ingress = ", ".join(f'"{i}"' for i in selector.ingress)
    match = ""
    if selector.match_prefixes:
        field = "saddr" if selector.side == "trust" else "daddr"
        match = f"ip {field} {{ {', '.join(selector.match_prefixes)} }} "
    counters = "".join(f"    counter {m.name} {{ }}\n" for m in selector.members)
    accounting = "".join(f'        meta mark {m.mark:#x} counter name "{m.name}"\n' for m in selector.members)
    name = f"nodes/{node.name}/selector-{selector.side}.nft"
    plan.files[name] = (
        f"# MX {node.name} {selector.side} selector ({topo.services.load_balancing}): bucket = jhash(ip "
        f"{selector.hash_field}) mod {buckets} seed {seed:#x};\n"
        f"# bucket -> mark -> table {MARK_TABLE_BASE}+SRX (one per SRX); no SRX -> table {FALLBACK_TABLE} "
        f"(blackhole). dataplane.mxlb rewrites the map.\n"
        f"table ip mxlb\ndelete table ip mxlb\n"
        f"table ip mxlb {{\n"
        f"{counters}"
        f"    map sel {{\n"
        f"        typeof numgen inc mod {buckets} : meta mark\n"
        f"        elements = {{ {elements} }}\n"
        f"    }}\n\n"
        f"    chain prerouting {{\n"
        f"        type filter hook prerouting priority mangle; policy accept;\n"
        f"        iifname {{ {ingress} }} {match}meta mark set {TLB_BIT:#x} "
        f"meta mark set jhash ip {selector.hash_field} mod {buckets} seed {seed:#x} map @sel\n"
        f"    }}\n\n"
        f"    chain accounting {{\n"
        f"        type filter hook forward priority filter; policy accept;\n"
        f"{accounting}"
        f"    }}\n"
        f"}}\n"
    )
    node.files.append(name)
    plan.rulesets.append(Ruleset(node.name, selector.ns, name))
    for member in selector.members:
        table = MARK_TABLE_BASE + (member.mark & 0xFF)
        plan.rules.append(Rule(selector.ns, member.mark, table, RULE_PRIORITY_BASE + (member.mark & 0xFF)))
        plan.routes.append(Route(selector.ns, "0.0.0.0/0", "unicast", via=member.nexthop, dev=member.dev,
                                 table=table))
    plan.rules.append(Rule(selector.ns, TLB_BIT, FALLBACK_TABLE, RULE_PRIORITY_BASE + 999, mask=TLB_BIT))
    plan.routes.append(Route(selector.ns, "0.0.0.0/0", "blackhole", table=FALLBACK_TABLE))
