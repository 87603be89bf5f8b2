"""MNHA session sync: the cold-sync handshake, the refresh windows, the heartbeat's sync flags,
conntrackd's counters and the acknowledged cold sync (dataplane.core.mnha.SessionSync,
dataplane.daemons.mnhad)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from dataplane.core.mnha import (
    SYNC_AWAITING,
    SYNC_DONE,
    SYNC_SENDING,
    PeerView,
    Role,
    SessionSync,
    Srg1,
    decode_heartbeat,
    decode_heartbeat_full,
    encode_heartbeat,
    refresh_windows,
)
from dataplane.daemons import mnhad, syncclient

CONFIG = "/run/lab/x/nodes/srx1/conntrackd.conf"


def test_a_starting_node_waits_until_the_peer_says_its_table_is_acknowledged() -> None:
    sync = SessionSync(15.0, 450.0, hold_cap=60.0)
    sync.start(100.0, awaiting=True)
    assert sync.flags() == SYNC_AWAITING
    assert sync.tick(100.5, True, 0, start_window=1.0) is None and sync.awaiting  # peer not answering yet
    assert sync.tick(101.0, True, SYNC_SENDING, 1.0) is None and sync.awaiting
    sync.tick(103.25, True, SYNC_DONE, 1.0)
    assert not sync.awaiting and sync.awaited_s == 3.25 and sync.flags() == 0
    assert sync.wait_ended == "received"


def test_a_starting_node_alone_or_waiting_too_long_stops_waiting() -> None:
    alone = SessionSync(15.0, 450.0)
    alone.start(0.0, awaiting=True)
    alone.tick(0.0, False, 0, start_window=1.0)  # the ICL up from the start
    alone.tick(0.5, False, 0, start_window=1.0)
    assert alone.awaiting, "the peer's heartbeats may not have arrived yet"
    alone.tick(1.5, False, 0, start_window=1.0)
    assert not alone.awaiting and alone.wait_ended == "no peer"
    slow = SessionSync(15.0, 450.0, hold_cap=60.0)
    slow.start(0.0, awaiting=True)
    slow.tick(59.0, True, SYNC_SENDING, 1.0)
    assert slow.awaiting
    slow.tick(60.5, True, SYNC_SENDING, 1.0)
    assert not slow.awaiting and slow.awaited_s == 60.5 and slow.wait_ended == "timed out", "not a complete one"
    slow.start(70.0, awaiting=True)
    assert slow.wait_ended is None, "a new wait has no outcome yet"


def test_the_peer_gets_one_cold_sync_per_request() -> None:
    sync = SessionSync(15.0, 450.0)
    sync.start(0.0, awaiting=False)
    assert sync.tick(10.0, True, 0, 1.0) is None, "a peer that does not ask gets nothing"
    assert sync.tick(11.0, True, SYNC_AWAITING, 1.0) == "cold"
    assert sync.flags() == SYNC_SENDING
    assert sync.tick(11.1, True, SYNC_AWAITING, 1.0) is None  # one at a time
    sync.finished(2.5, 1000, ok=True)
    assert sync.flags() == SYNC_DONE and sync.cold_syncs == 1 and sync.last_cold_s == 2.5
    assert sync.tick(13.7, True, SYNC_AWAITING, 1.0) is None, "answered: the peer's flag lags a beat"
    sync.tick(14.0, True, 0, 1.0)  # the peer stopped waiting
    assert sync.flags() == 0
    assert sync.tick(50.0, False, 0, 1.0) is None
    assert sync.tick(60.0, True, SYNC_AWAITING, 1.0) == "cold", "a peer that returns again asks again"
    sync.finished(120.0, None, ok=False)
    assert sync.flags() == SYNC_AWAITING and sync.cold_syncs == 1  # it waits for the peer's table too
    assert sync.tick(180.0, True, SYNC_AWAITING, 1.0) == "cold", "a failed cold sync is tried again"


def test_refresh_windows_follow_the_timeouts_and_the_epochs_flip_once_per_window() -> None:
    assert refresh_windows(60, 1800) == (15.0, 450.0)
    assert refresh_windows(2, 1_000_000) == (1.0, 600.0)
    sync = SessionSync(15.0, 450.0)
    parities = [sync.epochs(float(t))[0] for t in range(0, 60)]
    flips = sum(1 for a, b in zip(parities, parities[1:], strict=False) if a != b)
    assert flips == 3  # at 15, 30 and 45 s
    assert sync.epochs(449.0)[1] != sync.epochs(451.0)[1]


def test_the_refresh_rule_sets_each_protocols_bit_to_its_parity() -> None:
    text = mnhad.refresh_rules(1, 0)
    udp_bit, tcp_bit = mnhad.REFRESH_BITS
    assert f"meta l4proto != tcp ct mark set ct mark or {udp_bit:#x}" in text
    assert f"meta l4proto tcp ct mark set ct mark and {0xFFFFFFFF ^ tcp_bit:#x}" in text
    assert "ct state established" in text and "hook prerouting priority -150" in text
    # one table for both families: an IPv6 session's copy (and a NAT64 session's IPv6 side) is kept too
    assert text.startswith("table inet mnha_refresh {")


def test_heartbeat_version_3_carries_the_sync_flags_and_older_versions_none() -> None:
    data = encode_heartbeat("srx1", Role.BACKUP, 100, True, 7, None, SYNC_AWAITING | SYNC_DONE)
    assert data[4] == 3
    assert decode_heartbeat_full(data) == ("srx1", Role.BACKUP, 100, True, 7, Role.INIT, 0, SYNC_AWAITING | SYNC_DONE)
    assert decode_heartbeat(data) == ("srx1", Role.BACKUP, 100, True, 7)
    both = encode_heartbeat("srx2", Role.ACTIVE, 200, True, 8, (Role.BACKUP, 100), 0)
    assert decode_heartbeat_full(both)[5:] == (Role.BACKUP, 100, 0)
    assert decode_heartbeat_full(encode_heartbeat("srx2", Role.ACTIVE, 200, True, 8))[7] == 0


def test_a_waiting_node_takes_no_activeness_while_its_peer_can_carry_the_traffic() -> None:
    group = Srg1("srx1", "srx2", 200, True)
    peer = PeerView(True, Role.ACTIVE, 100, True)
    assert group.hold(True, peer, 1.0) is Role.BACKUP
    assert group.transitions[-1][2] == "cold sync from the peer not complete"
    assert group.hold(True, PeerView(True, Role.INELIGIBLE, 100, False), 2.0) is None
    assert group.hold(True, PeerView(False), 2.0) is None
    assert group.decide(True, peer, True, 3.0) is Role.ACTIVE  # the wait over: it preempts
    assert group.hold(True, peer, 4.0) is None, "an active node keeps its activeness"


STATS = """cache internal:
current active connections:	         300
connections created:		         300	failed:	           0
connections updated:		           4	failed:	           0
connections destroyed:		           0	failed:	           0

