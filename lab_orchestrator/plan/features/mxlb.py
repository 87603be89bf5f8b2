"""Plan the MX load-balancing selector (ECMP CHASH, plain ECMP, TLB): nft map, marks, tables, daemon.

The kernel forwards. On each side of the MX a prerouting rule hashes the subscriber address (source
on the trust side, destination on the untrust side; same jhash seed and bucket count) into a bucket;
an nftables map turns the bucket into a mark (TLB_BIT | SRX number, SRX number = position in the SRX
order, the JVD's "unilist" order); a policy rule per mark sends the packet to that SRX's table.
A packet that got TLB_BIT but no SRX (empty map: no SRX alive) hits the catch-all rule and the
blackhole of the `srx_mnha_group_tlb-fi`-like table: dropped at the MX, never sent to a dead SRX.

TLB differs from ECMP in what is steered (filter-based forwarding: only the client prefixes, by
source on the trust side and by destination on the untrust side) and in how an SRX is judged alive
(health checks to its loopback instead of BGP next hops). `dataplane.daemons.mxlb` only rewrites the map
(and, for TLB, the instance's default route).
"""

from __future__ import annotations

from ipaddress import IPv4Interface, ip_network
from typing import Literal

from dataplane.core.chash import build_initial
from labkit.configs import HealthProfile, Hop, Member, ResponderConfig, ResponderNode, Selector, SelectorConfig
from labkit.contracts import HEALTH_STATUS, MXLB_CONFIG, MXLB_STATUS

from ... import kinds
from ...model import usecase
from ...model.schema import Topology
from ..plantypes import LabPlan, NodePlan, Process, Route, Rule, Ruleset
from . import ipv6

MARK_TABLE_BASE = 100
TLB_BIT = 0x100
FALLBACK_TABLE = 199  # the TLB forwarding instance: blackhole unless an SRX is healthy
RULE_PRIORITY_BASE = 1000
SIDES = (("TRUST-VR", "trust", "saddr"), ("UNTRUST-VR", "untrust", "daddr"))


def srx_order(topo: Topology) -> list[str]:
    return [name for name, node in topo.nodes.items() if kinds.get(node.kind).firewall]


def real_services(topo: Topology, plan: LabPlan) -> list[tuple[str, tuple[str, ...], str]]:
    """TLB real-services in the SRX order: (name, SRXs that carry it, address). Per pair (the JVD):
    MNHA_<first node> on lo0.1 of both nodes (+ MNHA_<second node> on lo0.2 for srg1+srg2); a
    standalone SRX is its own, at its loopback. Per SRX: every SRX at its loopback."""
    loopbacks = {n.name: n.loopbacks.get("", "") for n in plan.nodes}
    if topo.services.load_balancing != "tlb" or topo.services.tlb_real_service != "pair":
        return [(name, (name,), loopbacks[name]) for name in srx_order(topo)]
    out: list[tuple[str, tuple[str, ...], str]] = []
    for name in srx_order(topo):
        pair = next((p for p in topo.mnha if name in p.nodes), None)
        units = plan.node(name).lo_units
        if pair is None:
            out.append((name, (name,), loopbacks[name]))
        elif name == pair.nodes[0]:
            out.append((f"MNHA_{name.upper().replace('-', '_')}", tuple(pair.nodes), units["1"]))
        elif "2" in units:
            out.append((f"MNHA_{name.upper().replace('-', '_')}", tuple(pair.nodes[::-1]), units["2"]))
    return out


def mark_of(position: int) -> int:
    return TLB_BIT | position


