"""Templates say how: BIRD, Junos-like and IOS-like configs rendered from the plan (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from ipaddress import IPv4Interface, IPv4Network, ip_address
from typing import Any

import jinja2

from labkit.contracts import CONNTRACKD_SYNC_PORT, MNHA_PORT

from .. import kinds
from ..model import naming, usecase
from ..model import nat64 as nat64_facts
from ..model.schema import Topology
from .features import ipv6, mnha, srd
from .plantypes import BgpSession, ExpectedRoute, Interface, LabPlan, NodePlan, Process, Ruleset
from .templating import environment


@dataclass(frozen=True)
class StaticRoute:
    prefix: str
    target: str  # BIRD syntax: "via 198.18.0.1" or "blackhole"


def _ip(address: str | None) -> str:
    return str(IPv4Interface(address).ip) if address else ""


def _statics(topo: Topology, plan: LabPlan, node: NodePlan) -> list[StaticRoute]:
    spec = topo.nodes[node.name]
    kind = kinds.get(spec.kind)
    out: list[StaticRoute] = []
    if kind.gateway:
        for iface in plan.interfaces():
            if iface.node == node.name and iface.peer_node and not kinds.get(topo.nodes[iface.peer_node].kind).routes:
                peer = plan.peer_of(iface)
                out += [StaticRoute(str(p), f"via {_ip(peer.address)}") for p in topo.nodes[iface.peer_node].prefixes]
        if spec.bgp is not None:
            out += [StaticRoute(str(p), "blackhole") for p in spec.bgp.announce]
            if spec.bgp.default_originate:
                # Blackhole, not a route out: nothing of the lab can leave through this router.
                out.append(StaticRoute("0.0.0.0/0", "blackhole"))
    if kind.firewall and node.nat_pool:
        out.append(StaticRoute(node.nat_pool, "blackhole"))
    if kind.firewall and node.nat64_pool:  # the JVD's VR-1 `route 100.64.2.0/24 discard`
        out.append(StaticRoute(node.nat64_pool, "blackhole"))
    return out


def _peer_pools(plan: LabPlan, node: NodePlan) -> list[str]:
    """CGNAT in an MNHA pair with a pool per SRX: the pool of this SRX's peer (announced as a backup
    path). None where the pair shares one pool: each node announces it as its own."""
    pools = {n.name: n.nat_pool for n in plan.nodes}
    return [str(pools[p]) for pair in plan.mnha if node.name in pair for p in pair
            if p != node.name and pools.get(p) and pools[p] != node.nat_pool]


def _prepend_unless(export: str, local_as: int, constant: str) -> str:
    """The same routes, with the AS path prepended three times unless CONSTANT is 1: an SRG1 backup
    (SRG1_ACTIVE, rewritten by the MNHA daemon) or an SRD standby MX (SRD_MASTER, by srdd)."""
    prepend = " ".join([f"bgp_path.prepend({local_as});"] * 3)
    if export.startswith("where "):
        return (f"filter {{ if !({export[6:]}) then reject; if {constant} = 0 then {{ {prepend} }} "
                f"accept; }}")
    body = export[len("filter { "):-len(" }")]
    return f"filter {{ if {constant} = 0 then {{ {prepend} }} {body} }}"


PEER_POOL_ACCEPT = 'if proto = "peer_pool" then {{ bgp_path.prepend({asn}); accept; }}'


def _pair_prepend(export: str, local_as: int, srg2_net: str | None, b_nets: tuple[str, ...] = (),
                  peer_pool_extra: int = 1) -> str:
    """An SRX of an MNHA pair, as the JVD's export policies: every route it announces carries its AS
    once more (term 2), three times while the SRG0 failure signal route exists (term 1: condition
    srg_sig_route_exist) or while the route's group is backup here (SRG1, or SRG2 for lo0.2). A B
    node (the pair's second, `prepend: a-b`) prepends twice, four times, on B_NETS: the routes the
    JVD's policies name (the pair's lo0.1/lo0.2, the NAT pools), so the MX prefers the A node there.
    The MNHA peer's pool (CGNAT) gets PEER_POOL_EXTRA more: its owner stays preferred while healthy."""
    once = f"bgp_path.prepend({local_as});"
    backup = "SRG1_ACTIVE = 0"
    if srg2_net:
        backup = f"(net = {srg2_net} && SRG2_ACTIVE = 0) || (net != {srg2_net} && SRG1_ACTIVE = 0)"
    lost = f"SRG0_SIGNAL = 1 || {backup}"
    step = f"if {lost} then {{ {once} {once} {once} }} else {{ {once} }}"
    if b_nets:
        b_step = f"if {lost} then {{ {' '.join([once] * 4)} }} else {{ {once} {once} }}"
        step = f"if net ~ [ {', '.join(b_nets)} ] then {{ {b_step} }} else {{ {step} }}"
    peer_pool = PEER_POOL_ACCEPT.format(asn=local_as)
    if peer_pool in export:
        extra = " ".join([once] * peer_pool_extra)
        export = export.replace(peer_pool, f'if proto = "peer_pool" then {{ {extra + " " if extra else ""}accept; }}')
    if export.startswith("where "):
        return f"filter {{ if !({export[6:]}) then reject; {step} accept; }}"
    body = export[len("filter { "):-len(" }")]
    return f"filter {{ {step} {body} }}"


