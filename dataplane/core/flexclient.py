"""The IOS-like FlexVPN client (pure core): peer choice, dead peer detection, status and `show` text.

What Cisco's FlexVPN IKEv2 load balancer guide configures on a client router:

    crypto ikev2 client flexvpn flex_client
     peer 1 10.10.10.100
     client connect Tunnel1
    interface Tunnel1
     ip address negotiated
     tunnel destination dynamic

The client connects to its first peer (the cluster VIP), follows the master's REDIRECT (RFC 5685) to a
member, gets an address for Tunnel1 from that member's pool (`ip address negotiated`), and its
CHILD_SA carries what is routed into Tunnel1. Dead peer detection as `crypto ikev2 dpd INTERVAL RETRY
periodic`: when nothing came from the gateway for INTERVAL seconds, an empty INFORMATIONAL request is
sent; unanswered, it is sent again every RETRY seconds, and after `DPD_RETRIES` more the peer is dead:
the tunnel goes down and the client starts over with the first peer of its list (the VIP), so the
master redirects it to a live member. A peer that does not answer at all is skipped for the next
one in the list; after a whole round the client waits (1 s, doubling, at most 10 s) and starts again.

`dataplane.daemons.flexclientd` is the daemon around this (sockets, the TUN device, the event loop).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from labkit.flexstatus import FlexclientStatus, Ikev2Status

DPD_RETRIES = 5  # IOS retransmits an unanswered liveness check five times before the peer is dead
BACKOFF_FIRST, BACKOFF_MAX = 1.0, 10.0
HISTORY = 20  # connection events kept in the status


class Liveness:
    """Periodic dead peer detection: `poll` says when to send a liveness request ("probe"), send it
    again ("retransmit"), or that the peer is dead ("dead"); `heard` is anything valid from the peer."""

    def __init__(self, interval: float, retry: float, now: float, retries: int = DPD_RETRIES):
        self.interval, self.retry, self.retries = interval, retry, retries
        self.next_at = now + interval
        self.waiting = False
        self.tries = 0
        self.probes = 0

    def heard(self, now: float) -> None:
        self.waiting = False
        self.tries = 0
        self.next_at = now + self.interval

    def poll(self, now: float) -> str | None:
        if now < self.next_at:
            return None
        self.next_at = now + self.retry
        if not self.waiting:
            self.waiting = True
            self.tries = 0
            self.probes += 1
            return "probe"
        if self.tries >= self.retries:
            return "dead"
        self.tries += 1
        return "retransmit"


@dataclass
class PeerList:
    """`peer N ADDRESS` in order: where the next connection attempt goes and how long to wait first."""

    peers: list[str]
    index: int = 0
    failures_in_round: int = 0
    backoff: float = 0.0

    def current(self) -> str:
        return self.peers[self.index]

    def failed(self) -> float:
        """The current peer did not answer: move to the next; the seconds to wait before trying it."""
        self.index = (self.index + 1) % len(self.peers)
        self.failures_in_round += 1
        if self.failures_in_round < len(self.peers):
            return 0.0
        self.failures_in_round = 0
        self.backoff = BACKOFF_FIRST if self.backoff == 0 else min(BACKOFF_MAX, self.backoff * 2)
        return self.backoff

    def connected(self) -> None:
        self.failures_in_round = 0
        self.backoff = 0.0

    def restart(self) -> None:
        """After a dead peer: back to the first peer (the cluster VIP)."""
        self.index = 0
        self.failures_in_round = 0


@dataclass
class ClientStatus:
    """What the daemon publishes in `ikev2-status.json` under `client` (and `show` reads)."""

    name: str
    interface: str
    peers: list[str]
    state: str = "connecting"  # connecting | up | down
    gateway: str | None = None  # the member the IKE SA is with
    redirected_from: str | None = None  # the address that redirected us there (the VIP)
    path: list[str] = field(default_factory=list)
    address: str | None = None
    local: str | None = None
    up_since: float | None = None
    connects: int = 0
    dead_peers: int = 0
    last_error: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)

    def event(self, what: str, wall: float | None = None, **details: Any) -> None:
        self.history.append({"at": round(time.time() if wall is None else wall, 3), "event": what, **details})
        del self.history[:-HISTORY]

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


# ------------------------------------------------------------------------------------------ show
def show_session(status: Ikev2Status | None) -> str:
    """`show crypto session` (IOS layout) from an `ikev2-status.json`: a client's one session, or a
    gateway's sessions (one per Virtual-Access)."""
    lines = ["Crypto session current status", ""]
    if status is None:
        return "\n".join(lines) + "\n"
    if isinstance(status, FlexclientStatus):
        client = status.client
        if client.state != "up":
            lines += [f"Interface: {client.interface}", "Session status: DOWN",
                      f"Peer: {(client.peers or ['-'])[0]} port 500", ""]
            return "\n".join(lines) + "\n"
        sa = status.sas[0] if status.sas else None
        lines += [f"Interface: {client.interface}", "Profile: default", "Session status: UP-ACTIVE",
                  f"Peer: {client.gateway} port 4500",
                  "  Session ID: 1",
                  f"  IKEv2 SA: local {sa.local if sa else '-'} remote {sa.remote if sa else '-'} Active",
                  f"  IPSEC FLOW: permit ip host {client.address} 0.0.0.0/0.0.0.0",
                  f"        Active SAs: {2 if status.ipsec_sas else 0}, origin: crypto map"]
        if client.redirected_from:
            lines.append(f"  Redirected from: {client.redirected_from}")
        return "\n".join(lines) + "\n\n"
    for index, gsa in enumerate(s for s in status.sas if s.state == "READY"):
        address, port = gsa.remote.split("/")[0], gsa.remote.split("/")[-1]
        lines += [f"Interface: Virtual-Access{index + 1}", "Profile: default", "Session status: UP-ACTIVE",
                  f"Peer: {address} port {port}",
                  f"  Session ID: {gsa.id}",
                  f"  IKEv2 SA: local {gsa.local} remote {gsa.remote} Active"]
        if gsa.address:
            lines.append(f"  IPSEC FLOW: permit ip 0.0.0.0/0.0.0.0 host {gsa.address}")
        installed = gsa.child is not None and gsa.child.installed
        lines.append(f"        Active SAs: {2 if installed else 0}, origin: crypto map")
        if gsa.redirected_from:
            lines.append(f"  Redirected from: {gsa.redirected_from}")
        lines.append("")
    return "\n".join(lines) + "\n"
