"""The `lab` command's contract: -h, --version, exit codes (docs/cli.md), --json output and errors as
JSON, shell completion (script and the names it completes), tables not cut outside a terminal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner
from wheelkit import REPO

from lab_orchestrator import __version__, api
from lab_orchestrator.cli import app

LABS = REPO / "labs"


def lab(*args: str, state_root: Path | None = None, cwd: Path = REPO, **env: str) -> subprocess.CompletedProcess[str]:
    """`lab ARGS` as a user runs it (the console script's main(), not the Typer test runner)."""
    full = {k: v for k, v in os.environ.items() if k not in ("LAB_DEBUG", "COLUMNS")}
    full["PYTHONPATH"] = str(REPO)
    if state_root is not None:
        full["LAB_STATE_ROOT"] = str(state_root)
    full.update(env)
    return subprocess.run([sys.executable, "-m", "lab_orchestrator.cli", *args], cwd=cwd, env=full,
                          capture_output=True, text=True, timeout=60)


def only_json(result: subprocess.CompletedProcess[str]) -> object:
    return json.loads(result.stdout)


# ------------------------------------------------------------------ help, version
@pytest.mark.parametrize("args", [[], ["render"], ["traffic", "stats"], ["events", "run"]])
def test_h_is_help(args: list[str]) -> None:
    runner = CliRunner()
    short, long = runner.invoke(app, [*args, "-h"]), runner.invoke(app, [*args, "--help"])
    assert short.exit_code == long.exit_code == 0
    assert short.output == long.output and "Usage:" in short.output


def test_version() -> None:
    result = lab("--version")
    assert result.returncode == 0 and result.stdout == f"lab {__version__}\n"


# ------------------------------------------------------------------ exit codes
def test_exit_0_valid_and_2_invalid(tmp_path: Path) -> None:
    assert lab("validate", "labs/topology3.yml").returncode == 0
    bad = tmp_path / "bad.yml"
    bad.write_text("name: x\nnodes:\n  r1: {kind: router}\n")
    result = lab("validate", str(bad))
    assert result.returncode == 2 and f"{bad}:3: nodes.r1.kind:" in result.stderr


def test_exit_2_not_utf8(tmp_path: Path) -> None:
    latin1 = tmp_path / "latin1.yml"
    latin1.write_bytes(b"# caf\xe9\nname: x\nnodes:\n  h1: {kind: host}\n")
    for args in (["validate", str(latin1)], ["render", str(latin1), "-o", str(tmp_path / "o")],
                 ["graph", str(latin1)], ["validate", "--json", str(latin1)]):
        result = lab(*args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert "not UTF-8 text" in result.stdout + result.stderr and "internal error" not in result.stderr


def test_exit_2_usage_errors() -> None:
    for args in (["bogus"], ["render"], ["up", "--bogus", "labs/topology3.yml"], ["graph", "x", "--format", "gif"]):
        result = lab(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert "Traceback" not in result.stderr


def test_exit_1_when_the_lab_is_not_running(tmp_path: Path) -> None:
    result = lab("status", "nosuchlab", state_root=tmp_path)
    assert result.returncode == 1 and "no running lab named nosuchlab" in result.stderr


def test_exit_70_on_an_internal_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def broken(path: Path, out_dir: Path) -> int:
        raise KeyError("a bug")

    monkeypatch.setattr(api, "render", broken)
    monkeypatch.delenv("LAB_DEBUG", raising=False)
    result = CliRunner().invoke(app, ["render", "topology3", "-o", str(tmp_path / "o")])
    assert result.exit_code == 70 and "internal error (KeyError" in result.output
    result = CliRunner().invoke(app, ["render", "topology3", "-o", str(tmp_path / "o"), "--json"])
    assert result.exit_code == 70
    body = json.loads(result.stdout)
    assert body["exit_code"] == 70 and body["error"].startswith("internal error (KeyError")


# ------------------------------------------------------------------ errors as JSON
def test_json_errors_are_json_on_stdout(tmp_path: Path) -> None:
    target = tmp_path / "a-file"
    target.write_text("keep me\n")
    result = lab("render", "topology3", "-o", str(target), "--json")
    assert result.returncode == 2
    assert only_json(result) == {"error": f"--out {target} is an existing file; give a folder (it is created if "
                                          f"missing)", "exit_code": 2}
    assert target.read_text() == "keep me\n"  # nothing written
    missing = lab("status", "nosuchlab", "--json", state_root=tmp_path)
    assert missing.returncode == 1 and only_json(missing)["exit_code"] == 1  # type: ignore[index]
    usage = lab("up", "--bogus", "--json")
    assert usage.returncode == 2 and only_json(usage) == {"error": "No such option: --bogus", "exit_code": 2}


def test_invalid_topology_as_json_lists_diagnostics(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text("name: x\nnodes:\n  r1: {kind: router}\n")
    result = lab("render", str(bad), "-o", str(tmp_path / "out"), "--json")
    body = only_json(result)
    assert result.returncode == 2 and body["exit_code"] == 2  # type: ignore[index]
    (diag,) = body["diagnostics"]  # type: ignore[index]
    assert diag["line"] == 3 and diag["path"] == "nodes.r1.kind"
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ --json results
def test_json_results_parse(tmp_path: Path) -> None:
    rendered = only_json(lab("render", "topology3", "-o", str(tmp_path / "r"), "--json"))
    assert rendered == {"out": str(tmp_path / "r"), "files": len([p for p in (tmp_path / "r").rglob("*")
                                                                  if p.is_file()])}
    exported = only_json(lab("export", "topology3", "-o", str(tmp_path / "e"), "--json"))
    assert exported["files"] > 0 and Path(exported["topology_file"]).is_file()  # type: ignore[index]
    valid = only_json(lab("validate", "flexvpn", "--json", "--no-host-check"))
    assert valid["valid"] is True and valid["name"] == "flexvpn"  # type: ignore[index]
    labs = only_json(lab("labs", "--json"))
    assert {entry["stem"] for entry in labs} == {p.stem for p in LABS.glob("*.yml")}  # type: ignore[union-attr]
    assert only_json(lab("down", "--all", "--json", state_root=tmp_path)) == {"down": []}
    assert only_json(lab("status", "--json", state_root=tmp_path)) == []


# ------------------------------------------------------------------ completion
def fake_running_lab(root: Path, name: str, nodes: dict[str, str]) -> None:
    (root / name).mkdir(parents=True)
    (root / name / "state.json").write_text("{}")
    (root / name / "plan.json").write_text(json.dumps({"nodes": [{"name": n, "kind": k} for n, k in nodes.items()]}))


def complete(words: str, state_root: Path) -> list[str]:
    cword = len(words.split()) - (0 if words.endswith(" ") else 1)
    result = lab(state_root=state_root, _LAB_COMPLETE="complete_bash", COMP_WORDS=words, COMP_CWORD=str(cword))
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish", "powershell"])
def test_completion_script_generation(shell: str) -> None:
    result = lab("completion", shell)
    assert result.returncode == 0, result.stderr
    assert "_LAB_COMPLETE" in result.stdout and f"complete_{shell}" in result.stdout
    assert lab("completion", "tcsh").returncode == 2


def test_bash_completion_script_runs_in_bash(tmp_path: Path) -> None:
    """The script defines the function bash calls, and `complete` binds it to `lab`."""
    script = tmp_path / "lab.bash"
    script.write_text(lab("completion", "bash").stdout)
    check = subprocess.run(["bash", "-c", f"source {script} && complete -p lab"], capture_output=True, text=True,
                           timeout=30)
    assert check.returncode == 0 and "-F _lab_completion lab" in check.stdout, check.stderr


@pytest.mark.parametrize("command", ["exec", "ssh", "sessions", "fail", "restore", "show", "restart", "selector"])
def test_completion_of_node_names(command: str, tmp_path: Path) -> None:
    fake_running_lab(tmp_path, "demo", {"mx1": "mx", "srx1": "srx", "srx2": "srx"})
    fake_running_lab(tmp_path, "other", {"router1": "ios-router"})
    assert complete(f"lab {command} ", tmp_path) == ["mx1", "router1", "srx1", "srx2"]
    assert complete(f"lab {command} srx", tmp_path) == ["srx1", "srx2"]
    assert complete(f"lab {command} --lab other ", tmp_path) == ["router1"]


def test_completion_of_lab_event_and_topology_names(tmp_path: Path) -> None:
    fake_running_lab(tmp_path, "demo", {"mx1": "mx"})
    fake_running_lab(tmp_path, "dev2", {"mx1": "mx"})
    assert complete("lab sessions srx1 --lab d", tmp_path) == ["demo", "dev2"]
    assert complete("lab down --lab dem", tmp_path) == ["demo"]
    assert complete("lab fail srx1 srx-", tmp_path) == ["srx-link-failure", "srx-link-blackhole", "srx-reboot",
                                                        "srx-power-off"]
    assert "topology3" in complete("lab up topology", tmp_path)


# ------------------------------------------------------------------ tables outside a terminal
def test_tables_are_not_cut_when_stdout_is_not_a_terminal() -> None:
    result = lab("events", "list", "labs/topology1.yml")
    assert result.returncode == 0
    assert "srx-link-failure" in result.stdout and "…" not in result.stdout
    assert max(len(line) for line in result.stdout.splitlines()) > 80  # one row per event, not wrapped
    narrow = lab("events", "list", "labs/topology1.yml", COLUMNS="80")
    assert max(len(line) for line in narrow.stdout.splitlines()) <= 80  # COLUMNS still wins


# ------------------------------------------------------------------ the test tree itself
def test_test_module_basenames_are_unique() -> None:
    """`pytest tests` (make test) imports test modules by basename (rootdir-relative, no packages): a
    tests/unit/test_x.py next to a tests/integration/test_x.py stops the whole collection."""
    seen: dict[str, Path] = {}
    for path in sorted((REPO / "tests").rglob("*.py")):
        if "golden" in path.parts or path.name == "conftest.py":
            continue
        assert path.name not in seen, f"{path.relative_to(REPO)} and {seen[path.name].relative_to(REPO)}: rename one"
        seen[path.name] = path


def test_an_output_file_in_a_missing_folder_is_bad_input(tmp_path: Path) -> None:
    for fmt in ("mermaid", "svg"):
        result = lab("graph", "topology3", "--format", fmt, "--out", str(tmp_path / "nonexistent" / "x.svg"))
        assert result.returncode == 2, (fmt, result.stderr)
        assert "cannot write" in result.stderr and "internal error" not in result.stderr, result.stderr


def test_graph_takes_the_format_from_the_file_name(tmp_path: Path) -> None:
    for name, start in (("g.svg", b"<?xml"), ("g.dot", b"graph"), ("g.md", b"graph LR")):
        result = lab("graph", "topology3", "--out", str(tmp_path / name))
        assert result.returncode == 0, result.stderr
        assert (tmp_path / name).read_bytes().lstrip()[:len(start)] in (start, b"<svg"), name
