"""The lab-wide supervisor process: forks daemons into namespaces and reaps them at once.

Run as `python -m lab_orchestrator.supervisord STATE_DIR` (started by `lab up`). It serves
requests on STATE_DIR/supervisor.sock, one JSON object per line:
  {"op": "spawn", "ns": NS, "argv": [...], "log": PATH, "env": {...}} -> {"ok", "pid", "starttime"}
  {"op": "stop", "pids": [...], "timeout": S}                        -> {"ok"}
  {"op": "ping"} / {"op": "shutdown"}
It keeps no state that matters: the lab's record (state.json) is written by the CLI.
"""

from __future__ import annotations

import contextlib
import json
import os
import selectors
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from .diagnostics import LabError
from .supervisor import SOCKET_NAME, fork_exec, starttime

_children: set[int] = set()


def _reap() -> None:
    while True:
        try:
            pid, _status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _children.discard(pid)


def _stop(pids: list[int], timeout: float) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            _reap()
            if all(starttime(p) is None for p in pids):
                return
            time.sleep(0.002)


def _handle(request: dict[str, Any]) -> dict[str, Any]:
    op = request.get("op")
    if op == "ping":
        return {"ok": True, "pid": os.getpid(), "children": sorted(_children)}
    if op == "spawn":
        try:
            pid = fork_exec(request["argv"], request["ns"], request["log"], request.get("env"))
        except LabError as exc:
            return {"ok": False, "error": str(exc)}
        _children.add(pid)
        return {"ok": True, "pid": pid, "starttime": starttime(pid) or 0}
    if op == "stop":
        _stop([int(p) for p in request.get("pids", [])], float(request.get("timeout", 2.0)))
        return {"ok": True}
    if op == "shutdown":
        _stop(sorted(_children), 2.0)
        return {"ok": True, "bye": True}
    return {"ok": False, "error": f"unknown op {op!r}"}


def serve(state_dir: Path) -> None:
    path = state_dir / SOCKET_NAME
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(16)
    stopping = False

    def on_term(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    selector = selectors.DefaultSelector()
    selector.register(server, selectors.EVENT_READ)
    while not stopping:
        for _key, _ in selector.select(timeout=0.1):
            conn, _addr = server.accept()
            # A client may vanish mid-request (an interrupted `lab up`, a timed-out ping): that
            # must never take the supervisor, and with it the lab's daemons, down.
            try:
                with conn:
                    conn.settimeout(5.0)
                    data = b""
                    while not data.endswith(b"\n"):
                        chunk = conn.recv(65536)
                        if not chunk:
                            break
                        data += chunk
                    try:
                        reply = _handle(json.loads(data))
                    except (ValueError, KeyError, TypeError) as exc:
                        reply = {"ok": False, "error": f"bad request: {exc}"}
                    if reply.get("bye"):
                        stopping = True
                    conn.sendall(json.dumps(reply).encode() + b"\n")
            except OSError:
                continue
        _reap()
    _stop(sorted(_children), 2.0)
    server.close()
    path.unlink(missing_ok=True)


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
