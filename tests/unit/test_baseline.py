"""The load a run may put on the machine: the baseline judgement before each event, the calibration's
choice of traffic, and a case that was not judged (error) in every output (JSON, JUnit, HTML)."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from typing import Any

import pytest
from test_eventresult import sample
from typer.testing import CliRunner

from lab_orchestrator.events import baseline, keptup
from lab_orchestrator.events import verdict as eventverdict
from lab_orchestrator.events.baseline import Carried, Direction
from lab_orchestrator.events.result import Check, EventError, EventResult
from lab_orchestrator.report import document as reportgen


def carried(rate: float = 10000, flows: int = 100, **over: Any) -> Carried:
    """Both directions clean unless OVER changes a field of each (sent, due, lost, ...)."""
    fields = {"sent": int(rate), "due": int(rate), "lost": 0, "flows_silent": 0, "max_lag_ms": 1.0,
              "lag_p99_ms": 0.5, **over}
    return Carried(flows, rate, 1.0, {"forward": Direction(**fields), "reverse": Direction(**fields)})


def test_a_clean_baseline_has_nothing_against_it() -> None:
    assert baseline.judge(carried()) == []
    assert carried().resolution_ms == 10.0


@pytest.mark.parametrize(("over", "words"), [
    ({"lost": 7}, "forward: 7 of 10000 packets lost"),
    ({"flows_silent": 3}, "3 of 100 flows received nothing"),
    ({"sent": 9800}, "the sender sent 9800 of 10000 packets due"),
    ({"lag_p99_ms": 12.0, "max_lag_ms": 15.0}, "up to 15.0 ms behind its schedule"),
    ({"max_lag_ms": 41.0}, "up to 41.0 ms behind"),
])
def test_loss_silence_or_a_late_sender_make_a_baseline_unclean(over: dict[str, Any], words: str) -> None:
    why = baseline.judge(carried(**over))
    assert len(why) == 2 and words in why[0] and why[1].startswith("reverse:")


def test_lateness_is_measured_in_per_flow_intervals() -> None:
    # 39 ms worst at a 10 ms resolution is within 4 intervals; at 2.5 ms (400 pps per flow) it is not
    assert baseline.judge(carried(max_lag_ms=39.0)) == []
    assert baseline.judge(carried(rate=40000, max_lag_ms=39.0)) != []
    assert baseline.judge(Carried(10, 1000, 1.0)) == ["no traffic measured"]


def test_the_error_sentence_names_the_load_and_the_way_out() -> None:
    load = carried(rate=100000, flows=200, lost=5)
    text = baseline.cannot_carry(load, baseline.judge(load))
    assert text.startswith("the generator or the path cannot carry 200 flows x 2 directions at 100000 pps here (")
    assert text.endswith("): lower --rate/--flows")


def test_a_sender_late_with_nothing_lost_is_named_as_such_and_runs_again() -> None:
    """Only a late sender: the sentence says so and that the case runs again, before the way out."""
    load = carried(max_lag_ms=200.0, lag_p99_ms=15.0)
    assert baseline.only_behind(load)
    text = baseline.cannot_carry(load, baseline.judge(load))
    assert text.startswith("the generator fell behind its schedule in the baseline, nothing lost (forward: ")
    assert text.endswith("the case runs again under --reruns; if it keeps falling behind, lower --rate/--flows")
    assert "cannot carry" not in text
    lossy = carried(max_lag_ms=200.0, lag_p99_ms=15.0, lost=3)
    assert not baseline.only_behind(lossy)
    assert baseline.cannot_carry(lossy, baseline.judge(lossy)).startswith("the generator or the path cannot carry")


def test_silent_flows_of_a_sender_on_schedule_are_named_as_drops_inside_the_lab() -> None:
    """Flows that delivered nothing while their sender kept its schedule were dropped in the lab: the
    sentence says how many of how many, in which direction, and does not blame the load."""
    load = Carried(60, 3000.0, 1.0, {
        "forward": Direction(sent=3000, due=3000, lost=600, flows_silent=12, max_lag_ms=1.0, lag_p99_ms=0.5),
        "reverse": Direction(sent=3000, due=3000, lost=0, flows_silent=0, max_lag_ms=1.0, lag_p99_ms=0.5)})
    text = baseline.cannot_carry(load, baseline.judge(load))
    assert text.startswith("12 of 60 forward flows delivered nothing in the baseline: dropped inside the lab, "
                           "not a slow sender (forward: 600 of 3000 packets lost; ")
    assert "cannot carry" not in text and "lower --rate/--flows" not in text


def test_silent_flows_count_against_their_own_family_s_share() -> None:
    fields: dict[str, Any] = {"sent": 1500, "due": 1500, "lost": 0, "max_lag_ms": 1.0, "lag_p99_ms": 0.5,
                              "flows": 30}
    load = Carried(60, 3000.0, 1.0, {"forward": Direction(flows_silent=0, **fields),
                                     "forward IPv6": Direction(flows_silent=30, **fields)})
    assert baseline.judge(load) == ["forward IPv6: 30 of 30 flows received nothing"]
    assert baseline.cannot_carry(load, baseline.judge(load)).startswith(
        "30 of 30 forward IPv6 flows delivered nothing in the baseline: dropped inside the lab")


@pytest.mark.parametrize("over", [{"sent": 5000}, {"max_lag_ms": 200.0, "lag_p99_ms": 150.0}])
def test_silent_flows_of_a_sender_behind_its_schedule_name_the_load(over: dict[str, Any]) -> None:
    """An overloaded generator may never have sent the silent flows: the load is named, as before."""
    load = carried(flows_silent=3, **over)
    assert baseline.behind(load.directions["forward"], load.resolution_ms)
    text = baseline.cannot_carry(load, baseline.judge(load))
    assert text.startswith("the generator or the path cannot carry 100 flows x 2 directions at 10000 pps here (")
    assert "dropped inside the lab" not in text and text.endswith("): lower --rate/--flows")


def test_calibration_takes_a_share_of_the_highest_clean_rung() -> None:
    rungs = [(rate, flows, []) for rate, flows in baseline.LADDER[:3]] + [(20000.0, 200, ["forward: 3 lost"])]
    choice = baseline.choose(rungs)
    assert choice.highest_clean == 10000.0 and choice.rate == max(baseline.LADDER[0][0], 10000.0 / baseline.HEADROOM)
    assert choice.flows == baseline.flows_for(choice.rate)
    assert [r["clean"] for r in choice.rungs] == [True, True, True, False]
    assert "calibrated" in choice.line() and json.dumps(choice.to_json())


def test_calibration_sends_the_families_the_run_will(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each rung shares its flows between the run's families: a dual-stack lab is calibrated on its mix."""
    asked: list[tuple[int, float, list[int] | None]] = []

    def measure(plan: Any, flows: int, rate: float, *args: Any, families: list[int] | None = None) -> Any:
        asked.append((flows, rate, families))
        return carried(flows_silent=3) if rate > 5000.0 else carried()

    monkeypatch.setattr(baseline, "measure", measure)
    choice = baseline.calibrate(None, "imix", families=[4, 6, 64])  # type: ignore[arg-type]
    assert asked == [(50, 2500.0, [4, 6, 64]), (100, 5000.0, [4, 6, 64]), (100, 10000.0, [4, 6, 64])]
    assert choice.highest_clean == 5000.0
    asked.clear()
    baseline.calibrate(None, "imix")  # type: ignore[arg-type]
    assert {fams for _, _, fams in asked} == {None}, "IPv4 alone unless told"