def pair_prepend_counts(topo: Topology, node: str) -> tuple[int, int]:
    """(normal, raised) prepend count of NODE on the routes the JVD's export policies name: A 1/3, B 2/4
    (`prepend: per-srx`: 1/3 on both)."""
    pair = next((p for p in topo.mnha if node in p.nodes), None)
    if pair is not None and pair.prepend == "a-b" and node == pair.nodes[1]:
        return 2, 4
    return 1, 3


def _b_nets(topo: Topology, plan: LabPlan, node: NodePlan) -> tuple[str, ...]:
    """The routes a B node prepends 2x/4x: its lo0.1/lo0.2 units, its own NAT pool (the pair's, where
    it shares one) and its peer's."""
    if pair_prepend_counts(topo, node.name) == (1, 3):
        return ()
    nets = [f"{address}/32" for _, address in sorted(node.lo_units.items())]
    nets += [str(node.nat_pool)] if node.nat_pool else []
    nets += [str(node.nat64_pool)] if node.nat64_pool else []
    return tuple(nets + _peer_pools(plan, node))


def _peer_pool_extra(topo: Topology, node: str) -> int:
    """How many more times than its own routes an SRX prepends its peer's pool: so that the owner's
    normal path stays shorter and its raised one longer (A 1/3 vs B 2/4: B adds 0, A adds 2)."""
    pair = next((p for p in topo.mnha if node in p.nodes), None)
    if pair is None or pair.prepend != "a-b":
        return 1
    return 0 if node == pair.nodes[1] else 2


def icl_export(kind: str, loopback: str) -> str:
    """A session of the MNHA ICL routed through an MX, as the JVD's: the SRX announces its lo0.0 only
    (policy mnha_ip), the MX's MNHA-VR passes on what it learned from the other SRXs
    (mnha-mx-to-srx-export: from protocol bgp, next-hop self), never prepended."""
    if kinds.get(kind).firewall:
        return f'where proto = "loopback" && net = {loopback}/32'
    return 'where proto ~ "icl_*"'


# Seconds each end of a session waits before it opens the TCP connection (BIRD's connect delay, jittered
# down by up to a quarter): the end with the lower address first, the other well after, so the two do
# not open at the same moment when both start waiting together (a restarted BIRD and its peers, which
# noticed the close; a link that comes back on both ends). BIRD takes a connection that arrives while
# its session is up for a restart of the peer: a peer that gave up its own attempt the moment the
# other one's OPEN came in left such a connection behind, and an end in graceful restart then lost the
# routes it kept for the peer before the peer could send them again. The lower end retries every
# second; the other one's own attempt is rarely needed, so its later start costs nothing.
CONNECT_DELAY_FIRST_S = 1
CONNECT_DELAY_SECOND_S = 3


def connect_delay(session: BgpSession) -> int:
    """How long SESSION's local end waits before connecting (see CONNECT_DELAY_FIRST_S)."""
    local, peer = ip_address(session.local_address), ip_address(session.peer_address)
    first = (local.version, int(local)) < (peer.version, int(peer))  # both ends of one family
    return CONNECT_DELAY_FIRST_S if first else CONNECT_DELAY_SECOND_S


