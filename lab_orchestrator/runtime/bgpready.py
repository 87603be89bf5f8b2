"""Between two events: BGP must be whole again before the next one starts.

The selectors settle on carrier and next hops, which come back before BGP has finished a
graceful restart. Killing a BIRD (restart-routing, gres, daemon-crash) while its previous
restart is still recovering makes its peers flush the routes they kept for it: an outage the
seed's GRES never has, and one the next event would be blamed for.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from labkit import birdctl

from ..plan.plantypes import BgpSession, LabPlan

GR_RECOVERY = "graceful restart recovery"


def pending(sessions: Iterable[BgpSession], sockets: dict[str, str], down: set[str],
            protocols: Callable[[str], dict[str, str]], status: Callable[[str], list[str]]) -> list[str]:
    """What still keeps BGP from being whole: sessions of nodes in service (both ends up) that are not
    Established, and BIRDs still in graceful-restart recovery. SOCKETS maps a session's namespace to
    its BIRD control socket; PROTOCOLS and STATUS read one BIRD (injected: pure and testable)."""
    out: list[str] = []
    by_socket: dict[str, list[BgpSession]] = {}
    for session in sessions:
        if session.node in down or session.peer_node in down or session.ns not in sockets:
            continue
        by_socket.setdefault(sockets[session.ns], []).append(session)
    for sock, wanted in sorted(by_socket.items()):
        try:
            states = protocols(sock)
            recovering = any(GR_RECOVERY in line.lower() for line in status(sock))
        except birdctl.BirdError as exc:
            out.append(str(exc))
            continue
        out += [f"{s.node} {s.protocol} {states.get(s.protocol, 'missing')}" for s in wanted
                if not states.get(s.protocol, "").startswith("Established")]
        if recovering:
            out.append(f"{wanted[0].node}: BGP graceful restart still recovering")
    return out


def _protocols(sock: str) -> dict[str, str]:
    return {p.name: p.info for p in birdctl.protocols(sock)}


def _status(sock: str) -> list[str]:
    return birdctl.command(sock, "show status")


def wait_whole(plan: LabPlan, down: set[str], timeout: float) -> list[str]:
    """Until BGP is whole (see pending) or TIMEOUT seconds: what was still pending (nothing: whole)."""
    sockets = {p.ns: p.control_socket for p in plan.processes if p.control_socket and p.name.startswith("bird")}
    deadline = time.monotonic() + timeout
    while True:
        left = pending(plan.sessions, sockets, down, _protocols, _status)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.2)
