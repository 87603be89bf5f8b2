"""Per-node processes: started detached inside a namespace, recorded by pid and start time.

A process outlives the `lab up` that started it (double fork, own session), logs to a file per
node and process, and is identified later by (pid, start time) so a recycled pid is never killed.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from . import netnsutil
from .diagnostics import LabError


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
    if fields[0] == "Z":
        return None  # a zombie is dead for our purposes
    return int(fields[19])


def alive(record: ProcessRecord) -> bool:
    return starttime(record.pid) == record.starttime


def spawn(node: str, name: str, ns: str, argv: Sequence[str], log: Path,
          env: dict[str, str] | None = None) -> ProcessRecord:
    """Start ARGV inside namespace NS, detached; raise LabError if it cannot be executed."""
    log.parent.mkdir(parents=True, exist_ok=True)
    pid_r, pid_w = os.pipe()
    err_r, err_w = os.pipe2(os.O_CLOEXEC)
    child = os.fork()
    if child == 0:  # pragma: no cover - runs in the forked child
        try:
            os.close(pid_r)
            os.close(err_r)
            os.setsid()
            grandchild = os.fork()
            if grandchild:
                os.write(pid_w, str(grandchild).encode())
                os._exit(0)
            os.close(pid_w)
            fd = os.open(netnsutil.path(ns), os.O_RDONLY)
            if netnsutil._libc.setns(fd, netnsutil.CLONE_NEWNET) != 0:
                raise OSError("setns failed")
            os.close(fd)
            out = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            null = os.open(os.devnull, os.O_RDONLY)
            os.dup2(null, 0)
            os.dup2(out, 1)
            os.dup2(out, 2)
            os.closerange(3, err_w)
            os.closerange(err_w + 1, 1024)
            os.execvpe(argv[0], list(argv), {**os.environ, **(env or {})})
        except BaseException as exc:  # noqa: BLE001 - report anything to the parent, then die
            try:
                os.write(err_w, f"{type(exc).__name__}: {exc}".encode())
            finally:
                os._exit(127)
    os.close(pid_w)
    os.close(err_w)
    pid_text = os.read(pid_r, 32).decode()
    os.close(pid_r)
    os.waitpid(child, 0)
    error = os.read(err_r, 4096).decode()
    os.close(err_r)
    if error or not pid_text:
        raise LabError(f"cannot start {name} on {node}: {error or 'fork failed'} (see {log})")
    pid = int(pid_text)
    start = starttime(pid)
    return ProcessRecord(node, name, ns, pid, start or 0, str(log), list(argv))


def stop(record: ProcessRecord, timeout: float = 2.0) -> None:
    """SIGTERM, then SIGKILL after TIMEOUT; a no-op if the process is already gone."""
    if not alive(record):
        return
    terminate([record.pid], timeout)


def terminate(pids: Sequence[int], timeout: float = 2.0) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    remaining = list(pids)
    while remaining and time.monotonic() < deadline:
        remaining = [p for p in remaining if starttime(p) is not None]
        if remaining:
            time.sleep(0.01)
    for pid in remaining:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    # Wait until the /proc entries vanish (zombies reaped by init), so that nothing of the lab
    # shows in a process listing once `lab down` returns.
    deadline = time.monotonic() + timeout
    remaining = list(pids)
    while remaining and time.monotonic() < deadline:
        remaining = [p for p in remaining if os.path.exists(f"/proc/{p}")]
        if remaining:
            time.sleep(0.01)
