"""SRD (Services Redundancy Daemon) mastership of a dual-MX pair: pure, no I/O.

The election is MNHA's SRG1 election (dataplane.mnha.Srg1: priorities, preemption, a monitored-link
failure makes a node ineligible, a silent peer is taken as gone), plus the CLI switchover:
`request services redundancy-set id 1 switchover` on the master releases mastership (its priority
drops under the peer's), on the standby acquires it (its priority rises over the peer's and it takes
over at once). The new priorities stay, so a switchover holds whatever the preemption setting.
"""

from __future__ import annotations

from dataclasses import dataclass

from .mnha import PeerView, Role, Srg1


@dataclass
class Mastership(Srg1):
    def switchover(self, peer: PeerView, now: float = 0.0) -> Role:
        if self.role is Role.ACTIVE:
            self.priority = max(1, min(self.priority, peer.priority) - 1)
            return self._set(Role.BACKUP, "CLI switchover: mastership released", now)
        self.priority = min(255, max(self.priority, peer.priority) + 1)
        return self._set(Role.ACTIVE, "CLI switchover: mastership acquired", now)

    @property
    def master(self) -> bool:
        return self.role is Role.ACTIVE