def test_calibration_stops_at_the_first_unclean_rung() -> None:
    # a rung above a failed one that happened to pass does not count
    rungs = [(2500.0, 50, []), (5000.0, 100, ["late"]), (10000.0, 100, [])]
    assert baseline.choose(rungs).highest_clean == 2500.0


def test_every_rung_clean_and_none_clean() -> None:
    top = baseline.choose([(rate, flows, []) for rate, flows in baseline.LADDER])
    assert top.top and top.rate == baseline.LADDER[-1][0] / baseline.HEADROOM
    assert top.resolution_ms == 1000.0 * top.flows / top.rate
    none = baseline.choose([(2500.0, 50, ["forward: 9 of 2500 packets lost"])])
    assert none.highest_clean is None and (none.flows, none.rate) == (50, 2500.0)
    assert "did not carry even this rate" in none.line()


def test_flows_follow_the_rate_and_options_win() -> None:
    assert baseline.flows_for(100000) == baseline.LADDER[-1][1]
    assert baseline.flows_for(1000) == baseline.LADDER[0][1]
    assert baseline.traffic(None, 100000.0)["flows"] == 200
    only_flows = baseline.traffic(60, None)
    assert (only_flows["flows"], only_flows["rate"]) == (60, 60 * baseline.PER_FLOW_PPS)
    both = baseline.traffic(60, 3000.0)
    assert both["json"] == {"chosen_by": "options", "flows": 60, "rate": 3000.0, "resolution_ms": 20.0}
    chosen = baseline.traffic(None, None, baseline.choose([(2500.0, 50, [])]))
    assert chosen["json"]["chosen_by"] == "calibration" and chosen["rate"] == 2500.0


