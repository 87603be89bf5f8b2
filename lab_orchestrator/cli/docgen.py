"""Generated documentation: the topology reference and JSON Schema from the pydantic model, the CLI
reference from the Typer app, the topology figures from `lab graph`. `make docs` (or
`python -m lab_orchestrator.cli.docgen [--check]`) writes them; a unit test fails when they are stale.

Everything is read by introspection, so a new model field or command option appears here without a
hand-written list: a field's description is its `Field(description=...)`, else the comment on its
line in model/schema.py, else the class docstring's mention; its example is the first value the shipped
labs use, else its default.
"""

from __future__ import annotations

import inspect
import json
import re
import sys
import types
import typing
from ipaddress import IPv4Address, IPv4Interface, IPv4Network
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel
from pydantic.fields import FieldInfo

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
TOPOLOGY_REFERENCE = DOCS / "topology-reference.md"
SCHEMA = DOCS / "topology.schema.json"
CLI_REFERENCE = DOCS / "cli.md"
FIGURES = {"topology1": "topology1", "topology2": "topology2", "topology3": "topology3", "topology4": "topology4",
           "flexvpn": "flexvpn"}
# Descriptions of fields whose model line carries no comment (a Field(description=...) or a comment wins).
DESCRIPTIONS = {
    "Topology.name": "lab name, prefix of every namespace and interface name: [a-z][a-z0-9-]*, at most 10 characters",
    "Topology.description": "free text (shown by `lab status` and as the title of `lab graph`)",
    "Topology.addressing": "address pools the planner allocates from",
    "Topology.services": "what the MX and SRX do: load balancing, use case, hashing",
    "Topology.nodes": "the nodes by name ([a-z][a-z0-9-]*)",
    "Topology.links": "point-to-point links (2 endpoints) and LANs (3+); short form `[a:if, b:if]`",
    "Topology.mnha": "SRX Multi Node High Availability pairs",
    "Topology.srd": "dual-MX Services Redundancy (needs an mx-mx link with zone icl)",
    "Addressing.p2p": "a /31 per point-to-point link",
    "Addressing.loopback": "a /32 per node and per MX routing instance",
    "Addressing.lan": "a /24 per LAN",
    "Addressing.nat": "CGNAT pools, one /nat_prefixlen per SRX, or per MNHA pair that shares one "
                      "(services.nat_pool_scope)",
    "Addressing.nat_prefixlen": "size of each CGNAT pool",
    "Addressing.mgmt": "management /24 (default: 198.19.N.0/24, N from a hash of the lab name)",
    "Services.load_balancing": "how the MX spreads flows over the SRXs: ECMP CHASH, plain ECMP (comparison), TLB",
    "Services.use_case": "SRX function: stateful firewall, CGNAT (source NAT into each SRX's pool), or mixed "
                         "(both, chosen by client source prefix: nat_sources)",
    "Services.nat_sources": "use_case mixed: the client prefixes translated into the SRXs' pools (NAPT44); the "
                            "other client prefixes are SFW (untranslated)",
    "Services.bfd": "BFD on every eBGP session (the JVD: 300 ms x 3); off by default (no nonstop routing in BIRD)",
    "Bfd.interval_ms": "minimum-interval and minimum-receive-interval",
    "Bfd.multiplier": "missed intervals before the session is down",
    "Services.buckets": "selector hash buckets (6400: the JVD's 4 -> 5 SRX example is exact)",
    "Services.hash_seed": "jhash seed, the same on both MX sides and both MXs (a flow crosses one SRX both ways)",
    "HealthCheck.type": "probe: ICMP echo, TCP connect, UDP echo, HTTP GET",
    "HealthCheck.interval_ms": "probe interval",
    "HealthCheck.failures": "consecutive failed probes that take a real-service down",
    "HealthCheck.recoveries": "consecutive good probes that bring it back",
    "HealthCheck.http_path": "HTTP GET path (type http)",
    "Node.kind": "`mx` (three namespaces: master, TRUST-VR, UNTRUST-VR), `srx`, `ios-router`, `host`",
    "Node.bgp": "BGP: the AS (srx, ios-router) or one AS per side (mx)",
    "Node.loopback": "loopback address (default: from addressing.loopback)",
    "Node.mgmt_ip": "management address (default: from the management subnet)",
    "Node.interfaces": "per-interface settings by vendor name (description, HSRP)",
    "Node.routes": "static routes",
    "Node.ikev2_cluster": "FlexVPN: `crypto ikev2 cluster` (CLB) of this router",
    "Node.ikev2": "FlexVPN: IKEv2 gateway of this router (redirect mode, address pool)",
    "Bgp.as": "the node's AS (srx, ios-router)",
    "Bgp.trust_as": "mx: AS of TRUST-VR",
    "Bgp.untrust_as": "mx: AS of UNTRUST-VR",
    "Bgp.icl_as": "mx: AS of its MNHA-VR, which peers each SRX over an srx-mx link with zone icl",
    "Bgp.announce": "extra prefixes to originate",
    "Bgp.default_originate": "originate a default route (as a blackhole: nothing leaves the lab)",
    "InterfaceSettings.description": "interface description (shown by `show interfaces descriptions`)",
    "InterfaceSettings.standby": "HSRP group on this interface",
    "Standby.group": "HSRP group number",
    "Standby.ip": "virtual IP address",
    "Standby.priority": "HSRP priority (higher wins)",
    "Standby.preempt": "take over from a lower-priority active router",
    "Standby.name": "group name (the IKEv2 cluster's standby_group refers to it)",
    "Standby.hello_ms": "hello interval",
    "Standby.hold_ms": "hold time",
    "Standby.authentication": "plain-text authentication string",
    "Standby.version": "HSRP version",
    "Ikev2Cluster.standby_group": "the HSRP group name whose active router is the cluster master",
    "Ikev2Cluster.max_session": "session limit of this member",
    "Ikev2Cluster.priority": "master election priority",
    "Ikev2Cluster.hello_ms": "CLB hello interval",
    "Ikev2Cluster.update_ms": "CLB load update interval",
    "Ikev2Cluster.holdtime_ms": "CLB hold time",
    "Ikev2Cluster.port": "CLB TCP port",
    "Ikev2Cluster.weight_crypto_load": "weight of the crypto load in the load figure",
    "Ikev2Cluster.weight_system_load": "weight of the system load in the load figure",
    "Ikev2Cluster.overload_limit": "load (%) above which a member takes no new clients",
    "Ikev2Cluster.shutdown": "cluster configured but shut down",
    "Ikev2.redirect": "IKEv2 redirect during IKE_SA_INIT, IKE_AUTH, or none",
    "Ikev2.pool": "addresses assigned to clients",
    "StaticRoute.prefix": "destination",
    "StaticRoute.via": "next hop",
    "Link.endpoints": "`node:interface` with vendor interface names",
    "Link.zone": ("MX routing instance / SRX security zone of this link; `icl` for an MNHA inter-chassis link "
                  "(srx-mx: routed through the mx's MNHA-VR, the JVD's; srx-srx: direct) or the SRD inter-MX link"),
    "Link.addresses": "explicit addresses, one per endpoint (default: a /31 from addressing.p2p)",
    "Link.mtu": "MTU of both ends",
    "MnhaPair.nodes": "the two SRXs",
    "MnhaPair.mode": "SRG0 (both active), SRG1 (active/backup), SRG1+SRG2 (each active for one group)",
    "MnhaPair.srg1_active": "the SRG1 active node (default: the first)",
    "MnhaPair.preempt": "the preferred active takes SRG1 back when it returns",
    "MnhaPair.heartbeat_ms": "heartbeat interval over the ICL",
    "MnhaPair.heartbeat_threshold": "missed heartbeats before the peer is declared lost",
    "MnhaPair.prepend": "a-b: the JVD's prepends (A 1x / 3x, B 2x / 4x); per-srx: both nodes 1x / 3x",
    "Srd.nodes": "the two MXs",
    "Srd.preempt": "the preferred master takes mastership back when it returns",
    "Srd.heartbeat_ms": "heartbeat interval between the MXs",
    "Srd.heartbeat_threshold": "missed heartbeats before the peer is declared lost",
    "SrgMonitor.zone": "the SRX zone whose links toward the MX are monitored",
    "SrgMonitor.multiplier": "missed BFD intervals before a link counts as failed",
    "SrgMonitor.weight": "weight of each failed link",
    "SrgMonitor.object_threshold": "weight a failed monitor object adds toward srg_threshold",
    "SrgMonitor.srg_threshold": "weight at which the node loses activeness",
    "Ssh.enabled": "run the lab's SSH server (false: no SSH, no ssh_config)",
    "Ssh.port": "TCP port on every node's management address",
    "Ssh.users": "logins of every node",
    "Ssh.lab_key": "the lab makes a client key for each user (`ssh/id_ed25519-USER`), good for that user only",
    "SshUser.name": "login name",
    "SshUser.password": "password (default: a random one drawn by `lab up` unless the user has keys; in "
                        "`ssh/passwords.secret.json`, 0600; `lab status` shows it)",
    "SshUser.keys": "authorized public keys",
    "SshUser.class": "super-user and operator may run commands that change state; read-only may not",
}
HAND_WRITTEN = "<!-- Generated above by `make docs` (lab_orchestrator/cli/docgen.py); written by hand below. -->"


