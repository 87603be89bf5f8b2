"""A traffic process that never says it is ready leaves the case without traffic to judge by: a
`NotStarted` naming it (a case not judged), never an internal error."""

from __future__ import annotations

import pytest

from lab_orchestrator.events import baseline
from lab_orchestrator.model.diagnostics import LabError


class Child:
    def __init__(self, error: Exception | None):
        self.error = error
        self.waited: float | None = None

    def wait_ready(self, timeout: float) -> Child:
        self.waited = timeout
        if self.error is not None:
            raise self.error
        return self


@pytest.mark.parametrize("error", [TimeoutError("traffic send child gave no answer in 20.0 s"),
                                   RuntimeError("traffic send child failed: Traceback ...")])
def test_a_process_that_does_not_start_is_named_and_is_a_lab_error(error: Exception) -> None:
    with pytest.raises(baseline.NotStarted, match=r"the NAT64 tx-reverse process did not start: traffic send") as got:
        baseline.started(Child(error), 64, "tx-reverse")
    assert isinstance(got.value, LabError)


def test_a_process_that_starts_is_given_the_start_bound() -> None:
    child = Child(None)
    baseline.started(child, 4, "tx-forward")
    assert child.waited == baseline.TRAFFIC_START_S