def plan_selectors(topo: Topology, plan: LabPlan, python: str) -> None:
    modes: dict[str, Literal["chash", "ecmp", "tlb"]] = {"ecmp-chash": "chash", "ecmp": "ecmp", "tlb": "tlb"}
    mode = modes[topo.services.load_balancing]
    services = real_services(topo, plan)
    order = [name for name, _, _ in services]
    marks = {name: mark_of(index + 1) for index, name in enumerate(order)}
    clients = tuple(str(p) for n in topo.nodes.values() if kinds.get(n.kind).end_host for p in n.prefixes
                    if _is_client_side(topo, plan, n))
    clients6 = tuple(str(p) for n in topo.nodes.values() if kinds.get(n.kind).end_host for p in n.prefixes6
                     if _is_client_side(topo, plan, n)) if plan.dual_stack else ()
    for node in plan.nodes:
        if not kinds.get(node.kind).load_balancer:
            continue
        selectors = []
        for instance, side, field in SIDES:
            watch = ("0.0.0.0/0",) if side == "trust" else clients
            # ECMP on a dual-stack lab: each SRX re-announces the IPv6 default (trust) and the IPv6
            # clients (untrust) as it does the IPv4 ones; TLB's health checks decide without routes
            watch6 = (("::/0",) if side == "trust" else clients6) if mode != "tlb" and plan.dual_stack else ()
            match = clients + clients6 if mode == "tlb" else ()
            if side == "untrust" and topo.services.use_case == "cgnat":
                if not clients6:
                    continue  # return traffic follows each SRX's NAT pool route, not a hash
                # IPv6 has no NAT pool: its answers are hashed back by destination, as in an SFW lab; an
                # SRX is routed while the MX learns a pool from it (the IPv4 answers' routes)
                pools = tuple(dict.fromkeys(str(n.nat_pool) for n in plan.nodes if n.nat_pool))
                # the pools decide for both families (the IPv6 answers' SRX is the one whose pool the MX learns)
                watch, match, watch6 = pools, clients6, ()
            if side == "untrust" and topo.services.use_case == "mixed":
                # only the SFW clients' answers are hashed back (the JVD's MX_TLB_LB_UNTRUST matches
                # the client prefixes by destination); the NAPT44 ones follow the pool routes, which
                # the SRXs announce (in every mode: a hash of a pool address would pick any SRX)
                sfw = tuple(str(p) for p in usecase.sfw_prefixes(topo))
                watch, match = sfw, sfw + clients6
            selector = _selector(plan, node, instance, side, field, marks, services, match, watch, watch6)
            if selector.members:
                selectors.append(selector)
                _kernel_side(plan, node, selector, topo)
        profiles = tuple(HealthProfile(
            **check.model_dump(exclude={"timeout_ms", "port"}), name=f"{check.type}-profile",
            timeout_ms=check.timeout_ms or check.interval_ms,
            port=check.port or {"tcp": 8088, "http": 80, "udp": 7}.get(check.type))
            for check in topo.services.health_checks)
        config = SelectorConfig(
            node=node.name, mode=mode, buckets=topo.services.buckets, seed=topo.services.hash_seed,
            order=tuple(order), selectors=tuple(selectors),
            status_file=f"{plan.state_dir}/nodes/{node.name}/{MXLB_STATUS}",
            fallback_table=FALLBACK_TABLE, health={"profiles": profiles} if mode == "tlb" else {},
            # Per SRX, a failed SRX's buckets go to its MNHA peer; per pair, the pair is the member.
            mark_table_base=MARK_TABLE_BASE,
            peers={a: b for pair in plan.mnha for a, b in (pair, pair[::-1])} if order == srx_order(topo) else {},
            health_status_file=f"{plan.state_dir}/nodes/{node.name}/{HEALTH_STATUS}" if mode == "tlb" else "",
            health_socket=f"{plan.state_dir}/nodes/{node.name}/mxlb-health.sock" if mode == "tlb" else "",
            restore_policy=topo.services.restore_policy, backend=topo.services.selector,
        )
        conf = f"nodes/{node.name}/{MXLB_CONFIG}"
        plan.files[conf] = config.to_json()
        node.files.append(conf)
        plan.processes.append(Process(node.name, node.master_ns, "mxlb",
                                      (python, "-m", "dataplane.daemons.mxlb", f"{plan.state_dir}/{conf}")))
        if mode == "tlb":  # the JVD's Network-monitor: its own process, restartable on its own
            plan.processes.append(Process(node.name, node.master_ns, "healthd",
                                          (python, "-m", "dataplane.daemons.healthd", f"{plan.state_dir}/{conf}")))
    plan_responder(topo, plan, python)


WEB_MANAGEMENT_PORT = 8088  # the JVD's SRX web-management http port, probed by the TLB tcp-profile
RESPONDER_FILE = "responder.json"