# ---------------------------------------------------------------------- the model
def _type_name(annotation: Any) -> str:
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is typing.Annotated:
        return _type_name(args[0])
    if origin is Literal:
        return " \\| ".join(f"`{a}`" for a in args)
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        shown = " or ".join(_type_name(a) for a in rest)
        return f"{shown} or null" if len(rest) < len(args) else shown
    if origin is list:
        return f"list of {_type_name(args[0])}"
    if origin is dict:
        return f"map: name → {_type_name(args[1])}"
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return f"[{annotation.__name__}](#{annotation.__name__.lower()})"
    names = {str: "string", int: "integer", bool: "boolean", float: "number", IPv4Network: "IPv4 prefix",
             IPv4Address: "IPv4 address", IPv4Interface: "IPv4 address/length"}
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _bounds(info: FieldInfo) -> str:
    low = high = None
    for item in info.metadata:
        low = getattr(item, "ge", None) if getattr(item, "ge", None) is not None else low
        high = getattr(item, "le", None) if getattr(item, "le", None) is not None else high
        if getattr(item, "min_length", None) is not None:
            low = f"≥ {item.min_length} items" if low is None else low
        if getattr(item, "max_length", None) is not None:
            high = f"≤ {item.max_length}" if high is None else high
    if low is not None and high is not None and not isinstance(low, str):
        return f" ({low}..{high})"
    if isinstance(low, str):
        return f" ({low})"
    return ""


