"""The built wheel in a clean venv, shared by tests/unit/test_wheel.py and the integration test that brings a
lab up from it. A module of its own (not conftest): `pytest tests` imports two conftest modules."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class InstalledWheel:
    wheel: Path
    venv: Path
    elsewhere: Path  # a working directory outside the checkout

    @property
    def lab(self) -> Path:
        return self.venv / "bin" / "lab"

    def env(self) -> dict[str, str]:
        """The environment of a user of that venv: nothing of the checkout on the path."""
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "LAB_TEMPLATES", "LAB_DEBUG")}
        env["PATH"] = f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
        return env

    def run(self, *args: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(self.lab), *args], cwd=self.elsewhere, env=self.env(), capture_output=True,
                              text=True, timeout=timeout)


def packages() -> list[str]:
    """The top-level packages pyproject.toml puts in the wheel ([tool.setuptools.packages.find] include)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    return sorted({pattern.rstrip("*").split(".")[0] for pattern in include})


def _can_build_offline() -> str | None:
    try:
        import setuptools
    except ImportError:
        return "setuptools is not installed (pip install -e '.[dev]')"
    major, minor = (int(x) for x in setuptools.__version__.split(".")[:2])
    if (major, minor) >= (70, 1):
        return None
    try:
        import wheel  # noqa: F401 - setuptools < 70.1 builds wheels with it
    except ImportError:
        return f"setuptools {setuptools.__version__} cannot build a wheel offline (the dev extra brings >= 70.1)"
    return None


def build_and_install(tmp_path_factory: pytest.TempPathFactory) -> InstalledWheel:
    """`pip wheel` of a copy of the sources, installed (--no-deps, --no-index) into a fresh venv.

    The venv finds the dependencies (typer, pydantic, ...) in the test runner's own site-packages through a
    .pth path list; the package itself, its templates and shipped labs come only from the wheel."""
    problem = _can_build_offline()
    if problem:
        pytest.skip(problem)
    base = tmp_path_factory.mktemp("wheel")
    src = base / "src"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for part in packages():
        shutil.copytree(REPO / part, src / part, ignore=skip)
    for part in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / part, src / part)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    quiet = {"capture_output": True, "text": True, "env": env, "timeout": 300}
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                            "--disable-pip-version-check", "-w", str(base / "dist"), str(src)], **quiet)
    assert built.returncode == 0, built.stdout + built.stderr
    (wheel,) = (base / "dist").glob("lab_orchestrator-*.whl")
    venv = base / "venv"
    made = subprocess.run([sys.executable, "-m", "venv", str(venv)], **quiet)
    assert made.returncode == 0, made.stderr
    installed = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--no-deps", "--no-index",
                                "--disable-pip-version-check", str(wheel)], **quiet)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    site_dir = Path(subprocess.run([str(venv / "bin" / "python"), "-c", "import sysconfig; "
                                    "print(sysconfig.get_paths()['purelib'])"], **quiet).stdout.strip())
    runner_sites = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site_dir / "zz_test_runner_deps.pth").write_text("".join(f"{p}\n" for p in sorted(runner_sites)))
    elsewhere = base / "elsewhere"
    elsewhere.mkdir()
    return InstalledWheel(wheel, venv, elsewhere)
