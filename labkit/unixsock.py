"""UNIX-socket framing shared by the lab's processes, written once:

- JSON lines over a stream socket (the supervisor's control socket): one request line, one reply line;
- datagram sockets bound to a path (a daemon's control or report socket) and one-shot datagrams to one.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

CHUNK = 65536


def read_line(sock: socket.socket) -> bytes:
    """Bytes up to and including the first newline, or whatever came before the peer closed."""
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(CHUNK)
        if not chunk:
            break
        data += chunk
    return data


def send_json_line(sock: socket.socket, message: Any) -> None:
    sock.sendall(json.dumps(message).encode() + b"\n")


def request(path: str | Path, message: Any, timeout: float) -> bytes:
    """Send MESSAGE as a JSON line to the stream socket at PATH; the reply line (b"" if the server
    closed without one). OSError (refused, missing, timed out) is the caller's."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        sock.connect(str(path))
        send_json_line(sock, message)
        return read_line(sock)


def bind_datagram(path: str | Path, blocking: bool = True) -> socket.socket:
    """A datagram socket bound to PATH (a stale file from a previous instance is replaced)."""
    Path(path).unlink(missing_ok=True)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(str(path))
    sock.setblocking(blocking)
    return sock


def send_datagram(path: str | Path, data: bytes) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.sendto(data, str(path))