def _exports(kind: str, use_case: str, sessions: list[BgpSession], srg1: bool = False,
             srd: bool = False, srg2_net: str | None = None, b_nets: tuple[str, ...] = (),
             peer_pool_extra: int = 1, node: NodePlan | None = None, loopback: str = "",
             nat_sources: tuple[str, ...] = (), peer_pool: bool = True) -> dict[str, str]:
    """Which routes each BGP session announces: the JVD's route exchange, per role (the kind's
    export policy), prepended by an MNHA pair's SRG1 role (SRG1) or an SRD pair's mastership (SRD).
    An IPv6 session announces the same kinds of routes in IPv6 (`ipv6.export6`). PEER_POOL false:
    the node originates no peer's pool (none, or a pool its pair shares), so no term names one."""
    policy = kinds.get(kind).bgp_export
    out = {}
    for s in sessions:
        if s.zone == "icl":
            out[s.protocol] = icl_export(kind, loopback)
            continue
        if s.family == 6:
            out[s.protocol] = ipv6.export6(policy(s.protocol, s.zone, s.local_as, "sfw"))
        else:
            out[s.protocol] = policy(s.protocol, s.zone, s.local_as, use_case, nat_sources)
            if node is not None and node.nat64_pool and s.zone == "untrust":
                out[s.protocol] = _with_nat64_pool(out[s.protocol])
            if not peer_pool:
                out[s.protocol] = out[s.protocol].replace(PEER_POOL_ACCEPT.format(asn=s.local_as) + " ", "")
        if srg1:
            nets6 = ipv6.b_nets6(node, b_nets) if node is not None else ()
            srg2 = ipv6.srg2_net6(node) if node is not None and srg2_net else None
            out[s.protocol] = _pair_prepend(out[s.protocol], s.local_as, srg2 if s.family == 6 else srg2_net,
                                            nets6 if s.family == 6 else b_nets, peer_pool_extra)
        if srd:
            out[s.protocol] = _prepend_unless(out[s.protocol], s.local_as, "SRD_MASTER")
    return out


def _with_nat64_pool(export: str) -> str:
    """An SRX's untrust export that also announces its NAT64 pool (the `originated` static): as a
    CGNAT SRX announces its NAPT44 pool (the JVD's untrust_export_policy terms 3 and 4)."""
    if 'proto = "originated"' in export:
        return export  # CGNAT, mixed: every originated route already
    if not export.startswith("where "):
        raise ValueError(f"cannot add the NAT64 pool to the export {export!r}")
    return f'where proto = "originated" || {export[len("where "):]}'


def _bird_files(topo: Topology, plan: LabPlan, node: NodePlan, env: jinja2.Environment) -> None:
    spec = topo.nodes[node.name]
    if not kinds.get(spec.kind).routes:
        return
    instances = kinds.get(spec.kind).bgp_instances
    if None not in instances:
        instances = (*instances, None)  # an MX's master namespace is its MNHA-VR (the routed ICLs)
    for instance in instances:
        ns = naming.namespace(plan.name, node.name, instance)
        sessions = [s for s in plan.sessions if s.ns == ns]
        statics = _statics(topo, plan, node) if instance is None else []
        if not sessions and not statics:
            continue
        suffix = f"-{instance.lower()}" if instance else ""
        peer_pools = _peer_pools(plan, node) if instance is None else []
        role_include = None
        in_mnha = mnha.in_pair(topo, node.name)  # an SRX of an MNHA pair (validate)
        # an MX of an SRD pair (its MNHA-VR is not prepended: no role include there)
        in_srd = not in_mnha and srd.initially_master(topo, node.name) is not None and instance is not None
        if in_mnha:
            role_include = f"{plan.state_dir}/{mnha.role_file(plan, node.name)}"
        elif in_srd:
            role_include = f"{plan.state_dir}/{srd.role_file(node.name)}"
        conf = f"nodes/{node.name}/bird{suffix}.conf"
        sock = f"{plan.state_dir}/nodes/{node.name}/bird{suffix}.ctl"
        local_as = sessions[0].local_as if sessions else 0
        plan.files[conf] = env.get_template("bird.conf.j2").render(
            node=node, instance=instance, kind=spec.kind, source=plan.source,
            router_id=node.loopbacks[instance or ""], loopback=node.loopbacks[instance or ""],
            statics=statics, sessions=sessions, local_as=local_as, peer_pools=peer_pools,
            exports=_exports(spec.kind, plan.use_case, sessions, srg1=in_mnha, srd=in_srd,
                             srg2_net=f"{node.lo_units['2']}/32" if "2" in node.lo_units else None,
                             b_nets=_b_nets(topo, plan, node) if in_mnha else (),
                             peer_pool_extra=_peer_pool_extra(topo, node.name), node=node,
                             loopback=node.loopbacks[instance or ""],
                             nat_sources=tuple(str(p) for p in topo.services.nat_sources),
                             peer_pool=bool(peer_pools)),
            # BIRD merges at most 16 equal paths unless told more: as many as this BIRD has sessions
            connect_delays={s.protocol: connect_delay(s) for s in sessions},
            role_include=role_include, bfd=topo.services.bfd if sessions else None, merge_limit=len(sessions),
            dual_stack=plan.dual_stack, statics6=ipv6.statics6(topo, plan, node) if instance is None else [],
            icl_source=node.loopbacks[""] if kinds.get(spec.kind).firewall and any(s.zone == "icl" for s in sessions)
            else None,
        )
        node.files.append(conf)
        plan.processes.append(Process(
            node=node.name, ns=ns, name=f"bird{suffix}",
            argv=("bird", "-f", "-c", f"{plan.state_dir}/{conf}", "-s", sock),
            control_socket=sock,
        ))