def _comments(cls: type) -> dict[str, str]:
    """Trailing `# comment` of each field line of CLS's source, and full-line comments just above it."""
    try:
        lines, _ = inspect.getsourcelines(cls)
    except (OSError, TypeError):
        return {}
    found: dict[str, str] = {}
    above: list[str] = []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("#"):
            above.append(stripped.lstrip("# "))
            continue
        match = re.match(r"^\s+(\w+):\s.*?#\s*(.+)$", line)
        name = re.match(r"^\s+(\w+):\s", line)
        if name:
            text = " ".join([*above, match.group(2)] if match else above).strip()
            if text:
                found[name.group(1)] = text
        above = []
    return found


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    value = info.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return "(see below)"
    if isinstance(value, list) and value and isinstance(value[0], BaseModel):
        return f"{len(value)} entries (see below)"
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int) and not isinstance(value, bool) and value > 0xFFFF:
        return f"`{value:#x}`"
    if isinstance(value, (list, dict)) and not value:
        return "empty"
    return f"`{value}`"


def _models(root: type[BaseModel]) -> list[tuple[str, type[BaseModel]]]:
    """Every model reachable from ROOT with the YAML path where it appears, in reading order."""
    seen: dict[type[BaseModel], str] = {}
    order: list[tuple[str, type[BaseModel]]] = []

    def walk(cls: type[BaseModel], path: str) -> None:
        if cls in seen:
            return
        seen[cls] = path
        order.append((path, cls))
        # a model defined before the models its fields name (Node before StaticRoute) keeps those
        # fields as unresolved forward references until pydantic rebuilds it, which it does on the
        # first validation only: rebuild here, so the reference does not depend on what ran before
        cls.model_rebuild()
        for name, info in cls.model_fields.items():
            key = info.alias or name
            for inner, suffix in _nested(info.annotation):
                walk(inner, f"{path}.{key}{suffix}" if path else f"{key}{suffix}")

    walk(root, "")
    return order


