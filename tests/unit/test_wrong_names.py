"""A misspelt node, daemon or event name given to a command on a lab is bad input (exit 2, nothing done)
with the closest known name suggested; `lab events run FILE` checks its names before it brings the lab up."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from lab_orchestrator import api
from lab_orchestrator.api.running import Lab
from lab_orchestrator.cli import app
from lab_orchestrator.model.diagnostics import BadInput
from lab_orchestrator.runtime import hostcheck, ops
from lab_orchestrator.runtime.state import LabState
from lab_orchestrator.runtime.supervisor import ProcessRecord

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Lab:
    """topology1's record, as `lab up` leaves it, with nothing running: only the checks before an
    operation can run, and any operation that would be carried out fails the test."""
    plan = api.plan(REPO / "labs/topology1.yml", state_root=str(tmp_path))
    namespaces = [ns for node in plan.nodes for ns in node.namespaces]
    processes = [ProcessRecord("mx1", "mxlb", "t1-mx1", 1, 0, "", ["mxlb"], restart=True),
                 ProcessRecord("_lab", "sshd", "t1-srx1", 2, 0, "", ["sshd"], restart=True)]
    state = LabState(plan.name, plan.source, str(tmp_path), "ready", namespaces, "", [], "", "", processes)
    found = Lab(state)
    found._plan = plan
    monkeypatch.setattr(hostcheck, "require_root", lambda: None)

    def carried_out(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the operation ran on a wrong name")

    for name in ("inject", "restore", "power_on", "power_off", "crash_daemon"):
        monkeypatch.setattr(ops, name, carried_out)
    return found


def test_a_misspelt_node_is_bad_input_with_the_closest_name(lab: Lab) -> None:
    for call in (lambda: lab.fail("srx-power-off", "srx_2"), lambda: lab.restore("srx_2"),
                 lambda: lab.power("srx_2", on=False), lambda: lab.exec_namespace("srx_2"),
                 lambda: lab.restart("srx_2", "bird")):
        with pytest.raises(BadInput, match=r"has no node srx_2 \(did you mean 'srx2'\?\)|"
                                           r"has no node/instance 'srx_2' \(did you mean 'srx2'\?\)"):
            call()


def test_a_misspelt_daemon_or_event_is_bad_input(lab: Lab) -> None:
    with pytest.raises(BadInput, match=r"mx1 of lab t1 runs no daemon mxbl \(did you mean 'mxlb'\?\)"):
        lab.fail("daemon-crash", "mx1", daemon="mxbl")
    with pytest.raises(BadInput, match=r"mx1 of lab t1 runs no daemon mxbl \(did you mean 'mxlb'\?\)"):
        lab.restart("mx1", "mxbl")
    with pytest.raises(BadInput, match=r"unknown event srx-powr-off \(did you mean 'srx-power-off'\?\)"):
        lab.fail("srx-powr-off", "srx2")
    with pytest.raises(BadInput, match="mnha-pair-power-off does not apply to lab t1"):
        lab.fail("mnha-pair-power-off", "srx2")
    with pytest.raises(BadInput, match=r"--target srx_2: lab t1 has no node srx_2 \(did you mean 'srx2'\?\)"):
        lab.event_names(["srx-power-off"], "srx_2")
    assert lab.event_names(["srx-power-off"], "srx2") == ["srx-power-off"]


def test_the_lab_wide_node_takes_a_daemon_crash_only(lab: Lab) -> None:
    with pytest.raises(AssertionError, match="the operation ran"):  # past every check: the crash itself
        lab.fail("daemon-crash", "_lab", daemon="sshd")
    with pytest.raises(BadInput, match="has no node _lab"):
        lab.restore("_lab")
    # `lab events run -e daemon-crash --target _lab --daemon sshd` (the lab-wide SSH server), and no other event
    assert lab.event_names(["daemon-crash"], "_lab") == ["daemon-crash"]
    with pytest.raises(BadInput, match="--target _lab: lab t1 has no node _lab"):
        lab.event_names(["daemon-crash", "srx-power-off"], "_lab")


@pytest.fixture
def never_up(monkeypatch: pytest.MonkeyPatch) -> CliRunner:
    """A CLI runner whose commands fail the test if they bring a lab up (bad input is refused before)."""
    def brought_up(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("a lab was brought up for bad input")

    monkeypatch.setattr(api, "running", brought_up)
    return CliRunner()


def test_events_run_checks_its_names_before_the_lab_is_up(never_up: CliRunner) -> None:
    runner = never_up
    wrong_event = runner.invoke(app, ["events", "run", "topology1", "-e", "srx-powr-off"])
    assert wrong_event.exit_code == 2, wrong_event.output
    assert "unknown event srx-powr-off (did you mean 'srx-power-off'?)" in wrong_event.output
    wrong_target = runner.invoke(app, ["events", "run", "topology1", "-e", "srx-power-off", "--target", "srx_2"])
    assert wrong_target.exit_code == 2, wrong_target.output
    assert "has no node srx_2 (did you mean 'srx2'?)" in wrong_target.output
    not_here = runner.invoke(app, ["events", "run", "topology1", "-e", "mnha-pair-power-off", "--json"])
    assert not_here.exit_code == 2 and '"exit_code": 2' in not_here.output, not_here.output


def test_report_filters_that_name_nothing_are_bad_input() -> None:
    runner = CliRunner()
    lab_typo = runner.invoke(app, ["report", "-l", "t33", "--list"])
    assert lab_typo.exit_code == 2 and "(did you mean 't3'?)" in lab_typo.output, lab_typo.output
    topology_typo = runner.invoke(app, ["report", "-t", "topolgy3", "--list"])
    assert topology_typo.exit_code == 2 and "(did you mean 'topology3'?)" in topology_typo.output, topology_typo.output
    nothing_left = runner.invoke(app, ["report", "-t", "3", "-e", "srd-switchover", "--list"])
    assert nothing_left.exit_code == 2 and "no case left" in nothing_left.output, nothing_left.output


def test_report_list_says_the_load_the_run_uses() -> None:
    """The shipped plan sets no load: the run calibrates it, and --list says so (not the unused defaults)."""
    runner = CliRunner()
    calibrated = runner.invoke(app, ["report", "-t", "3", "--list"])
    assert calibrated.exit_code == 0 and "traffic calibrated on the first lab" in calibrated.output
    assert "pps per direction" not in calibrated.output
    given = runner.invoke(app, ["report", "-t", "3", "--flows", "50", "--list"])
    assert "50 flows x 200 pps per direction" in given.output, given.output


def test_ssh_to_a_node_without_a_cli_is_bad_input(lab: Lab) -> None:
    (lab.state_dir / "ssh_config").write_text("Host t1-mx1\n  HostName 198.19.0.4\n")
    with pytest.raises(BadInput, match="client of lab t1 does not answer SSH"):
        lab.ssh("client", None, [])
    with pytest.raises(BadInput, match=r"has no node clinet \(did you mean 'client'\?\)"):
        lab.ssh("clinet", None, [])


def test_usage_mistakes_are_bad_input(never_up: CliRunner) -> None:
    runner = never_up
    family = runner.invoke(app, ["events", "run", "topology1", "--family", "5"])
    assert family.exit_code == 2 and "--family 5: give 4, 6, 64, both or all" in family.output, family.output
    no_command = runner.invoke(app, ["exec", "srx1"])
    assert no_command.exit_code == 2 and "give a command after --" in no_command.output, no_command.output
