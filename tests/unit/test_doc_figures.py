"""Every figure the docs quote from a run comes from a kept result through bench/docfigures.py.

The blocks must be what the generator makes of their results (always checked); the results must not be
older than the code they describe (checked by `make test`, which sets LAB_RESULTS_AGE=check; a landing
of unrelated code elsewhere may age them, and `make results` renews them).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
from benchmod import load

REPO = Path(__file__).resolve().parents[2]
docfigures = load("docfigures")


def test_every_block_is_what_its_result_gives() -> None:
    problems = docfigures.differences()
    assert not problems, "\n".join(problems)


def test_a_changed_figure_is_caught(tmp_path: Path) -> None:
    path = docfigures.ROOT / "docs" / "results.md"
    text = path.read_text()
    body = next(m for m in docfigures.MARKDOWN_BLOCK.finditer(text) if m.group("name") == "results").group("body")
    edited = text.replace(body, body.replace("passed", "passd", 1))
    assert edited != text
    filled, found = docfigures.fill(edited, path)
    assert found == ["results", "families"] and filled == text


def test_an_unknown_block_is_an_error() -> None:
    path = docfigures.ROOT / "docs" / "results.md"
    with pytest.raises(docfigures.FigureError, match="block 'nope' has no generator"):
        docfigures.fill("<!-- figures:nope -->\nx\n<!-- /figures -->\n", path)


def test_ci_budgets_follow_the_rule() -> None:
    assert docfigures.budget_ms(0) == 0
    assert docfigures.budget_ms(15) == 200
    assert docfigures.budget_ms(50) == 200
    assert docfigures.budget_ms(51) == 300
    assert docfigures.budget_ms(2790) == 5700


def test_the_workflow_runs_the_generated_budgets() -> None:
    text = docfigures.WORKFLOW.read_text()
    assert "${{ matrix.budgets }}" in text and "${{ matrix.timing }}" in text
    assert "--max-convergence-ms" not in text, "one convergence budget for every event is not derived from results"


def _git(cwd: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def test_the_age_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "r"
    (repo / "dataplane").mkdir(parents=True)
    (repo / "lab_orchestrator" / "cli").mkdir(parents=True)
    (repo / "dataplane" / "a.py").write_text("1\n")
    (repo / "lab_orchestrator" / "cli" / "b.py").write_text("1\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "one")
    ran_on = _git(repo, "rev-parse", "--short", "HEAD")
    monkeypatch.setattr(docfigures, "ROOT", repo)
    assert docfigures.older_than_code(ran_on) is None
    assert "uncommitted" in (docfigures.older_than_code(ran_on + "-dirty") or "")
    assert "records no commit" in (docfigures.older_than_code("") or "")
    (repo / "lab_orchestrator" / "cli" / "b.py").write_text("2\n")  # a front end: no figure changes
    _git(repo, "commit", "-qam", "two")
    assert docfigures.older_than_code(f"v0-1-g{ran_on}") is None
    (repo / "dataplane" / "a.py").write_text("2\n")
    _git(repo, "commit", "-qam", "three")
    assert "dataplane/a.py" in (docfigures.older_than_code(ran_on) or "")
    assert "not in this checkout's history" in (docfigures.older_than_code("deadbee") or "")


def test_a_lab_file_ages_only_the_results_that_ran_that_lab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new or changed shipped lab makes a result older than the code only if the result ran it."""
    repo = tmp_path / "r"
    (repo / "lab_orchestrator" / "labs").mkdir(parents=True)
    (repo / "lab_orchestrator" / "labs" / "topology3.yml").write_text("name: t3\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "one")
    ran_on = _git(repo, "rev-parse", "--short", "HEAD")
    monkeypatch.setattr(docfigures, "ROOT", repo)
    (repo / "lab_orchestrator" / "labs" / "topology4-dualstack.yml").write_text("name: t4d\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "a new lab")
    assert docfigures.older_than_code(ran_on, labs={"topology3"}) is None
    assert "topology4-dualstack.yml" in (docfigures.older_than_code(ran_on, labs={"topology4-dualstack"}) or "")
    assert "topology4-dualstack.yml" in (docfigures.older_than_code(ran_on) or ""), "no labs named: every file counts"
    (repo / "lab_orchestrator" / "labs" / "notes.md").write_text("not a lab\n")  # not a lab: ages every result
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "a note")
    assert "notes.md" in (docfigures.older_than_code(ran_on, labs={"topology3"}) or "")
    _git(repo, "rm", "-q", "lab_orchestrator/labs/notes.md")
    _git(repo, "commit", "-qm", "no note")
    ran_on = _git(repo, "rev-parse", "--short", "HEAD")
    _git(repo, "mv", "lab_orchestrator/labs/topology3.yml", "lab_orchestrator/labs/topology3-sfw.yml")
    _git(repo, "commit", "-qm", "renamed")
    assert "topology3.yml" in (docfigures.older_than_code(ran_on, labs={"topology3"}) or ""), "a renamed lab"
    _git(repo, "mv", "lab_orchestrator/labs/topology3-sfw.yml", "lab_orchestrator/labs/topology3.yml")
    _git(repo, "commit", "-qm", "named back")
    ran_on = _git(repo, "rev-parse", "--short", "HEAD")
    (repo / "lab_orchestrator" / "labs" / "topology3.yml").write_text("name: t3\ndescription: changed\n")
    _git(repo, "commit", "-qam", "topology3 changed")
    assert "topology3.yml" in (docfigures.older_than_code(ran_on, labs={"topology3"}) or "")


def test_each_kept_result_names_the_labs_it_ran() -> None:
    labs = docfigures.result_labs()
    assert labs["docs/results/jvd-report.json"] >= {"topology1", "topology3"}
    assert labs["docs/events-results/topology3.json"] == {"topology3"}


@pytest.mark.skipif(os.environ.get("LAB_RESULTS_AGE") != "check",
                    reason="the results' age is checked by make test (LAB_RESULTS_AGE=check)")
def test_no_result_is_older_than_the_code_it_describes() -> None:
    stale = docfigures.stale_results()
    assert not stale, "\n".join(stale) + "\n(make results; make events-results)"


def _kept_report_without(key: str, section: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The kept plan report with KEY taken out of every case's result (its page then has no SECTION),
    and a passed case of it to give KEY back to."""
    doc = json.loads((REPO / "docs" / "results" / "jvd-report.json").read_text())
    for case in doc["cases"]:
        (case.get("result") or {}).pop(key, None)
    assert section not in docfigures.render_results(doc)
    return doc, next(c for c in doc["cases"] if c.get("status") == "passed")


def test_a_plan_with_tcp_gets_its_tcp_table() -> None:
    """docs/results.md's TCP table: one cell per case that ran TCP beside its flows, none without."""
    with_tcp, case = _kept_report_without("tcp", "### TCP beside the flows")
    case["result"]["tcp"] = {"connections": 100, "completed": 99, "reset": 1, "failed": 0, "timed_out": 0,
                             "stuck": 0, "retried": 2, "longest_gap_ms": 812.4, "stalled": 0, "stall_ms": 1000.0,
                             "interval_ms": 100.0, "carried_before": {}, "stalls": []}
    page = docfigures.render_results(with_tcp)
    assert "### TCP beside the flows" in page
    row = next(line for line in page.splitlines() if line.startswith(f"| {case['event']} |") and "99/100" in line)
    assert "99/100, 0, 1, 0, 812" in row


def test_a_lab_with_families_gets_a_column_per_family() -> None:
    """docs/results.md's per-family table: a column per lab and family for the cases run with IPv4, IPv6
    and NAT64 flows side by side (each family's own verdict), none when no case has families."""
    with_families, case = _kept_report_without("families", "### Per family")

    def family(number: int, passed: bool, worst: float) -> dict[str, object]:
        return {"family": number, "flows": 33, "affected_flows": 16, "unaffected_flows": 17,
                "convergence_ms": {"max": worst, "median": worst / 2}, "longest_gap_ms": worst,
                "packets_lost_by_unaffected_flows": 0 if passed else 7, "flows_moved": 16, "recovered": True,
                "passed": passed, "received": 1000, "lost": 10}

    case["result"]["families"] = {"4": family(4, True, 80.0), "6": family(6, True, 90.0),
                                  "64": family(64, False, 120.0)}
    page = docfigures.render_results(with_families)
    lab = case["lab"]
    assert f"| event | {lab} IPv4 | {lab} IPv6 | {lab} NAT64 |" in page
    row = next(line for line in page.split("### Per family")[1].splitlines() if line.startswith(f"| {case['event']} |"))
    assert row == f"| {case['event']} | pass 80 / 40, 0, rec | pass 90 / 45, 0, rec | **FAIL** 120 / 60, 7, rec |"


def test_the_workflow_command_is_one_the_cli_takes() -> None:
    """Each matrix entry of the convergence workflow, put into its `lab events run` step, is a command line
    the CLI parses as it stands (no old spelling), whose budgets parse and name events that apply to the lab."""
    import shlex

    import typer.main
    import yaml

    from lab_orchestrator import api
    from lab_orchestrator.cli import app
    from lab_orchestrator.cli.grammar import rewrite_deprecated
    from lab_orchestrator.events import budgets as budgetsmod

    job = yaml.safe_load(docfigures.WORKFLOW.read_text())["jobs"]["events"]
    step = next(s["run"] for s in job["steps"] if "lab events run" in s.get("run", ""))
    events_run = typer.main.get_command(app).commands["events"].commands["run"]  # type: ignore[attr-defined]
    assert len(job["strategy"]["matrix"]["include"]) == len(docfigures.CI_LABS)
    for entry in job["strategy"]["matrix"]["include"]:
        line = step.replace("${{ matrix.lab }}", entry["lab"]).replace("${{ matrix.budgets }}", entry["budgets"])
        line = line.replace("${{ matrix.timing }}", entry["timing"])
        words = shlex.split(line.replace("\\\n", " "))
        assert words[:4] == ["sudo", "lab", "events", "run"], words
        args = words[4:]
        assert rewrite_deprecated(["events", "run", *args]) == (["events", "run", *args], []), args
        ctx = events_run.make_context("run", list(args))
        assert (REPO / ctx.params["topology"]).is_file(), ctx.params["topology"]
        applicable = {a.event.name for a in api.file_event_verdicts(REPO / ctx.params["topology"]) if a.applicable}
        budgets = budgetsmod.collect(ctx.params["max_convergence_ms"], ctx.params["max_unaffected_loss"],
                                     ctx.params["budget"], applicable)
        assert {b.event for b in budgets if b.event} <= applicable and len(budgets) > 1, entry["lab"]
        # the budgets were measured with the plan's timing (a reboot's convergence includes its down time)
        timing = json.loads(docfigures.REPORT.read_text())["plan"]["traffic"]
        assert (ctx.params["warmup"], ctx.params["hold"], ctx.params["down_time"]) == \
            (timing["warmup"], timing["hold"], timing["down_time"]), entry["lab"]


def test_the_device_configurations_left_out_of_the_packet_path_are_only_shown() -> None:
    """The age rule leaves out the templates of nodes/NODE/juniper.conf and running-config: true only while
    nothing on the packet path reads those files but the SSH CLI's plan (a path it passes on). A tripwire:
    every line of the packet path that names them, counted per file, so a new reader anywhere changes it."""
    from lab_orchestrator import kinds

    rendered = {kind.device_config[1] for kind in map(kinds.get, kinds.names(lambda k: k.device_config is not None))
                if kind.device_config}
    assert rendered == set(docfigures.DEVICE_CONFIG_TEMPLATES)
    files = subprocess.run(["git", "-C", str(docfigures.ROOT), "ls-files", "--", *docfigures.PACKET_PATH],
                           check=True, capture_output=True, text=True).stdout.split()
    assert not [f for f in files if f.rsplit("/", 1)[-1] in rendered]
    names = re.compile(r"device_config|config_file|juniper\.conf|running-config|" +
                       "|".join(re.escape(t) for t in rendered))
    mentions = {}
    for f in files:
        path = docfigures.ROOT / f
        if not path.is_file() or path.suffix not in (".py", ".j2", ".yml", ".json", ".sh"):
            continue
        count = sum(1 for line in path.read_text(errors="replace").splitlines() if names.search(line))
        if count:
            mentions[f] = count
    # declared by the kinds, written by render.py, passed to the SSH CLI by sshplan/sshconfig: nothing else
    assert mentions == {"lab_orchestrator/kinds/__init__.py": 1, "lab_orchestrator/kinds/base.py": 3,
                        "lab_orchestrator/kinds/mx.py": 1, "lab_orchestrator/kinds/srx.py": 1,
                        "lab_orchestrator/kinds/ios_router.py": 1, "lab_orchestrator/plan/render.py": 3,
                        "lab_orchestrator/plan/sshplan.py": 1, "lab_orchestrator/plan/sshconfig.py": 2}, mentions


def test_the_traffic_by_hand_is_left_out_of_the_packet_path() -> None:
    """(test_architecture.py checks that only the API imports it, which is why it may be left out)"""
    assert f":(exclude){docfigures.HAND_TRAFFIC}" in docfigures.PACKET_PATH


def test_the_dual_stack_labs_get_a_table_per_lab_with_a_column_per_family() -> None:
    def run(fams: dict[str, Any]) -> dict[str, Any]:
        return {"started": "2026-12-07T10:17:00", "commit": "abcdef0123", "command": "lab events run x --rate 3000",
                "events": [{"event": "srx-power-off", "target": "srx1", "families": fams}]}

    good = {"passed": True, "convergence_ms": {"max": 60.0, "median": 40.0}, "packets_lost_by_unaffected_flows": 0,
            "recovered": True}
    bad = {**good, "passed": False, "packets_lost_by_unaffected_flows": 7, "recovered": False}
    tables = load("sidematrices")
    assert tables.dual_stack_labs() == [f"topology{n}-dualstack" for n in (1, 2, 3, 4)]
    kept = {lab: run({"4": good, "6": good}) for lab in tables.dual_stack_labs()}
    kept["topology3-dualstack"] = run({"4": good, "6": bad, "64": good})
    text = tables.dual_stack_tables(kept, docfigures.FigureError)
    assert "| event | IPv4 | IPv6 | NAT64 |" in text and "| event | IPv4 | IPv6 |" in text
    assert "| srx-power-off on srx1 | pass 60 / 40, 0, rec | **FAIL** 60 / 40, 7, **not rec** | pass 60" in text
    assert "commit `abcdef0123`" in text and "`lab events run x --rate 3000`" in text
    del kept["topology1-dualstack"]
    with pytest.raises(docfigures.FigureError, match="topology1-dualstack.json is missing"):
        tables.dual_stack_tables(kept, docfigures.FigureError)
