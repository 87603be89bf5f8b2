"""Plan SSH access to the emulated nodes: the lab-wide SSH/CLI server, its configuration, ssh_config.

Pure, like the rest of plan.build: the server's configuration (`ssh/sshd.json`), an OpenSSH client
configuration (`ssh_config`) and one Process. Host keys and the lab's client key are not in the
plan: the server generates them under `STATE_DIR/ssh/` the first time it starts (they live as long
as the lab's state dir) and writes `ssh/known_hosts` next to them.

Every mx, srx and ios-router answers on port 22 at its management address (fxp0 / mgmt0); hosts
are reached with `lab exec`. Users come from the topology's optional `ssh:` section; without it,
user `admin`. A user's password is the topology's, or (a user without keys) a random one drawn by
`lab up` into `ssh/passwords.secret.json` (0600, shown by `lab status`); no password is in the plan.
With `ssh.lab_key` the server makes a client key for each user (`ssh/id_ed25519-USER`, authorised for
that user only), so `lab ssh NODE` and `ssh -F STATE_DIR/ssh_config admin@LAB-NODE` log in without one.
"""

from __future__ import annotations

import json

from .. import kinds
from ..model.schema import Ssh, SshUser, Topology
from .features import mxlb
from .plantypes import LabPlan, NodePlan, Process
from .sshconfig import PASSWORDS_FILE, VENDORS, Bird, Instance, Node, Peer, Port, ServerConfig, User

PROCESS_NODE = "_lab"  # not a node name (names start with a letter): the process serves every node
PROCESS_NAME = "sshd"
CONFIG_FILE = "ssh/sshd.json"
SSH_CONFIG_FILE = "ssh_config"


def _selector_tables(topo: Topology, plan: LabPlan, ns: str, instance: str) -> dict[str, str]:
    """The MX selector's kernel tables in one instance (lab_orchestrator.plan.features.mxlb): one per SRX and the
    fallback (the TLB forwarding instance), named for `show route` like Junos tables."""
    order = mxlb.srx_order(topo)
    used = sorted({r.table for r in plan.rules if r.ns == ns} | {r.table for r in plan.routes
                                                                    if r.ns == ns and r.table})
    names = {}
    for table in used:
        if table == mxlb.FALLBACK_TABLE:
            name = "srx_mnha_group_tlb-fi" if plan.load_balancing == "tlb" else "selector-none"
        elif 1 <= table - mxlb.MARK_TABLE_BASE <= len(order):
            name = f"selector-{order[table - mxlb.MARK_TABLE_BASE - 1]}"
        else:
            name = f"table-{table}"
        names[str(table)] = f"{instance}.{name}.inet.0"
    return names


def _instances(topo: Topology, plan: LabPlan, node: NodePlan) -> tuple[Instance, ...]:
    out = [Instance("", node.master_ns, "inet.0")]
    if kinds.get(node.kind).load_balancer:  # the selector's tables live in its routing instances
        for instance in kinds.get(node.kind).instances:
            ns = next(n for n in node.namespaces if n.endswith("-" + instance.lower()))
            out.append(Instance(instance, ns, f"{instance}.inet.0", _selector_tables(topo, plan, ns, instance)))
    return tuple(out)


def _features(topo: Topology, plan: LabPlan, node: NodePlan) -> dict[str, object]:
    spec = topo.nodes[node.name]
    features: dict[str, object] = {}
    kind = kinds.get(node.kind)
    if kind.load_balancer:
        features["load_balancing"] = plan.load_balancing
        if topo.srd is not None and node.name in topo.srd.nodes:
            features["srd"] = {"nodes": list(topo.srd.nodes), "master": topo.srd.master or topo.srd.nodes[0]}
    if kind.firewall:
        for pair in topo.mnha:
            if node.name in pair.nodes:
                features["mnha"] = {"nodes": list(pair.nodes), "mode": pair.mode,
                                    "srg1_active": pair.srg1_active or pair.nodes[0], "preempt": pair.preempt,
                                    "heartbeat_ms": pair.heartbeat_ms,
                                    "heartbeat_threshold": pair.heartbeat_threshold}
        if plan.use_case == "mixed":  # `show security nat source rule`: the rule's source match
            features["nat_sources"] = [str(p) for p in topo.services.nat_sources]
    if kind.gateway:
        hsrp = [{"interface": alias, "group": s.standby.group, "ip": str(s.standby.ip),
                 "priority": s.standby.priority, "preempt": s.standby.preempt, "name": s.standby.name,
                 "hello_ms": s.standby.hello_ms, "hold_ms": s.standby.hold_ms, "version": s.standby.version}
                for alias, s in spec.interfaces.items() if s.standby is not None]
        if hsrp:
            features["hsrp"] = hsrp
        if spec.ikev2_cluster is not None:
            features["ikev2_cluster"] = spec.ikev2_cluster.model_dump(mode="json")
        if spec.ikev2 is not None:
            features["ikev2"] = spec.ikev2.model_dump(mode="json", exclude={"psk"})
        if spec.flexvpn_client is not None:
            features["flexvpn_client"] = spec.flexvpn_client.model_dump(mode="json", exclude={"psk"})
    return features


