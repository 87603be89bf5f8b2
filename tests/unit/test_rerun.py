"""A case whose generator fell behind runs again; the first judged run is the verdict, the reasons
of the runs before it are kept, and a case not judged for another cause is never run again."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from lab_orchestrator.events import rerun
from lab_orchestrator.events.result import CaseError, EventError


def late(reason: str, again: bool = True) -> CaseError:
    return CaseError(EventError(event="srx-power-off", title="t", target="srx1", flows=100, rate=10000.0,
                                error=reason, again=again))


class Runs:
    """A case whose runs end as OUTCOMES says, one per call (an exception is raised)."""

    def __init__(self, *outcomes: Any):
        self.outcomes = list(outcomes)
        self.calls = 0

    def __call__(self) -> Any:
        outcome = self.outcomes[self.calls]
        self.calls += 1
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


def test_a_judged_first_run_is_the_verdict_and_says_nothing_of_reruns() -> None:
    judged = SimpleNamespace(runs_not_judged=None)
    runs = Runs(judged)
    assert rerun.until_judged(runs, 1) is judged
    assert runs.calls == 1 and judged.runs_not_judged is None


def test_a_late_run_runs_again_and_its_reason_stays_in_the_result() -> None:
    judged = SimpleNamespace(runs_not_judged=None)
    said: list[str] = []
    runs = Runs(late("the sender was 101 ms late"), judged)
    assert rerun.until_judged(runs, 1, said.append) is judged
    assert runs.calls == 2
    assert judged.runs_not_judged == ["the sender was 101 ms late"]
    assert said and "running it again (1 of 1)" in said[0]


def test_late_every_time_gives_up_after_the_reruns_with_every_reason() -> None:
    runs = Runs(late("first"), late("second"), late("third"))
    with pytest.raises(CaseError) as caught:
        rerun.until_judged(runs, 2)
    assert runs.calls == 3
    assert caught.value.error.error == "third" and caught.value.error.runs_not_judged == ["first", "second"]


@pytest.mark.parametrize("reruns", [0, 3])
def test_a_case_not_judged_for_another_cause_never_runs_again(reruns: int) -> None:
    runs = Runs(late("BGP not settled after 60 s", again=False), SimpleNamespace(runs_not_judged=None))
    with pytest.raises(CaseError):
        rerun.until_judged(runs, reruns)
    assert runs.calls == 1


def test_no_reruns_reports_the_late_run_as_the_error() -> None:
    runs = Runs(late("late"), SimpleNamespace(runs_not_judged=None))
    with pytest.raises(CaseError) as caught:
        rerun.until_judged(runs, 0)
    assert runs.calls == 1 and caught.value.error.runs_not_judged == []
