"""`lab up` interrupted while it forks: Python cannot raise the signal handler's KeyboardInterrupt in
an at-fork hook (logging registers one) and prints "Exception ignored ... Traceback" on stderr; the
interrupt is honoured at the next step all the same, so `up` keeps that traceback off the screen."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace
from typing import Any

from lab_orchestrator.api import quiet_own_interrupts


def _unraisable(exc_type: type[BaseException]) -> Any:
    return SimpleNamespace(exc_type=exc_type, exc_value=exc_type(), exc_traceback=None, err_msg=None, object=None)


def test_only_an_interrupt_already_seen_is_kept_quiet() -> None:
    passed: list[Any] = []
    interrupts: list[int] = []
    hook = quiet_own_interrupts(interrupts, passed.append)
    hook(_unraisable(KeyboardInterrupt))  # no signal seen yet: not ours, shown
    interrupts.append(2)
    hook(_unraisable(KeyboardInterrupt))  # ours: quiet
    hook(_unraisable(ValueError))  # anything else: shown
    assert [u.exc_type for u in passed] == [KeyboardInterrupt, ValueError]


def test_a_signal_raised_in_an_at_fork_hook_leaves_no_traceback() -> None:
    # the real case, forced: an after-fork hook raises as a signal handler landing there would
    script = (
        "import os, sys\n"
        "from lab_orchestrator.api import quiet_own_interrupts\n"
        "seen = [2]\n"
        "if sys.argv[1] == 'quiet': sys.unraisablehook = quiet_own_interrupts(seen, sys.unraisablehook)\n"
        "def hook(): raise KeyboardInterrupt\n"
        "os.register_at_fork(after_in_parent=hook)\n"
        "pid = os.fork()\n"
        "if pid == 0: os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "print('went on')\n"
    )
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    shown = subprocess.run([sys.executable, "-c", script, "default"], capture_output=True, text=True, env=env)
    quiet = subprocess.run([sys.executable, "-c", script, "quiet"], capture_output=True, text=True, env=env)
    assert "Traceback" in shown.stderr and shown.stdout == "went on\n"  # what users saw before
    assert quiet.stderr == "" and quiet.stdout == "went on\n"
