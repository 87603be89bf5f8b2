"""Node kinds: one module per kind, each a `Kind` of facts the planner asks instead of comparing
kind names. Registered here, in one place; a new kind is a module here, its template(s) and goldens.

    kind = kinds.get(node.kind)
    kind.instances          # routing instances beyond the master one (an MX: TRUST-VR, UNTRUST-VR)
    kind.device_config      # (file in nodes/NODE/, template) or None
"""

from __future__ import annotations

from collections.abc import Callable

from . import host, ios_router, mx, srx
from .base import NO_IPV6, Kind, dual_stack_sysctls

__all__ = ["KINDS", "NO_IPV6", "Kind", "dual_stack_sysctls", "get", "names"]

KINDS: dict[str, Kind] = {k.name: k for k in (mx.KIND, srx.KIND, ios_router.KIND, host.KIND)}


def get(name: str) -> Kind:
    """The kind of that name (the model only accepts registered names)."""
    return KINDS[name]


def names(predicate: Callable[[Kind], bool]) -> frozenset[str]:
    """The names of the kinds that PREDICATE holds for, e.g. `names(lambda k: k.firewall)`."""
    return frozenset(k.name for k in KINDS.values() if predicate(k))
