"""`lab doctor`: feature verdicts from checks (pure), tool lookup on a PATH with a tool hidden, the conntrack
limit against a lab's session table."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from lab_orchestrator import api
from lab_orchestrator.cli import app
from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.runtime import doctor
from lab_orchestrator.runtime.doctor import CheckResult

REPO = Path(__file__).resolve().parents[2]


def _all_ok(*failing: str) -> list[CheckResult]:
    return [CheckResult(c.name, c.group, c.what, c.name not in failing, "", "" if c.name not in failing else c.fix)
            for c in doctor.CHECKS]


def _path_without(tmp_path: Path, hidden: str) -> str:
    """A PATH folder with every tool doctor looks for, except HIDDEN."""
    folder = tmp_path / "bin"
    folder.mkdir()
    for binary in doctor.TOOL_BINARIES.values():
        found = shutil.which(binary)
        if found and binary != hidden:
            os.symlink(found, folder / binary)
        elif binary != hidden:
            (folder / binary).write_text("#!/bin/sh\n")
            (folder / binary).chmod(0o755)
    swanctl = folder / "swanctl"
    swanctl.write_text("#!/bin/sh\n")
    swanctl.chmod(0o755)
    return str(folder)


def test_everything_present_every_feature_works() -> None:
    assert all(f.ok for f in doctor.judge(_all_ok()))


def test_esp_absent_is_covered_by_tun() -> None:
    verdicts = {f.name: f for f in doctor.judge(_all_ok("esp"))}
    assert verdicts["FlexVPN data plane (CHILD_SA traffic)"].ok
    checks = _all_ok("esp")
    assert doctor._optional("esp", checks)
    assert any(line.startswith("--") and " esp " in line for line in doctor.lines(checks, doctor.judge(checks)))


def test_flexvpn_data_plane_without_esp_and_tun_names_both() -> None:
    labs = {"flexvpn.yml": doctor.features_of(load_topology(REPO / "labs" / "flexvpn.yml", []).topology)}
    verdicts = {f.name: f for f in doctor.judge(_all_ok("esp", "tun"), labs)}
    broken = verdicts["FlexVPN data plane (CHILD_SA traffic)"]
    assert not broken.ok and broken.missing == ["esp or tun"] and broken.labs == ["flexvpn.yml"]
    assert verdicts["MX selector (ECMP CHASH, ECMP, TLB)"].ok


def test_features_of_shipped_labs() -> None:
    found = doctor.shipped_lab_features(REPO / "labs")
    assert "CGNAT source NAT" in found["topology1-cgnat.yml"]
    assert "CGNAT source NAT" not in found["topology1.yml"]
    assert "CGNAT source NAT" in found["topology3-mixed.yml"]  # SFW and NAPT44 side by side
    assert "MNHA session sync" in found["topology3.yml"] and "MNHA session sync" not in found["topology1.yml"]
    assert "FlexVPN HSRP virtual IP" in found["flexvpn.yml"]
    assert "MX selector (ECMP CHASH, ECMP, TLB)" not in found["flexvpn.yml"]
    assert doctor.NAT64 in found["topology3-dualstack.yml"] and doctor.NAT64 not in found["topology3-mixed.yml"]
    assert "FlexVPN data plane (CHILD_SA traffic)" not in found["topology3-dualstack.yml"]
    assert "SSH CLI (`lab ssh`)" in found["topology3-dualstack.yml"]


def test_hidden_tool_is_named_with_its_fix_and_the_labs(tmp_path: Path) -> None:
    tools = doctor.probe_tools(_path_without(tmp_path, "bird"))
    bird = next(r for r in tools if r.name == "bird")
    assert not bird.ok and "`bird` not found on PATH" in bird.detail and bird.fix == "apt-get install -y bird2"
    assert all(r.ok for r in tools if r.name in ("nft", "ip", "conntrackd"))
    checks = [r for r in _all_ok() if r.group != "tool"] + tools
    verdicts = doctor.judge(checks, doctor.shipped_lab_features(REPO / "labs"))
    broken = [f for f in verdicts if not f.ok]
    assert [f.name for f in broken] == ["any lab (namespaces, links, BGP)"]
    assert broken[0].missing == ["bird"] and "topology3.yml" in broken[0].labs
    text = "\n".join(doctor.lines(checks, verdicts))
    assert "FAIL tool     bird" in text and "fix: apt-get install -y bird2" in text
    assert "will not work: any lab (namespaces, links, BGP)" in text


def test_hidden_conntrackd_breaks_only_mnha_sync(tmp_path: Path) -> None:
    tools = doctor.probe_tools(_path_without(tmp_path, "conntrackd"))
    checks = [r for r in _all_ok() if r.group != "tool"] + tools
    broken = [f for f in doctor.judge(checks, doctor.shipped_lab_features(REPO / "labs")) if not f.ok]
    assert [f.name for f in broken] == ["MNHA session sync"]
    assert "topology1.yml" not in broken[0].labs and "topology4.yml" in broken[0].labs


def test_json_shape() -> None:
    checks = _all_ok("tshark")
    data = doctor.to_json(checks, doctor.judge(checks))
    assert data["ok"] is False
    assert {"name", "group", "what", "ok", "detail", "fix"} <= set(data["checks"][0])  # type: ignore[index]


def test_ebpf_selector_refused_names_only_the_labs_that_ask_for_it(tmp_path: Path) -> None:
    source = (REPO / "labs" / "topology1.yml").read_text()
    source = source.replace("\nservices:\n", "\nservices:\n  selector: ebpf\n", 1)
    (tmp_path / "ebpf.yml").write_text(source)
    labs = {"ebpf.yml": doctor.features_of(load_topology(tmp_path / "ebpf.yml", []).topology),
            "topology1.yml": doctor.features_of(load_topology(REPO / "labs" / "topology1.yml", []).topology)}
    verdicts = {f.name: f for f in doctor.judge(_all_ok("ebpf-selector"), labs)}
    broken = verdicts[doctor.EBPF_SELECTOR]
    assert not broken.ok and broken.missing == ["ebpf-selector"] and broken.labs == ["ebpf.yml"]
    assert not {f.name: f for f in doctor.judge(_all_ok("tc"), labs)}[doctor.EBPF_SELECTOR].ok, "needs `tc` too"
    assert verdicts["MX selector (ECMP CHASH, ECMP, TLB)"].ok


def _kernel(tmp_path: Path, limit: int, buckets: int) -> Path:
    """A /proc/sys/net/netfilter stand-in with the two conntrack knobs."""
    (tmp_path / "nf_conntrack_max").write_text(f"{limit}\n")
    (tmp_path / "nf_conntrack_buckets").write_text(f"{buckets}\n")
    return tmp_path


def _big_lab(tmp_path: Path, max_sessions: int) -> Path:
    source = (REPO / "labs" / "topology1.yml").read_text()
    path = tmp_path / "big.yml"
    path.write_text(source.replace("\nservices:\n", f"\nservices:\n  max_sessions: {max_sessions}\n", 1))
    return path


def test_conntrack_limit_is_judged_against_the_labs_max_sessions(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = _kernel(tmp_path, 262144, 65536)
    monkeypatch.setattr(doctor.os, "access", lambda *_: False)  # a container's read-only /proc/sys
    assert doctor.conntrack_limit(doctor.default_need(), kernel).ok
    big = doctor.need_of(api.plan(_big_lab(tmp_path, 1048576), state_root=None))
    checked = doctor.conntrack_limit(big, kernel)
    assert not checked.ok
    # topology1: four SRX tables in the one hash
    assert "nf_conntrack_max 262144 (needs 1048576), nf_conntrack_buckets 65536 (needs 1048576)" in checked.detail
    assert "room for 1048576 sessions per table (services.max_sessions of lab " in checked.detail
    assert "4 SRX tables" in checked.detail and "not writable here" in checked.detail
    assert checked.fix.endswith("sysctl -w net.netfilter.nf_conntrack_max=1048576 "
                                "net.netfilter.nf_conntrack_buckets=1048576")


def test_conntrack_limit_without_a_topology_names_the_default(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = _kernel(tmp_path, 65536, 16384)
    monkeypatch.setattr(doctor.os, "access", lambda *_: False)
    checked = doctor.conntrack_limit(doctor.default_need(), kernel)
    assert not checked.ok and "nf_conntrack_max 65536 (needs 262144)" in checked.detail
    assert "the default services.max_sessions" in checked.detail
    monkeypatch.setattr(doctor.os, "access", lambda *_: True)  # root on the host: `lab up` raises them
    checked = doctor.conntrack_limit(doctor.default_need(), kernel)
    assert checked.ok and checked.detail.endswith("`lab up` raises them") and checked.fix == ""


def test_doctor_with_a_topology_checks_that_labs_need(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[doctor.SessionNeed | None] = []

    def fake_run(labs_dir: Path | None = None,
                 need: doctor.SessionNeed | None = None) -> tuple[list[CheckResult], list[doctor.FeatureResult]]:
        seen.append(need)
        checks = _all_ok()
        return checks, doctor.judge(checks)

    monkeypatch.setattr(doctor, "run", fake_run)
    assert CliRunner().invoke(app, ["doctor", str(_big_lab(tmp_path, 2097152))]).exit_code == 0
    assert CliRunner().invoke(app, ["doctor"]).exit_code == 0
    assert seen[0] is not None and seen[0].max_sessions == 2097152 and seen[1] is None


def test_a_small_conntrack_hash_alone_is_reported_not_failed(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor.os, "access", lambda *_: False)
    checked = doctor.conntrack_limit(doctor.default_need(), _kernel(tmp_path, 262144, 16384))
    assert checked.ok and "nf_conntrack_buckets 16384 (needs 65536)" in checked.detail
    assert checked.detail.endswith("not writable here")
