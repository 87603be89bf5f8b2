"""Ctrl-C and SIGTERM while `lab up` builds a lab: everything built so far is removed, and the user is
told so. The signal handler raises KeyboardInterrupt wherever the main thread is, so that a long wait
ends at once, except inside `whole()`: a body that must not be cut in the middle finishes first and the
interrupt is raised as it ends. A progress line is such a body: rich counts the prints under way, and
an exception landing between its count going up and its `with` taking hold leaves that count up for
good; every later line, the cleanup's and the final error included, then stays in its buffer and the
command ends with an empty stderr."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any


class UpInterrupts:
    def __init__(self) -> None:
        self.seen: list[int] = []  # the signals received, in order
        self._held = 0  # depth of `whole()` bodies under way

    def handler(self, signum: int, frame: object) -> None:
        self.seen.append(signum)
        if not self._held:
            raise KeyboardInterrupt

    def raise_if_seen(self) -> None:
        """A signal seen but not raised (held, or dropped where Python cannot raise): honour it now."""
        if self.seen:
            raise KeyboardInterrupt

    @contextmanager
    def whole(self) -> Iterator[None]:
        """The body runs to its end; a signal received meanwhile is raised once it has."""
        self._held += 1
        try:
            yield
        finally:
            self._held -= 1
        if not self._held:
            self.raise_if_seen()

    def guard(self, progress: Callable[[str, str], None]) -> Callable[[str, str], None]:
        """PROGRESS as `lab up`'s steps call it: a signal seen and not raised yet stops the next step
        before it starts, and a line is printed whole."""
        def checked(step: str, detail: str) -> None:
            self.raise_if_seen()
            with self.whole():
                progress(step, detail)
        return checked

    def unraisable_hook(self, previous: Callable[[Any], object]) -> Callable[[Any], None]:
        """Python cannot raise an exception in some places (an at-fork hook such as logging's, when the
        signal lands during a fork) and prints "Exception ignored ... Traceback" instead. Such a
        KeyboardInterrupt is this handler's, already in `seen` and honoured at the next step: it is
        not shown. Anything else goes to PREVIOUS."""
        def hook(unraisable: Any) -> None:
            if self.seen and unraisable.exc_type is not None and issubclass(unraisable.exc_type, KeyboardInterrupt):
                return
            previous(unraisable)
        return hook


