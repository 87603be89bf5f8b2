"""Health checks of the TLB: a pure up/down state machine and the probes that feed it.

The state machine is plain logic (unit-tested); the probes (ICMP echo over a raw socket, TCP
connect, UDP request/any answer, HTTP GET) are thin I/O that report one boolean per round.
"""

from __future__ import annotations

import errno
import os
import select
import socket
import struct
import time
from dataclasses import dataclass, field


@dataclass
class HealthState:
    """Consecutive failures take a target down, consecutive successes bring it back.

    A target starts up (the lab comes up with every SRX in the table and must not churn while the
    first probes are in flight) unless told otherwise, e.g. after a restart that found it out."""

    failures: int
    recoveries: int
    up: bool = True
    fail_streak: int = 0
    ok_streak: int = 0
    last_result: str = "not probed yet"
    last_change: float = 0.0
    probes: int = 0
    last_sent: float = 0.0  # wall clock when the last probe counted was sent

    def record(self, ok: bool, detail: str = "", now: float | None = None, sent: float | None = None) -> bool:
        """Account one probe (sent at SENT, wall clock); return True when the up/down state changed."""
        self.probes += 1
        self.last_sent = time.time() if sent is None else sent
        self.last_result = detail or ("ok" if ok else "failed")
        if ok:
            self.ok_streak += 1
            self.fail_streak = 0
            if not self.up and self.ok_streak >= self.recoveries:
                return self._flip(True, now)
        else:
            self.fail_streak += 1
            self.ok_streak = 0
            if self.up and self.fail_streak >= self.failures:
                return self._flip(False, now)
        return False

    def _flip(self, up: bool, now: float | None) -> bool:
        self.up = up
        self.last_change = time.time() if now is None else now
        return True


@dataclass
class ProfileHealth:
    """A real-service probed by several network-monitoring profiles (the JVD: ICMP and TCP 8088):
    it is up while every profile's state is up. Same fields as HealthState for the status file."""

    states: dict[str, HealthState]

    @property
    def up(self) -> bool:
        return all(state.up for state in self.states.values())

    @property
    def probes(self) -> int:
        return sum(state.probes for state in self.states.values())

    @property
    def fail_streak(self) -> int:
        return max((state.fail_streak for state in self.states.values()), default=0)

    @property
    def last_change(self) -> float:
        return max((state.last_change for state in self.states.values()), default=0.0)

    @property
    def last_result(self) -> str:
        return "; ".join(f"{name}: {state.last_result}" for name, state in self.states.items())

    def record(self, profile: str, ok: bool, detail: str = "", now: float | None = None,
               sent: float | None = None) -> bool:
        """Account one probe of PROFILE; True when the real-service's overall state changed."""
        before = self.up
        self.states[profile].record(ok, detail, now, sent)
        return self.up != before

    def force_down(self, why: str) -> None:
        """Out until every profile has passed `recoveries` probes again (carrier lost, restart)."""
        for state in self.states.values():
            state.up = False
            state.ok_streak = 0
            state.last_result = why


