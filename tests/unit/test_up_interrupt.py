"""`lab up` interrupted (Ctrl-C, SIGTERM): the interrupt is honoured where it lands, except inside a
progress line (a line cut in the middle would silence the cleanup's lines and the final error) and
while a thread returns from a lab's namespace; Python's "Exception ignored" traceback of an interrupt
it could not raise (an at-fork hook) is kept off the screen."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from lab_orchestrator.api.interrupts import UpInterrupts
from labkit import netnsutil

ENV = {**os.environ, "PYTHONPATH": os.getcwd()}


def _unraisable(exc_type: type[BaseException]) -> Any:
    return SimpleNamespace(exc_type=exc_type, exc_value=exc_type(), exc_traceback=None, err_msg=None, object=None)


def test_only_an_interrupt_already_seen_is_kept_quiet() -> None:
    passed: list[Any] = []
    interrupts = UpInterrupts()
    hook = interrupts.unraisable_hook(passed.append)
    hook(_unraisable(KeyboardInterrupt))  # no signal seen yet: not ours, shown
    interrupts.seen.append(2)
    hook(_unraisable(KeyboardInterrupt))  # ours: quiet
    hook(_unraisable(ValueError))  # anything else: shown
    assert [u.exc_type for u in passed] == [KeyboardInterrupt, ValueError]


def test_a_signal_raised_in_an_at_fork_hook_leaves_no_traceback() -> None:
    # the real case, forced: an after-fork hook raises as a signal handler landing there would
    script = (
        "import os, sys\n"
        "from lab_orchestrator.api.interrupts import UpInterrupts\n"
        "interrupts = UpInterrupts(); interrupts.seen.append(2)\n"
        "if sys.argv[1] == 'quiet': sys.unraisablehook = interrupts.unraisable_hook(sys.unraisablehook)\n"
        "def hook(): raise KeyboardInterrupt\n"
        "os.register_at_fork(after_in_parent=hook)\n"
        "pid = os.fork()\n"
        "if pid == 0: os._exit(0)\n"
        "os.waitpid(pid, 0)\n"
        "print('went on')\n"
    )
    shown = subprocess.run([sys.executable, "-c", script, "default"], capture_output=True, text=True, env=ENV)
    quiet = subprocess.run([sys.executable, "-c", script, "quiet"], capture_output=True, text=True, env=ENV)
    assert "Traceback" in shown.stderr and shown.stdout == "went on\n"  # what users saw before
    assert quiet.stderr == "" and quiet.stdout == "went on\n"


def test_a_signal_outside_a_whole_body_raises_at_once() -> None:
    interrupts = UpInterrupts()
    previous = signal.signal(signal.SIGUSR1, interrupts.handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGUSR1)  # the handler runs as the call returns
            raise AssertionError("not interrupted")
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert interrupts.seen == [signal.SIGUSR1]


def test_a_signal_inside_a_whole_body_is_raised_once_the_body_has_ended() -> None:
    interrupts = UpInterrupts()
    done: list[str] = []
    previous = signal.signal(signal.SIGUSR1, interrupts.handler)
    try:
        with pytest.raises(KeyboardInterrupt), interrupts.whole():
            os.kill(os.getpid(), signal.SIGUSR1)  # the handler runs here, before the next line
            done.append("first half")
            with interrupts.whole():  # nested: only the outermost end raises
                done.append("inner")
            done.append("second half")
    finally:
        signal.signal(signal.SIGUSR1, previous)
    assert done == ["first half", "inner", "second half"]
    assert interrupts.seen == [signal.SIGUSR1]
    with pytest.raises(KeyboardInterrupt):  # seen: the next step is not started
        interrupts.raise_if_seen()


# The case that left `lab up` silent: the interrupt lands in rich's Console.print just after its count
# of prints under way went up, before its `with` holds; every later print then stays in rich's buffer.
RICH_SCRIPT = """
import os, signal, sys
from rich.console import Console
from lab_orchestrator.api.interrupts import UpInterrupts
err = Console(stderr=True)
interrupts = UpInterrupts()
signal.signal(signal.SIGINT, interrupts.handler)
counting = Console._enter_buffer
def enter_then_signal(self):
    counting(self)
    Console._enter_buffer = counting
    os.kill(os.getpid(), signal.SIGINT)  # the handler runs before this function returns
Console._enter_buffer = enter_then_signal
try:
    if sys.argv[1] == "whole":
        with interrupts.whole():
            err.print("0.10s namespaces 10 namespaces")
    else:
        err.print("0.10s namespaces 10 namespaces")
except KeyboardInterrupt:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    err.print("error: interrupted; the lab was removed")
    sys.exit(1)
"""


@pytest.mark.parametrize("mode", ["whole", "bare"])
def test_an_interrupt_in_a_progress_line_leaves_the_error_visible(mode: str) -> None:
    result = subprocess.run([sys.executable, "-c", RICH_SCRIPT, mode], capture_output=True, text=True, env=ENV)
    assert result.returncode == 1, result.stderr
    if mode == "whole":
        assert result.stderr.splitlines() == ["0.10s namespaces 10 namespaces",
                                              "error: interrupted; the lab was removed"]
    else:  # what `lab up` printed before: nothing at all
        assert result.stderr == ""


class FakeLibc:
    def __init__(self) -> None:
        self.setns_calls: list[int] = []

    def setns(self, fd: int, nstype: int) -> int:
        self.setns_calls.append(fd)
        return 0


def interrupting_check(at: set[int]) -> Any:
    """A `_check` during whose calls number AT (1 is the first) a signal handler raises."""
    calls: list[str] = []

    def check(result: int, what: str) -> None:
        calls.append(what)
        if len(calls) in at:
            raise KeyboardInterrupt(len(calls))
    return check


def test_interrupts_while_returning_home_still_return_home(monkeypatch: pytest.MonkeyPatch) -> None:
    libc = FakeLibc()
    monkeypatch.setattr(netnsutil, "_libc", libc)
    monkeypatch.setattr(netnsutil, "_check", interrupting_check({1, 2}))  # Ctrl-C twice
    with pytest.raises(KeyboardInterrupt) as raised:
        netnsutil._return_home(7)
    assert libc.setns_calls == [7, 7, 7]  # until one was not cut: setns into where one is is harmless
    assert raised.value.args == (1,), "the first interrupt is the one raised"


def test_a_body_interrupted_in_a_namespace_returns_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "lab-r1").touch()
    monkeypatch.setattr(netnsutil, "NETNS_RUN_DIR", tmp_path)
    libc = FakeLibc()
    monkeypatch.setattr(netnsutil, "_libc", libc)
    monkeypatch.setattr(netnsutil, "_check", interrupting_check({2}))  # as the thread leaves
    with pytest.raises(KeyboardInterrupt), netnsutil.entered("lab-r1"):
        pass
    target, home, again = libc.setns_calls
    assert home == again != target, "back home once more after the interrupted return"


def test_lab_up_s_progress_lines_are_printed_whole() -> None:
    interrupts = UpInterrupts()
    printed: list[str] = []

    def progress(step: str, detail: str) -> None:
        interrupts.handler(signal.SIGINT, None)  # Ctrl-C in the middle of the line
        printed.append(f"{step} {detail}")

    checked = interrupts.guard(progress)
    with pytest.raises(KeyboardInterrupt):
        checked("namespaces", "10 namespaces")
    assert printed == ["namespaces 10 namespaces"]
    with pytest.raises(KeyboardInterrupt):
        checked("links", "20 links")  # the next step does not start
    assert printed == ["namespaces 10 namespaces"]
