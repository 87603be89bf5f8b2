"""One grammar for every `lab` command, checked over every command's options: `--json` is a flag that
prints JSON; files written go through `--out/-o` or `--KIND-out`; the lab is `--lab/-l` (or a lone
positional name); a short flag means the same long option everywhere; no `<bool>` in help. Old
spellings are rewritten, with a note, for one release."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest
from typer.testing import CliRunner

from lab_orchestrator.cli import app
from lab_orchestrator.cli.docgen import _commands, _param_type
from lab_orchestrator.cli.grammar import RENAMED, rewrite_deprecated

COMMANDS = _commands()
# options that name a file or folder the command reads, not one it writes
INPUT_PATHS = {"--plan", "--render", "--labs"}


def options(cmd: Any) -> list[Any]:
    return [p for p in cmd.params if p.param_type_name == "option" and "--help" not in p.opts]


def test_json_is_always_a_flag_that_prints_json() -> None:
    seen = 0
    for path, cmd in COMMANDS:
        for opt in options(cmd):
            if "--json" in opt.opts:
                seen += 1
                assert opt.is_flag, f"{path}: --json takes a value"
                assert (opt.help or "").startswith("Print"), f"{path}: --json does not print: {opt.help}"
    assert seen >= 15


def test_files_written_go_through_out_options() -> None:
    for path, cmd in COMMANDS:
        for opt in options(cmd):
            long = next(o for o in opt.opts if o.startswith("--"))
            if _param_type(opt, cmd.context_class(cmd)) == "<path>" and long not in INPUT_PATHS:
                assert long == "--out" or long.endswith("-out"), f"{path}: {long} names a file: --out or --KIND-out"
            if "-o" in opt.opts:
                assert long == "--out", f"{path}: -o is {long}"


def test_the_lab_is_chosen_by_lab_option() -> None:
    for path, cmd in COMMANDS:
        for param in cmd.params:
            if param.name in ("lab", "name") and param.param_type_name == "option":
                assert param.opts[:2] == ["--lab", "-l"], f"{path}: the lab option is {param.opts}"
        positional_labs = [p for p in cmd.params if p.param_type_name == "argument" and p.metavar == "[LAB]"]
        if positional_labs:  # a positional lab name only where it is the only argument, next to --lab
            assert len([p for p in cmd.params if p.param_type_name == "argument"]) == 1, path
            assert any("--lab" in p.opts for p in options(cmd)), path


def test_one_meaning_per_short_flag() -> None:
    meaning: dict[str, set[str]] = defaultdict(set)
    for _, cmd in COMMANDS:
        for opt in options(cmd):
            long = next(o for o in opt.opts if o.startswith("--"))
            for short in (o for o in [*opt.opts, *opt.secondary_opts] if not o.startswith("--")):
                meaning[short].add(long)
    assert meaning["-l"] == {"--lab"} and meaning["-o"] == {"--out"}
    clashes = {short: longs for short, longs in meaning.items() if len(longs) > 1}
    assert not clashes, clashes


@pytest.mark.parametrize("path", [path for path, _ in COMMANDS])
def test_help_shows_no_bool_placeholder(path: str) -> None:
    result = CliRunner().invoke(app, [*path.split()[1:], "--help"], env={"COLUMNS": "200"})
    assert result.exit_code == 0, result.output
    assert "<bool>" not in result.output and "BOOLEAN" not in result.output


def test_old_spellings_are_rewritten_with_a_note() -> None:
    args, notes = rewrite_deprecated(["down", "--name", "t3"])
    assert args == ["down", "--lab", "t3"] and "--lab" in notes[0]
    assert rewrite_deprecated(["down", "-n", "t3"])[0] == ["down", "--lab", "t3"]
    assert rewrite_deprecated(["report", "-p", "plan.yml"])[0] == ["report", "--plan", "plan.yml"]
    args, notes = rewrite_deprecated(["events", "run", "topology3", "--json", "r.json", "--junit", "r.xml"])
    assert args == ["events", "run", "topology3", "--json-out", "r.json", "--junit-out", "r.xml"] and len(notes) == 2
    assert rewrite_deprecated(["events", "run", "--json=r.json"])[0] == ["events", "run", "--json-out", "r.json"]
    assert rewrite_deprecated(["events", "run", "t.yml", "--json", "/tmp/new-report"])[0] == \
        ["events", "run", "t.yml", "--json-out", "/tmp/new-report"]  # not a topology: a file to write
    # the current spellings pass untouched: --json as a flag before the topology, -p of `lab web`
    for current in (["events", "run", "--json", "topology3"], ["events", "run", "--json", "labs/topology3.yml"],
                    ["web", "-p", "8041"], ["up", "topology3", "--json"]):
        assert rewrite_deprecated(current) == (current, [])
    # words after `--` are a node's command
    assert rewrite_deprecated(["exec", "srx1", "--", "down", "--name"])[0] == ["exec", "srx1", "--", "down", "--name"]


def test_every_old_spelling_maps_to_an_option_of_its_command() -> None:
    by_path = {path[len("lab "):]: cmd for path, cmd in COMMANDS}
    for (command, old), new in RENAMED.items():
        names = {o for opt in options(by_path[command]) for o in opt.opts}
        assert new in names and old not in names, (command, old, new)


def test_old_spelling_still_runs(tmp_path: Any) -> None:
    """`lab down --name X` answers like `lab down --lab X` (here: no such lab), with the note on stderr."""
    import os
    import subprocess
    import sys

    from wheelkit import REPO

    env = {**os.environ, "PYTHONPATH": str(REPO), "LAB_STATE_ROOT": str(tmp_path)}
    old = subprocess.run([sys.executable, "-m", "lab_orchestrator.cli", "status", "--lab", "nosuch"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert old.returncode == 1 and "no running lab named nosuch" in old.stderr
    result = subprocess.run([sys.executable, "-m", "lab_orchestrator.cli", "report", "-p", str(tmp_path / "x.yml"),
                             "--list"], env=env, capture_output=True, text=True, timeout=60)
    assert "deprecated:" in result.stderr and "No such option" not in result.stderr, result.stderr


def test_make_demo_types_the_current_spellings(monkeypatch: pytest.MonkeyPatch) -> None:
    """`make demo` shows a newcomer the commands to type: none of them an old spelling (no deprecation note)."""
    from wheelkit import REPO

    from lab_orchestrator.cli import demo

    typed: list[list[str]] = []
    monkeypatch.setattr(demo, "run", lambda args, check=True: typed.append(args) or 0)
    demo.main(str(REPO / "labs" / "topology3.yml"))
    assert typed[0][0] == "validate" and typed[-1][0] == "down", typed
    for args in typed:
        assert rewrite_deprecated(args) == (args, []), args


def test_down_without_a_name_takes_the_only_running_lab(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    from lab_orchestrator import api
    from lab_orchestrator.model.diagnostics import LabError
    from lab_orchestrator.runtime import hostcheck
    from lab_orchestrator.runtime.state import LabState

    def record(name: str) -> LabState:
        return LabState(name, "", str(tmp_path / name), "ready", [], "", [], "", "")

    monkeypatch.setattr(hostcheck, "require_root", lambda: None)
    monkeypatch.setattr(api, "running_labs", lambda: [record("t3")])
    assert [lab.name for lab in api.down_targets()] == ["t3"]
    monkeypatch.setattr(api, "running_labs", lambda: [])
    assert api.down_targets() == []
    monkeypatch.setattr(api, "running_labs", lambda: [record("t3"), record("t1")])
    with pytest.raises(LabError, match=r"say which lab \(2 run: t3, t1\)"):
        api.down_targets()


def test_the_command_listing_reflows_each_summary() -> None:
    """`lab --help` lists each command with its summary reflowed to the terminal, not cut at the line
    breaks of its docstring."""
    listing = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "300"}).output
    assert "exit 0 only once it is ready for traffic: BGP established" in listing, listing
    assert "becomes a plan (namespaces, veths, addresses, configs, daemons); the netns backend" in listing
    events = CliRunner().invoke(app, ["events", "--help"], env={"COLUMNS": "300"}).output
    assert "run" in events and "list" in events


def test_no_doc_or_message_teaches_an_old_spelling() -> None:
    """README, docs/, the workflows and the product's own messages write only current spellings (the
    deprecation table of docs/cli.md excepted): a command line there is one a newcomer copies."""
    import re

    from wheelkit import REPO

    files = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / ".github").rglob("*.yml")),
             *sorted(p for p in (REPO / "lab_orchestrator").rglob("*.py") if p.name != "grammar.py"),
             *sorted((REPO / "bench").glob("*.py"))]
    found = []
    old_spellings = [(rf"\blab {command}\b[^\n`|\"]*?\s{re.escape(old)}(?=[\s=])", old, new)
                     for (command, old), new in RENAMED.items()]
    old_spellings.append((r"\blab events run\b[^\n`|\"]*?\s--json[ =]\S+\.json\b", "--json FILE", "--json-out FILE"))
    old_spellings += [(rf"`{re.escape(old)}`", old, new)
                      for (command, old), new in RENAMED.items() if command == "events run"]
    for regex, old, new in old_spellings:
        pattern = re.compile(regex)
        for path in files:
            for number, line in enumerate(path.read_text().splitlines(), 1):
                if path.name == "cli.md" and line.startswith("| `lab"):
                    continue  # the table of old spellings
                if pattern.search(line):
                    found.append(f"{path.relative_to(REPO)}:{number}: {old} (now {new})")
    assert not found, "\n".join(found)