def _node_interfaces(plan: LabPlan, node: str) -> list[Interface]:
    return sorted((i for i in plan.interfaces() if i.node == node), key=lambda i: i.alias)


def _real_services(topo: Topology, plan: LabPlan) -> list[tuple[str, tuple[str, ...], str]]:
    from .features import mxlb

    return mxlb.real_services(topo, plan)


def _mnha_context(topo: Topology, plan: LabPlan, node: NodePlan) -> dict[str, Any] | None:
    """The SRX's `chassis high-availability` and export-policy facts (None outside an MNHA pair)."""
    from .features import mnha

    pair = next((p for p in topo.mnha if node.name in p.nodes), None)
    if pair is None:
        return None
    local_id = pair.nodes.index(node.name) + 1
    b_nets = _b_nets(topo, plan, node)
    peer = pair.nodes[2 - local_id]
    icl = mnha.icl_of(plan, node.name, peer)
    return {"pair": pair, "local_id": local_id, "peer_id": 3 - local_id, "peer": peer,
            "local_ip": icl.local_ip, "peer_ip": icl.peer_ip, "icl": icl.interface, "routed": bool(icl.routed_devs),
            "monitor": mnha.monitor_config(topo, plan, node.name), "signal_route": str(pair.signal_route),
            "srg1_active": mnha.srg1_initially_active(topo, node.name),
            "role": "A" if node.name == pair.nodes[0] else "B", "prepend": pair_prepend_counts(topo, node.name),
            "b_nets": b_nets, "b_nets6": ipv6.b_nets6(node, b_nets)}


def _device_config(topo: Topology, plan: LabPlan, node: NodePlan, env: jinja2.Environment) -> None:
    spec = topo.nodes[node.name]
    context: dict[str, Any] = dict(
        node=node, spec=spec, plan=plan, interfaces=_node_interfaces(plan, node.name),
        sessions=[s for s in plan.sessions if s.node == node.name],
        statics=_statics(topo, plan, node), ip=_ip, topo=topo,
        mgmt=next(p for p in plan.mgmt.ports if p.node == node.name),
        mnha=_mnha_context(topo, plan, node),
        real_services=_real_services(topo, plan),  # used by the MX template only
        # dual stack: what the IPv6 half really runs (addresses, sessions, originated routes)
        statics6=ipv6.statics6(topo, plan, node),
        group=kinds.get(spec.kind).peer_group,  # BGP group names, as the SSH CLI shows them
    )
    device = kinds.get(spec.kind).device_config
    if device is None:
        return
    name, template = f"nodes/{node.name}/{device[0]}", device[1]
    plan.files[name] = env.get_template(template).render(**context)
    node.files.append(name)


