"""What every per-node daemon needs the same way: a stop flag set by SIGTERM/SIGINT, an atomic JSON
status file, and the peer heartbeat bookkeeping of the HA daemons (MNHA, SRD)."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn, TypeVar

from labkit.status import StatusModel, read_status

from ..core.mnha import HeartbeatError, PeerView, decode_heartbeat_full


class StopFlag:
    """True once SIGTERM or SIGINT arrived: loops check it and finish their round cleanly. A loop that
    waits in select() adds `wakeup()` to what it waits on, so a stop ends the wait at once (Python
    retries an interrupted select() until its timeout)."""

    def __init__(self) -> None:
        self.set = False
        self._wake: tuple[socket.socket, socket.socket] | None = None
        signal.signal(signal.SIGTERM, self._on_signal)
        signal.signal(signal.SIGINT, self._on_signal)

    def wakeup(self) -> socket.socket:
        """A socket that turns readable when the flag is set (one for the flag's life)."""
        if self._wake is None:
            pair = socket.socketpair()
            for end in pair:
                end.setblocking(False)
            self._wake = pair
            if self.set:
                self._poke()
        return self._wake[0]

    def _poke(self) -> None:
        if self._wake is not None:
            with contextlib.suppress(OSError):
                self._wake[1].send(b"x")

    def _on_signal(self, signum: int, frame: object) -> None:
        self.set = True
        self._poke()

    def __bool__(self) -> bool:
        return self.set


def exit_now(code: int) -> NoReturn:
    """End the daemon once its main returned (its status written, its sockets closed by the kernel):
    output flushed, no interpreter teardown (freeing every module's objects took 60-100 ms of CPU per
    daemon, and `lab down` stops them all at once)."""
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


RESUME_ENV = "LAB_RESUME"  # the lab supervisor sets it to 1 when it restarts a daemon after a crash


S = TypeVar("S", bound=StatusModel)


def resumed(path: str | Path, model: type[S]) -> S | None:
    """The typed status this daemon's previous instance published, when it is being restarted after a
    crash (LAB_RESUME=1) and resumes from it; None on a fresh start, or when the file is not a MODEL."""
    if os.environ.get(RESUME_ENV) != "1":
        return None
    return read_status(path, model)


@dataclass
class PeerLink:
    """Heartbeats from one known peer (node name and address) on a non-blocking UDP socket."""

    sock: socket.socket
    peer: str
    peer_ip: str
    view: PeerView = field(default_factory=lambda: PeerView(False))
    heard: float = 0.0
    received: int = 0
    bad: int = 0
    # heartbeat sequence numbers start again at 1 with each instance of the peer's daemon: a
    # number below the last one heard means the peer restarted (or powered on) meanwhile
    last_seq: int = 0
    instances: int = 0

    def drain(self, now: float) -> None:
        while True:
            try:
                data, source = self.sock.recvfrom(512)
            except BlockingIOError:
                return
            try:
                node, role, priority, healthy, seq, role2, priority2, sync = decode_heartbeat_full(data)
            except HeartbeatError:
                self.bad += 1
                continue
            if node != self.peer or source[0] != self.peer_ip:
                self.bad += 1  # a stranger on the link: ignored, counted
                continue
            self.received += 1
            self.heard = now
            if seq < self.last_seq:
                self.instances += 1
            self.last_seq = seq
            self.view = PeerView(True, role, priority, healthy, role2, priority2, sync)

    def expire(self, now: float, deadline_s: float, link_up: bool) -> None:
        """Silence for DEADLINE_S, or the link without carrier, means no peer over this link."""
        if now - self.heard > deadline_s or not link_up:
            self.view = PeerView(False)


DECIDE_S = 0.05  # how often an HA daemon re-decides (a lost carrier or route is acted on at once)


def heartbeat_loop(interval: float, handlers: dict[socket.socket, Callable[[float], None]],
                   tick: Callable[[float, bool], None]) -> None:
    """The HA daemons' loop: serve readable sockets, decide every DECIDE_S, and let TICK send a
    heartbeat (second argument True) every INTERVAL, until SIGTERM/SIGINT."""
    stopping = StopFlag()
    wake = stopping.wakeup()
    next_beat = time.monotonic()
    while not stopping:
        timeout = max(0.0, min(next_beat - time.monotonic(), DECIDE_S))
        ready, _, _ = select.select([*handlers, wake], [], [], timeout)
        now = time.monotonic()
        for sock in ready:
            if sock is not wake:
                handlers[sock](now)
        beat = now >= next_beat
        tick(now, beat)
        if beat:
            next_beat = max(next_beat + interval, now)
