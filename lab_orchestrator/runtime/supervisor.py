"""Per-node processes of a lab, run under one lab-wide supervisor process.

`lab up` starts `python -m lab_orchestrator.runtime.supervisord STATE_DIR` detached; that process forks
every daemon into its namespace, logs it to a file per node and process, and reaps it the moment
it exits (init on this kind of machine reaps orphans only about once a second, and a zombie
would still show in process listings after `lab down`). Clients talk to it over a UNIX socket
with one JSON object per line. Processes are identified by (pid, start time), so a recycled pid
is never signalled.

Supervision: a lab daemon (spawned with restart=True) that dies without having been stopped
through the supervisor is started again after a backoff (RestartPolicy), in recovery: BIRD with
`-R` (graceful restart, kernel routes kept), the Python daemons with LAB_RESUME=1 (they resume
from their status files). A daemon stopped through the supervisor (power off, restart routing,
GRES, `lab down`) is intentionally down and stays down until spawned again. The supervisor
publishes its table of processes (Slot) in STATE_DIR/processes.json on every change.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from labkit import netnsutil, unixsock

from ..model.diagnostics import LabError

SOCKET_NAME = "supervisor.sock"
TABLE_NAME = "processes.json"  # the supervisor's table of processes (pids, states, restarts)
RESUME_ENV = "LAB_RESUME"  # set to 1 when the supervisor restarts a daemon after a crash


@dataclass
class ProcessRecord:
    node: str
    name: str
    ns: str
    pid: int
    starttime: int
    log: str
    argv: list[str]
    restart: bool = False  # supervised: restarted by the supervisor when it dies unexpectedly
    stale_files: list[str] = field(default_factory=list)  # left by a killed instance; removed before a start
    restarts: int = 0  # automatic restarts so far (from the supervisor's table)
    state: str = "running"  # running | backoff | stopped | exited (from the supervisor's table)


@dataclass(frozen=True)
class SpawnRequest:
    """One daemon to start (Supervisor.spawn_all)."""

    node: str
    name: str
    ns: str
    argv: list[str]
    log: str
    env: dict[str, str] = field(default_factory=dict)
    restart: bool = False
    stale_files: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class RestartPolicy:
    """Backoff of automatic restarts: the first after FIRST_DELAY, each further one of a streak of
    quick crashes FACTOR times later, at most MAX_DELAY; a run of STABLE_AFTER seconds ends the streak."""

    first_delay: float = 0.1
    factor: float = 2.0
    max_delay: float = 30.0
    stable_after: float = 10.0

    def streak(self, previous: int, ran_for: float) -> int:
        """Consecutive quick crashes, this one included."""
        return 1 if ran_for >= self.stable_after else previous + 1

    def delay(self, streak: int) -> float:
        return min(self.max_delay, self.first_delay * self.factor ** max(0, streak - 1))


@dataclass
class Slot:
    """One process the supervisor runs, keyed by (node, name), across its restarts."""

    node: str
    name: str
    ns: str
    argv: list[str]
    log: str
    env: dict[str, str] = field(default_factory=dict)
    restart: bool = False
    recover_argv: list[str] = field(default_factory=list)
    recover_env: dict[str, str] = field(default_factory=dict)
    stale_files: list[str] = field(default_factory=list)
    pid: int = 0
    starttime: int = 0
    state: str = "running"  # running | backoff (dead, restart scheduled) | stopped (on purpose) | exited
    restarts: int = 0  # automatic restarts
    streak: int = 0  # consecutive quick crashes (drives the backoff)
    started_at: float = 0.0  # wall clock of the current (or last) start
    exited_at: float = 0.0  # wall clock of the last exit
    last_exit: str = ""  # "killed by SIGKILL", "exit status 1"
    restart_at: float = 0.0  # backoff: wall clock of the scheduled restart
    last_down_s: float | None = None  # how long it was down before its last automatic restart
    running_argv: list[str] = field(default_factory=list)  # the command line of the current process

    @property
    def key(self) -> tuple[str, str]:
        return self.node, self.name

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Slot:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in data.items() if k in known})


def describe_exit(status: int) -> str:
    """A wait status in words."""
    if os.WIFSIGNALED(status):
        try:
            return f"killed by {signal.Signals(os.WTERMSIG(status)).name}"
        except ValueError:
            return f"killed by signal {os.WTERMSIG(status)}"
    if os.WIFEXITED(status):
        return f"exit status {os.WEXITSTATUS(status)}"
    return f"wait status {status}"


def _wire(r: SpawnRequest) -> dict[str, Any]:
    """A spawn request as the supervisor reads it."""
    item: dict[str, Any] = {"node": r.node, "name": r.name, "ns": r.ns, "argv": list(r.argv), "log": r.log,
                            "env": r.env, "restart": r.restart, "stale_files": list(r.stale_files)}
    if r.restart:
        item["recover_argv"], item["recover_env"] = recovery(r.argv, r.env)
    return item


class PartialStart(LabError):
    """Starting a batch of daemons stopped at one that could not start; STARTED: the records of those
    started before it, which run: the caller records them so that `lab down` stops them too."""

    def __init__(self, message: str, started: list[ProcessRecord]):
        super().__init__(message)
        self.started = started


def _record(r: SpawnRequest, answer: dict[str, Any]) -> ProcessRecord:
    """The record of R once the supervisor answered (LabError if it could not start it)."""
    if not answer.get("ok"):
        raise LabError(f"cannot start {r.name} on {r.node}: {answer.get('error')}")
    return ProcessRecord(r.node, r.name, r.ns, int(answer["pid"]), int(answer["starttime"]), r.log, list(r.argv),
                         restart=r.restart, stale_files=list(r.stale_files))


def recovery(argv: Sequence[str], env: dict[str, str] | None = None) -> tuple[list[str], dict[str, str]]:
    """How a daemon is started again after a crash: BIRD in graceful-restart recovery (`-R`: its
    peers keep the stale routes, the kernel keeps its routes until the sessions are back), every
    other daemon with LAB_RESUME=1 (it resumes from its status file instead of starting afresh)."""
    argv = list(argv)
    if argv and Path(argv[0]).name == "bird":
        return (argv if "-R" in argv else [*argv, "-R"]), dict(env or {})
    return argv, {**(env or {}), RESUME_ENV: "1"}


def read_table(state_dir: str | Path) -> list[Slot] | None:
    """The supervisor's table as last published, None if there is none (yet)."""
    try:
        data = json.loads((Path(state_dir) / TABLE_NAME).read_text())
        return [Slot.from_json(s) for s in data["processes"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def slot_alive(slot: Slot) -> bool:
    return slot.state == "running" and slot.pid > 0 and starttime(slot.pid) == slot.starttime


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
            netnsutil.enter(ns)
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


def reaped() -> Iterator[tuple[int, int]]:
    """(pid, wait status) of every child that has exited, without blocking: what a process that
    starts daemons (the supervisor, the node agent in a container) calls on SIGCHLD."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        yield pid, status


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
        return self.wait_started(self.launch())

    def launch(self) -> int:
        """Start the supervisor process and return at once (its pid): it gets ready (imports, socket)
        while the caller goes on; `wait_started` before the first request."""
        self.socket_path.unlink(missing_ok=True)
        argv = [sys.executable, "-m", "lab_orchestrator.runtime.supervisord", str(self.state_dir)]
        return fork_exec(argv, None, str(self.state_dir / "logs" / "supervisor.log"), detach=True)

    def wait_started(self, pid: int, timeout: float = 5.0) -> int:
        """PID, once the supervisor it is answers requests (LabError if it exits or does not answer)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.socket_path.exists() and self.running():
                return pid
            if starttime(pid) is None:
                break
            time.sleep(0.005)
        raise LabError(f"the lab supervisor did not start (log: {self.state_dir / 'logs' / 'supervisor.log'})")

    def spawn(self, node: str, name: str, ns: str, argv: Sequence[str], log: str,
              env: dict[str, str] | None = None, restart: bool = False,
              stale_files: Sequence[str] = ()) -> ProcessRecord:
        """Start (node, name). With RESTART the supervisor starts it again whenever it dies without
        having been stopped through it (in recovery, after a backoff)."""
        wanted = SpawnRequest(node, name, ns, list(argv), log, env or {}, restart, list(stale_files))
        reply = self._call({"op": "spawn", **_wire(wanted)}, timeout=10.0)
        return _record(wanted, reply)

    def spawn_all(self, requests: Sequence[SpawnRequest]) -> list[ProcessRecord]:
        """Start them all with one request (the supervisor forks them one after the other, without a
        round trip each); PartialStart at the first that cannot start, with the records of those
        before it (they run)."""
        reply = self._call({"op": "spawn_all", "requests": [_wire(r) for r in requests]},
                           timeout=10.0 + len(requests) * 0.5)
        records: list[ProcessRecord] = []
        for r, answer in zip(requests, reply.get("replies", []), strict=False):
            try:
                records.append(_record(r, answer))
            except LabError as exc:
                raise PartialStart(str(exc), records) from None
        if len(records) != len(requests):
            raise PartialStart(f"the lab supervisor did not start every daemon: {reply.get('error', 'no answer')}",
                               records)
        return records

    def stop(self, pids: Sequence[int] = (), timeout: float = 2.0, procs: Sequence[tuple[str, str]] = (),
             kill: bool = False) -> None:
        """Stop these processes on purpose (by pid, or by (node, name) whatever their current pid):
        the supervisor will not restart them. KILL: SIGKILL at once (a power cut), not SIGTERM first."""
        self._call({"op": "stop", "pids": list(pids), "procs": [list(p) for p in procs], "timeout": timeout,
                    "kill": kill}, timeout=timeout * 2 + 1)

    def table(self) -> list[Slot]:
        """Every process the supervisor knows, as it is now."""
        reply = self._call({"op": "list"})
        return [Slot.from_json(s) for s in reply.get("processes", [])]

    def shutdown(self) -> None:
        with contextlib.suppress(OSError, LabError):
            self._call({"op": "shutdown"}, timeout=5.0)

    def _call(self, request: dict[str, Any], timeout: float = 5.0) -> dict[str, Any]:
        data = unixsock.request(self.socket_path, request, timeout)
        if not data:
            raise LabError("the lab supervisor closed the connection")
        reply: dict[str, Any] = json.loads(data)
        return reply

