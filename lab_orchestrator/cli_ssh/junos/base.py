"""What every Junos-like command module shares: argument type, error output, the routing-down check."""

from __future__ import annotations

from typing import Any

from ..gather import Snapshot
from ..pipes import Output

Args = dict[str, Any]


ROUTING_DOWN = "error: the routing subsystem is not running\n"


NAT_POOL, NAT_RULE_SET, NAT_RULE = "SRC-POOL", "TRUST-TO-UNTRUST", "cgnat"  # names in srx.nft's comments


def error(text: str) -> Output:
    return Output(f"error: {text}\n", status=1)


def bird_down(snap: Snapshot) -> bool:
    return any(i.bird_error for i in snap.instances)


def updown(up: bool) -> str:
    return "up" if up else "down"


# ---------------------------------------------------------------------- security (SRX)
