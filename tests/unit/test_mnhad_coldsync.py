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
