"""Plan the FlexVPN load balancer of IOS-like routers: HSRP, the IKEv2 cluster (CLB), the IKEv2 gateway.

Pure, like the rest of plan.build. Every ios-router with an HSRP group (`interfaces.X.standby`), an
`ikev2_cluster` or `ikev2` gets one daemon, `python -m dataplane.daemons.flexvpnd nodes/NODE/flexvpn.json`,
that runs all three in one process (one event loop; ~20 MB instead of three interpreters). The
daemon writes `nodes/NODE/hsrp-status.json` and `nodes/NODE/ikev2-status.json`, which the SSH CLI
and `python -m lab_orchestrator.cli_ssh.flexshow` turn into `show standby`, `show crypto ikev2 cluster`
and `show crypto ikev2 sa`.

Kernel side: the HSRP virtual IP is a macvlan with the virtual MAC that the daemon creates; for the
ARP reply to carry that MAC the router's namespace gets `arp_ignore=1` / `arp_announce=2`.
"""

from __future__ import annotations

import json
from dataclasses import replace
from ipaddress import IPv4Interface

from labkit.configs import ClusterConfig, FlexclientConfig, FlexvpnConfig, HsrpGroupConfig, Ikev2GatewayConfig
from labkit.contracts import HSRP_STATUS, IKEV2_STATUS

from ... import kinds
from ...model.naming import linux_ifname
from ...model.schema import Node, Topology
from ..plantypes import Interface, LabPlan, NodePlan, Process

PROCESS_NAME = "flexvpn"
CONFIG_NAME = "flexvpn.json"
CLIENT_PROCESS_NAME = "flexclient"  # an IOS FlexVPN client (crypto ikev2 client flexvpn)
CLIENT_CONFIG_NAME = "flexclient.json"
PSK_FILE = "psk.secret.json"  # nodes/NODE/: {"psk": KEY}; null in the plan: the lab's key, drawn by `lab up`
VIP_SYSCTLS = (
    ("net.ipv4.conf.all.arp_ignore", "1"),  # the ARP reply for the VIP comes from the macvlan (virtual MAC)
    ("net.ipv4.conf.all.arp_announce", "2"),
)
REDIRECT_WARNING = "! (IKEv2 Cluster load-balancer is not enabled)"


