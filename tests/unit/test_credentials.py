"""The lab's secrets: drawn at random per lab, written owner-only, masked by `lab render` (no root)."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
import yaml

from lab_orchestrator.api import topology as apitopology
from lab_orchestrator.api.running import Lab as RunningLab
from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod
from lab_orchestrator.plan import sshconfig
from lab_orchestrator.plan.features import flexvpn
from lab_orchestrator.runtime import credentials
from lab_orchestrator.runtime.netns import NetnsBackend
from lab_orchestrator.runtime.state import LabState
from labkit import files

REPO = Path(__file__).resolve().parents[2]


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def built(name: str, state_root: str, edit: dict[str, object] | None = None, tmp: Path | None = None):  # type: ignore[no-untyped-def]
    path = REPO / "labs" / name
    if edit:
        assert tmp is not None
        data = yaml.safe_load(path.read_text())
        for node, settings in edit.items():
            data["nodes"][node].update(settings)
        path = tmp / name
        path.write_text(yaml.safe_dump(data))
    return planmod.build(load_topology(path).topology, str(path), state_root)


def test_flexvpn_key_is_drawn_per_lab_and_shared_by_its_routers(tmp_path: Path) -> None:
    plan = built("flexvpn-branch.yml", "/run/lab")
    psk_files = sorted(rel for rel in plan.files if rel.endswith(flexvpn.PSK_FILE))
    assert len(psk_files) == 5  # router1..3 and the two branch clients
    assert "cisco123" not in "".join(plan.files.values())
    assert {plan.files[rel] for rel in psk_files} == {'{\n  "psk": null\n}\n'}
    one, two = credentials.materialize(plan.files), credentials.materialize(plan.files)
    keys = {json.loads(one[rel])["psk"] for rel in psk_files}
    assert len(keys) == 1  # one key for the whole lab: gateways and client agree
    assert keys != {json.loads(two[rel])["psk"] for rel in psk_files}  # another lab up, another key
    config = json.loads(plan.files["nodes/router1/flexvpn.json"])
    assert config["ikev2"]["psk_file"] == "/run/lab/fvios/nodes/router1/psk.secret.json"
    assert "psk" not in config["ikev2"]


def test_flexvpn_key_set_by_the_topology_is_kept(tmp_path: Path) -> None:
    own = {"router1": {"ikev2": {"redirect": "init", "psk": "our-own-key"}}}
    plan = built("flexvpn.yml", "/run/lab", own, tmp_path)
    drawn = credentials.materialize(plan.files)
    assert json.loads(drawn["nodes/router1/psk.secret.json"]) == {"psk": "our-own-key"}
    assert json.loads(drawn["nodes/router2/psk.secret.json"])["psk"] != "our-own-key"


def test_lab_up_writes_secrets_owner_only_in_a_private_state_dir(tmp_path: Path) -> None:
    os.umask(0o022)
    plan = built("flexvpn-branch.yml", str(tmp_path / "run"))
    LabState(name=plan.name, source="", state_dir=plan.state_dir, status="creating", namespaces=[], bridge="",
             host_ports=[], nft_table="", mgmt_subnet="").save()
    NetnsBackend()._write_files(plan)
    root = Path(plan.state_dir)
    assert mode(root) == 0o700
    secrets = sorted(p for p in root.rglob("*") if files.is_secret(p))
    assert root / sshconfig.PASSWORDS_FILE in secrets and root / "nodes" / "router1" / flexvpn.PSK_FILE in secrets
    for path in secrets:
        assert mode(path) == 0o600, path
        assert None not in json.loads(path.read_text()).values()  # every value drawn
    password = json.loads((root / sshconfig.PASSWORDS_FILE).read_text())["admin"]
    assert password != "admin" and len(password) >= 16
    assert password not in (root / "ssh" / "sshd.json").read_text()
    assert not list(root.rglob("*.tmp"))


def test_render_marks_secrets_and_does_not_print_them(tmp_path: Path) -> None:
    source = tmp_path / "t.yml"
    data = yaml.safe_load((REPO / "labs" / "flexvpn.yml").read_text())
    data["ssh"] = {"users": [{"name": "ops", "password": "hunter2-hunter2"}, {"name": "admin"}]}
    data["nodes"]["router1"]["ikev2"]["psk"] = "topology-psk-1"
    source.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    apitopology.render(source, out)
    written = "".join(p.read_text() for p in out.rglob("*") if p.is_file())
    assert "hunter2-hunter2" not in written and "topology-psk-1" not in written
    shown = json.loads((out / sshconfig.PASSWORDS_FILE).read_text())
    assert shown == {"admin": credentials.DRAWN, "ops": credentials.SET}
    assert json.loads((out / "nodes" / "router2" / flexvpn.PSK_FILE).read_text()) == {"psk": credentials.DRAWN}
    assert mode(out / sshconfig.PASSWORDS_FILE) == 0o600


def test_write_secret_is_never_readable_by_others(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        target = tmp_path / "new" / "k.secret.json"
        files.write_secret(target, '{"k": "v"}\n')
        assert mode(target) == 0o600 and mode(target.parent) == 0o700
        target.chmod(0o644)
        files.write_secret(target, '{"k": "w"}\n')  # replaced, not rewritten in place: the mode is the new file's
        assert mode(target) == 0o600 and files.read_secret(target, "k") == "w"
    finally:
        os.umask(old)


def _written(tmp_path: Path, ssh: dict[str, object] | None = None) -> RunningLab:
    tmp_path.mkdir()
    source = tmp_path / "t1.yml"
    data = yaml.safe_load((REPO / "labs" / "topology1.yml").read_text())
    if ssh is not None:
        data["ssh"] = ssh
    source.write_text(yaml.safe_dump(data))
    plan = planmod.build(load_topology(source).topology, str(source), str(tmp_path / "run"))
    state = LabState(name=plan.name, source=str(source), state_dir=plan.state_dir, status="ready", namespaces=[],
                     bridge="", host_ports=[], nft_table="", mgmt_subnet="")
    state.save()
    NetnsBackend()._write_files(plan)
    (Path(plan.state_dir) / "ssh" / "ready").write_text("1\n")
    return RunningLab(state)


def test_lab_ssh_says_the_password_only_when_it_is_needed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    execs: list[list[str]] = []
    monkeypatch.setattr(os, "execvp", lambda name, argv: execs.append(argv))
    with_keys = _written(tmp_path / "a")
    logins = with_keys.ssh_logins()
    assert logins is not None and set(logins) == {"admin"} and logins["admin"] != "admin"
    with_keys.ssh("mx1", None, [])
    assert capsys.readouterr().err == ""  # the lab's key logs in: no password on the screen
    without = _written(tmp_path / "b", {"lab_key": False, "users": [{"name": "ops"}]})
    without.ssh("mx1", None, ["show", "version"])
    password = (without.ssh_logins() or {})["ops"]
    assert capsys.readouterr().err == f"password of ops: {password}\n"
    assert execs[-1][-3:] == ["t1-mx1", "show", "version"]


def test_containerlab_export_draws_one_key_for_its_routers(tmp_path: Path) -> None:
    from lab_orchestrator.clab.export import ExportOptions

    out = tmp_path / "export"
    apitopology.export(REPO / "labs" / "flexvpn.yml", out, ExportOptions())
    written = sorted(out.rglob(flexvpn.PSK_FILE))
    assert [p.parent.name for p in written] == ["router1", "router2", "router3"]
    keys = {files.read_secret(p, "psk") for p in written}
    assert len(keys) == 1 and credentials.DRAWN not in keys
    assert all(mode(p) == 0o600 for p in written)