def _nested(annotation: Any, suffix: str = "") -> list[tuple[type[BaseModel], str]]:
    origin, args = get_origin(annotation), get_args(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [(annotation, suffix)]
    if origin is list:
        return _nested(args[0], suffix + "[]")
    if origin is dict:
        return _nested(args[1], suffix + ".NAME")
    if origin in (typing.Union, types.UnionType, typing.Annotated):
        return [found for a in args for found in _nested(a, suffix)]
    return []


def _lab_values() -> dict[str, Any]:
    """Every value the shipped labs use, by YAML path (NAME for map keys, [] for list items)."""
    import yaml

    values: dict[str, Any] = {}

    def walk(data: Any, path: str, in_map: bool) -> None:
        if path and path not in values:
            values[path] = data
        if isinstance(data, dict):
            for key, value in data.items():
                step = "NAME" if in_map else str(key)
                walk(value, f"{path}.{step}" if path else step, step in ("nodes", "interfaces") and not in_map)
        elif isinstance(data, list):
            for item in data:
                walk(item, f"{path}[]", False)

    for lab in sorted((REPO / "labs").glob("*.yml")):
        data = yaml.safe_load(lab.read_text())
        if isinstance(data, dict):
            for link in data.get("links", []):  # the short form is a list of endpoints
                if isinstance(link, list):
                    data["links"][data["links"].index(link)] = {"endpoints": link}
            walk(data, "", False)
    return values


def _example(value: Any) -> str:
    if value is None or isinstance(value, dict):
        return ""
    text = json.dumps(value, default=str) if not isinstance(value, str) else value
    return f"`{text}`" if len(text) <= 48 else f"`{text[:45]}...`"


def topology_reference() -> str:
    from ..model.schema import Topology

    examples = _lab_values()
    out = ["# Topology reference", "",
           "Every key of a topology file, generated from the model (`lab_orchestrator/model/schema.py`) by "
           "`make docs`.",
           "Unknown keys are errors. Types: *IPv4 prefix* `198.18.0.0/17`, *IPv4 address* `10.0.0.1`, *IPv4 "
           "address/length* `10.0.0.1/31`. Examples come from the shipped labs (`labs/*.yml`) where they use the "
           "key. A JSON Schema for editors is [topology.schema.json](topology.schema.json) (see the end of this "
           "page). The format with its explanations: [topology.md](topology.md).", ""]
    for path, cls in _models(Topology):
        title = cls.__name__
        out += [f"## {title}", "", f"Where: `{path or '(top level)'}`" + (f" — {_doc(cls)}" if _doc(cls) else ""), "",
                "| key | type | default | example | description |", "|---|---|---|---|---|"]
        comments = _comments(cls)
        for name, info in cls.model_fields.items():
            key = info.alias or name
            full = f"{path}.{key}" if path else key
            description = info.description or comments.get(name, "") or DESCRIPTIONS.get(f"{title}.{key}", "")
            out.append(f"| `{key}` | {_type_name(info.annotation)}{_bounds(info)} | {_default(info)} | "
                       f"{_example(examples.get(full))} | {description.replace('|', '/')} |")
        out.append("")
    out += ["## Editor support", "",
            "Point your editor's YAML language server at the schema, e.g. first line of a topology file:", "",
            "```yaml", "# yaml-language-server: $schema=../docs/topology.schema.json", "```", ""]
    return "\n".join(out)


def _doc(cls: type) -> str:
    text = inspect.getdoc(cls) or ""
    if cls.__doc__ is None or text.startswith(("Usage docs", "!!! abstract")):
        return ""
    return " ".join(text.split())


def schema() -> str:
    from ..model.schema import Topology

    data = Topology.model_json_schema(by_alias=True)
    data["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    data["title"] = "lab topology"
    links = data["properties"]["links"]
    links["items"] = {"anyOf": [links["items"], {"type": "array", "items": {"type": "string"}, "minItems": 2,
                                                 "description": "short form: [node:interface, node:interface]"}]}
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


# ---------------------------------------------------------------------- the commands
def _commands() -> list[tuple[str, Any]]:
    import typer

    from . import app

    root: Any = typer.main.get_command(app)
    found: list[tuple[str, Any]] = []

    def walk(cmd: Any, path: str) -> None:
        if hasattr(cmd, "list_commands"):  # a group (typer may bring its own copy of click: no isinstance)
            ctx = cmd.context_class(cmd)
            for name in cmd.list_commands(ctx):
                sub = cmd.get_command(ctx, name)
                if sub is not None and not sub.hidden:
                    walk(sub, f"{path} {name}")
        else:
            found.append((path, cmd))

    walk(root, "lab")
    return found


def cli_options(cmd: Any) -> list[str]:
    """Every option name of a click command (--json, -l...), without --help."""
    return [opt for param in cmd.params if param.param_type_name == "option" for opt in param.opts
            if opt != "--help"]


def cli_reference(existing: str = "") -> str:
    out = ["# CLI reference", "",
           "Every `lab` command, generated from the commands themselves by `make docs` (what `--help` prints).",
           "Errors are one sentence on stderr; `LAB_DEBUG=1` shows the traceback of an internal error.", ""]
    commands = _commands()
    out += ["| command | what |", "|---|---|"]
    for path, cmd in commands:
        anchor = path.replace(" ", "-")
        summary = " ".join((cmd.help or "").split()).split(". ")[0].rstrip(".")
        out.append(f"| [`{path}`](#{anchor}) | {summary.replace('|', '/')} |")
    out.append("")
    for path, cmd in commands:
        ctx = cmd.context_class(cmd, info_name=path)
        out += [f"## {path}", "", "```", cmd.get_usage(ctx).replace("Usage: ", ""), "```", "",
                inspect.cleandoc(cmd.help or ""), ""]
        rows = []
        for param in cmd.params:
            if param.param_type_name == "argument":
                rows.append(f"| `{(param.metavar or param.name or '').upper()}` | argument"
                            f"{'' if param.required else ', optional'} | | {getattr(param, 'help', '') or ''} |")
            elif "--help" not in param.opts:
                names = ", ".join(f"`{o}`" for o in [*param.opts, *param.secondary_opts])
                default = param.default if not callable(param.default) else None
                shown = "" if default in (None, False, (), []) or param.is_flag else \
                    f"`{getattr(default, 'value', default)}`"
                kind = "flag" if param.is_flag else f"`{_param_type(param, ctx)}`"
                rows.append(f"| {names} | {kind} | {shown} | "
                            f"{(param.help or '').replace('|', '/')} |")
        if rows:
            out += ["| argument / option | type | default | description |", "|---|---|---|---|", *rows, ""]
    text = "\n".join(out) + "\n" + HAND_WRITTEN + "\n"
    return text + _hand_written(existing)


def _param_type(param: Any, ctx: Any) -> str:
    """`<path>`, `<svg|png>`... as --help shows it (typer's parameters, or plain click's)."""
    if hasattr(param, "display_type"):
        try:
            return str(param.display_type(ctx)).replace("|", "/")
        except TypeError:
            pass
    return str(getattr(getattr(param, "type", None), "name", "text"))


def _hand_written(existing: str) -> str:
    """What another author wrote in docs/cli.md: everything after the marker, or its `## Exit codes`
    section when the file predates the marker."""
    if HAND_WRITTEN in existing:
        return existing.split(HAND_WRITTEN, 1)[1].lstrip("\n")
    match = re.search(r"^## Exit codes.*?(?=^# |\Z)", existing, flags=re.S | re.M)
    return "\n" + match.group(0) if match else ""


# ---------------------------------------------------------------------- figures
def figures() -> dict[Path, bytes]:
    from ..model.validate import load_topology
    from ..report import graph

    return {DOCS / "img" / f"{name}.svg": graph.render_image(load_topology(REPO / "labs" / f"{lab}.yml", []).topology,
                                                            "svg")
            for name, lab in FIGURES.items()}


def generated() -> dict[Path, str]:
    existing = CLI_REFERENCE.read_text() if CLI_REFERENCE.exists() else ""
    return {TOPOLOGY_REFERENCE: topology_reference(), SCHEMA: schema(), CLI_REFERENCE: cli_reference(existing)}


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for path, text in generated().items():
        if not path.exists() or path.read_text() != text:
            stale.append(path)
            if not check:
                path.write_text(text)
    if not check and "--no-figures" not in argv:
        for path, data in figures().items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
    for path in stale:
        print(f"{'stale' if check else 'wrote'} {path.relative_to(REPO)}")
    return 1 if (check and stale) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

