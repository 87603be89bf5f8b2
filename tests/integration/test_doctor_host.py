"""`lab doctor` on this host: every feature works; a tool hidden from PATH is named with its fix."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.root


def _doctor(env_path: str | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    if env_path is not None:
        env["PATH"] = env_path
    return subprocess.run([sys.executable, "-m", "lab_orchestrator.cli", "doctor", "--json"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=60)


def _namespaces() -> set[str]:
    folder = Path("/run/netns")
    return {p.name for p in folder.iterdir()} if folder.is_dir() else set()


def test_doctor_passes_here_and_leaves_nothing() -> None:
    before = _namespaces()
    done = _doctor()
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    checks = {c["name"]: c for c in report["checks"]}
    for name in ("netns", "veth-ifindex", "nft-numgen", "nft-jhash", "conntrack", "nat", "macvlan", "tun", "bird"):
        assert checks[name]["ok"], checks[name]
    assert all(f["ok"] for f in report["features"])
    assert _namespaces() == before


def test_doctor_names_a_tool_hidden_from_path(tmp_path: Path) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    for tool in ("ip", "nft", "bird", "conntrack", "conntrackd", "tayga", "ssh", "dot", "iperf3", "swanctl", "tc"):
        found = shutil.which(tool)
        if found:
            os.symlink(found, folder / tool)
    done = _doctor(str(folder))  # tshark left out
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(done.stdout)
    tshark = next(c for c in report["checks"] if c["name"] == "tshark")
    assert not tshark["ok"] and "`tshark` not found on PATH" in tshark["detail"]
    assert tshark["fix"] == "apt-get install -y tshark"
    broken = [f["name"] for f in report["features"] if not f["ok"]]
    assert broken == ["packet decoding in the FlexVPN tests"]
