"""Receiver accounting (pure): per-flow loss, duplicates, reordering, gaps, latency, convergence."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .binding import Bindings
from .frames import HEADER, HEADER_LEN, MAGIC, MASK32


# --------------------------------------------------------------------------- receiver accounting
class FlowStats:
    """Per-flow accounting of received (sequence, send time, receive time) triples; pure."""

    __slots__ = ("flow_id", "received", "next_seq", "holes", "duplicates", "reordered", "first_ts", "last_ts",
                 "max_gap", "max_gap_start", "first_rx", "last_rx", "lat_sum", "lat_min", "lat_max")

    def __init__(self, flow_id: int):
        self.flow_id = flow_id
        self.received = 0  # unique packets
        self.next_seq = 0  # highest sequence seen + 1
        self.holes: list[list[int]] = []  # missing [start, end) ranges, ascending
        self.duplicates = 0
        self.reordered = 0
        self.first_ts = -1  # send time of the first packet received
        self.last_ts = 0  # send time of the highest sequence received
        self.max_gap = 0  # ns, between consecutive in-order arrivals, on send times
        self.max_gap_start = 0  # send time of the packet before the longest gap
        self.first_rx = 0
        self.last_rx = 0
        self.lat_sum = 0
        self.lat_min = 1 << 62
        self.lat_max = 0

    def add(self, seq: int, ts: int, rx: int) -> None:
        self.last_rx = rx
        latency = rx - ts
        next_seq = self.next_seq
        if seq >= next_seq:
            if seq > next_seq:
                self.holes.append([next_seq, seq])
            if self.received:
                gap = ts - self.last_ts
                if gap > self.max_gap:
                    self.max_gap = gap
                    self.max_gap_start = self.last_ts
            else:
                self.first_ts = ts
                self.first_rx = rx
            self.next_seq = seq + 1
            self.last_ts = ts
        elif not self._fill(seq):
            self.duplicates += 1
            return
        else:
            self.reordered += 1
        self.received += 1
        self.lat_sum += latency
        if latency < self.lat_min:
            self.lat_min = latency
        if latency > self.lat_max:
            self.lat_max = latency

    def _fill(self, seq: int) -> bool:
        """Take SEQ out of the missing ranges; False if it was not missing (a duplicate)."""
        holes = self.holes
        for index in range(len(holes) - 1, -1, -1):  # late packets are usually recent
            start, end = holes[index]
            if seq >= end:
                return False
            if seq >= start:
                if start == seq and end == seq + 1:
                    del holes[index]
                elif seq == start:
                    holes[index][0] = seq + 1
                elif seq == end - 1:
                    holes[index][1] = seq
                else:
                    holes[index:index + 1] = [[start, seq], [seq + 1, end]]
                return True
        return False

    def state(self) -> list[Any]:
        """Everything this object knows, JSON-ready (to carry it out of a child process)."""
        return [getattr(self, name) for name in self.__slots__]

    @classmethod
    def from_state(cls, state: Sequence[Any]) -> FlowStats:
        stats = cls(int(state[0]))
        for name, value in zip(cls.__slots__, state, strict=True):
            setattr(stats, name, value)
        return stats

    def lost(self, sent: int | None = None) -> int:
        missing = sum(end - start for start, end in self.holes)
        if sent is not None and sent > self.next_seq:
            missing += sent - self.next_seq
        return missing

    def estimated_rate(self) -> float | None:
        """Packets/s from the send times of the first and highest sequence received."""
        if self.received < 2 or self.last_ts <= self.first_ts:
            return None
        first_seq = self.holes[0][1] if self.holes and self.holes[0][0] == 0 else 0
        span = self.next_seq - 1 - first_seq
        return span * 1e9 / (self.last_ts - self.first_ts) if span > 0 else None

    def report(self, rate: float | None = None, sent: int | None = None, end_ts: int | None = None
               ) -> dict[str, Any]:
        """JSON-ready figures; RATE (pps of this flow) turns loss into convergence time, SENT adds
        the tail loss, END_TS (the sender's end) extends the longest gap to a silent tail."""
        lost = self.lost(sent)
        max_gap, gap_start = self.max_gap, self.max_gap_start
        if (end_ts is not None and sent is not None and sent > self.next_seq and self.received
                and end_ts - self.last_ts > max_gap):
            max_gap, gap_start = end_ts - self.last_ts, self.last_ts
        used_rate = rate if rate else self.estimated_rate()
        return {
            "flow": self.flow_id, "received": self.received, "lost": lost, "duplicates": self.duplicates,
            "reordered": self.reordered,
            "convergence_ms": round(lost / used_rate * 1000, 3) if used_rate else None,
            "max_gap_ms": round(max_gap / 1e6, 3), "max_gap_start_ns": gap_start if max_gap else None,
            "first_seen_ns": self.first_rx if self.received else None,
            "last_seen_ns": self.last_rx if self.received else None,
            "latency_us": ({"min": round(self.lat_min / 1e3, 1), "avg": round(self.lat_sum / self.received / 1e3, 1),
                            "max": round(self.lat_max / 1e3, 1)} if self.received else None),
        }


def restore_timestamp(ts32: int, rx_ns: int) -> int:
    """The full send time whose low 32 bits are TS32, latest not after RX_NS (same clock)."""
    return rx_ns - ((rx_ns - ts32) & MASK32)


class Accounting:
    """All flows of one receiver: feed it payloads (header at OFFSET) or decoded fields."""

    def __init__(self) -> None:
        self.flows: dict[int, FlowStats] = {}
        self.foreign = 0  # datagrams without our magic
        self.first_rx: int | None = None
        self.last_rx: int | None = None
        self.bindings = Bindings()  # packet mode: each flow's source address:port as received

    def state(self) -> dict[str, Any]:
        return {"foreign": self.foreign, "first_rx": self.first_rx, "last_rx": self.last_rx,
                "flows": [f.state() for f in self.flows.values()], "bindings": self.bindings.state()}

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Accounting:
        acc = cls()
        acc.foreign, acc.first_rx, acc.last_rx = state["foreign"], state["first_rx"], state["last_rx"]
        for item in state["flows"]:
            stats = FlowStats.from_state(item)
            acc.flows[stats.flow_id] = stats
        acc.bindings = Bindings.from_state(state.get("bindings", {}))
        return acc

    def add(self, flow_id: int, seq: int, ts: int, rx: int) -> None:
        stats = self.flows.get(flow_id)
        if stats is None:
            stats = self.flows[flow_id] = FlowStats(flow_id)
        stats.add(seq, ts, rx)

    def add_payload(self, data: bytes | bytearray | memoryview, rx: int, offset: int = 0) -> bool:
        if len(data) < offset + HEADER_LEN:
            self.foreign += 1
            return False
        magic, flow_id, seq, ts32 = HEADER.unpack_from(data, offset)
        if magic != MAGIC:
            self.foreign += 1
            return False
        self.add(flow_id, seq, restore_timestamp(ts32, rx), rx)
        return True

    def report(self, rate_per_flow: float | None = None, sent: dict[str, Any] | None = None,
               expected_flows: Sequence[int] | None = None) -> dict[str, Any]:
        """Per-flow figures and a summary. SENT: a sender's report (its per-flow counts add tail
        loss, its per-flow rate is used when RATE_PER_FLOW is not given); EXPECTED_FLOWS: flow
        ids that count as fully lost when never seen (default: those in SENT)."""
        counts: dict[int, int] = {}
        end_ts = None
        if sent is not None:
            counts = {int(k): int(v) for k, v in sent.get("per_flow_sent", {}).items()}
            end_ts = sent.get("end_ns")
            if not rate_per_flow:
                rate_per_flow = sent.get("per_flow_pps") or None
        ids = set(self.flows) | set(expected_flows if expected_flows is not None else counts)
        flows = []
        for flow_id in sorted(ids):
            stats = self.flows.get(flow_id) or FlowStats(flow_id)
            flows.append({**stats.report(rate_per_flow, counts.get(flow_id), end_ts),
                          **self.bindings.report(flow_id)})
        received = sum(f["received"] for f in flows)
        convergence = [f["convergence_ms"] for f in flows if f["convergence_ms"] is not None]
        gaps = [f["max_gap_ms"] for f in flows if f["received"]]
        span = (self.last_rx - self.first_rx) / 1e9 if self.first_rx and self.last_rx else 0.0
        return {
            "role": "receive", "flows": len(flows), "received": received,
            "lost": sum(f["lost"] for f in flows), "duplicates": sum(f["duplicates"] for f in flows),
            "reordered": sum(f["reordered"] for f in flows), "foreign": self.foreign,
            "flows_with_loss": sum(1 for f in flows if f["lost"]),
            "flows_never_seen": sum(1 for f in flows if not f["received"]),
            "flows_rebound": sum(1 for f in flows if f.get("binding_changes")),
            "rate_per_flow_pps": rate_per_flow,
            "resolution_ms": round(1000 / rate_per_flow, 3) if rate_per_flow else None,
            "convergence_ms": ({"min": min(convergence), "avg": round(sum(convergence) / len(convergence), 3),
                                "max": max(convergence)} if convergence else None),
            "max_gap_ms": max(gaps) if gaps else None,
            "first_seen_ns": self.first_rx, "last_seen_ns": self.last_rx,
            "pps": received / span if span > 0 else 0.0,
            "per_flow": flows,
        }