def _checksum(data: bytes) -> int:
    if len(data) % 2:
        data += b"\0"
    total: int = sum(struct.unpack(f"!{len(data) // 2}H", data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def icmp_echo(ident: int, seq: int, payload: bytes = b"lab-tlb-health") -> bytes:
    header = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
    return struct.pack("!BBHHH", 8, 0, _checksum(header + payload), ident, seq) + payload


def parse_echo_reply(packet: bytes) -> tuple[int, int] | None:
    """(identifier, sequence) of an ICMP echo reply inside an IPv4 packet, else None."""
    if len(packet) < 28:
        return None
    ihl = (packet[0] & 0x0F) * 4
    icmp = packet[ihl:ihl + 8]
    if len(icmp) < 8 or icmp[0] != 0:
        return None
    _type, _code, _sum, ident, seq = struct.unpack("!BBHHH", icmp)
    return ident, seq


def set_mark(sock: socket.socket, mark: int | None) -> None:
    """Give what SOCK sends the firewall mark MARK (None: leave it as it is). Needs CAP_NET_ADMIN."""
    if mark is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, mark)


@dataclass
class Prober:
    """One probe round to every target, answered within TIMEOUT seconds."""

    kind: str
    timeout: float
    port: int | None = None
    http_path: str = "/"
    _icmp: socket.socket | None = None
    _seq: int = 0
    _ident: int = field(default_factory=lambda: os.getpid() & 0xFFFF)

    def open(self) -> None:
        """Open sockets in the calling thread's namespace (call it while inside the instance)."""
        if self.kind == "icmp":
            self._icmp = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
            self._icmp.setblocking(False)

    def round(self, targets: dict[str, str], marks: dict[str, int] | None = None) -> dict[str, tuple[bool, str]]:
        """Probe every target (name -> address). MARKS (name -> firewall mark): each target's probes
        carry its mark, so that policy routing sends them the way its traffic goes."""
        marks = marks or {}
        if self.kind == "icmp":
            return self._icmp_round(targets, marks)
        if self.kind == "tcp":
            return self._tcp_round(targets, marks)
        return {name: self._stream_probe(address, marks.get(name)) for name, address in targets.items()}

    def _tcp_round(self, targets: dict[str, str], marks: dict[str, int]) -> dict[str, tuple[bool, str]]:
        """Every target at once (non-blocking connects): a dead one costs the timeout once, not per target."""
        port = self.port or 8088
        pending: dict[socket.socket, str] = {}
        results: dict[str, tuple[bool, str]] = {}
        started = time.monotonic()
        for name, address in targets.items():
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            set_mark(sock, marks.get(name))
            sock.setblocking(False)
            code = sock.connect_ex((address, port))
            if code not in (0, errno.EINPROGRESS):
                results[name] = (False, f"tcp/{port}: {os.strerror(code)}")
                sock.close()
                continue
            pending[sock] = name
        deadline = started + self.timeout
        while pending and (left := deadline - time.monotonic()) > 0:
            _, writable, _ = select.select([], list(pending), [], left)
            for sock in writable:
                name = pending.pop(sock)
                code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                results[name] = (code == 0, f"tcp/{port} connected in {(time.monotonic() - started) * 1000:.1f} ms"
                                 if code == 0 else f"tcp/{port}: {os.strerror(code)}")
                sock.close()
        for sock, name in pending.items():
            results[name] = (False, f"tcp/{port}: no answer within {self.timeout * 1000:.0f} ms")
            sock.close()
        return results

    def _icmp_round(self, targets: dict[str, str], marks: dict[str, int]) -> dict[str, tuple[bool, str]]:
        assert self._icmp is not None
        pending: dict[int, str] = {}
        failed: dict[str, tuple[bool, str]] = {}
        sent_at = time.monotonic()
        for name, address in targets.items():
            self._seq = (self._seq + 1) & 0xFFFF
            set_mark(self._icmp, marks.get(name, 0))  # one socket: each echo request with its target's mark
            try:
                self._icmp.sendto(icmp_echo(self._ident, self._seq), (address, 0))
                pending[self._seq] = name
            except OSError as exc:  # e.g. no route to the loopback any more
                failed[name] = (False, f"send failed: {os.strerror(exc.errno or errno.EIO)}")
        return {**self._drain(pending, sent_at), **failed}

    def _drain(self, pending: dict[int, str], sent_at: float) -> dict[str, tuple[bool, str]]:
        assert self._icmp is not None
        results: dict[str, tuple[bool, str]] = {}
        deadline = sent_at + self.timeout
        while pending and (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self._icmp], [], [], left)
            if not ready:
                break
            while True:
                try:
                    packet = self._icmp.recv(2048)
                except BlockingIOError:
                    break
                reply = parse_echo_reply(packet)
                if reply and reply[0] == self._ident and reply[1] in pending:
                    name = pending.pop(reply[1])
                    results[name] = (True, f"echo reply in {(time.monotonic() - sent_at) * 1000:.1f} ms")
        for name in pending.values():
            results[name] = (False, f"no echo reply within {self.timeout * 1000:.0f} ms")
        return results

    def _stream_probe(self, address: str, mark: int | None = None) -> tuple[bool, str]:
        kind = socket.SOCK_DGRAM if self.kind == "udp" else socket.SOCK_STREAM
        port = self.port or (80 if self.kind == "http" else 7)
        with socket.socket(socket.AF_INET, kind) as sock:
            set_mark(sock, mark)
            sock.settimeout(self.timeout)
            try:
                sock.connect((address, port))
                if self.kind == "udp":
                    sock.send(b"lab-tlb-health")
                    sock.recv(2048)  # any answer; ICMP port unreachable raises ConnectionRefused
                elif self.kind == "http":
                    sock.sendall(f"GET {self.http_path} HTTP/1.0\r\nHost: {address}\r\n\r\n".encode())
                    status = sock.recv(64).split(b" ", 2)
                    if len(status) < 2 or not status[1].startswith(b"2"):
                        return False, f"HTTP status {status[1:2]!r}"
            except (OSError, TimeoutError) as exc:
                return False, f"{self.kind}/{port}: {exc.__class__.__name__}"
        return True, f"{self.kind}/{port} ok"