def _srx_ruleset(topo: Topology, plan: LabPlan, node: NodePlan, env: jinja2.Environment) -> None:
    if not kinds.get(topo.nodes[node.name].kind).firewall:
        return
    own = _node_interfaces(plan, node.name)
    pool = IPv4Network(node.nat_pool) if node.nat_pool else None
    name = f"nodes/{node.name}/srx.nft"
    pair = next((p for p in topo.mnha if node.name in p.nodes), None)
    icl = mnha.icl_of(plan, node.name, next(n for n in pair.nodes if n != node.name)) if pair else None
    plan.files[name] = env.get_template("srx.nft.j2").render(
        node=node, plan=plan, routed_icl=icl if icl and icl.routed_devs else None,
        default_policy=topo.services.default_policy,
        mnha_ports=(MNHA_PORT, CONNTRACKD_SYNC_PORT),
        trust=[i.name for i in own if i.zone == "trust"], untrust=[i.name for i in own if i.zone == "untrust"],
        pool_first=pool.network_address if pool else "", pool_last=pool.broadcast_address if pool else "",
        # mixed: only these sources are translated (the JVD's rule match source-address); else every one
        nat_sources=[str(p) for p in topo.services.nat_sources] if plan.use_case == "mixed" else [],
        nat64=_nat64_context(topo, node),
    )
    node.files.append(name)
    plan.rulesets.append(Ruleset(node.name, node.master_ns, name))


def _nat64_context(topo: Topology, node: NodePlan) -> dict[str, str] | None:
    """What srx.nft.j2 needs of NAT64 (services.nat64): None without it."""
    nat64 = topo.services.nat64
    if nat64 is None or node.nat64_pool is None:
        return None
    pool = IPv4Network(node.nat64_pool)
    return {"device": nat64_facts.DEVICE, "source": str(nat64.source), "address": str(nat64.address),
            "server": str(nat64.server), "clients": str(nat64_facts.mapped_clients(nat64)),
            "pool_first": str(pool.network_address), "pool_last": str(pool.broadcast_address)}


def _expected_routes(topo: Topology, plan: LabPlan) -> list[ExpectedRoute]:
    """Readiness: each gateway has learned what the far side originates (the chain is complete)."""
    sides: dict[str, list[NodePlan]] = {"trust": [], "untrust": []}
    for iface in plan.interfaces():
        if kinds.get(topo.nodes[iface.node].kind).gateway and iface.peer_node and \
                kinds.get(topo.nodes[iface.peer_node].kind).load_balancer and iface.zone in sides:
            gw = plan.node(iface.node)
            if gw not in sides[iface.zone]:
                sides[iface.zone].append(gw)
    originated = {gw.name: [r.prefix for r in _statics(topo, plan, gw)]
                  for side in sides.values() for gw in side}
    pools = list(dict.fromkeys(n.nat_pool for n in plan.nodes if n.nat_pool))  # a pair's shared pool once
    out = []
    for gw in sides["trust"]:
        out += [ExpectedRoute(gw.master_ns, p) for u in sides["untrust"] for p in originated[u.name]]
    translated = {str(p) for p in usecase.nat_sources(topo)} if plan.use_case == "mixed" else set()
    for gw in sides["untrust"]:
        wanted = list(pools) if plan.use_case == "cgnat" else \
            [p for t in sides["trust"] for p in originated[t.name] if p not in translated]
        if plan.use_case == "mixed":
            wanted = pools + wanted  # NAPT44 clients come back by the pools, SFW ones by their prefixes
        wanted += list(dict.fromkeys(n.nat64_pool for n in plan.nodes if n.nat64_pool))  # NAT64 answers, too
        out += [ExpectedRoute(gw.master_ns, p) for p in wanted]
    return out + ipv6.expected_routes6(topo, plan, sides)


def configs(topo: Topology, plan: LabPlan, python: str = "python3") -> None:
    """Per node: BIRD configs (and their processes), the device config, the SRX ruleset."""
    env = environment()
    for node in plan.nodes:
        _bird_files(topo, plan, node, env)
        _device_config(topo, plan, node, env)
        _srx_ruleset(topo, plan, node, env)


def readiness(topo: Topology, plan: LabPlan, python: str = "python3") -> None:
    """What `lab up` waits for besides BGP: each gateway's routes to the far side."""
    plan.expected_routes = _expected_routes(topo, plan)