external inject:
connections created:		         600	failed:	           2
connections updated:		          10	failed:	           0
connections destroyed:		           5	failed:	           0

traffic processed:
                   0 Bytes                         0 Pckts

UDP traffic (active device=icl):
               68432 Bytes sent                   64 Bytes recv
                 334 Pckts sent                    4 Pckts recv
                   0 Error send                    1 Error recv

message tracking:
                   0 Malformed msgs                    3 Lost msgs
"""
QUEUE = """allocated queue nodes:		           1

queue txqueue:
current elements:		           0
maximum elements:		  2147483647
not enough space errors:	           0

queue rsqueue:
current elements:		         301
maximum elements:		      131072
not enough space errors:	           0
"""

NETWORK = """network statistics:
	recv:
		Malformed messages:	                   0
		Wrong protocol version:	                   0
		Malformed header:	                   0
		Malformed payload:	                   0
		Bad message type:	                   0
		Truncated message:	                   0
		Bad message size:	                   0
	send:
		Malformed messages:	                   0

sequence tracking statistics:
	recv:
		Packets lost:		                   3
		Packets before:		                   7

UDP traffic (active device=lo):
                 416 Bytes sent                   16 Bytes recv
                   7 Pckts sent                    1 Pckts recv
                   0 Error send                    0 Error recv
