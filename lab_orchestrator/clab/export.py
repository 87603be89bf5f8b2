"""plan -> containerlab: a `.clab.yml` topology and the per-node files it binds (pure, deterministic).

Every emulated node becomes a `linux` container of the node image (`make image`: images/node/build) whose
entrypoint, `python3 -m lab_orchestrator.clab.agent`, applies that node's slice of the plan inside
the container: the same interface names as the netns backend (naming.linux_ifname), addresses,
aliases, MX routing instances as namespaces of their own, routes, nftables rulesets and daemons.
A LAN (a link with three or more endpoints) becomes a small `linux` container holding bridge `br0`,
as it is a namespace with `br0` in the netns backend.

A node can instead be a real vendor kind (`--vendor srx1=juniper_vsrx`): its rendered Junos or IOS
config, with the interface names that kind uses, becomes its containerlab startup-config.

A two-host split (`--host2 NODES --underlay IP1,IP2`) adds one `.clab.yml` per host in which every
link that crosses hosts is a containerlab `vxlan` link (same VNI on both sides).

Nothing here touches the system: `export()` returns the files; the CLI or the backend writes them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from typing import Any

import yaml

from ..kinds import KINDS
from ..model.diagnostics import LabError
from ..plan.features.mxlb import RESPONDER_FILE
from ..plan.pipeline import Interface, LabPlan, Veth

EXPORT_FORMAT = 1
DEFAULT_NODE_IMAGE = "lab-node:latest"
NODE_CONFIG_DIR = "/etc/lab/node"  # where a container sees its node folder (read-only)
NODE_CONFIG_FILE = "clab-node.json"
SIDECAR_FILE = "lab-export.json"  # what `lab up --backend containerlab` needs to know about an export
STARTUP_CONFIG_FILE = "startup-config.cfg"
VXLAN_PORT = 4789
DEFAULT_VNI_BASE = 10000
AGENT_MODULE = "lab_orchestrator.clab.agent"
SKIPPED_PROCESS_NODES = ("_lab",)  # lab-wide processes (the SSH CLI server) do not map to one container


@dataclass(frozen=True)
class VendorKind:
    """A containerlab kind that can stand in for an emulated node, and how its ports are named."""

    kind: str
    replaces: tuple[str, ...]  # lab kinds it can replace
    dialect: str  # "junos" | "ios": which rendered config becomes its startup config
    note: str

    def port_name(self, index: int) -> str:
        """The vendor's name for the INDEX-th data port (0-based), backed by container port eth{index+1}."""
        if self.kind == "cisco_iol":
            linux = index + 1  # Ethernet0/0 is the management port (eth0)
            return f"Ethernet{linux // 4}/{linux % 4}"
        if self.kind == "juniper_crpd":
            return f"eth{index + 1}"  # cRPD configures the container's Linux interfaces
        return f"ge-0/0/{index}"

    def mgmt_name(self) -> str | None:
        """What the rendered config's management port (fxp0 / mgmt0) is called on this kind."""
        return {"cisco_iol": "Ethernet0/0", "juniper_crpd": "eth0"}.get(self.kind)


def _stands_in(vendor: str) -> tuple[str, ...]:
    """The lab kinds a containerlab kind can replace (each kind lists its `clab_kinds`)."""
    return tuple(k.name for k in KINDS.values() if vendor in k.clab_kinds)


VENDOR_KINDS: dict[str, VendorKind] = {
    v.kind: v for v in (
        VendorKind("juniper_vjunosrouter", _stands_in("juniper_vjunosrouter"), "junos",
                   "vJunos-router VM (vrnetlab image); data ports ge-0/0/0.. are container eth1.."),
        VendorKind("juniper_vsrx", _stands_in("juniper_vsrx"), "junos",
                   "vSRX VM (vrnetlab image); data ports ge-0/0/0.. are container eth1.."),
        VendorKind("juniper_crpd", _stands_in("juniper_crpd"), "junos",
                   "cRPD container: routing only; its ports are the container's eth1.."),
        VendorKind("cisco_iol", _stands_in("cisco_iol"), "ios",
                   "IOS on Linux (vrnetlab image); Ethernet0/0 is management, data ports Ethernet0/1.."),
    )
}


@dataclass(frozen=True)
class ExportOptions:
    vendor: Mapping[str, str] = field(default_factory=dict)  # node -> vendor kind
    images: Mapping[str, str] = field(default_factory=dict)  # kind ("linux" or a vendor kind) -> image
    host2: tuple[str, ...] = ()  # nodes (or LANs, "lanN") placed on the second host
    underlay: tuple[str, str] | None = None  # underlay IPv4 addresses of host 1 and host 2
    vni_base: int = DEFAULT_VNI_BASE


