"""The importer's records: one Device per configuration file, its addressed interfaces (End), what was
added, and the result; the lab's node kinds as the kind registry names them."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from ipaddress import IPv4Interface
from typing import Any

from .. import kinds
from . import ios as iosmod
from . import junos as junosmod
from .parse import Statement, Syntax


def _one(predicate: Any) -> str:
    (name,) = kinds.names(predicate)
    return name


# the lab's node kinds, asked of the kind registry
MX = _one(lambda k: k.load_balancer)
SRX = _one(lambda k: k.firewall)
ROUTER = _one(lambda k: k.gateway)
HOST = _one(lambda k: k.end_host)
GATEWAY = "gateway"  # a Junos device that is neither: each BGP-speaking routing instance is a ROUTER


@dataclass
class Device:
    file: str
    syntax: Syntax
    statements: list[Statement]
    name: str = ""
    kind: str = ""  # mx | srx | gateway | ios-router
    junos: junosmod.Junos | None = None
    ios: iosmod.Ios | None = None


@dataclass
class End:
    """One interface with an address: the lab node it belongs to and its vendor name."""

    device: Device
    node: str
    iface: str
    address: IPv4Interface
    stmt: Statement
    instance: str = ""
    zone: str | None = None  # trust | untrust | icl (SRX: security zone; MX: instance side)


@dataclass
class Added:
    what: str
    why: str


@dataclass
class Result:
    topology: dict[str, Any]
    devices: list[Device]
    added: list[Added] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    clients: list[str] = field(default_factory=list)  # the added hosts behind the trust side


def zone_of_node(ends: list[End], node: str) -> str | None:
    return next((e.zone for e in ends if e.node == node and e.zone in ("trust", "untrust")), None)


def _slug(instance: str) -> str:
    s = re.sub(r"[-_]?vr$", "", instance.lower())
    return re.sub(r"[^a-z0-9-]+", "-", s).strip("-") or "vr"


def instance_node(d: Device, instance: str) -> str:
    return f"{d.name}-{_slug(instance)}" if d.kind == GATEWAY and instance != junosmod.MASTER else d.name