def _node(topo: Topology, plan: LabPlan, node: NodePlan) -> Node:
    state = plan.state_dir
    port = next(p for p in plan.mgmt.ports if p.node == node.name)
    instances = _instances(topo, plan, node)
    instance_of = {i.ns: i.name for i in instances}
    birds = tuple(Bird(instance_of.get(p.ns, ""), p.name, p.control_socket) for p in plan.processes
                  if p.node == node.name and p.control_socket)
    kind = kinds.get(node.kind)
    peers = tuple(Peer(s.protocol, s.instance or "", kind.peer_group(s.protocol, s.zone, s.family), s.peer_node,
                       s.peer_address, s.peer_as, s.local_address, s.local_as)
                  for s in plan.sessions if s.node == node.name)
    ports = []
    for iface in sorted((i for i in plan.interfaces() if i.node == node.name), key=lambda i: i.alias):
        if kind.ssh_vendor == "ios":  # IOS-like descriptions
            description = f"LAN {iface.lan}" if iface.lan else f"to {iface.peer_node} {iface.peer_alias}"
        else:
            description = f"{iface.zone or 'core'}: to {iface.peer_node} {iface.peer_alias}"
        ports.append(Port(iface.name, iface.alias, iface.instance or "", iface.zone, description))
    return Node(
        name=node.name, kind=node.kind, vendor=VENDORS[node.kind], master_ns=node.master_ns,
        mgmt_if=port.name, mgmt_address=port.address, instances=instances, birds=birds, peers=peers,
        ports=tuple(ports), loopbacks=dict(node.loopbacks), config_file=f"{state}/nodes/{node.name}/{kind.config_file}",
        status_dir=f"{state}/nodes/{node.name}", host_key=f"{state}/ssh/{node.name}_ed25519_key",
        nat_pool=node.nat_pool, features=_features(topo, plan, node),
    )


def password_login(user: SshUser) -> bool:
    """Whether USER logs in with a password: the topology's, or a random one when it has no keys."""
    return user.password is not None or not user.keys


def passwords_text(topo: Topology) -> str:
    """The secret file of the passwords (credentials): the topology's, or null for one drawn by `lab up`."""
    users = (topo.ssh or Ssh()).users
    return json.dumps({u.name: u.password for u in users if password_login(u)}, indent=2, sort_keys=True) + "\n"


def server_config(topo: Topology, plan: LabPlan) -> ServerConfig | None:
    ssh = topo.ssh or Ssh()
    nodes = tuple(_node(topo, plan, n) for n in plan.nodes if n.kind in VENDORS)
    if not ssh.enabled or not nodes:
        return None
    users = tuple(User(u.name, password_login(u), tuple(" ".join(k.split()[:2]) for k in u.keys), u.class_)
                  for u in ssh.users)
    return ServerConfig(
        lab=plan.name, state_dir=plan.state_dir, source=plan.source, port=ssh.port,
        load_balancing=plan.load_balancing, use_case=plan.use_case, users=users, lab_key=ssh.lab_key,
        client_key=f"{plan.state_dir}/ssh/id_ed25519", known_hosts=f"{plan.state_dir}/ssh/known_hosts",
        nodes=nodes,
    )


def ssh_config_text(config: ServerConfig) -> str:
    """OpenSSH client configuration: one Host block per node, named LAB-NODE (no wildcard, so two
    labs whose names share a prefix never match each other's nodes)."""
    default_user = config.users[0].name
    lines = [
        f"# OpenSSH client configuration of lab {config.lab}, written by `lab up` (lab_orchestrator.plan.sshplan).",
        f"#   ssh -F {config.state_dir}/{SSH_CONFIG_FILE} {default_user}@{config.lab}-{config.nodes[0].name}",
        "# or, once, at the top of ~/.ssh/config (lab never edits it):  Include /run/lab/*/ssh_config",
        "",
    ]
    for node in config.nodes:
        lines += [
            f"Host {config.lab}-{node.name}",
            f"    HostName {node.mgmt_address.split('/')[0]}",
            f"    Port {config.port}",
            f"    User {default_user}",
            f"    HostKeyAlias {config.lab}-{node.name}",
            f"    UserKnownHostsFile {config.known_hosts}",
            "    StrictHostKeyChecking yes",
            "    CheckHostIP no",
            "    LogLevel ERROR",
        ]
        if config.lab_key:  # %r: the remote user, so each login offers its own key
            lines += [f"    IdentityFile {config.client_key}-%r", "    IdentitiesOnly yes"]
        lines.append("")
    return "\n".join(lines)


def plan_ssh(topo: Topology, plan: LabPlan, python: str) -> None:
    """Add the SSH server (one Process for the whole lab), its configuration and the ssh_config."""
    config = server_config(topo, plan)
    if config is None:
        return
    plan.files[CONFIG_FILE] = config.to_json()
    plan.files[PASSWORDS_FILE] = passwords_text(topo)
    plan.files[SSH_CONFIG_FILE] = ssh_config_text(config)
    # The process is listed in the first served node's namespace (every plan process lives in a lab
    # namespace); the server moves itself to the supervisor's namespace at once, so that no node's
    # power-off (which kills what runs in that node's namespaces) takes SSH down for the whole lab.
    plan.processes.append(Process(PROCESS_NODE, config.nodes[0].master_ns, PROCESS_NAME,
                                  (python, "-m", "lab_orchestrator.cli_ssh", f"{plan.state_dir}/{CONFIG_FILE}")))
