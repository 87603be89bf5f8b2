"""The lab-wide supervisor process: forks daemons into namespaces, reaps them at once, restarts them.

Run as `python -m lab_orchestrator.runtime.supervisord STATE_DIR` (started by `lab up`). It serves
requests on STATE_DIR/supervisor.sock, one JSON object per line:
  {"op": "spawn", "node", "name", "ns", "argv", "log", "env", "restart", "recover_argv", "recover_env",
   "stale_files"}                                                     -> {"ok", "pid", "starttime"}
  {"op": "spawn_all", "requests": [spawn requests without "op"]}      -> {"ok", "replies": [spawn replies]}
  {"op": "stop", "pids": [...], "procs": [[node, name]...], "timeout": S, "kill": bool} -> {"ok"}
  {"op": "list"}                                                      -> {"ok", "processes": [slot...]}
  {"op": "ping"} / {"op": "shutdown"}
A supervised process (restart=True) that exits without a stop request is started again after a
backoff (supervisor.RestartPolicy) with its recovery command line; a stopped one stays down until
spawned again. The table of processes is published in STATE_DIR/processes.json on every change.
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

from labkit import unixsock
from labkit.files import write_json

from ..model.diagnostics import LabError
from .supervisor import (
    SOCKET_NAME,
    TABLE_NAME,
    RestartPolicy,
    Slot,
    describe_exit,
    fork_exec,
    reaped,
    starttime,
)


class Supervisor:
    def __init__(self, state_dir: Path, policy: RestartPolicy | None = None):
        self.state_dir = state_dir
        self.policy = policy or RestartPolicy()
        self.slots: dict[tuple[str, str], Slot] = {}
        self.by_pid: dict[int, Slot] = {}
        self.dirty = True

    # ------------------------------------------------------------------ table
    def publish(self) -> None:
        if not self.dirty:
            return
        self.dirty = False
        data = {"supervisor_pid": os.getpid(), "updated_at": time.time(),
                "processes": [s.to_json() for s in self.slots.values()]}
        with contextlib.suppress(OSError):  # the state folder is being removed (`lab down`)
            write_json(self.state_dir / TABLE_NAME, data, indent=1)

    # ------------------------------------------------------------------ processes
    def start(self, slot: Slot, recover: bool) -> None:
        """Start SLOT's process (its recovery command line with RECOVER); LabError if exec fails."""
        for path in slot.stale_files:
            with contextlib.suppress(OSError):
                os.unlink(path)
        argv = slot.recover_argv if recover and slot.recover_argv else slot.argv
        env = slot.recover_env if recover and slot.recover_argv else slot.env
        pid = fork_exec(argv, slot.ns or None, slot.log, env)
        slot.pid, slot.starttime, slot.running_argv = pid, starttime(pid) or 0, list(argv)
        slot.state, slot.started_at, slot.restart_at = "running", time.time(), 0.0
        self.by_pid[pid] = slot
        self.dirty = True

    def spawn(self, request: dict[str, Any]) -> dict[str, Any]:
        argv = list(request["argv"])
        key = (str(request.get("node", "")), str(request.get("name", argv[0] if argv else "")))
        old = self.slots.get(key)
        if old is not None and old.state == "running" and starttime(old.pid) == old.starttime:
            return {"ok": False, "error": f"{key[1]} on {key[0]} is already running (pid {old.pid})"}
        slot = Slot(key[0], key[1], str(request["ns"] or ""), argv, str(request["log"]),
                    env=dict(request.get("env") or {}), restart=bool(request.get("restart")),
                    recover_argv=list(request.get("recover_argv") or []),
                    recover_env=dict(request.get("recover_env") or {}),
                    stale_files=list(request.get("stale_files") or []))
        if old is not None:  # the same daemon again: its history goes on
            slot.restarts, slot.last_exit, slot.exited_at = old.restarts, old.last_exit, old.exited_at
            slot.last_down_s = old.last_down_s
        try:
            self.start(slot, recover=False)
        except LabError as exc:
            return {"ok": False, "error": str(exc)}
        self.slots[key] = slot
        return {"ok": True, "pid": slot.pid, "starttime": slot.starttime}

    def reap(self) -> None:
        for pid, status in reaped():
            slot = self.by_pid.pop(pid, None)
            if slot is not None and slot.pid == pid:
                self.exited(slot, status)

    def exited(self, slot: Slot, status: int) -> None:
        now = time.time()
        slot.exited_at, slot.last_exit = now, describe_exit(status)
        self.dirty = True
        if slot.state == "stopped":
            return  # stopped on purpose: it stays down
        if not slot.restart:
            slot.state = "exited"
            return
        slot.streak = self.policy.streak(slot.streak, now - slot.started_at)
        delay = self.policy.delay(slot.streak)
        slot.state, slot.restart_at = "backoff", now + delay
        print(f"{time.strftime('%H:%M:%S')} {slot.node}/{slot.name} (pid {slot.pid}) {slot.last_exit}; "
              f"restart in {delay:.2f} s", flush=True)

    def due(self) -> None:
        """Start again every process whose backoff is over."""
        now = time.time()
        for slot in self.slots.values():
            if slot.state != "backoff" or slot.restart_at > now:
                continue
            try:
                self.start(slot, recover=True)
            except LabError as exc:
                slot.exited_at, slot.last_exit = time.time(), str(exc)
                slot.streak += 1
                slot.restart_at = time.time() + self.policy.delay(slot.streak)
                self.dirty = True
                print(f"{time.strftime('%H:%M:%S')} {slot.node}/{slot.name}: {exc}", flush=True)
                continue
            slot.restarts += 1
            slot.last_down_s = round(slot.started_at - slot.exited_at, 4)
            print(f"{time.strftime('%H:%M:%S')} {slot.node}/{slot.name} restarted: pid {slot.pid} "
                  f"(down {slot.last_down_s:.3f} s, restart {slot.restarts})", flush=True)

    def next_wakeup(self) -> float:
        pending = [s.restart_at for s in self.slots.values() if s.state == "backoff"]
        if not pending:
            return 0.5
        return max(0.0, min(0.5, min(pending) - time.time()))

    def stop(self, pids: list[int], procs: list[tuple[str, str]], timeout: float, kill: bool) -> None:
        """Stop on purpose: mark the slots stopped first, so that their exit is not taken for a crash."""
        targets = set(pids)
        for slot in self.slots.values():
            if slot.key in procs or slot.pid in targets:
                if slot.state == "running" and starttime(slot.pid) == slot.starttime:
                    targets.add(slot.pid)
                else:
                    targets.discard(slot.pid)
                slot.state = "stopped"
                self.dirty = True
        self.signal(sorted(targets), timeout, kill)

    def signal(self, pids: list[int], timeout: float, kill: bool) -> None:
        for sig in ((signal.SIGKILL,) if kill else (signal.SIGTERM, signal.SIGKILL)):
            for pid in pids:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, sig)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                self.reap()
                if all(starttime(p) is None for p in pids):
                    return
                time.sleep(0.002)

    def shutdown(self) -> None:
        for slot in self.slots.values():
            if slot.state == "backoff":
                slot.state = "stopped"
        live = [s.pid for s in self.slots.values() if s.state == "running"]
        self.stop(live, [], 2.0, False)
        self.publish()

    # ------------------------------------------------------------------ requests
    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        op = request.get("op")
        if op == "ping":
            return {"ok": True, "pid": os.getpid(), "children": sorted(self.by_pid)}
        if op == "spawn":
            return self.spawn(request)
        if op == "spawn_all":  # in order, stopping at the first that cannot start
            replies = []
            for item in request.get("requests", []):
                replies.append(self.spawn(item))
                if not replies[-1].get("ok"):
                    break
            return {"ok": all(r.get("ok") for r in replies), "replies": replies}
        if op == "stop":
            procs = [(str(p[0]), str(p[1])) for p in request.get("procs", [])]
            self.stop([int(p) for p in request.get("pids", [])], procs, float(request.get("timeout", 2.0)),
                      bool(request.get("kill")))
            return {"ok": True}
        if op == "list":
            return {"ok": True, "processes": [s.to_json() for s in self.slots.values()]}
        if op == "shutdown":
            self.shutdown()
            return {"ok": True, "bye": True}
        return {"ok": False, "error": f"unknown op {op!r}"}