"""


def test_conntrackd_counters_are_read() -> None:
    stats = syncclient.parse_stats(STATS)
    assert stats["cache_active"] == 300
    assert (stats["inject_created"], stats["inject_created_failed"], stats["inject_destroyed"]) == (600, 2, 5)
    assert (stats["packets_sent"], stats["packets_received"], stats["bytes_sent"]) == (334, 4, 68432)
    assert (stats["receive_errors"], stats["lost"], stats["malformed"]) == (1, 3, 0)
    assert stats["cache_events"] == 304  # created + updated + destroyed: one message each
    assert syncclient.parse_stats(QUEUE) == {"txqueue": 0, "rsqueue": 301}
    assert syncclient.parse_stats("") == {}
    assert syncclient.parse_stats(NETWORK)["before"] == 7  # `conntrackd -s network` as conntrackd 1.4.7 prints it


def test_messages_dropped_as_older_are_a_sync_problem() -> None:
    from lab_orchestrator.runtime.status import sync_problems

    healthy = {"daemon_answering": True, "errors": 0, "lost": 0, "stale": 0, "resend_queue": 0}
    assert sync_problems(healthy, 1.0) == []
    assert sync_problems({**healthy, "stale": 7}, 1.0) == [
        "7 sync messages from the peer dropped as older than the last accepted"]


def test_a_cold_sync_that_timed_out_is_a_sync_problem_until_one_completes() -> None:
    from lab_orchestrator.runtime.status import sync_problems

    healthy = {"daemon_answering": True, "errors": 0, "lost": 0, "stale": 0, "resend_queue": 0}
    timed_out = {**healthy, "awaited_s": 30.0, "cold_sync_ended": "timed out"}
    assert sync_problems(timed_out, 1.0) == [
        "the last cold sync timed out after 30.0 s: this node took over without its peer's sessions"]
    assert sync_problems({**timed_out, "cold_sync_ended": "received"}, 1.0) == []
    assert sync_problems({**timed_out, "cold_sync_ended": "no peer"}, 1.0) == []
    assert sync_problems({**timed_out, "awaiting_peer": True}, 1.0) == ["waiting for the peer's cold sync"]


def conntrackd_with(queues: list[int], updated: list[int], calls: list[tuple[str, ...]]) -> Any:
    """A fake conntrackd client whose queues (-s queue) and cache events (-s: 300 created, UPDATED
    updated, 0 destroyed) answer the given values in turn."""
    queue_values, updated_values = iter(queues), iter(updated)

    def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        assert argv[:3] == ["conntrackd", "-C", CONFIG]
        calls.append(tuple(argv[3:]))
        if argv[3:] == ["-s", "queue"]:
            return subprocess.CompletedProcess(argv, 0, QUEUE.replace("301", str(next(queue_values))), "")
        if argv[3:] == ["-s"]:
            return subprocess.CompletedProcess(argv, 0, STATS.replace(
                "updated:\t\t           4", f"updated:\t\t {next(updated_values):11d}"), "")
        return subprocess.CompletedProcess(argv, 0, "", "")
    return run


def test_a_cold_sync_sends_the_whole_kernel_table_and_waits_for_its_ack(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, ...]] = []
    # nothing queued before -B, no event since: done when at most one message is left
    monkeypatch.setattr(syncclient.subprocess, "run", conntrackd_with([0, 5000, 800, 1], [4] * 4, calls))
    monkeypatch.setattr(syncclient.time, "sleep", lambda _s: None)
    ok, _seconds, sessions = syncclient.cold_sync(CONFIG)
    assert ok and sessions == 300
    assert calls == [("-s", "queue"), ("-s",), ("-B",)] + [("-s",), ("-s", "queue")] * 3
    # to a peer that came back empty: the kernel's table read into the cache first (the copies of
    # the peer's sessions injected here, which this node may carry since, included)
    calls.clear()
    monkeypatch.setattr(syncclient.subprocess, "run", conntrackd_with([0, 1], [4] * 2, calls))
    assert syncclient.cold_sync(CONFIG, whole=True)[0]
    assert calls == [("-R",), ("-s", "queue"), ("-s",), ("-B",), ("-s",), ("-s", "queue")]


def test_a_cold_sync_is_acknowledged_while_the_node_keeps_sending_new_sessions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The queues are never empty on a node with traffic, and may keep a message lost while the ICL
    was cut: the sync is done once they hold no more than before -B plus what was queued since."""
    calls: list[tuple[str, ...]] = []
    # 7 queued before -B (one of them stuck); then 2, 8, 16 messages queued since -B
    run = conntrackd_with([7, 40, 17, 24], [4, 6, 12, 20], calls)
    monkeypatch.setattr(syncclient.subprocess, "run", run)
    monkeypatch.setattr(syncclient.time, "sleep", lambda _s: None)
    assert syncclient.cold_sync(CONFIG)[0]
    # (and at most one keep-alive within the first second)
    assert calls.count(("-s", "queue")) == 4, "not done at 40 > 7 + 2 + 1 nor 17 > 7 + 8 + 1; done at 24"


