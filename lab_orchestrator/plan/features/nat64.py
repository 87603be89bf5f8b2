"""Plan NAT64 on the SRXs (`services.nat64`, the JVD's srx-nat64.conf): a NAT64 pool per MNHA pair
(the JVD's nat_64_source_ipv4_pool, 100.64.2.0/24 on srx1a and srx1b), and on each SRX a translator
(`tayga`, in user space on a TUN device: this kernel has no NAT64 and cannot load one) started by
`dataplane.daemons.nat64d`. The translator maps the client's IPv6 address 1:1 into `mapped` and the
NAT64 address to the server (stateless, the same on every SRX); the SRX's nftables then translate
the mapped address into the pool (stateful, `persistent` as address-pooling paired) and conntrackd
synchronises both sessions (the IPv6 one and the translated IPv4 one) to the MNHA peer, so a flow
that moves to the peer keeps its pool address and port. The pool is announced by BGP toward the
untrust side like a CGNAT pool (render: the `originated` static, the B node's prepends)."""

from __future__ import annotations

from ipaddress import IPv4Network

from ... import kinds
from ...model import nat64 as facts
from ...model.schema import Topology
from ..plantypes import LabPlan, Nat64Flows, Process


def plan_nat64(topo: Topology, plan: LabPlan, python: str) -> None:
    nat64 = topo.services.nat64
    if nat64 is None:
        return
    srxs = [n for n in plan.nodes if kinds.get(n.kind).firewall]
    plan.nat64 = Nat64Flows(str(nat64.source), str(nat64.address), str(nat64.server))
    _pools(topo, plan, [n.name for n in srxs])
    clients = facts.mapped_clients(nat64)
    for node in srxs:
        conf = f"nodes/{node.name}/tayga.conf"
        plan.files[conf] = "\n".join([
            f"# NAT64 translator of {node.name} (services.nat64), rendered by lab_orchestrator: stateless,",
            "# the same on every SRX; the SRX's nftables translate the mapped clients into its NAT64 pool.",
            f"tun-device {facts.DEVICE}",
            f"ipv4-addr {facts.TRANSLATOR_V4}",
            f"ipv6-addr {node.loopbacks6.get('', '')}",
            f"# destination NAT (nat_64_dest_rule): {nat64.address} stands for the server {nat64.server}",
            f"map {nat64.server} {nat64.address}",
            f"# the clients ({nat64.source}), one IPv4 address each",
            f"map {clients} {nat64.source}",
            "",
        ])
        node.files.append(conf)
        plan.processes.append(Process(node.name, node.master_ns, "nat64", (
            python, "-m", "dataplane.daemons.nat64d", f"{plan.state_dir}/{conf}",
            "--route", f"{nat64.address}/128", "--route", str(clients), "--route", f"{facts.TRANSLATOR_V4}/32")))


def _pools(topo: Topology, plan: LabPlan, srxs: list[str]) -> None:
    """One pool per MNHA pair (both nodes announce it, the B node prepended), one per SRX outside a
    pair; from addressing.nat, the first free ones once every NAPT44 pool is given out (planned or
    set on a node), so adding NAT64 moves no other address."""
    taken = [IPv4Network(n.nat_pool) for n in plan.nodes if n.nat_pool]
    taken += [n.nat_pool for n in topo.nodes.values() if n.nat_pool]
    pools = topo.addressing.nat.subnets(new_prefix=topo.addressing.nat_prefixlen)
    free = (p for p in pools if not any(p.overlaps(t) for t in taken))
    groups = [tuple(pair.nodes) for pair in topo.mnha]
    groups += [(name,) for name in srxs if not any(name in g for g in groups)]
    for group in groups:
        pool = next(free, None)
        if pool is None:
            raise ValueError(f"address pool {topo.addressing.nat} is exhausted (NAT64 pools)")
        for name in group:
            plan.node(name).nat64_pool = str(pool)