def plan_flexvpn(topo: Topology, plan: LabPlan, python: str) -> None:
    """Add each FlexVPN router's daemon config, Process and sysctls to PLAN."""
    interfaces = {(i.node, i.alias): i for i in plan.interfaces()}
    vip_namespaces: set[str] = set()
    for node in plan.nodes:
        spec = topo.nodes[node.name]
        if not kinds.get(node.kind).flexvpn:
            continue
        if spec.flexvpn_client is not None:
            _plan_client(spec, plan, node, python, interfaces)
        standby = [(alias, s.standby) for alias, s in spec.interfaces.items() if s.standby is not None]
        if not standby and spec.ikev2_cluster is None and spec.ikev2 is None:
            continue
        groups = []
        names: set[str] = set()
        for alias, sb in standby:
            iface = interfaces.get((node.name, alias))
            if iface is None or not iface.address:
                continue  # validate reports an HSRP group on an interface without a link
            vip_name = f"hsrp{sb.group}"
            if vip_name in names:
                vip_name = f"hsrp{sb.group}-{len(names)}"
            names.add(vip_name)
            address = IPv4Interface(iface.address)
            groups.append(HsrpGroupConfig(
                interface=iface.name, alias=alias, address=str(address.ip),
                prefixlen=address.network.prefixlen, group=sb.group, vip=str(sb.ip),
                priority=sb.priority, preempt=sb.preempt, preempt_delay=sb.preempt_delay,
                hello_ms=sb.hello_ms, hold_ms=sb.hold_ms,
                timers_configured=(sb.hello_ms, sb.hold_ms) != (3000, 10000),
                authentication=sb.authentication, name=sb.name, version=sb.version,
                vip_ifname=vip_name,
            ))
        if groups:
            vip_namespaces.add(node.master_ns)
        cluster = None
        if spec.ikev2_cluster is not None:
            c = spec.ikev2_cluster
            cluster = ClusterConfig(**c.model_dump(mode="json"), memory_mib=512)
        warnings = []
        ikev2 = None
        if spec.ikev2 is not None:
            own = sorted({g.address for g in groups} | {g.vip for g in groups})
            pool = spec.ikev2.pool
            ikev2 = Ikev2GatewayConfig(
                redirect=spec.ikev2.redirect,
                pool=str(pool) if pool else None,
                pool_first=str(pool[1]) if pool else None,
                pool_last=str(pool[-2]) if pool else None,
                psk_file=_psk_file(plan, node, spec.ikev2.psk),
                pki_dir=f"{plan.state_dir}/pki",
                identities=own,
                max_redirects=5,
            )
            if spec.ikev2.redirect != "none" and (cluster is None or cluster.shutdown):
                warnings.append(f"crypto ikev2 redirect gateway {spec.ikev2.redirect}\n{REDIRECT_WARNING}")
        base = f"nodes/{node.name}"
        config = FlexvpnConfig(
            node=node.name, lab=plan.name, state_dir=plan.state_dir,
            hsrp_status=f"{plan.state_dir}/{base}/{HSRP_STATUS}",
            ikev2_status=f"{plan.state_dir}/{base}/{IKEV2_STATUS}",
            groups=groups, cluster=cluster, ikev2=ikev2, warnings=warnings,
        )
        name = f"{base}/{CONFIG_NAME}"
        plan.files[name] = config.to_json()
        node.files.append(name)
        plan.processes.append(Process(node.name, node.master_ns, PROCESS_NAME,
                                      (python, "-m", "dataplane.daemons.flexvpnd", f"{plan.state_dir}/{name}")))
    plan.namespaces = [replace(ns, sysctls=ns.sysctls + VIP_SYSCTLS) if ns.name in vip_namespaces else ns
                       for ns in plan.namespaces]


def _psk_file(plan: LabPlan, node: NodePlan, psk: str | None) -> str:
    """The node's pre-shared key file (a secret file: credentials): the topology's key, or null for the
    lab's own, drawn at random when the lab comes up (the same in every router's file)."""
    name = f"nodes/{node.name}/{PSK_FILE}"
    plan.files[name] = json.dumps({"psk": psk}, indent=2, sort_keys=True) + "\n"
    if name not in node.files:
        node.files.append(name)
    return f"{plan.state_dir}/{name}"


def _plan_client(spec: Node, plan: LabPlan, node: NodePlan, python: str,
                 interfaces: dict[tuple[str, str], Interface]) -> None:
    """The IOS FlexVPN client of NODE: its daemon's config and Process (dataplane.daemons.flexclientd)."""
    client = spec.flexvpn_client
    assert client is not None
    source = interfaces.get((node.name, client.source))
    if source is None or not source.address:
        return  # validate reports a tunnel source that is not on a link
    base = f"nodes/{node.name}"
    config = FlexclientConfig(
        node=node.name, lab=plan.name, name=client.name, interface=f"Tunnel{client.tunnel}",
        device=linux_ifname(f"Tunnel{client.tunnel}"), source_interface=client.source,
        source=str(IPv4Interface(source.address).ip), peers=[str(p) for p in client.peers],
        routes=[str(r) for r in client.routes], psk_file=_psk_file(plan, node, client.psk), identity=node.name,
        ike="aes256-sha256-ecp256", esp=client.esp, max_redirects=client.max_redirects,
        dpd_interval=client.dpd_interval, dpd_retry=client.dpd_retry,
        status=f"{plan.state_dir}/{base}/{IKEV2_STATUS}",
    )
    name = f"{base}/{CLIENT_CONFIG_NAME}"
    plan.files[name] = config.to_json()
    node.files.append(name)
    plan.processes.append(Process(node.name, node.master_ns, CLIENT_PROCESS_NAME,
                                  (python, "-m", "dataplane.daemons.flexclientd", f"{plan.state_dir}/{name}")))
