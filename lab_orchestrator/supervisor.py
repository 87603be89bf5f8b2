"""Per-node processes of a lab, run under one lab-wide supervisor process.

`lab up` starts `python -m lab_orchestrator.supervisord STATE_DIR` detached; that process forks
every daemon into its namespace, logs it to a file per node and process, and reaps it the moment
it exits (init on this kind of machine reaps orphans only about once a second, and a zombie
would still show in process listings after `lab down`). Clients talk to it over a UNIX socket
with one JSON object per line. Processes are identified by (pid, start time), so a recycled pid
is never signalled.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from . import netnsutil
from .diagnostics import LabError

SOCKET_NAME = "supervisor.sock"


@dataclass
class ProcessRecord:
    node: str
    name: str
    ns: str
    pid: int
    starttime: int
    log: str
    argv: list[str]


def starttime(pid: int) -> int | None:
    """Clock ticks since boot when PID started (field 22 of /proc/PID/stat), None if gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] in ("Z", "X"):
        return None  # a zombie is dead for our purposes
    return int(fields[19])


def alive(record: ProcessRecord) -> bool:
    return starttime(record.pid) == record.starttime


def exec_in_namespace(argv: Sequence[str], ns: str | None, log: str, env: dict[str, str] | None,
                      err_fd: int) -> None:  # pragma: no cover - runs in a forked child
    """Become ARGV inside namespace NS with stdout/stderr to LOG; report failure on ERR_FD."""
    try:
        if ns:
            fd = os.open(netnsutil.path(ns), os.O_RDONLY)
            if netnsutil._libc.setns(fd, netnsutil.CLONE_NEWNET) != 0:
                raise OSError(f"setns into {ns} failed")
            os.close(fd)
        out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(out, 2)
        os.closerange(3, err_fd)
        os.closerange(err_fd + 1, 4096)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD, signal.SIGHUP, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        os.execvpe(argv[0], list(argv), {**os.environ, **(env or {})})
    except BaseException as exc:  # noqa: BLE001 - report anything to the parent, then die
        try:
            os.write(err_fd, f"{type(exc).__name__}: {exc}".encode())
        finally:
            os._exit(127)


def fork_exec(argv: Sequence[str], ns: str | None, log: str, env: dict[str, str] | None = None,
              detach: bool = False) -> int:
    """Fork and exec; return the pid once exec succeeded, raise LabError with the reason if not.
    With DETACH the process is double-forked into its own session (parent: init)."""
    Path(log).parent.mkdir(parents=True, exist_ok=True)
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    pid_r, pid_w = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover
        os.close(err_r)
        os.close(pid_r)
        if detach:
            os.setsid()
            if os.fork():
                os._exit(0)
        os.write(pid_w, str(os.getpid()).encode())
        os.close(pid_w)
        exec_in_namespace(argv, ns, log, env, err_w)
    os.close(err_w)
    os.close(pid_w)
    pid_text = os.read(pid_r, 32).decode()
    os.close(pid_r)
    if detach:
        os.waitpid(child, 0)
    error = os.read(err_r, 4096).decode()
    os.close(err_r)
    if error or not pid_text:
        if not detach:
            os.waitpid(child, 0)
        raise LabError(f"cannot start {argv[0]}: {error or 'fork failed'} (log: {log})")
    return int(pid_text)


def terminate(pids: Sequence[int], timeout: float = 2.0) -> None:
    """SIGTERM, then SIGKILL after TIMEOUT; returns once none of PIDS is running."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    remaining = _wait_gone(pids, timeout)
    for pid in remaining:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    _wait_gone(remaining, timeout)


def _wait_gone(pids: Sequence[int], timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    remaining = list(pids)
    while remaining and time.monotonic() < deadline:
        remaining = [p for p in remaining if starttime(p) is not None]
        if remaining:
            time.sleep(0.005)
    return remaining


class Supervisor:
    """Client of a lab's supervisor process (started on demand)."""

    def __init__(self, state_dir: str | Path):
        self.state_dir = Path(state_dir)
        self.socket_path = self.state_dir / SOCKET_NAME

    def running(self) -> bool:
        try:
            return bool(self._call({"op": "ping"}, timeout=0.5).get("ok"))
        except (OSError, LabError):
            return False

    def start(self) -> int:
        if self.running():
            return int(self._call({"op": "ping"})["pid"])
        self.socket_path.unlink(missing_ok=True)
        argv = [sys.executable, "-m", "lab_orchestrator.supervisord", str(self.state_dir)]
        pid = fork_exec(argv, None, str(self.state_dir / "logs" / "supervisor.log"), detach=True)
        deadline = time.monotonic() + 5.0
        while time.monotonic() < deadline:
            if self.socket_path.exists() and self.running():
                return pid
            if starttime(pid) is None:
                break
            time.sleep(0.01)
        raise LabError(f"the lab supervisor did not start (log: {self.state_dir / 'logs' / 'supervisor.log'})")

    def spawn(self, node: str, name: str, ns: str, argv: Sequence[str], log: str,
              env: dict[str, str] | None = None) -> ProcessRecord:
        reply = self._call({"op": "spawn", "ns": ns, "argv": list(argv), "log": log, "env": env or {}})
        if not reply.get("ok"):
            raise LabError(f"cannot start {name} on {node}: {reply.get('error')}")
        return ProcessRecord(node, name, ns, int(reply["pid"]), int(reply["starttime"]), log, list(argv))

    def stop(self, pids: Sequence[int], timeout: float = 2.0) -> None:
        self._call({"op": "stop", "pids": list(pids), "timeout": timeout}, timeout=timeout * 2 + 1)

    def shutdown(self) -> None:
        with contextlib.suppress(OSError, LabError):
            self._call({"op": "shutdown"}, timeout=5.0)

    def _call(self, request: dict[str, Any], timeout: float = 5.0) -> dict[str, Any]:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(str(self.socket_path))
            sock.sendall(json.dumps(request).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = sock.recv(65536)
                if not chunk:
                    break
                data += chunk
        if not data:
            raise LabError("the lab supervisor closed the connection")
        reply: dict[str, Any] = json.loads(data)
        return reply


def record_json(record: ProcessRecord) -> dict[str, Any]:
    return asdict(record)
