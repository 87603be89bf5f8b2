"""SRD (Services Redundancy Daemon) mastership of a dual-MX pair: pure, no I/O.

The election is MNHA's SRG1 election (dataplane.core.mnha.Srg1: priorities, preemption, a monitored-link
failure makes a node ineligible, a silent peer is taken as gone), plus the CLI switchover:
`request services redundancy-set id 1 switchover` on the master releases mastership (its priority
drops under the peer's), on the standby acquires it (its priority rises over the peer's and it takes
over at once). The new priorities stay, so a switchover holds whatever the preemption setting.

A failure both MXs see moves nothing: every MX has a link to every SRX, so an SRX (or a whole MNHA
pair) powering off takes a monitored link from both at once. Moving mastership then gains nothing and
costs a lot: both MXs giving it up would advertise with the same prepend, the gateways would spread
the traffic over both MXs and every flow would cross the standby's selector. So while both are
unhealthy the roles stay as they are. As the two learn of the failure a heartbeat apart, a change of
health (own or the peer's) settles for HOLD_S before it moves mastership: the daemon sends a
heartbeat at once on a change of its own health, so the peer's view arrives well within it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .mnha import PeerView, Role, Srg1


@dataclass
class Mastership(Srg1):
    hold_s: float = 0.0  # a change of health settles this long before it moves mastership
    _inputs: tuple[bool, bool, bool] | None = field(default=None, init=False, repr=False)
    _since: float = field(default=0.0, init=False, repr=False)

    def decide(self, healthy: bool, peer: PeerView, peer_seen_in_network: bool, now: float = 0.0) -> Role:
        peer_healthy = peer.healthy and peer.role is not Role.INELIGIBLE
        inputs = (healthy, peer.alive, peer_healthy)
        if inputs != self._inputs:
            self._inputs, self._since = inputs, now
        settled = self.role in (Role.ACTIVE, Role.BACKUP) and peer.alive
        if settled and self.hold_s and now - self._since < self.hold_s:
            return self.role  # the peer may be about to report the same failure
        if settled and not healthy and not peer_healthy:
            return self._set(self.role, "both MXs lost monitored links: mastership kept", now)
        return super().decide(healthy, peer, peer_seen_in_network, now)

    def switchover(self, peer: PeerView, now: float = 0.0) -> Role:
        if self.role is Role.ACTIVE:
            self.priority = max(1, min(self.priority, peer.priority) - 1)
            return self._set(Role.BACKUP, "CLI switchover: mastership released", now)
        self.priority = min(255, max(self.priority, peer.priority) + 1)
        return self._set(Role.ACTIVE, "CLI switchover: mastership acquired", now)

    @property
    def master(self) -> bool:
        return self.role is Role.ACTIVE