def test_an_idle_node_s_cold_sync_allows_for_its_keep_alives(monkeypatch: pytest.MonkeyPatch) -> None:
    """A node with no session to send queues a keep-alive a second, acknowledged only with a later
    session message: after N seconds, N + 1 may be left on top of what was queued before -B."""
    calls: list[tuple[str, ...]] = []
    clock = iter(range(1000))
    monkeypatch.setattr(syncclient.time, "monotonic", lambda: float(next(clock)) / 2)  # half a second a call
    monkeypatch.setattr(syncclient.subprocess, "run", conntrackd_with([30, 70, 36, 34], [4] * 4, calls))
    monkeypatch.setattr(syncclient.time, "sleep", lambda _s: None)
    assert syncclient.cold_sync(CONFIG)[0]
    assert calls.count(("-s", "queue")) == 4, "70 > 30 + 2 and 36 > 30 + 3 keep-alives; 34 <= 30 + 4 is done"


def test_a_cold_sync_that_cannot_send_or_is_never_acknowledged_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    def refused(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 1, "", "refused")

    monkeypatch.setattr(syncclient.subprocess, "run", refused)
    assert syncclient.cold_sync(CONFIG)[0] is False

    def stuck(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        out = QUEUE if argv[3:] == ["-s", "queue"] else STATS
        return subprocess.CompletedProcess(argv, 0, out.replace("301", "301" if calls else "0"), "")

    calls: list[int] = []
    monkeypatch.setattr(syncclient.subprocess, "run",
                        lambda argv, **kw: (calls.append(1) if argv[3:] == ["-B"] else None) or stuck(argv, **kw))
    monkeypatch.setattr(syncclient.time, "sleep", lambda _s: None)
    assert syncclient.cold_sync(CONFIG, limit_s=0.05)[0] is False


def test_a_peer_heard_again_after_it_was_lost_makes_this_node_wait_for_its_table() -> None:
    sync = SessionSync(15.0, 450.0)
    sync.start(0.0, awaiting=False)  # a restarted daemon that took up its role
    sync.tick(1.0, True, 0, 1.0)
    assert not sync.awaiting, "the first peer heard after a restart is not a return"
    sync.tick(10.0, False, 0, 1.0)
    sync.tick(20.0, True, 0, 1.0)  # the ICL back: sessions opened meanwhile on either side
    assert sync.awaiting and sync.flags() & SYNC_AWAITING
    sync.tick(20.5, True, SYNC_DONE, 1.0)
    assert not sync.awaiting and sync.awaited_s == 0.5


def test_a_node_of_a_syncing_pair_powers_on_with_every_route_prepended_until_its_cold_sync() -> None:
    from pathlib import Path

    from dataplane.core.mnha import COLD_SYNC_WAIT_NOTE
    from lab_orchestrator.model.validate import load_topology
    from lab_orchestrator.plan import pipeline
    from lab_orchestrator.plan.features import mnha

    path = Path(__file__).resolve().parents[2] / "labs" / "topology3-cgnat.yml"
    plan = pipeline.build(load_topology(path).topology, f"labs/{path.name}")
    boot = mnha.boot_role(plan, "srx1")
    assert boot is not None
    # nothing active, the signal-route branch (3x prepend) without the signal route: mnhad reads the
    # note and installs no signal route, then rewrites the include once the peer's table is here
    assert "SRG1_ACTIVE = 0;" in boot and "SRG2_ACTIVE = 0;" in boot
    assert f"SRG0_SIGNAL = 1;  # {COLD_SYNC_WAIT_NOTE}" in boot
    assert "SRG0_SIGNAL = 0;" in plan.files[mnha.role_file(plan, "srx1")], "lab up: nothing to wait for yet"
    assert mnha.boot_role(plan, "mx1") is None


def test_an_srg0_node_holds_its_routes_prepended_from_its_start_until_the_cold_sync() -> None:
    from dataplane.core.mnha import holds_routes

    # just started, the peer not heard yet: held (BGP may be up before the first heartbeat)
    assert holds_routes("srg0", awaiting=True, never_heard=True, peer_alive=False, peer_healthy=False)
    assert holds_routes("srg0", awaiting=True, never_heard=False, peer_alive=True, peer_healthy=True)
    # the table is here, the peer is gone or cannot carry the traffic: no hold
    assert not holds_routes("srg0", awaiting=False, never_heard=True, peer_alive=True, peer_healthy=True)
    assert not holds_routes("srg0", awaiting=True, never_heard=False, peer_alive=False, peer_healthy=False)
    assert not holds_routes("srg0", awaiting=True, never_heard=False, peer_alive=True, peer_healthy=False)
    assert not holds_routes("srg1", awaiting=True, never_heard=True, peer_alive=True, peer_healthy=True)
    # the two nodes hear each other again after their ICL was cut: both wait, neither withdraws its traffic
    assert not holds_routes("srg0", awaiting=True, never_heard=False, peer_alive=True, peer_healthy=True, mutual=True)


def test_a_wait_after_the_icl_returns_is_mutual_one_after_a_start_is_not() -> None:
    sync = SessionSync(15.0, 450.0)
    sync.start(0.0, awaiting=True)
    sync.tick(1.0, True, 0, 1.0, peer_instance=7)
    assert sync.awaiting and not sync.mutual, "a node that starts waits alone (its peer carries the traffic)"
    sync.tick(2.0, True, SYNC_DONE, 1.0, peer_instance=7)
    assert not sync.awaiting
    sync.tick(10.0, False, 0, 1.0, peer_instance=7, icl_up=False)
    sync.tick(20.0, True, SYNC_AWAITING, 1.0, peer_instance=7)
    assert sync.awaiting and sync.mutual
    sync.start(30.0, awaiting=True)
    assert not sync.mutual


def test_a_starting_node_waits_for_its_peer_while_the_icl_is_not_up_yet() -> None:
    sync = SessionSync(15.0, 450.0)
    sync.start(0.0, awaiting=True)
    sync.tick(5.0, False, 0, 1.0, icl_up=False)  # a routed ICL: BGP has not brought the peer's loopback
    assert sync.awaiting, "no peer heard over an ICL that is not there is no peer lost"
    sync.tick(5.5, False, 0, 1.0, icl_up=True)
    assert sync.awaiting, "the ICL just came up: the peer's heartbeats are on their way"
    sync.tick(6.6, False, 0, 1.0, icl_up=True)
    assert not sync.awaiting and sync.awaited_s == 6.6, "the ICL up for the start window, still no peer: alone"


def test_a_peer_back_as_a_new_instance_is_not_waited_for() -> None:
    """A peer that powered on starts empty and waits for this node's table: this node keeps its
    activeness (were both held, the empty node could win the traffic before its table arrived)."""
    sync = SessionSync(15.0, 450.0)
    sync.start(0.0, awaiting=False)
    sync.tick(1.0, True, 0, 1.0, peer_instance=0)
    sync.tick(10.0, False, 0, 1.0, peer_instance=0)  # powered off
    assert sync.tick(20.0, True, SYNC_AWAITING, 1.0, peer_instance=1) == "whole", "the whole table"
    assert not sync.awaiting and not sync.flags() & SYNC_AWAITING
    sync.finished(0.5, 10, True)
    assert not sync.peer_empty, "its later requests get the cache only"
    sync.tick(30.0, False, 0, 1.0, peer_instance=1)  # then its ICL is cut and comes back: a return
    sync.tick(40.0, True, 0, 1.0, peer_instance=1)
    assert sync.awaiting


def test_the_peer_link_counts_the_instances_of_the_peer_daemon_by_its_sequence_numbers() -> None:
    import socket
    import time

    from dataplane.daemons.daemonkit import PeerLink

    rx, tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM), socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    with rx, tx:
        rx.bind(("127.0.0.1", 0))
        rx.setblocking(False)
        tx.bind(("127.0.0.1", 0))
        link = PeerLink(rx, "srx1", "127.0.0.1")
        for seq in (1, 2, 3, 1, 2):  # the daemon restarted after its third heartbeat
            tx.sendto(encode_heartbeat("srx1", Role.ACTIVE, 200, True, seq), rx.getsockname())
        deadline = time.monotonic() + 2
        while link.received < 5 and time.monotonic() < deadline:
            link.drain(time.monotonic())
        assert link.received == 5 and link.instances == 1 and link.last_seq == 2