@dataclass
class ClabExport:
    name: str
    topology_file: str  # the single-host topology, relative to the export folder
    files: dict[str, str]  # path relative to the export folder -> content
    topology: dict[str, Any]  # the single-host topology as data (what topology_file holds)
    host_files: list[str] = field(default_factory=list)  # per-host topologies of a split
    containers: dict[str, str] = field(default_factory=dict)  # clab node -> container name
    vendor: dict[str, str] = field(default_factory=dict)
    lans: list[str] = field(default_factory=list)


def container_name(lab: str, node: str) -> str:
    """containerlab's default container name: `clab-LAB-NODE`."""
    return f"clab-{lab}-{node}"


def parse_assignments(values: Iterable[str], what: str) -> dict[str, str]:
    """`["srx1=juniper_vsrx", ...]` -> {"srx1": "juniper_vsrx"}; LabError on a malformed item."""
    out: dict[str, str] = {}
    for value in values:
        key, sep, val = value.partition("=")
        if not sep or not key.strip() or not val.strip():
            raise LabError(f"{what} takes NAME=VALUE, got '{value}'")
        out[key.strip()] = val.strip()
    return out


# ---------------------------------------------------------------- checks
def _clab_nodes(plan: LabPlan) -> list[str]:
    return [n.name for n in plan.nodes] + [b.ns[len(plan.name) + 1:] for b in plan.bridges]


def _check(plan: LabPlan, options: ExportOptions) -> None:
    nodes = {n.name: n for n in plan.nodes}
    lans = [b.ns[len(plan.name) + 1:] for b in plan.bridges]
    clash = sorted(set(lans) & set(nodes))
    if clash:
        raise LabError(f"node name {clash[0]} is taken by a LAN container of the export; rename the node")
    for node, kind in sorted(options.vendor.items()):
        if node not in nodes:
            raise LabError(f"--vendor names {node}, which is not a node of lab {plan.name} "
                           f"(nodes: {', '.join(nodes)})")
        if kind not in VENDOR_KINDS:
            raise LabError(f"--vendor {node}={kind}: unknown vendor kind; known: {', '.join(VENDOR_KINDS)}")
        spec = VENDOR_KINDS[kind]
        if nodes[node].kind not in spec.replaces:
            raise LabError(f"--vendor {node}={kind}: {kind} stands in for {'/'.join(spec.replaces)} nodes, "
                           f"and {node} is {nodes[node].kind}")
        if kind not in options.images:
            raise LabError(f"node {node} is {kind}: give its image with --image {kind}=IMAGE "
                           f"(built with vrnetlab or loaded from the vendor's archive)")
    for kind in options.images:
        if kind != "linux" and kind not in VENDOR_KINDS:
            raise LabError(f"--image {kind}=...: unknown kind; use linux or one of {', '.join(VENDOR_KINDS)}")
    known = set(_clab_nodes(plan))
    for node in options.host2:
        if node not in known:
            raise LabError(f"--host2 names {node}, which is not a node of lab {plan.name}")
    if options.host2 and options.underlay is None:
        raise LabError("a two-host split needs the hosts' underlay addresses: --underlay HOST1_IP,HOST2_IP")
    if options.underlay is not None:
        for address in options.underlay:
            try:
                IPv4Address(address)
            except ValueError:
                raise LabError(f"--underlay: '{address}' is not an IPv4 address") from None
        if not options.host2:
            raise LabError("--underlay only applies to a two-host split: say which nodes go to host 2 with --host2")


