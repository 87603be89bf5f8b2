"""A minimal single-threaded event loop (selectors + a timer heap) for the FlexVPN daemon and client.

asyncio costs ~8 MB more per process than this (platform notes); the daemon needs only readable
and writable callbacks and timers.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import selectors
import time
from collections.abc import Callable
from typing import Any


class Timer:
    __slots__ = ("when", "callback", "cancelled")

    def __init__(self, when: float, callback: Callable[[], None]):
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


class Loop:
    def __init__(self) -> None:
        self.selector = selectors.DefaultSelector()
        self._timers: list[tuple[float, int, Timer]] = []
        self._seq = itertools.count()
        self.stopping = False
        self.errors: list[str] = []

    @staticmethod
    def time() -> float:
        return time.monotonic()

    def call_at(self, when: float, callback: Callable[[], None]) -> Timer:
        timer = Timer(when, callback)
        heapq.heappush(self._timers, (when, next(self._seq), timer))
        return timer

    def call_later(self, delay: float, callback: Callable[[], None]) -> Timer:
        return self.call_at(self.time() + delay, callback)

    def watch(self, fileobj: Any, events: int, callback: Callable[[int], None]) -> None:
        """Call CALLBACK(mask) when FILEOBJ is readable/writable (EVENT_READ | EVENT_WRITE)."""
        try:
            self.selector.modify(fileobj, events, callback)
        except KeyError:
            self.selector.register(fileobj, events, callback)

    def unwatch(self, fileobj: Any) -> None:
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(fileobj)

    def stop(self) -> None:
        self.stopping = True

    def run_once(self, max_wait: float = 1.0) -> None:
        now = self.time()
        while self._timers and self._timers[0][2].cancelled:
            heapq.heappop(self._timers)
        wait = max_wait
        if self._timers:
            wait = min(wait, max(0.0, self._timers[0][0] - now))
        for key, mask in self.selector.select(wait):
            self._guard(lambda k=key, m=mask: k.data(m))  # type: ignore[misc]
        now = self.time()
        while self._timers and self._timers[0][0] <= now:
            _, _, timer = heapq.heappop(self._timers)
            if not timer.cancelled:
                self._guard(timer.callback)

    def run(self) -> None:
        while not self.stopping:
            self.run_once()

    def _guard(self, callback: Callable[[], None]) -> None:
        """A bug in one handler must not take the router down: log it and carry on."""
        try:
            callback()
        except Exception as exc:  # noqa: BLE001
            import traceback

            message = f"{type(exc).__name__}: {exc}"
            self.errors = (self.errors + [message])[-20:]
            print(f"{time.strftime('%H:%M:%S')} handler error: {message}", flush=True)
            traceback.print_exc()