def serve(state_dir: Path) -> None:
    path = state_dir / SOCKET_NAME
    path.unlink(missing_ok=True)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(16)
    stopping = False
    sup = Supervisor(state_dir)

    def on_term(signum: int, frame: object) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    # A child's death wakes the loop at once (through the wakeup pipe): it is reaped and, if it was
    # not stopped on purpose, its restart is scheduled without waiting for the next poll.
    wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(wake_w, warn_on_full_buffer=False)
    signal.signal(signal.SIGCHLD, lambda signum, frame: None)
    selector = selectors.DefaultSelector()
    selector.register(server, selectors.EVENT_READ)
    selector.register(wake_r, selectors.EVENT_READ)
    while not stopping:
        for key, _ in selector.select(timeout=sup.next_wakeup()):
            if key.fileobj == wake_r:
                with contextlib.suppress(BlockingIOError):
                    os.read(wake_r, 4096)
                continue
            conn, _addr = server.accept()
            # A client may vanish mid-request (an interrupted `lab up`, a timed-out ping): that
            # must never take the supervisor, and with it the lab's daemons, down.
            try:
                with conn:
                    conn.settimeout(5.0)
                    data = unixsock.read_line(conn)
                    try:
                        reply = sup.handle(json.loads(data))
                    except (ValueError, KeyError, TypeError) as exc:
                        reply = {"ok": False, "error": f"bad request: {exc}"}
                    if reply.get("bye"):
                        stopping = True
                    unixsock.send_json_line(conn, reply)
            except OSError:
                continue
        sup.reap()
        if not stopping:
            sup.due()
        sup.publish()
    sup.shutdown()
    server.close()
    path.unlink(missing_ok=True)


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
