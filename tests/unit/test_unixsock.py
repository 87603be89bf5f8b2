"""labkit.unixsock: JSON lines over a stream socket, datagrams to a path."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path

import pytest

from labkit import unixsock


def test_read_line_stops_at_the_newline_or_at_close() -> None:
    a, b = socket.socketpair()
    with a, b:
        a.sendall(b'{"op": ')
        a.sendall(b'"ping"}\n')
        assert unixsock.read_line(b) == b'{"op": "ping"}\n'
        a.sendall(b"half")
        a.shutdown(socket.SHUT_WR)
        assert unixsock.read_line(b) == b"half"


def test_a_request_gets_the_reply_line(tmp_path: Path) -> None:
    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(1)

    def serve() -> None:
        conn, _ = server.accept()
        with conn:
            request = json.loads(unixsock.read_line(conn))
            unixsock.send_json_line(conn, {"ok": True, "echo": request["op"]})

    thread = threading.Thread(target=serve)
    thread.start()
    try:
        assert json.loads(unixsock.request(path, {"op": "list"}, timeout=5.0)) == {"ok": True, "echo": "list"}
    finally:
        thread.join(5)
        server.close()


def test_a_request_to_nobody_raises_oserror(tmp_path: Path) -> None:
    with pytest.raises(OSError):
        unixsock.request(tmp_path / "missing.sock", {"op": "ping"}, timeout=1.0)


def test_a_datagram_reaches_the_bound_socket_and_a_stale_file_is_replaced(tmp_path: Path) -> None:
    path = tmp_path / "d.sock"
    path.write_text("stale")
    with unixsock.bind_datagram(path, blocking=False) as sock:
        with pytest.raises(BlockingIOError):
            sock.recv(16)
        unixsock.send_datagram(path, b"switchover")
        sock.setblocking(True)
        sock.settimeout(5.0)
        assert sock.recv(256) == b"switchover"
