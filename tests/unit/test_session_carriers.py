"""Which SRX carries a flow, from two readings of the SRXs' conntrack counters (pure part)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from types import SimpleNamespace

import pytest

from lab_orchestrator.events import watch as eventwatch
from lab_orchestrator.events.sessions import Session, growth_carriers, udp_counts


def session(src: str, sport: int, packets: int, protocol: str = "udp") -> Session:
    return Session(protocol, "", src, "203.0.113.10", sport, 7000, "203.0.113.10", src, packets, packets * 100, 120)


def test_the_forwarding_node_carries_the_flow_not_its_peer_s_synced_copy() -> None:
    a, b = ("100.64.0.1", 1024), ("100.64.0.2", 1025)
    first = udp_counts({"srx1": [session(*a, 100)], "srx2": [session(*a, 90), session(*b, 50)],
                        "srx3": [session(*b, 40, protocol="tcp")]})
    assert first == {a: {"srx1": 100, "srx2": 90}, b: {"srx2": 50}}, "UDP sessions only"
    # srx1 forwards a (+20); the sync rewrote srx2's copy of it (+5); b stopped growing anywhere
    second = udp_counts({"srx1": [session(*a, 120)], "srx2": [session(*a, 95), session(*b, 50)]})
    assert growth_carriers(first, second) == {a: "srx1"}
    # a flow that appears between the readings counts from zero, and so does a session re-created
    # between them (a counter lower than before: the MNHA peer's push, or an expiry)
    third = udp_counts({"srx1": [session(*a, 110)], "srx4": [session("100.64.0.3", 1026, 7)]})
    assert growth_carriers(second, third) == {a: "srx1", ("100.64.0.3", 1026): "srx4"}


def test_a_flow_seen_nowhere_is_looked_for_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """One reading can miss a carried flow (the peer's sync rewrote the counters): the runner samples
    again, up to three times, for the flows it is missing, and keeps what the first samples said."""
    a, b = ("100.64.0.1", 1024), ("100.64.0.2", 1025)
    readings = iter([{a: {"srx1": 10}, b: {"srx2": 10}}, {a: {"srx1": 20}, b: {"srx2": 10}},   # b missed
                     {a: {"srx1": 20}, b: {"srx2": 10}}, {a: {"srx3": 5}, b: {"srx2": 30}},    # b found
                     {a: {"srx1": 0}}, {a: {"srx1": 100}}])
    opened: list[object] = []

    @contextlib.contextmanager
    def reader(plan: object, flows: object) -> Iterator[Callable[[], object]]:
        opened.append(flows)
        yield lambda: next(readings)

    monkeypatch.setattr(eventwatch, "_flow_reader", reader)
    monkeypatch.setattr(eventwatch.time, "sleep", lambda s: None)
    flows = [flow(*a), flow(*b)]
    assert eventwatch.carriers(None, flows=flows) == {a: "srx1", b: "srx2"}  # type: ignore[arg-type]
    assert next(readings) == {a: {"srx1": 0}}, "no third sample once every flow has a carrier"
    assert opened == [flows], "one reader (its sockets) for all the samples"
    readings = iter([{a: {"srx1": 10}}, {a: {"srx1": 10}}] * 3)  # never growing
    assert eventwatch.carriers(None, flows=flows[:1]) == {}, "given up after three samples"  # type: ignore[arg-type]


def flow(src: str, sport: int) -> SimpleNamespace:
    return SimpleNamespace(src=src, dst="203.0.113.10", sport=sport, dport=7000)
