"""NAT bindings: the source address and port a flow's packets carry when they reach the receiver.

Behind source NAT (CGNAT) the server never sees the subscriber's address: it sees the binding the
SRX chose from its pool (address and port), and a real server answers that binding; the SRX
translates the answer back to the subscriber. The forward receiver (packet mode) therefore records,
per flow id, the binding its packets arrive with and every change of it (a flow moved to another
SRX gets a new binding from that SRX's pool), and publishes each change as a 10-byte record on a
pipe or a FIFO (`open_fifo`); the reverse sender reads the records and from then on sends that flow's answers to the
binding (`FrameSet.rebind`), the way a server answers the source it last saw.

Record (network byte order): u32 forward flow id, 4 bytes IPv4 address, u16 port.
"""

from __future__ import annotations

import os
import socket
import struct
from collections.abc import Iterator
from typing import Any

RECORD = struct.Struct("!I4sH")


def key(address: str, port: int) -> int:
    """One integer for an (address, port) binding: the address in the high bits, the port below."""
    return int.from_bytes(socket.inet_aton(address), "big") << 16 | port


def text(binding: int) -> str:
    """'a.b.c.d:port' of a binding key."""
    return f"{socket.inet_ntoa((binding >> 16).to_bytes(4, 'big'))}:{binding & 0xFFFF}"


def split(binding: int) -> tuple[str, int]:
    return socket.inet_ntoa((binding >> 16).to_bytes(4, "big")), binding & 0xFFFF


def encode(flow_id: int, binding: int) -> bytes:
    return RECORD.pack(flow_id, (binding >> 16).to_bytes(4, "big"), binding & 0xFFFF)


def decode(data: bytes) -> Iterator[tuple[int, int]]:
    """(flow id, binding) of every whole record in DATA (a multiple of the record size)."""
    for flow_id, address, port in RECORD.iter_unpack(data):
        yield flow_id, int.from_bytes(address, "big") << 16 | port


class Bindings:
    """Per flow: the binding now and every change, with the receive time it was first seen (pure)."""

    def __init__(self) -> None:
        self.current: dict[int, int] = {}
        self.history: dict[int, list[list[int]]] = {}  # flow id -> [[binding, first rx ns], ...]

    def observe(self, flow_id: int, binding: int, rx: int) -> bool:
        """Record FLOW_ID's packet arriving with BINDING; True when it differs from the last one."""
        if self.current.get(flow_id) == binding:
            return False
        self.current[flow_id] = binding
        self.history.setdefault(flow_id, []).append([binding, rx])
        return True

    def state(self) -> dict[str, list[list[int]]]:
        return {str(k): v for k, v in self.history.items()}

    @classmethod
    def from_state(cls, state: dict[str, list[list[int]]]) -> Bindings:
        out = cls()
        for flow_id, items in state.items():
            out.history[int(flow_id)] = [[int(b), int(t)] for b, t in items]
            if items:
                out.current[int(flow_id)] = int(items[-1][0])
        return out

    def report(self, flow_id: int) -> dict[str, Any]:
        """'bindings' (distinct, in the order first seen) and 'binding_changes' of FLOW_ID; {} if none."""
        items = self.history.get(flow_id)
        if not items:
            return {}
        distinct: list[int] = []
        for binding, _ in items:
            if binding not in distinct:
                distinct.append(binding)
        return {"bindings": [text(b) for b in distinct], "binding_changes": len(items) - 1,
                "rebound_at_ns": items[1][1] if len(items) > 1 else None}


def open_fifo(path: str, write: bool = True) -> int:
    """Open the bindings FIFO at PATH without waiting for the other end (read-write: a FIFO's open
    blocks until both ends exist otherwise; neither end then sees the other close). The writer's
    end is non-blocking (a full FIFO drops records, counted), the reader's blocks in read."""
    fd = os.open(path, os.O_RDWR | (os.O_NONBLOCK if write else 0))
    if write:
        os.set_blocking(fd, False)
    return fd


class Publisher:
    """The receiver's end of the pipe: non-blocking writes; a reader gone stops publishing."""

    def __init__(self, fd: int):
        self.fd: int | None = fd
        os.set_blocking(fd, False)
        self.dropped = 0

    def publish(self, flow_id: int, binding: int) -> None:
        if self.fd is None:
            return
        try:
            os.write(self.fd, encode(flow_id, binding))  # 10 bytes < PIPE_BUF: written whole or not at all
        except BlockingIOError:
            self.dropped += 1
        except OSError:  # the sender finished and closed its end
            self.close()

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def read_records(fd: int) -> Iterator[tuple[int, int]]:
    """Blocking reader (a thread of the sender): (flow id, binding) until the writer closes."""
    pending = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            return
        if not chunk:
            return
        pending += chunk
        whole = len(pending) - len(pending) % RECORD.size
        yield from decode(pending[:whole])
        pending = pending[whole:]