def plan_responder(topo: Topology, plan: LabPlan, python: str) -> None:
    """One lab-wide process answering health checks in every SRX's namespace: TCP 8088 always (the
    SRX's web-management), and the ports of the lab's TCP, HTTP and UDP checks."""
    srxs = [n for n in plan.nodes if kinds.get(n.kind).firewall]
    if not srxs:
        return
    checks = topo.services.health_checks if topo.services.load_balancing == "tlb" else []
    tcp = sorted({WEB_MANAGEMENT_PORT} | {c.port for c in checks if c.type == "tcp" and c.port}
                 - {c.port or 80 for c in checks if c.type == "http"})
    http = sorted({c.port or 80 for c in checks if c.type == "http"})
    udp = sorted({c.port or 7 for c in checks if c.type == "udp"})
    config = ResponderConfig(nodes=tuple(ResponderNode(name=n.name, ns=n.master_ns, tcp=tuple(tcp), http=tuple(http),
                                                       udp=tuple(udp)) for n in srxs))
    plan.files[RESPONDER_FILE] = config.to_json()
    plan.processes.append(Process("_lab", srxs[0].master_ns, "responder",
                                  (python, "-m", "dataplane.daemons.responder", f"{plan.state_dir}/{RESPONDER_FILE}")))


def _is_client_side(topo: Topology, plan: LabPlan, host: object) -> bool:
    """Subscriber prefixes: those of hosts behind the trust-side gateways."""
    names = [name for name, n in topo.nodes.items() if n is host]
    for iface in plan.interfaces():
        if iface.node in names and iface.peer_node:
            gateway = iface.peer_node
            return any(i.node == gateway and i.zone == "trust" for i in plan.interfaces())
    return False


def _selector(plan: LabPlan, node: NodePlan, instance: str, side: str, field: str, marks: dict[str, int],
              services: list[tuple[str, tuple[str, ...], str]], match: tuple[str, ...],
              watch: tuple[str, ...], watch6: tuple[str, ...]) -> Selector:
    ns = next(n for n in node.namespaces if n.endswith("-" + instance.lower()))
    srxs = {srx for _, carriers, _ in services for srx in carriers}
    hops: dict[str, Hop] = {}
    ingress = []
    for iface in plan.interfaces():
        if iface.ns != ns or iface.peer_node is None:
            continue
        peer = plan.peer_of(iface)
        if iface.peer_node in srxs:
            hops[iface.peer_node] = Hop(node=iface.peer_node, dev=iface.name,
                                        nexthop=str(IPv4Interface(peer.address).ip) if peer.address else "",
                                        nexthop6=ipv6.ip6(peer.address6))
        else:
            ingress.append(iface.name)
    members = []
    for name, carriers, address in services:
        reach = tuple(hops[c] for c in carriers if c in hops)
        if reach:
            members.append(Member(name=name, mark=marks[name], dev=reach[0].dev, nexthop=reach[0].nexthop,
                                  loopback=address, hops=reach, nexthop6=reach[0].nexthop6))
    return Selector(side=side, ns=ns, hash_field=field, ingress=tuple(sorted(ingress)), match_prefixes=match,
                    watch_prefixes=watch, watch_prefixes6=watch6, members=tuple(members),
                    nft_family="inet" if plan.dual_stack else "ip")