# ------------------------------------------------------------------ a case not judged, in every output
CHECKS = [Check(name="selectors ready", ok=True, detail="every member in service in every table"),
          Check(name="BGP settled", ok=True, detail="every session established"),
          Check(name="baseline carried", ok=False, detail="the generator or the path cannot carry ...")]


def error_case() -> EventError:
    return EventError(event="srx-power-off", title="SRX Series Firewall power off", target="srx1",
                      error="the generator or the path cannot carry 200 flows x 2 directions at 100000 pps here "
                            "(forward: 9 of 100000 packets lost): lower --rate/--flows",
                      flows=200, rate=100000.0, checks=CHECKS)


def test_an_error_case_in_json_and_junit() -> None:
    judged = EventResult.from_json(sample(checks=[c.model_dump() for c in CHECKS[:2]]))
    assert judged.to_json()["status"] == "passed" and judged.to_json()["checks"][0]["name"] == "selectors ready"
    data = error_case().to_json()
    assert data["status"] == "error" and "lower --rate/--flows" in data["error"]
    assert [c["ok"] for c in data["checks"]] == [True, True, False]
    suite = ET.fromstring(eventverdict.junit([judged, error_case()], "t1"))
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("2", "0", "1")
    error = suite.findall("testcase")[1].find("error")
    assert error is not None and "cannot carry" in (error.get("message") or "")


def test_a_failed_check_after_the_event_fails_it() -> None:
    after = Check(name="settled after the event", ok=False, when="after", detail="the selector tables did not settle")
    result = EventResult.from_json(sample(passed=False, checks=[after.model_dump()]))
    assert "the selector tables did not settle" in result.failure_reasons()
    assert result.to_json()["status"] == "failed"


def test_an_error_case_in_the_html_report() -> None:
    case = {"id": "t1/srx-power-off", "lab": "t1", "event": "srx-power-off", "target": "srx1", "status": "error",
            "error": error_case().error, "checks": [c.model_dump() for c in CHECKS], "result": None,
            "duration_s": 2.0}
    doc = {"schema": reportgen.SCHEMA, "plan": {"name": "p", "traffic": {}}, "labs": {"t1": {}}, "cases": [case]}
    page = reportgen.to_html(doc)
    assert "ERROR" in page and "lower --rate/--flows" in page
    assert "NOT MET: the generator or the path cannot carry" in page and "ok: every session established" in page
    assert reportgen.summary(doc)["errors"] == 1


