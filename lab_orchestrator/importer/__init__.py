"""`lab import`: a lab topology from device configurations (Junos braces or `set` lines, IOS).

parse.py reads the files into statements with their file and line; junos.py (with secpolicy.py for
policies, NAT rules and address books) and ios.py read what each configuration says; build.py infers
links, kinds, BGP (bgp.py: sessions and ASes), MNHA, TLB, NAT and the hosts the configurations imply
(implied.py), usecase.py the SRXs' use case; report.py says what the lab does with every statement."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from ipaddress import IPv4Network
from pathlib import Path
from typing import Any

import yaml

from . import ios, junos, report
from .build import build
from .devices import ROUTER, Device, Result
from .devices import instance_node as build_node
from .parse import ParseError, Statement, parse_file

__all__ = ["ImportResult", "ParseError", "Statement", "import_configs"]

SOURCE_LIMIT = 400  # statements carried per node into the topology (the report has them all)


@dataclass
class ImportResult:
    result: Result
    topology: dict[str, Any]

    def yaml(self) -> str:
        return _dump(self.topology)

    def report_text(self, output: str) -> str:
        return report.to_text(self.result, output)

    def report_json(self) -> dict[str, Any]:
        return report.to_json(self.result)


def import_configs(paths: Sequence[Path], name: str = "imported",
                   client_lan: IPv4Network | None = None) -> ImportResult:
    devices: list[Device] = []
    for path in paths:
        syntax, statements = parse_file(path, label=path.name)
        device = Device(path.name, syntax, statements)
        if syntax == "ios":
            device.ios = ios.read(statements)
        else:
            device.junos = junos.read(statements)
        devices.append(device)
    result = build(devices, name, client_lan)
    for d in devices:
        report.classify(d.statements)
    topo = result.topology
    for d in devices:
        kept = [s for s in d.statements if s.status == "emulated"]
        if d.kind != "gateway":
            _attach(topo["nodes"].get(d.name), kept)
            continue
        for node_name, node in topo["nodes"].items():
            if node_name.startswith(d.name + "-") and node.get("kind") == ROUTER:
                _attach(node, [s for s in kept if _gateway_node(d, s) in ("", node_name)])
    return ImportResult(result, topo)


def _attach(node: dict[str, Any] | None, kept: list[Statement]) -> None:
    if node is None:
        return
    lines = [f"{s.where}: {' '.join(s.path)}" for s in kept[:SOURCE_LIMIT]]
    if len(kept) > SOURCE_LIMIT:
        lines.append(f"... and {len(kept) - SOURCE_LIMIT} more (see the import report)")
    node["source"] = node.get("source", []) + lines


def _gateway_node(d: Device, s: Statement) -> str:
    """The node (one per routing instance) a statement of a gateway belongs to; "" for all of them."""
    j = d.junos
    if j is None:
        return ""
    if s.path[:1] == ("routing-instances",) and len(s.path) > 1:
        return build_node(d, s.path[1])
    if s.path[:1] == ("interfaces",) and len(s.path) > 3 and s.path[2] == "unit":
        return build_node(d, j.instance_of.get(f"{s.path[1]}.{s.path[3]}", junos.MASTER))
    return ""


class _Dumper(yaml.SafeDumper):
    pass


def _flow_lists(dumper: yaml.SafeDumper, data: list[Any]) -> yaml.Node:
    flow = all(not isinstance(x, (dict, list)) for x in data) and len(data) <= 6 and \
        sum(len(str(x)) for x in data) < 100
    return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=flow)


_Dumper.add_representer(list, _flow_lists)


def _dump(topo: dict[str, Any]) -> str:
    head = ("# Imported by `lab import` from device configurations; the import report says what the lab does\n"
            "# with each statement. Each node's `source` lists the statements it emulates (file:line).\n")
    return head + yaml.dump(topo, Dumper=_Dumper, sort_keys=False, width=120, allow_unicode=True)
