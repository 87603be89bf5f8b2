"""The anti-replay window of an inbound ESP SA (RFC 4303 section 3.4.3), 32-bit sequence numbers.

`check` is asked before the integrity check (cheap rejection of replays and of packets left of the
window); `accept` is called only once the ICV verified, so a forged packet cannot move the window.
"""

from __future__ import annotations


class ReplayWindow:
    def __init__(self, size: int = 1024):
        if size < 32:
            raise ValueError("an anti-replay window holds at least 32 packets")
        self.size = size
        self.top = 0  # highest sequence number accepted so far (0: none yet)
        self.bits = 0  # bit i set: sequence number top - i was accepted

    def check(self, seq: int) -> bool:
        """Whether a packet with this sequence number may be new (not yet verified)."""
        if seq == 0:
            return False  # never sent: the first packet carries 1
        if seq > self.top:
            return True
        offset = self.top - seq
        if offset >= self.size:
            return False
        return not (self.bits >> offset) & 1

    def accept(self, seq: int) -> None:
        """Record a verified packet's sequence number."""
        if seq > self.top:
            shift = seq - self.top
            self.bits = ((self.bits << shift) | 1) & ((1 << self.size) - 1) if shift < self.size else 1
            self.top = seq
        else:
            self.bits |= 1 << (self.top - seq)