def test_exit_status_of_a_run_with_an_error_case_is_3(monkeypatch: pytest.MonkeyPatch) -> None:
    """`lab events run`: a case not judged (and none failed) exits 3, distinct from a failed event (1)."""
    import contextlib

    from lab_orchestrator import api
    from lab_orchestrator.cli import app
    from lab_orchestrator.events.result import CaseError

    class Lab:
        name = "t1"

        def event_names(self, wanted: list[str], target: str | None = None) -> list[str]:
            return wanted

        def event_target(self, event: str, target: str | None) -> str:
            return "srx1"

        def traffic_choice(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return baseline.traffic(None, 100000.0)

        def traffic_families(self, family: str | None = None, flows: int | None = None) -> list[int]:
            return [4]

        def run_event(self, event: str, *args: Any, **kwargs: Any) -> EventResult:
            if event == "srx-power-off":
                raise CaseError(error_case())
            return EventResult.from_json(sample(event=event, passed=event != "gres"))

    monkeypatch.setattr(api, "running", lambda *a, **k: contextlib.nullcontext(Lab()))
    runner = CliRunner()
    result = runner.invoke(app, ["events", "run", "--lab", "t1", "-e", "srx-power-off", "-e", "restart-tlb"])
    assert result.exit_code == 3, result.output
    assert "not judged (a precondition failed): srx-power-off" in result.output
    failed = runner.invoke(app, ["events", "run", "--lab", "t1", "-e", "srx-power-off", "-e", "gres"])
    assert failed.exit_code == 1 and "events failed: gres" in failed.output


def test_a_report_without_flows_or_rate_runs_every_case_at_the_calibrated_load(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from lab_orchestrator import api
    from lab_orchestrator.report import run as reportrun
    from lab_orchestrator.report import testplan

    choice = baseline.choose([(rate, flows, []) for rate, flows in baseline.LADDER[:4]])
    monkeypatch.setattr(baseline, "calibrate", lambda *a, **k: choice)
    monkeypatch.setattr(api, "pick", lambda name: SimpleNamespace(plan=lambda: None, traffic_families=lambda: [4]))
    doc: dict[str, Any] = {"plan": {"traffic": {}}}
    steps: list[str] = []
    traffic = reportrun._calibrated("t1", testplan.TrafficParams(), doc, steps.append)
    assert (traffic.flows, traffic.rate) == (choice.flows, choice.rate) == (100, 5000.0)
    assert doc["plan"]["traffic"]["chosen_by"] == "calibration" and doc["plan"]["traffic"]["resolution_ms"] == 20.0
    assert steps == [choice.line()]
    shipped = testplan.load_plan(testplan.DEFAULT_PLAN).plan.traffic
    assert not {"flows", "rate_per_flow"} & shipped.model_fields_set, "the shipped plan is calibrated"


def test_a_sender_late_during_the_event_makes_it_an_error_with_its_figures() -> None:
    on_time = {"forward": {"max_lag_ms": 13.0, "lag_p99_ms": 4.3}, "reverse": {"max_lag_ms": 6.0, "lag_p99_ms": 1.0}}
    assert baseline.senders_late(on_time, 10.0) == []
    late = {**on_time, "reverse": {"max_lag_ms": 55.0, "lag_p99_ms": 2.0}}
    assert baseline.senders_late(late, 10.0) == [
        "reverse: the sender was up to 55.0 ms behind its schedule (1 % of the packets 2.0 ms or more; "
        "resolution 10 ms)"]
    measured = EventResult.from_json(sample())
    error = EventError(event="gres", title="GRES", target="mx1", error="the generator fell behind", flows=2,
                       rate=100.0, result=measured)
    data = error.to_json()
    assert data["status"] == "error" and data["result"]["status"] == "passed"
    assert EventResult.from_json(data["result"]) == measured


def test_the_html_report_says_how_the_load_was_chosen() -> None:
    choice = baseline.choose([(rate, flows, []) for rate, flows in baseline.LADDER])
    doc = {"schema": reportgen.SCHEMA, "plan": {"name": "p", "traffic": {"chosen_by": "calibration",
                                                                         "calibration": choice.to_json()}},
           "labs": {}, "cases": []}
    assert "calibration on the first lab: 1/4 of the highest rate it carried loss-free and on schedule (40000 pps)" \
        in reportgen.to_html(doc)


@pytest.mark.parametrize(("over", "only_behind"), [
    ({"lag_p99_ms": 13.2, "max_lag_ms": 14.0}, True),  # late: the machine, the case may run again
    ({"sent": 9000}, True),  # fell short of its schedule
    ({"lag_p99_ms": 13.2, "max_lag_ms": 14.0, "lost": 3}, False),  # a loss may be the lab's
    ({"sent": 9000, "flows_silent": 2}, False),
    ({"lost": 3}, False),
    ({}, False),  # clean
])
def test_a_baseline_unclean_only_by_a_late_sender_is_told_apart(over: dict[str, Any], only_behind: bool) -> None:
    assert baseline.only_behind(carried(**over)) is only_behind


def test_a_case_whose_baseline_only_found_a_late_sender_runs_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from lab_orchestrator.events import run
    from lab_orchestrator.events.result import CaseError, Check

    spec = SimpleNamespace(flows=100, rate=10000.0)
    event = SimpleNamespace(name="srx-power-off", title="SRX power off")
    late = Check(name=run.BASELINE_CARRIED, ok=False, detail="forward: the sender was up to 14.0 ms behind")
    for checks, behind, again in (([late], True, True), ([late], False, False),
                                  ([late, Check(name="TCP baseline answered", ok=False)], True, False)):
        monkeypatch.setattr(run, "preconditions", lambda *_a, _c=checks, _b=behind: (_c, _b))
        with pytest.raises(CaseError) as raised:
            run._checked_run(None, None, event, "srx1", spec, print, None, None, None, None)  # type: ignore[arg-type]
        assert raised.value.error.again is again


def sender(start_s: float, end_s: float, stopped: bool) -> dict[str, Any]:
    """A sender report's fields the runner reads: its start and end (CLOCK_MONOTONIC ns), stopped by it or not."""
    return {"start_ns": int(start_s * 1e9), "end_ns": int(end_s * 1e9), "stopped": stopped, "max_lag_ms": 1.0,
            "lag_p99_ms": 0.5}


def test_traffic_that_ran_out_before_the_runner_stopped_it_did_not_cover_the_case() -> None:

    marks = {"traffic": 100.0, "readings": 133.0, "event": 134.0, "restore": 136.0, "settled": 138.0}
    whole = {"forward": sender(100.0, 141.0, True), "reverse IPv6": sender(100.5, 141.1, True)}
    assert keptup.ran_out(whole, marks) == []
    # the readings before the event took 33 s: the forward sender reached its bound a second before the event
    short = {**whole, "forward": sender(100.0, 133.5, False)}
    assert keptup.ran_out(short, marks) == [
        "the forward sender ran out of its time at -0.5 s from the event, before the runner stopped it; "
        "the readings before the event took 33.0 s"]
    # stopped by the runner, but before the event (a case that ended early): no traffic under the event
    early = {**whole, "reverse IPv6": sender(100.5, 120.0, True)}
    assert keptup.ran_out(early, marks) == ["the reverse IPv6 sender had ended 14.0 s before the event"]


def test_a_case_whose_traffic_ran_out_is_not_judged_and_runs_again(monkeypatch: pytest.MonkeyPatch) -> None:
    from types import SimpleNamespace

    from lab_orchestrator.events import run
    from lab_orchestrator.events.result import CaseError

    spec = SimpleNamespace(flows=100, rate=10000.0)
    event = SimpleNamespace(name="srx-power-off", title="SRX power off")
    monkeypatch.setattr(run, "preconditions", lambda *_a: ([], False))
    for stopped in (True, False):
        measured = EventResult.from_json(sample())
        measured.marks = {"traffic": 100.0, "readings": 101.0, "event": 101.2}
        measured.senders = {"forward": sender(100.0, 110.0, stopped), "reverse": sender(100.3, 110.1, True)}
        monkeypatch.setattr(run, "_run", lambda *_a, _m=measured: _m)
        if stopped:
            result = run._checked_run(None, None, event, "srx1", spec, print, None, None, None, None)  # type: ignore[arg-type]
            assert [c.ok for c in result.checks if c.name == keptup.COVERED] == [True]
            continue
        with pytest.raises(CaseError) as raised:
            run._checked_run(None, None, event, "srx1", spec, print, None, None, None, None)  # type: ignore[arg-type]
        assert raised.value.error.again is True
        assert "the traffic did not cover the case (the forward sender ran out of its time" in raised.value.error.error
        assert [c.ok for c in raised.value.error.checks or [] if c.name == keptup.COVERED] == [False]


def test_the_senders_bound_covers_a_lasting_event_s_session_probe() -> None:
    from lab_orchestrator.events import background, run

    spec = run.TrafficSpec(warmup=1.0, hold=1.5, settle=1.0, down_time=1.5)
    fixed = run.MAX_EXTRA_S + run.READINGS_S
    assert run.senders_bound(spec, "restart-tlb") == 2.0 + fixed
    assert run.senders_bound(spec, "srx-reboot") == 3.5 + fixed
    assert run.senders_bound(spec, "srx-power-off") == 3.5 + fixed
    spec.sessions = 1_000_000  # probed while the power-off lasts: hundreds of seconds before the restore
    assert run.senders_bound(spec, "srx-power-off") == 3.5 + fixed + background.work_s(1_000_000)
    assert background.work_s(1_000_000) > 300
    assert run.senders_bound(spec, "restart-tlb") == 2.0 + fixed  # probed after the traffic: not in its bound
