"""BGP must be whole before an event starts: sessions Established, no graceful restart recovering."""

from __future__ import annotations

from lab_orchestrator.plan.plantypes import BgpSession
from lab_orchestrator.runtime import bgpready
from labkit import birdctl


def session(node: str, peer: str, protocol: str, ns: str | None = None) -> BgpSession:
    return BgpSession(ns=ns or f"l-{node}", node=node, instance=None, protocol=protocol, local_address="10.0.0.1",
                      local_as=65001, peer_address="10.0.0.2", peer_as=65002, peer_node=peer, zone=None)


SESSIONS = [session("mx1", "srx1", "srx1"), session("mx1", "srx2", "srx2"), session("srx1", "mx1", "mx1"),
            session("srx2", "mx1", "mx1")]
SOCKETS = {"l-mx1": "mx1.ctl", "l-srx1": "srx1.ctl", "l-srx2": "srx2.ctl"}


RUNNING = ["BIRD 2.0.12", "Daemon is up and running"]


def reader(states: dict[str, dict[str, str]], status: dict[str, list[str]] | None = None):  # type: ignore[no-untyped-def]
    return (lambda sock: states[sock]), (lambda sock: (status or {}).get(sock, RUNNING))


def test_all_established_and_no_recovery_is_whole() -> None:
    up = {"mx1.ctl": {"srx1": "Established", "srx2": "Established"}, "srx1.ctl": {"mx1": "Established"},
          "srx2.ctl": {"mx1": "Established"}}
    assert bgpready.pending(SESSIONS, SOCKETS, set(), *reader(up)) == []


def test_a_session_not_established_is_named() -> None:
    up = {"mx1.ctl": {"srx1": "Established", "srx2": "Active"}, "srx1.ctl": {"mx1": "Established"},
          "srx2.ctl": {"mx1": "Connect"}}
    assert bgpready.pending(SESSIONS, SOCKETS, set(), *reader(up)) == ["mx1 srx2 Active", "srx2 mx1 Connect"]


def test_sessions_of_a_node_out_of_service_are_not_waited_for() -> None:
    up = {"mx1.ctl": {"srx1": "Established", "srx2": "Active"}, "srx1.ctl": {"mx1": "Established"},
          "srx2.ctl": {}}
    assert bgpready.pending(SESSIONS, SOCKETS, {"srx2"}, *reader(up)) == []


def test_a_bird_still_in_graceful_restart_recovery_is_not_whole() -> None:
    up = {"mx1.ctl": {"srx1": "Established", "srx2": "Established"}, "srx1.ctl": {"mx1": "Established"},
          "srx2.ctl": {"mx1": "Established"}}
    status = {"mx1.ctl": ["BIRD 2.0.12", "Graceful restart recovery in progress", "  Waiting for 1 channels"]}
    assert bgpready.pending(SESSIONS, SOCKETS, set(), *reader(up, status)) == [
        "mx1: BGP graceful restart still recovering"]


def test_an_unreachable_bird_is_pending() -> None:
    def gone(sock: str) -> dict[str, str]:
        raise birdctl.BirdError(f"cannot reach BIRD at {sock}")

    assert bgpready.pending(SESSIONS[:2], SOCKETS, set(), gone, lambda s: []) == ["cannot reach BIRD at mx1.ctl"]
