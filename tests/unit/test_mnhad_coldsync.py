"""The MNHA table push's conntrackd commands: the peer must get every session it lacks without
its own sessions being deleted and re-created (conntrackd re-creates a session it receives as "new"
and already holds; it updates one it receives as "update")."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from dataplane.daemons import mnhad

CONFIG = "/run/lab/x/nodes/srx1/conntrackd.conf"


def _fake_conntrackd(monkeypatch: pytest.MonkeyPatch, calls: list[tuple[str, ...]], fail: str | None = None) -> None:
    def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        assert argv[:3] == ["conntrackd", "-C", CONFIG]
        calls.append(tuple(argv[3:]))
        code = 1 if argv[3] == fail else 0
        return subprocess.CompletedProcess(argv, code, "", "refused" if code else "")

    monkeypatch.setattr(mnhad.subprocess, "run", run)


@pytest.mark.parametrize("kind", ["cold", "refresh"])
def test_a_push_reads_the_table_twice_before_sending_it_then_empties_the_cache(
        monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    calls: list[tuple[str, ...]] = []
    _fake_conntrackd(monkeypatch, calls)
    mnhad.cold_sync(CONFIG, kind)
    send = calls.index(("-B",))
    # read twice: every cached session is then sent as an update, which the peer applies in place
    assert calls[:send].count(("-R",)) >= 2 and calls[send - 1] == ("-R",)
    assert calls[send + 1:] == [("-f", "internal")], "nothing read back stays in the cache"


def test_a_flush_only_empties_the_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[str, ...]] = []
    _fake_conntrackd(monkeypatch, calls)
    mnhad.cold_sync(CONFIG, "flush")
    assert calls == [("-f", "internal")]


def test_a_failing_command_ends_the_push(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[tuple[str, ...]] = []
    _fake_conntrackd(monkeypatch, calls, fail="-R")
    mnhad.cold_sync(CONFIG)
    assert calls == [("-R",)]
    assert "exited 1: refused" in capsys.readouterr().out


class ConntrackdPair:
    """This node's conntrackd as far as a push goes, and the peer's sync messages arriving here.

    -R puts each kernel session in the cache: absent, as "new"; present, as "alive" (conntrackd's
    cache_update_force). -B sends every cached session: "new" ones as new, the others as updates. The
    peer's messages (a session it opened, injected into this kernel, not cached: conntrackd skips the
    events of its own injections) arrive between two commands, unless the hold drops them; FTFW sends
    them again once the hold is gone."""

    def __init__(self, kernel: set[str], from_peer: list[str]):
        self.kernel = set(kernel)
        self.cache: dict[str, str] = {}
        self.from_peer = list(from_peer)
        self.held = False
        self.sent_new: set[str] = set()
        self.sent_update: set[str] = set()
        self.order: list[str] = []

    def arrive(self) -> None:
        if not self.held and self.from_peer:
            self.kernel.add(self.from_peer.pop(0))

    def run(self, argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        if argv[0] == "nft":
            if argv[1:] == ["-f", "-"]:
                rules = kwargs["input"]
                assert "ip saddr 10.0.0.2 udp dport 3780 drop" in rules and "hook input" in rules
                self.held = True
                self.order.append("hold")
            else:
                assert argv[1:] == ["delete", "table", "ip", mnhad.HOLD_TABLE]
                self.held = False
                self.order.append("release")
            self.arrive()
            return subprocess.CompletedProcess(argv, 0, "", "")
        command = tuple(argv[3:])
        self.order.append(" ".join(command))
        if command == ("-R",):
            for session in self.kernel:
                self.cache[session] = "alive" if session in self.cache else "new"
        elif command == ("-B",):
            self.sent_new |= {s for s, state in self.cache.items() if state == "new"}
            self.sent_update |= {s for s, state in self.cache.items() if state == "alive"}
        elif command == ("-f", "internal"):
            self.cache.clear()
        self.arrive()
        return subprocess.CompletedProcess(argv, 0, "", "")


def test_a_session_the_peer_sends_during_the_push_is_not_sent_back_as_new(monkeypatch: pytest.MonkeyPatch) -> None:
    """The peer opens a session while this node reads its table: without the hold it lands between the
    two reads, is read once and goes back to the peer as "new", and the peer, which carries it,
    deletes and re-creates it (counters zeroed, a packet in the gap dropped)."""
    pair = ConntrackdPair(kernel={"a", "b"}, from_peer=["carried-by-peer"])
    monkeypatch.setattr(mnhad.subprocess, "run", pair.run)
    mnhad.cold_sync(CONFIG, "refresh", mnhad.SyncHold("10.0.0.2"))
    assert pair.order == ["hold", "-R", "-R", "release", "-B", "-f internal"]
    assert pair.sent_new == set(), "nothing goes out as new: the peer keeps every session it holds"
    assert pair.sent_update == {"a", "b"}
    assert "carried-by-peer" in pair.kernel, "the held-off message arrived once the hold was gone"
    assert not pair.held


def test_without_the_hold_the_window_is_there(monkeypatch: pytest.MonkeyPatch) -> None:
    """The model shows the defect the hold closes (a push with nothing to hold the peer off)."""
    pair = ConntrackdPair(kernel={"a"}, from_peer=["carried-by-peer"])
    monkeypatch.setattr(mnhad.subprocess, "run", pair.run)
    mnhad.cold_sync(CONFIG, "refresh")
    assert pair.sent_new == {"carried-by-peer"}


def test_a_push_that_cannot_hold_the_peer_off_is_not_sent(monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    calls: list[list[str]] = []

    def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 1 if argv[0] == "nft" else 0, "", "Operation not permitted")

    monkeypatch.setattr(mnhad.subprocess, "run", run)
    mnhad.cold_sync(CONFIG, "cold", mnhad.SyncHold("10.0.0.2"))
    assert [c[0] for c in calls] == ["nft"]
    assert "cannot hold the peer's sync off" in capsys.readouterr().out


def test_a_failed_read_releases_the_hold(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[list[str]] = []

    def run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 1 if argv[-1] == "-R" else 0, "", "")

    monkeypatch.setattr(mnhad.subprocess, "run", run)
    mnhad.cold_sync(CONFIG, "cold", mnhad.SyncHold("10.0.0.2"))
    assert calls[-1] == ["nft", "delete", "table", "ip", mnhad.HOLD_TABLE]
