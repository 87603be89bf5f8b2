"""The built wheel is a complete install: templates and shipped labs travel as package data, and the
`lab` of a venv holding only that wheel validates, renders and lists labs from any directory."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

from wheelkit import REPO, InstalledWheel, packages

from lab_orchestrator import __version__


def test_wheel_holds_the_templates_the_labs_and_every_module(installed_wheel: InstalledWheel) -> None:
    names = set(zipfile.ZipFile(installed_wheel.wheel).namelist())
    for folder, pattern in (("templates", "*.j2"), ("labs", "*.yml"), ("plan/features", "*/*.j2")):
        shipped = {str(p.relative_to(REPO)) for p in (REPO / "lab_orchestrator" / folder).glob(pattern)}
        assert shipped and shipped <= names, sorted(shipped - names)
    modules = {str(p.relative_to(REPO)) for part in packages() for p in (REPO / part).rglob("*.py")}
    assert modules <= names, sorted(modules - names)
    assert not any(n.startswith(("tests/", "bench/")) for n in names)


def test_version_comes_from_one_place(installed_wheel: InstalledWheel) -> None:
    assert installed_wheel.wheel.name.startswith(f"lab_orchestrator-{__version__}-")
    result = installed_wheel.run("--version")
    assert result.returncode == 0 and result.stdout.strip() == f"lab {__version__}"


def test_the_package_is_the_wheels_not_the_checkout(installed_wheel: InstalledWheel) -> None:
    code = f"import {', '.join(packages())}; " + "; ".join(f"print({name}.__file__)" for name in packages())
    where = subprocess.run([str(installed_wheel.venv / "bin" / "python"), "-c", code], cwd=installed_wheel.elsewhere,
                           env=installed_wheel.env(), capture_output=True, text=True, timeout=60)
    assert len(where.stdout.split()) == len(packages())
    assert where.returncode == 0, where.stderr
    for line in where.stdout.split():
        assert Path(line).is_relative_to(installed_wheel.venv), line


def test_labs_lists_the_shipped_labs(installed_wheel: InstalledWheel) -> None:
    result = installed_wheel.run("labs", "--json")
    assert result.returncode == 0, result.stderr
    listed = {lab["stem"]: lab for lab in json.loads(result.stdout)}
    assert set(listed) == {p.stem for p in (REPO / "labs").glob("*.yml")}
    assert listed["topology3"]["name"] == "t3" and listed["topology3"]["nodes"] > 0
    assert Path(listed["topology3"]["path"]).is_relative_to(installed_wheel.venv)


def test_render_a_shipped_lab_by_name_from_another_directory(installed_wheel: InstalledWheel,
                                                              tmp_path: Path) -> None:
    result = installed_wheel.run("render", "topology3", "--out", "t3")
    assert result.returncode == 0, result.stdout + result.stderr
    out = installed_wheel.elsewhere / "t3"
    plan = json.loads((out / "plan.json").read_text())
    assert {node["name"] for node in plan["nodes"]} >= {"mx1", "srx1", "srx2"}
    # the same configs as the checkout renders (templates from package data, not from a folder nearby)
    reference = subprocess.run([sys.executable, "-m", "lab_orchestrator.cli", "render", "topology3",
                                "--out", str(tmp_path)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert reference.returncode == 0, reference.stderr
    ours = {p.relative_to(out): p.read_text() for p in (out / "nodes").rglob("*") if p.is_file()}
    theirs = {p.relative_to(tmp_path): p.read_text() for p in (tmp_path / "nodes").rglob("*") if p.is_file()}
    assert len(ours) > 10 and ours == theirs


def test_validate_by_path_and_unknown_name(installed_wheel: InstalledWheel) -> None:
    (installed_wheel.elsewhere / "mine.yml").write_text((REPO / "labs" / "flexvpn.yml").read_text())
    assert installed_wheel.run("validate", "mine.yml").returncode == 0
    missing = installed_wheel.run("validate", "topology9")
    assert missing.returncode == 2
    assert "topology3" in missing.stderr and "Traceback" not in missing.stderr
