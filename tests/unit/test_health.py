"""TLB health checks: the up/down state machine and the ICMP codec (pure, no sockets), and the marks the
probes carry (on stand-in sockets)."""

from __future__ import annotations

import errno
import socket
import struct
from typing import Any

import pytest

from dataplane.core import health
from dataplane.core.health import HealthState, Prober, _checksum, icmp_echo, parse_echo_reply


def test_starts_up_and_goes_down_after_exactly_n_consecutive_failures() -> None:
    state = HealthState(failures=3, recoveries=2)
    assert state.up
    assert not state.record(False)
    assert not state.record(False)
    assert state.record(False, now=10.0)
    assert not state.up and state.last_change == 10.0


def test_a_success_resets_the_failure_streak() -> None:
    state = HealthState(failures=3, recoveries=2)
    for ok in (False, False, True, False, False):
        assert not state.record(ok)
    assert state.up
    assert state.record(False)


def test_comes_back_after_n_consecutive_successes_only() -> None:
    state = HealthState(failures=1, recoveries=3, up=False)
    assert not state.record(True)
    assert not state.record(True)
    assert not state.record(False)  # streak broken
    assert not state.record(True)
    assert not state.record(True)
    assert state.record(True)
    assert state.up


@pytest.mark.parametrize("failures", [1, 2, 5, 10])
def test_detection_takes_failures_probes(failures: int) -> None:
    state = HealthState(failures=failures, recoveries=1)
    flips = [state.record(False) for _ in range(failures + 3)]
    assert flips.index(True) == failures - 1
    assert flips.count(True) == 1, "a down target does not flip again while it stays down"


def test_last_result_and_probe_count_are_kept() -> None:
    state = HealthState(failures=2, recoveries=2)
    state.record(False, "no echo reply within 1000 ms")
    assert state.last_result == "no echo reply within 1000 ms"
    state.record(True)
    assert state.last_result == "ok" and state.probes == 2


def test_echo_request_has_a_valid_checksum() -> None:
    packet = icmp_echo(0x1234, 7, b"payload!")
    assert packet[0] == 8 and packet[1] == 0
    assert _checksum(packet) == 0, "a correct ICMP checksum sums to zero over the message"
    assert struct.unpack("!HH", packet[4:8]) == (0x1234, 7)


def test_odd_length_payload_checksum() -> None:
    assert _checksum(icmp_echo(1, 1, b"abc")) == 0


def _ipv4(payload: bytes, ihl_words: int = 5) -> bytes:
    header = bytes([0x40 | ihl_words]) + bytes(4 * ihl_words - 1)
    return header + payload


def test_parse_echo_reply_reads_identifier_and_sequence() -> None:
    reply = bytearray(icmp_echo(0xBEEF, 42))
    reply[0] = 0  # echo reply
    assert parse_echo_reply(_ipv4(bytes(reply))) == (0xBEEF, 42)
    assert parse_echo_reply(_ipv4(bytes(reply), ihl_words=6)) == (0xBEEF, 42), "IP options are skipped"


def test_parse_echo_reply_ignores_requests_and_runts() -> None:
    assert parse_echo_reply(_ipv4(icmp_echo(1, 1))) is None  # type 8: a request, not a reply
    assert parse_echo_reply(b"\x45" + bytes(10)) is None


class _Socket:
    """Records the mark each probe leaves with; nothing is sent and nothing answers."""

    sent: list[tuple[str, int]] = []

    def __init__(self, *_: Any) -> None:
        self.mark = 0

    def setsockopt(self, level: int, option: int, value: int) -> None:
        if (level, option) == (socket.SOL_SOCKET, socket.SO_MARK):
            self.mark = value

    def setblocking(self, _: bool) -> None:
        pass

    def sendto(self, _: bytes, address: tuple[str, int]) -> None:
        self.sent.append((address[0], self.mark))

    def connect_ex(self, address: tuple[str, int]) -> int:
        self.sent.append((address[0], self.mark))
        return errno.ECONNREFUSED

    def close(self) -> None:
        pass


def test_each_real_service_s_probes_carry_its_selector_mark(monkeypatch: pytest.MonkeyPatch) -> None:
    """A real-service's probes carry its selector mark, so the MX's policy rules send them through the
    table its traffic takes (the SRX the selector picked), not wherever the instance's routes point
    while BGP converges (the default route: an SRX of another pair, which does not answer)."""
    targets = {"MNHA_SRX1": "198.18.128.10", "MNHA_SRX3": "198.18.128.11"}
    marks = {"MNHA_SRX1": 0x101, "MNHA_SRX3": 0x102}
    icmp = Prober("icmp", timeout=0.0)
    icmp._icmp = _Socket()  # type: ignore[assignment]
    _Socket.sent = []
    results = icmp.round(targets, marks)
    assert _Socket.sent == [("198.18.128.10", 0x101), ("198.18.128.11", 0x102)]
    assert not any(ok for ok, _ in results.values())
    monkeypatch.setattr(health.socket, "socket", _Socket)
    _Socket.sent = []
    Prober("tcp", timeout=0.0, port=8088).round(targets, marks)
    assert sorted(_Socket.sent) == [("198.18.128.10", 0x101), ("198.18.128.11", 0x102)]
