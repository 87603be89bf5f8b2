"""A case run again when its generator fell behind its schedule during the event (or in the
baseline before it, with nothing else wrong: `baseline.only_behind`).

Such a run is not judged (`EventError.again`): a packet due during the outage but sent after it was
not lost, so its figures are short, and the cause is the machine (busy, or paused by its hypervisor),
not the lab. The event has been restored before the senders' schedule is checked, so the case can
simply run once more; the first run judged is the verdict, and the reasons of the runs before it
stay in the result (`runs_not_judged`), so a rerun is never silent."""

from __future__ import annotations

from collections.abc import Callable

from .result import CaseError, EventResult


def until_judged(run: Callable[[], EventResult], reruns: int,
                 progress: Callable[[str], None] = lambda _: None) -> EventResult:
    """RUN, and again (up to RERUNS more times) while it raises a `CaseError` whose cause is the
    machine. The error of the last run carries the reasons of the runs before it."""
    not_judged: list[str] = []
    while True:
        try:
            result = run()
        except CaseError as exc:
            if exc.error.again and len(not_judged) < reruns:
                not_judged.append(exc.error.error)
                progress(f"not judged, running it again ({len(not_judged)} of {reruns}): {exc.error.error}")
                continue
            exc.error.runs_not_judged = not_judged
            raise
        if not_judged:
            result.runs_not_judged = not_judged
        return result