def test_a_cold_sync_on_the_wire_is_done_after_the_ack_wait_acknowledged_or_not(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A peer that found a gap in the sequence acknowledges nothing until a later session message: the
    sync does not wait for that longer than ACK_WAIT_S once every message is on the wire."""
    calls: list[tuple[str, ...]] = []
    clock = iter(range(1000))
    monkeypatch.setattr(syncclient.time, "monotonic", lambda: float(next(clock)) / 10)
    monkeypatch.setattr(syncclient.time, "sleep", lambda _s: None)
    monkeypatch.setattr(syncclient.subprocess, "run", conntrackd_with([0] + [500] * 100, [4] * 101, calls))
    ok, seconds, _sessions = syncclient.cold_sync(CONFIG)
    assert ok and syncclient.ACK_WAIT_S <= seconds < syncclient.ACK_WAIT_S + 0.5

    def transmitting(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        reads.append(1)
        queue = QUEUE.replace("current elements:\t\t           0", "current elements:\t\t         900")
        return subprocess.CompletedProcess(argv, 0, (queue if len(reads) > 1 else "") if argv[3:] == ["-s", "queue"]
                                           else STATS, "")

    reads: list[int] = []

    monkeypatch.setattr(syncclient.subprocess, "run", transmitting)
    assert syncclient.cold_sync(CONFIG, limit_s=5.0)[0] is False, "never on the wire: failed at the limit"


def _daemon(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, sync: bool,
            monitored: tuple[str, ...] = (), monitor: Any = None) -> tuple[mnhad.Daemon, Any]:
    """An mnhad on 127.0.0.2 whose heartbeats go to a socket of the test (the peer, 127.0.0.1)."""
    import socket

    peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    peer.bind(("127.0.0.1", 0))
    peer.setblocking(False)
    monkeypatch.setattr(mnhad, "PORT", peer.getsockname()[1])
    monkeypatch.setattr(mnhad, "bird_configure", lambda _sock: "Reconfigured")
    role = tmp_path / "mnha-role.conf"
    role.write_text("define SRG1_ACTIVE = 0;\ndefine SRG2_ACTIVE = 0;\ndefine SRG0_SIGNAL = 0;\n")
    config = mnhad.MnhaConfig(
        node="srx1", peer="srx2", mode="srg0", priority=200, srg2_priority=200, preempt=True,
        heartbeat_ms=1000, heartbeat_threshold=3, icl_dev="lo", local_ip="127.0.0.2", peer_ip="127.0.0.1",
        peer_loopback="127.0.0.1", icl_routed=["ge-0-0-4"], monitored=list(monitored), role_file=str(role),
        bird_socket=str(tmp_path / "bird.ctl"), status_file=str(tmp_path / "mnha-status.json"), monitor=monitor,
        signal_route="192.168.255.0", signal_table=50, sync_config=CONFIG if sync else None)
    daemon = mnhad.Daemon(config)
    return daemon, peer


def _heard(peer: Any) -> list[int]:
    """The sync flags of every heartbeat the peer received since the last call."""
    flags = []
    while True:
        try:
            data = peer.recv(512)
        except BlockingIOError:
            return flags
        flags.append(decode_heartbeat_full(data)[7])


def test_mnhad_sends_a_heartbeat_at_once_on_a_change_not_at_the_next_interval(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each step of the start-up handshake costs a round trip, not a heartbeat interval: a heartbeat
    goes out when the routed ICL comes up, when the peer is heard, when the sync flags change."""
    daemon, peer = _daemon(tmp_path, monkeypatch, sync=True)
    monkeypatch.setattr(mnhad, "set_refresh", lambda *_bits: True)
    icl = [False]
    monkeypatch.setattr(daemon, "icl_up", lambda: icl[0])
    started: list[tuple[bool]] = []  # the cold syncs the daemon starts (their thread is not run)

    class Thread:
        def __init__(self, target: Any, args: tuple[bool], daemon: bool) -> None:
            self.args = args

        def start(self) -> None:
            started.append(self.args)

    monkeypatch.setattr(mnhad.threading, "Thread", Thread)
    now = daemon.started
    daemon.tick(now, True)  # the first heartbeat, at start (a routed ICL: lost without a route)
    assert _heard(peer) == [SYNC_AWAITING]
    daemon.tick(now + 0.05, False)
    assert _heard(peer) == []  # nothing changed: nothing between intervals
    icl[0] = True  # BGP brought the peer's loopback
    daemon.tick(now + 0.1, False)
    assert _heard(peer) == [SYNC_AWAITING]  # at once, not up to an interval later
    daemon.tick(now + 0.15, False)
    assert _heard(peer) == []
    # the peer is heard, waiting for this node's table: one heartbeat with the cold sync running
    daemon.link.view, daemon.link.heard = PeerView(True, Role.ACTIVE, 100, True, sync=SYNC_AWAITING), now + 0.2
    daemon.tick(now + 0.2, False)
    assert started == [(False,)] and _heard(peer) == [SYNC_AWAITING | SYNC_SENDING]
    daemon.sync.finished(0.1, 0, ok=True)  # what the cold sync's thread does when it ends
    daemon.tick(now + 0.25, False)
    assert _heard(peer) == [SYNC_AWAITING | SYNC_DONE]
    daemon.link.view = PeerView(True, Role.ACTIVE, 100, True, sync=SYNC_DONE)  # the peer's table is here
    daemon.tick(now + 0.3, False)
    assert _heard(peer) == [0] and not daemon.sync.awaiting
    status = mnhad.MnhaStatus.model_validate_json((tmp_path / "mnha-status.json").read_text())
    assert status.sync is not None and not status.sync.awaiting_peer and status.heartbeat.peer_alive


def test_mnhad_writes_its_status_when_it_changes_between_heartbeats(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    daemon, peer = _daemon(tmp_path, monkeypatch, sync=False)
    monkeypatch.setattr(daemon, "icl_up", lambda: True)
    now = daemon.started
    daemon.tick(now, True)
    status_file = tmp_path / "mnha-status.json"
    assert not mnhad.MnhaStatus.model_validate_json(status_file.read_text()).heartbeat.peer_alive
    daemon.link.view, daemon.link.heard = PeerView(True, Role.ACTIVE, 100, True), now + 0.05
    daemon.tick(now + 0.05, False)
    assert mnhad.MnhaStatus.model_validate_json(status_file.read_text()).heartbeat.peer_alive
    assert len(_heard(peer)) == 2  # the first beat and the one telling the peer it is heard



def _trust_monitor() -> Any:
    from labkit.configs import MonitorConfig
    from labkit.configs import MonitorDestination as dest

    return MonitorConfig(object="trust", threshold=300, object_threshold=300, srg_threshold=300,
                               interval_ms=300, multiplier=3,
                               destinations=[dest(ip="198.18.0.8", src_ip="198.18.0.9", dev="ge-0-0-0",
                                                  interface="ge-0/0/0.0", weight=300, peer_node="mx1")])


def test_links_back_keep_every_route_prepended_until_bgp_routes_over_each(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """srx1's links to the MX go down (SRG0 loses activeness: every route prepended) and come back; its
    trust session comes up before its untrust one. Until the kernel has BGP routes over both links,
    BIRD keeps every route prepended: the short path on the trust side alone would draw forward
    traffic that srx1 cannot send on (and the other way round for the pool's return traffic)."""
    links = ("ge-0-0-0", "ge-0-0-1")
    carrier = dict.fromkeys(links, True)
    routed: set[str] = set()
    monkeypatch.setattr(mnhad, "has_carrier", lambda _sock, dev: carrier[dev])
    monkeypatch.setattr(mnhad, "routed_devices", lambda: set(routed))
    daemon, _peer = _daemon(tmp_path, monkeypatch, sync=False, monitored=links, monitor=_trust_monitor())
    role = Path(daemon.c.role_file)
    now = daemon.started + 10

    def tick() -> str:
        nonlocal now
        now += 1
        daemon.tick(now, send=False)
        return role.read_text()

    tick()
    assert daemon.routes_pending == list(links), "started: no BGP route over its links yet"
    assert json.loads(Path(daemon.c.status_file).read_text())["srg0"]["links_unrouted"] == list(links)
    routed.update(links)
    assert "SRG0_SIGNAL = 0" in tick() and daemon.routes_pending == []
    carrier.update(dict.fromkeys(links, False))
    routed.clear()
    assert "SRG0_SIGNAL = 1" in [tick() for _ in range(3)][-1], "SRG0 failed: every route prepended"
    carrier.update(dict.fromkeys(links, True))
    text = tick()
    assert not daemon.srg0_failed, "BFD liveliness is back with the carrier"
    assert "SRG0_SIGNAL = 1" in text and daemon.routes_pending == list(links)
    routed.add("ge-0-0-0")
    assert "SRG0_SIGNAL = 1" in tick() and daemon.routes_pending == ["ge-0-0-1"], "trust routed only"
    routed.add("ge-0-0-1")
    assert "SRG0_SIGNAL = 0" in tick(), "let go at once, on both sides"
    assert not daemon.signal_installed, "a hold, not the SRG0 signal route"
    # a link that comes back while the node announces its short paths: nothing is made longer
    carrier["ge-0-0-1"] = False
    routed.discard("ge-0-0-1")
    tick()
    carrier["ge-0-0-1"] = True
    assert "SRG0_SIGNAL = 0" in tick() and daemon.routes_pending == ["ge-0-0-1"]


@pytest.mark.skipif(shutil.which("nft") is None, reason="needs nft")
def test_the_refresh_rule_is_valid_nftables() -> None:
    result = subprocess.run(["nft", "-c", "-f", "-"], input=mnhad.refresh_rules(0, 1), capture_output=True, text=True)
    if result.returncode != 0 and "Operation not permitted" in result.stderr:
        pytest.skip("nft -c needs CAP_NET_ADMIN")
    assert result.returncode == 0, result.stderr


def test_an_empty_role_file_is_written_anew_at_the_first_tick(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A role file cut short (empty) keeps BIRD from starting: the daemon does not take it for "every
    group backup, no signal" (which would leave it as it is while nothing changes) but writes it."""
    monkeypatch.setattr(mnhad, "has_carrier", lambda _sock, dev: True)
    monkeypatch.setattr(mnhad, "routed_devices", lambda: set())
    (tmp_path / "mnha-role.conf").write_text("")
    monkeypatch.setattr(Path, "write_text", _keep_empty_role(Path.write_text))
    daemon, _peer = _daemon(tmp_path, monkeypatch, sync=False)
    assert not daemon.role_file_ok and daemon.bird_state == (False, False, True)
    daemon.tick(daemon.started + 10, send=False)
    text = Path(daemon.c.role_file).read_text()
    assert all(f"define {name} = " in text for name in ("SRG1_ACTIVE", "SRG2_ACTIVE", "SRG0_SIGNAL")), text
    assert not list(tmp_path.glob("*.tmp")), "written through a sibling file renamed over it"


def _keep_empty_role(write: Any) -> Any:
    """Path.write_text, except that the test's fixture may not fill mnha-role.conf (it stays empty)."""
    def wrapped(self: Path, text: str, *args: Any, **kwargs: Any) -> int:
        if self.name == "mnha-role.conf":
            return write(self, "", *args, **kwargs)
        return write(self, text, *args, **kwargs)
    return wrapped


def test_a_refresh_swap_also_removes_the_ip_table_an_older_daemon_left(monkeypatch: pytest.MonkeyPatch) -> None:
    given: list[str] = []

    def nft(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        given.append(str(kwargs["input"]))
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(mnhad.subprocess, "run", nft)
    assert mnhad.set_refresh(1, 0)
    text = given[0]
    assert "delete table ip mnha_refresh\n" in text and "delete table inet mnha_refresh\n" in text
    assert text.rstrip().endswith(mnhad.refresh_rules(1, 0).rstrip())  # only the inet table is left
