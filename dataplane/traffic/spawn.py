"""Senders and receivers in child processes (`python -m dataplane.traffic ROLE --config -`)."""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
from typing import Any

from .stats import Accounting


# --------------------------------------------------------------------------- child processes
class Spawned:
    """A sender or receiver in a child process fed its configuration as one JSON line on stdin.

    The child prints one JSON line when it is ready ({"ready": true}) and one with its report when
    done. Its stdin stays open: when it closes (`stop()`, or this process dies) the child stops and
    reports, so a child never outlives its parent."""

    def __init__(self, role: str, config: dict[str, Any], pass_fds: tuple[int, ...] = ()):
        repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")]))}
        self.role = role
        self.proc = subprocess.Popen([sys.executable, "-m", "dataplane.traffic", role, "--config", "-"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True, env=env, pass_fds=pass_fds)
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(config) + "\n")
        self.proc.stdin.flush()
        self._ready = False

    def _line(self, timeout: float) -> dict[str, Any] | None:
        stdout = self.proc.stdout
        assert stdout is not None
        ready, _, _ = select.select([stdout], [], [], timeout)
        if not ready:
            raise TimeoutError(f"traffic {self.role} child gave no answer in {timeout} s")
        line = stdout.readline()
        if not line:
            return None
        data: dict[str, Any] = json.loads(line)
        return data

    def wait_ready(self, timeout: float = 10.0) -> Spawned:
        if not self._ready:
            line = self._line(timeout)
            if not line or not line.get("ready"):
                raise RuntimeError(f"traffic {self.role} child failed: {self._stderr()}")
            self._ready = True
        return self

    def wait(self, timeout: float = 60.0, sent: dict[str, Any] | None = None) -> dict[str, Any]:
        """The child's report once it finished by itself (a receiver's with SENT, a sender's
        report, for tail loss and the per-flow rate, as `Receiver.stop` does)."""
        self.wait_ready(timeout)
        line = self._line(timeout)
        self._close_stdin()
        self.proc.wait(timeout)
        if line is None or self.proc.returncode != 0:
            raise RuntimeError(f"traffic {self.role} child exited {self.proc.returncode}: {self._stderr()}")
        state = line.pop("state", None)
        if state is not None:
            report = Accounting.from_state(state).report(line.get("rate_per_flow_pps"), sent)
            line.update(report)
        return line

    def stop(self, timeout: float = 10.0, sent: dict[str, Any] | None = None) -> dict[str, Any]:
        """Stop the child (a receiver stops counting, a sender stops sending); its report."""
        self.wait_ready(timeout)
        self._close_stdin()
        return self.wait(timeout, sent)

    def _close_stdin(self) -> None:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()

    def kill(self) -> None:
        self._close_stdin()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)

    def _stderr(self) -> str:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        assert self.proc.stderr is not None
        return self.proc.stderr.read().strip()[-2000:]