# ---------------------------------------------------------------- per-node plan slice
def node_slice(plan: LabPlan, node: str, whole: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The part of the plan one container applies: its namespaces, links, routes, rules, rulesets,
    processes (lab-wide ones left out), as plan.json would hold them (LabPlan.from_json reads it).
    WHOLE: the plan as JSON data, when the caller already has it."""
    data: dict[str, Any] = dict(whole) if whole is not None else json.loads(plan.to_json())
    data["mgmt"] = dict(data["mgmt"])
    own_ns = {ns.name for ns in plan.namespaces if ns.node == node}
    data["nodes"] = [n for n in data["nodes"] if n["name"] == node]
    data["namespaces"] = [n for n in data["namespaces"] if n["name"] in own_ns]
    data["veths"] = [v for v in data["veths"] if v["a"]["ns"] in own_ns or v["b"]["ns"] in own_ns]
    data["bridges"] = [b for b in data["bridges"] if b["ns"] in own_ns]
    for key in ("routes", "rules", "rulesets", "sessions", "expected_routes"):
        data[key] = [x for x in data[key] if x["ns"] in own_ns]
    lab_wide = [p for p in data["processes"] if p["node"] in SKIPPED_PROCESS_NODES]
    data["processes"] = [p for p in data["processes"]
                         if p["ns"] in own_ns and p["node"] not in SKIPPED_PROCESS_NODES]
    own_responder = own_responder_of(plan, node)
    if own_responder is not None:  # the lab-wide health-check responder, as this container's own
        template = next(p for p in lab_wide if p["name"] == "responder")
        data["processes"].append({**template, "node": node, "ns": own_responder[1],
                                  "argv": [*template["argv"][:-1], f"{plan.state_dir}/{own_responder[0]}"]})
    data["mgmt"]["ports"] = [p for p in data["mgmt"]["ports"] if p["node"] == node]
    data["file_names"] = sorted({f for f in data["file_names"] if f.startswith(f"nodes/{node}/")}
                                | ({own_responder[0]} if own_responder else set()))
    return data


def own_responder_of(plan: LabPlan, node: str) -> tuple[str, str, str] | None:
    """(file, namespace, config) of NODE's own health-check responder in a container: the lab-wide
    responder serves every SRX namespace from one process, which a container cannot do."""
    text = plan.files.get(RESPONDER_FILE)
    if text is None:
        return None
    entries = [n for n in json.loads(text)["nodes"] if n["name"] == node]
    if not entries:
        return None
    config = json.dumps({"nodes": entries}, indent=2, sort_keys=True) + "\n"
    return f"nodes/{node}/{RESPONDER_FILE}", entries[0]["ns"], config


def _node_config(plan: LabPlan, node: str, kind: str, peers_vendor: set[str], whole: Mapping[str, Any]) -> str:
    own = node_slice(plan, node, whole)
    # BGP sessions toward a vendor node are not waited for: a VM boots on its own time.
    waited = [s["protocol"] for s in own["sessions"] if s["peer_node"] not in peers_vendor]
    config = {
        "format": EXPORT_FORMAT,
        "lab": plan.name,
        "node": node,
        "kind": kind,
        "state_dir": plan.state_dir,
        "mgmt_alias": next((p.name for p in plan.mgmt.ports if p.node == node), "mgmt0"),
        "wait_sessions": waited,
        "plan": own,
    }
    return json.dumps(config, indent=2, sort_keys=True) + "\n"


# ---------------------------------------------------------------- vendor configs
def _vendor_ports(plan: LabPlan, node: str) -> list[Interface]:
    return [i for i in plan.interfaces() if i.node == node]


def vendor_port_map(plan: LabPlan, node: str, kind: str) -> list[tuple[Interface, str, str]]:
    """(plan interface, container port ethN, vendor port name) for each data port of a vendor node."""
    spec = VENDOR_KINDS[kind]
    return [(iface, f"eth{i + 1}", spec.port_name(i)) for i, iface in enumerate(_vendor_ports(plan, node))]


def rename_interfaces(text: str, renames: Mapping[str, str], comment: str) -> str:
    """Rename interface tokens (whole names, a unit suffix like `.0` kept) outside description lines.

    One pass with one pattern: a name renamed to another name of the map is not renamed twice."""
    if not renames:
        return text
    names = sorted(renames, key=len, reverse=True)
    pattern = re.compile(r"(?<![\w/.:-])(" + "|".join(re.escape(n) for n in names) + r")(?![\w/-])")
    out = []
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith(("description", comment)):
            out.append(line)
            continue
        out.append(pattern.sub(lambda m: renames[m.group(1)], line))
    return "".join(out)


def _startup_config(plan: LabPlan, node: str, kind: str) -> str:
    spec = VENDOR_KINDS[kind]
    source_file = f"nodes/{node}/juniper.conf" if spec.dialect == "junos" else f"nodes/{node}/running-config"
    text = plan.files[source_file]
    ports = vendor_port_map(plan, node, kind)
    renames = {iface.alias: vendor for iface, _, vendor in ports}
    mgmt = next(p.name for p in plan.mgmt.ports if p.node == node)
    if spec.mgmt_name():
        renames[mgmt] = spec.mgmt_name() or mgmt
    comment = "##" if spec.dialect == "junos" else "!"
    header = [f"{comment} Startup config for {kind}: the rendered config of {node} with this kind's port names."]
    header += [f"{comment}   {iface.alias} -> {vendor} (container {eth})" for iface, eth, vendor in ports]
    if spec.mgmt_name():
        header.append(f"{comment}   {mgmt} -> {spec.mgmt_name()} (management)")
    return "\n".join(header) + "\n" + rename_interfaces(text, renames, comment)


# ---------------------------------------------------------------- topology
def _endpoint(plan: LabPlan, iface: Interface, vendor: Mapping[str, str]) -> tuple[str, str]:
    """(containerlab node, container interface) of one end of a plan veth."""
    if iface.ns == iface.lan:  # a LAN switch port: node lanN, port pN
        return iface.node, iface.name
    if iface.node in vendor:
        for port, eth, _ in vendor_port_map(plan, iface.node, vendor[iface.node]):
            if port == iface:
                return iface.node, eth
    return iface.node, iface.name


def _mgmt_ip(plan: LabPlan, node: str) -> str:
    """The node's planned management address; a LAN container gets one from the top of the subnet
    (every container has a fixed address: docker would otherwise hand out one a node may want)."""
    for port in plan.mgmt.ports:
        if port.node == node:
            return str(IPv4Interface(port.address).ip)
    taken = {IPv4Interface(p.address).ip for p in plan.mgmt.ports} | {IPv4Interface(plan.mgmt.host_address).ip}
    free = [h for h in reversed(list(IPv4Network(plan.mgmt.subnet).hosts())) if h not in taken]
    lans = [b.ns[len(plan.name) + 1:] for b in plan.bridges]
    if node not in lans or lans.index(node) >= len(free):
        raise LabError(f"no management address left in {plan.mgmt.subnet} for {node}")
    return str(free[lans.index(node)])


def _node_entry(plan: LabPlan, node: str, kind: str, vendor: Mapping[str, str]) -> dict[str, Any]:
    entry: dict[str, Any] = {}
    if node in vendor:
        entry["kind"] = vendor[node]
    else:
        entry["kind"] = "linux"
    entry["mgmt-ipv4"] = _mgmt_ip(plan, node)
    entry["group"] = kind
    entry["labels"] = {"lab.name": plan.name, "lab.kind": kind,
                       "lab.role": "vendor" if node in vendor else "emulated"}
    if node in vendor:
        entry["startup-config"] = f"nodes/{node}/{STARTUP_CONFIG_FILE}"
    else:
        entry["binds"] = [f"nodes/{node}:{NODE_CONFIG_DIR}:ro"]
    return entry


def _kinds(options: ExportOptions, used_vendor: Iterable[str]) -> dict[str, Any]:
    kinds: dict[str, Any] = {
        "linux": {
            "image": options.images.get("linux", DEFAULT_NODE_IMAGE),
            "cmd": f"python3 -m {AGENT_MODULE} run {NODE_CONFIG_DIR}/{NODE_CONFIG_FILE}",
            "privileged": True,  # named namespaces (mount), sysctls, nftables, conntrack
        }
    }
    for kind in sorted(set(used_vendor)):
        kinds[kind] = {"image": options.images[kind]}
    return kinds


def _mgmt(plan: LabPlan) -> dict[str, Any]:
    return {
        "network": f"lab-{plan.name}",
        "ipv4-subnet": plan.mgmt.subnet,
        "ipv4-gw": str(IPv4Interface(plan.mgmt.host_address).ip),
    }


def _link(plan: LabPlan, veth: Veth, vendor: Mapping[str, str]) -> dict[str, Any]:
    a, b = _endpoint(plan, veth.a, vendor), _endpoint(plan, veth.b, vendor)
    return {"endpoints": [f"{a[0]}:{a[1]}", f"{b[0]}:{b[1]}"], "mtu": veth.a.mtu}


def _vxlan_link(plan: LabPlan, veth: Veth, local: Interface, remote_ip: str, vni: int,
                vendor: Mapping[str, str]) -> dict[str, Any]:
    node, port = _endpoint(plan, local, vendor)
    return {"type": "vxlan", "endpoint": {"node": node, "interface": port}, "remote": remote_ip,
            "vni": vni, "dst-port": VXLAN_PORT, "mtu": veth.a.mtu}


def _topology(plan: LabPlan, options: ExportOptions, nodes: list[str],
              links: list[dict[str, Any]]) -> dict[str, Any]:
    kinds_of = {n.name: n.kind for n in plan.nodes}
    vendor = dict(options.vendor)
    entries = {}
    for node in nodes:
        entries[node] = _node_entry(plan, node, kinds_of.get(node, "lan"), vendor)
    return {
        "name": plan.name,
        "mgmt": _mgmt(plan),
        "topology": {
            "kinds": _kinds(options, [vendor[n] for n in nodes if n in vendor]),
            "nodes": entries,
            "links": links,
        },
    }


class _Dumper(yaml.SafeDumper):
    """Block style for the structure, flow style for endpoint pairs and labels (as clab examples)."""


def _represent_dict(dumper: yaml.SafeDumper, data: dict[str, Any]) -> yaml.MappingNode:
    return dumper.represent_mapping("tag:yaml.org,2002:map", data.items())


_Dumper.add_representer(dict, _represent_dict)


def dump(data: Mapping[str, Any], header: str) -> str:
    text = yaml.dump(dict(data), Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=1000)
    return header + text


def _header(plan: LabPlan, what: str) -> str:
    return (f"# containerlab topology of lab {plan.name}, exported by lab_orchestrator from {plan.source}\n"
            f"# {what}\n"
            f"# Deploy: containerlab deploy -t THIS_FILE (node image: `make image`); see docs/containerlab.md\n")


def export(plan: LabPlan, options: ExportOptions | None = None) -> ClabExport:
    """The containerlab form of PLAN: topology file(s), node folders and a sidecar describing it."""
    options = options or ExportOptions()
    _check(plan, options)
    vendor = dict(options.vendor)
    nodes = _clab_nodes(plan)
    lans = [b.ns[len(plan.name) + 1:] for b in plan.bridges]
    files: dict[str, str] = {}
    kinds_of = {n.name: n.kind for n in plan.nodes}
    whole = json.loads(plan.to_json())
    for node in nodes:
        if node in vendor:
            files[f"nodes/{node}/{STARTUP_CONFIG_FILE}"] = _startup_config(plan, node, vendor[node])
            continue
        for rel, content in plan.files.items():
            if rel.startswith(f"nodes/{node}/"):
                files[rel] = content
        own_responder = own_responder_of(plan, node)
        if own_responder is not None:
            files[own_responder[0]] = own_responder[2]
        files[f"nodes/{node}/{NODE_CONFIG_FILE}"] = _node_config(plan, node, kinds_of.get(node, "lan"),
                                                                  set(vendor), whole)
    links = [_link(plan, veth, vendor) for veth in plan.veths]
    topology = _topology(plan, options, nodes, links)
    topology_file = f"{plan.name}.clab.yml"
    files[topology_file] = dump(topology, _header(plan, "single host (also the input of clabverter for clabernetes)"))
    result = ClabExport(plan.name, topology_file, files, topology, vendor=vendor, lans=lans,
                        containers={n: container_name(plan.name, n) for n in nodes})
    if options.host2:
        result.host_files = _split(plan, options, nodes, files)
    files[SIDECAR_FILE] = json.dumps({
        "format": EXPORT_FORMAT, "lab": plan.name, "source": plan.source, "topology_file": topology_file,
        "host_files": result.host_files, "vendor": vendor, "lans": lans,
        "containers": [{"node": n, "container": c} for n, c in result.containers.items()],  # topology order
        "options": {"images": dict(sorted(options.images.items())), "host2": list(options.host2),
                    "underlay": list(options.underlay) if options.underlay else None,
                    "vni_base": options.vni_base},
    }, indent=2, sort_keys=True) + "\n"
    return result


def _split(plan: LabPlan, options: ExportOptions, nodes: list[str], files: dict[str, str]) -> list[str]:
    assert options.underlay is not None
    on_host2 = set(options.host2)
    host_of = {n: 2 if n in on_host2 else 1 for n in nodes}
    vendor = dict(options.vendor)
    per_host: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    for veth in plan.veths:
        a_host, b_host = host_of[_endpoint(plan, veth.a, vendor)[0]], host_of[_endpoint(plan, veth.b, vendor)[0]]
        if a_host == b_host:
            per_host[a_host].append(_link(plan, veth, vendor))
            continue
        vni = options.vni_base + plan.veths.index(veth)
        for local, host in ((veth.a, a_host), (veth.b, b_host)):
            remote_ip = options.underlay[1] if host == 1 else options.underlay[0]
            per_host[host].append(_vxlan_link(plan, veth, local, remote_ip, vni, vendor))
    names = []
    for host in (1, 2):
        host_nodes = [n for n in nodes if host_of[n] == host]
        topo = _topology(plan, options, host_nodes, per_host[host])
        if not per_host[host]:
            topo["topology"].pop("links")
        name = f"{plan.name}.host{host}.clab.yml"
        files[name] = dump(topo, _header(plan, f"host {host} of a two-host split: links to host "
                                               f"{3 - host} are vxlan links over the underlay "
                                               f"({options.underlay[host - 1]} -> {options.underlay[2 - host]})"))
        names.append(name)
    return names


def sidecar(files: Mapping[str, str]) -> dict[str, Any]:
    return dict(json.loads(files[SIDECAR_FILE]))
