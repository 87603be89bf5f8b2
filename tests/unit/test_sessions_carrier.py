"""Which SRX carries a flow, from two reads of the SRXs' session counters (pure)."""

from __future__ import annotations

from lab_orchestrator.events.sessions import carrier


def test_the_session_that_grew_carries_the_flow() -> None:
    assert carrier({"srx1": 100, "srx2": 40}, {"srx1": 120, "srx2": 40}) == "srx1"
    assert carrier({"srx1": 100}, {"srx1": 100, "srx2": 15}) == "srx2"  # a session opened since
    assert carrier({"srx1": 100, "srx2": 40}, {"srx1": 100, "srx2": 40}) is None  # nothing moved
    assert carrier({}, {}) is None


def test_a_session_opened_anew_between_the_reads_counts_what_it_has_now() -> None:
    # the MNHA peer's table push re-created srx1's live session (its counter starts over): it is
    # still srx1 that carries the flow, not "nobody"
    assert carrier({"srx1": 5000, "srx2": 0}, {"srx1": 18, "srx2": 0}) == "srx1"
    # a re-created copy that sees no packet does not take the flow from the one that grows
    assert carrier({"srx1": 5000, "srx2": 300}, {"srx1": 5020, "srx2": 0}) == "srx1"