def _kernel_side(plan: LabPlan, node: NodePlan, selector: Selector, topo: Topology) -> None:
    """The static part: policy rules and tables, and (nftables backend) the nft table with the initial
    map and per-SRX counters; the eBPF backend's program is loaded by the daemon.

    Packets for the MX itself (BGP from a gateway) are marked too, harmlessly: the `local` table is
    looked up before the fwmark rules, so no `fib daddr type local` test is needed on the hot path.
    """
    _marks_and_tables(plan, selector)
    if topo.services.selector == "ebpf":
        return  # dataplane.daemons.mxlb puts the tc program (dataplane.kernel.tcprog) on the ingress interfaces itself
    buckets, seed = topo.services.buckets, topo.services.hash_seed
    initial = build_initial([m.name for m in selector.members], buckets)
    by_name = {m.name: m.mark for m in selector.members}
    elements = ", ".join(f"{b} : {by_name[name]:#x}" for b, name in enumerate(initial.buckets))
    ingress = ", ".join(f'"{i}"' for i in selector.ingress)
    family = selector.nft_family
    steer = "".join(f"        iifname {{ {ingress} }} {match}meta mark set {TLB_BIT:#x} meta mark set jhash {proto} "
                    f"{selector.hash_field} mod {buckets} seed {seed:#x} map @sel\n"
                    for proto, match in _steered(selector))
    counters = "".join(f"    counter {m.name} {{ }}\n" for m in selector.members)
    accounting = "".join(f'        meta mark {m.mark:#x} counter name "{m.name}"\n' for m in selector.members)
    name = f"nodes/{node.name}/selector-{selector.side}.nft"
    plan.files[name] = (
        f"# MX {node.name} {selector.side} selector ({topo.services.load_balancing}): bucket = jhash(ip "
        f"{selector.hash_field}) mod {buckets} seed {seed:#x};\n"
        f"# bucket -> mark -> table {MARK_TABLE_BASE}+SRX (one per SRX); no SRX -> table {FALLBACK_TABLE} "
        f"(blackhole). dataplane.daemons.mxlb rewrites the map.\n"
        f"table {family} mxlb\ndelete table {family} mxlb\n"
        f"table {family} mxlb {{\n"
        f"{counters}"
        f"    map sel {{\n"
        f"        typeof numgen inc mod {buckets} : meta mark\n"
        f"        elements = {{ {elements} }}\n"
        f"    }}\n\n"
        f"    chain prerouting {{\n"
        f"        type filter hook prerouting priority mangle; policy accept;\n"
        f"{steer}"
        f"    }}\n\n"
        f"    chain accounting {{\n"
        f"        type filter hook forward priority filter; policy accept;\n"
        f"{accounting}"
        f"    }}\n"
        f"}}\n"
    )
    node.files.append(name)
    plan.rulesets.append(Ruleset(node.name, selector.ns, name))


def _steered(selector: Selector) -> list[tuple[str, str]]:
    """(address family keyword, match) of each prerouting rule: `ip` alone in an IPv4 lab; in a dual-stack
    lab (an inet table) an `ip` and an `ip6` rule into the same map, so a bucket means the same SRX for
    both families; with TLB each matches its own family's client prefixes."""
    field = "saddr" if selector.side == "trust" else "daddr"
    out = []
    for proto, version in (("ip", 4), ("ip6", 6)):
        if proto == "ip6" and selector.nft_family != "inet":
            continue
        prefixes = [p for p in selector.match_prefixes if ip_network(p).version == version]
        if selector.match_prefixes and not prefixes:
            continue  # TLB without client prefixes of this family: nothing of it is steered
        match = f"{proto} {field} {{ {', '.join(prefixes)} }} " if prefixes else \
            (f"meta nfproto ipv{version} " if selector.nft_family == "inet" else "")
        out.append((proto, match))
    return out


def _marks_and_tables(plan: LabPlan, selector: Selector) -> None:
    """A policy rule per member mark to the member's table (default via that SRX); the bare mark to
    the blackhole table. The same for both selector backends."""
    for member in selector.members:
        table = MARK_TABLE_BASE + (member.mark & 0xFF)
        plan.rules.append(Rule(selector.ns, member.mark, table, RULE_PRIORITY_BASE + (member.mark & 0xFF)))
        plan.routes.append(Route(selector.ns, "0.0.0.0/0", "unicast", via=member.nexthop, dev=member.dev,
                                 table=table))
    plan.rules.append(Rule(selector.ns, TLB_BIT, FALLBACK_TABLE, RULE_PRIORITY_BASE + 999, mask=TLB_BIT))
    plan.routes.append(Route(selector.ns, "0.0.0.0/0", "blackhole", table=FALLBACK_TABLE))
    if selector.nft_family == "inet":  # dual stack: the same marks and tables in IPv6
        for member in selector.members:
            table = MARK_TABLE_BASE + (member.mark & 0xFF)
            plan.rules.append(Rule(selector.ns, member.mark, table, RULE_PRIORITY_BASE + (member.mark & 0xFF),
                                   family=6))
            plan.routes.append(Route(selector.ns, "::/0", "unicast", via=member.nexthop6, dev=member.dev, table=table))
        plan.rules.append(Rule(selector.ns, TLB_BIT, FALLBACK_TABLE, RULE_PRIORITY_BASE + 999, mask=TLB_BIT, family=6))
        plan.routes.append(Route(selector.ns, "::/0", "blackhole", table=FALLBACK_TABLE))
