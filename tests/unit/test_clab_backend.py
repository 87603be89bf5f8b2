"""The containerlab backend's subprocess driving, against STAND-IN executables.

Nothing here runs containerlab or Docker (this machine has neither an engine nor containerlab): the
`containerlab` and `docker` found on PATH during these tests are small stand-in scripts written to a
temporary folder. They record every argument list they are called with (one JSON line each) and
answer `containerlab inspect --format json` with canned output in either of containerlab's shapes
(before v0.68: {"containers": [...]}; from v0.68: grouped by lab name), and `docker exec ...
clab_node status` with a canned readiness report. What is asserted is what the backend asks for.
"""

from __future__ import annotations

import json
import os
import stat
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lab_orchestrator.clab import backend as clab
from lab_orchestrator.clab import export as clab_export
from lab_orchestrator.model.diagnostics import LabError
from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod
from lab_orchestrator.plan.pipeline import LabPlan

REPO = Path(__file__).resolve().parents[2]
NODES_T3 = ["client", "gw-trust", "mx1", "srx1", "srx2", "srx3", "srx4", "gw-untrust", "server"]

STAND_IN = r'''#!/bin/sh
# STAND-IN for `{name}` in unit tests: records its arguments, prints canned answers. Not the real tool.
line='["{name}"'
for arg in "$@"; do
  arg=$(printf '%s' "$arg" | sed 's/\\/\\\\/g; s/"/\\"/g')
  line="$line, \"$arg\""
done
printf '%s]\n' "$line" >> "$STAND_IN_LOG"
if [ "{name}" = containerlab ]; then
  case "$1" in
    deploy) printf '%s' "${{STAND_IN_DEPLOY_ERR:-}}" >&2; exit "${{STAND_IN_DEPLOY_RC:-0}}" ;;
    inspect) cat "$STAND_IN_INSPECT" ;;
  esac
  exit 0
fi
# docker exec CONTAINER python3 -m lab_orchestrator.clab.agent SUBCOMMAND ...
if [ "$1" = exec ]; then
  container=$2
  shift 2
  while [ $# -gt 0 ] && [ "$1" != lab_orchestrator.clab.agent ]; do shift; done
  [ $# -gt 0 ] && shift
  case "$1" in
    status)
      if [ "${{STAND_IN_READY:-1}}" = 1 ]; then
        printf '{{"node": "%s", "phase": "ready", "ready": true, "pending": []}}\n' "$container"
      else
        printf '{{"node": "%s", "phase": "ready", "ready": false, "pending": ["%s fw_srx1 Active"]}}\n' \
          "$container" "$container"
      fi ;;
    link) echo "$container $2 $3" ;;
    *) echo "$container: $*" ;;
  esac
fi
exit 0
'''


def _entry(lab: str, node: str, index: int, state: str = "running") -> dict[str, Any]:
    return {"lab_name": lab, "labPath": f"{lab}.clab.yml", "name": f"clab-{lab}-{node}",
            "container_id": f"{index:012x}", "image": "lab-node:latest", "kind": "linux", "state": state,
            "ipv4_address": f"198.19.27.{index + 2}/24", "ipv6_address": "N/A", "owner": "root"}


def inspect_before_068(lab: str, nodes: list[str], state: str = "running") -> str:
    return json.dumps({"containers": [_entry(lab, n, i, state) for i, n in enumerate(nodes)]}, indent=2)


def inspect_from_068(lab: str, nodes: list[str], state: str = "running") -> str:
    entries = [dict(_entry(lab, n, i, state), absLabPath=f"/labs/{lab}.clab.yml", status="Up 2 minutes")
               for i, n in enumerate(nodes)]
    return json.dumps({lab: entries, "other": [_entry("other", "r1", 99)]}, indent=2)


class StandIns:
    def __init__(self, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
        self.bin = tmp_path / "bin"
        self.bin.mkdir()
        self.log = tmp_path / "calls.jsonl"
        self.inspect = tmp_path / "inspect.json"
        for name in ("containerlab", "docker"):
            script = self.bin / name
            script.write_text(STAND_IN.format(name=name))
            script.chmod(script.stat().st_mode | stat.S_IXUSR)
        monkeypatch.setenv("PATH", f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}")
        monkeypatch.setenv("STAND_IN_LOG", str(self.log))
        monkeypatch.setenv("STAND_IN_INSPECT", str(self.inspect))
        monkeypatch.delenv("LAB_CONTAINERLAB", raising=False)
        monkeypatch.delenv("LAB_DOCKER", raising=False)
        self.state_root = tmp_path / "state"
        monkeypatch.setattr(clab, "STATE_ROOT", self.state_root)

    def calls(self, tool: str | None = None) -> list[list[str]]:
        if not self.log.exists():
            return []
        calls = [json.loads(line) for line in self.log.read_text().splitlines()]
        return [c[1:] for c in calls if tool is None or c[0] == tool]


@pytest.fixture
def stand_ins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StandIns:
    return StandIns(tmp_path, monkeypatch)


@cache
def plan_t3() -> LabPlan:
    return planmod.build(load_topology(REPO / "labs" / "topology3.yml").topology, "labs/topology3.yml")


def staged_t3(vendor: dict[str, str] | None = None) -> clab.ClabRecord:
    plan = plan_t3()
    options = clab_export.ExportOptions(vendor=vendor or {}, images={k: "img" for k in (vendor or {}).values()})
    return clab.record_for(clab.stage_export(clab_export.export(plan, options)))


# ---------------------------------------------------------------- inspect JSON shapes
@pytest.mark.parametrize("shape", [inspect_before_068, inspect_from_068])
def test_parse_inspect_reads_both_json_shapes(shape: Any) -> None:
    found = [c for c in clab.parse_inspect(shape("t3", NODES_T3)) if c.lab == "t3"]
    assert [c.node for c in found] == NODES_T3
    assert found[2] == clab.ContainerInfo("t3", "clab-t3-mx1", "mx1", "linux", "lab-node:latest", "running",
                                          "198.19.27.4/24", "000000000002")


def test_parse_inspect_edge_cases() -> None:
    assert clab.parse_inspect("") == []
    assert clab.parse_inspect("{}") == []
    assert clab.parse_inspect('{"containers": []}') == []
    named = clab.parse_inspect(json.dumps({"containers": [dict(_entry("t3", "mx1", 0), node_name="mx1")]}))
    assert named[0].node == "mx1"
    with pytest.raises(LabError, match="did not print JSON"):
        clab.parse_inspect("INFO no containers found")
    with pytest.raises(LabError, match="unknown shape"):
        clab.parse_inspect("42")


# ---------------------------------------------------------------- up / down
@pytest.mark.parametrize("shape", [inspect_before_068, inspect_from_068])
def test_up_deploys_inspects_and_waits_for_every_emulated_node(stand_ins: StandIns, shape: Any) -> None:
    stand_ins.inspect.write_text(shape("t3", NODES_T3))
    record = staged_t3()
    done = clab.ContainerlabBackend().up(record, ready_timeout=5)
    assert done.status == "ready"
    topo = record.topology_file
    assert Path(topo).is_absolute() and Path(topo).is_file()
    calls = stand_ins.calls("containerlab")
    assert calls[0] == ["deploy", "-t", topo]
    assert calls[1] == ["inspect", "-t", topo, "--format", "json"]
    status_calls = stand_ins.calls("docker")
    assert [c[1] for c in status_calls] == [f"clab-t3-{n}" for n in NODES_T3]
    assert all(c[0] == "exec" and c[2:] == ["python3", "-m", "lab_orchestrator.clab.agent", "status"]
               for c in status_calls)
    saved = clab.ClabRecord.load("t3")
    assert saved is not None and saved.status == "ready" and len(saved.inspect) == len(NODES_T3)


def test_vendor_nodes_are_not_waited_for(stand_ins: StandIns) -> None:
    stand_ins.inspect.write_text(inspect_from_068("t3", NODES_T3))
    clab.ContainerlabBackend().up(staged_t3({"srx1": "juniper_vsrx"}), ready_timeout=5)
    assert "clab-t3-srx1" not in [c[1] for c in stand_ins.calls("docker")]


def test_failed_deploy_is_destroyed_and_forgotten(stand_ins: StandIns, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STAND_IN_DEPLOY_RC", "1")
    monkeypatch.setenv("STAND_IN_DEPLOY_ERR", "Error: failed to create container clab-t3-mx1\n")
    record = staged_t3()
    with pytest.raises(LabError, match="failed to create container clab-t3-mx1"):
        clab.ContainerlabBackend().up(record, ready_timeout=5)
    assert stand_ins.calls("containerlab")[-1] == ["destroy", "-t", record.topology_file, "--cleanup"]
    assert clab.ClabRecord.load("t3") is None


def test_missing_or_stopped_containers_fail_the_deploy(stand_ins: StandIns) -> None:
    stand_ins.inspect.write_text(inspect_before_068("t3", NODES_T3[:-1]))
    with pytest.raises(LabError, match="does not list server"):
        clab.ContainerlabBackend().up(staged_t3(), ready_timeout=5)
    stand_ins.inspect.write_text(inspect_before_068("t3", NODES_T3, state="exited"))
    with pytest.raises(LabError, match=r"not running after deploy: client \(exited\)"):
        clab.ContainerlabBackend().up(staged_t3(), ready_timeout=5)
    assert stand_ins.calls("containerlab")[-1][0] == "destroy"


def test_not_ready_in_time_is_destroyed(stand_ins: StandIns, monkeypatch: pytest.MonkeyPatch) -> None:
    stand_ins.inspect.write_text(inspect_from_068("t3", NODES_T3))
    monkeypatch.setenv("STAND_IN_READY", "0")
    with pytest.raises(LabError, match="not ready after 0 s: clab-t3-client fw_srx1 Active"):
        clab.ContainerlabBackend().up(staged_t3(), ready_timeout=0)
    assert stand_ins.calls("containerlab")[-1][0] == "destroy"
    assert clab.ClabRecord.load("t3") is None


def test_down_destroys_with_cleanup_and_removes_the_record(stand_ins: StandIns) -> None:
    stand_ins.inspect.write_text(inspect_from_068("t3", NODES_T3))
    backend = clab.ContainerlabBackend()
    record = backend.up(staged_t3(), ready_timeout=5)
    assert backend.down(record) == []
    assert stand_ins.calls("containerlab")[-1] == ["destroy", "-t", record.topology_file, "--cleanup"]
    assert clab.ClabRecord.load("t3") is None and clab.deployed_labs() == []


def test_without_containerlab_the_backend_says_so_in_one_sentence(tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(LabError) as info:
        clab.ContainerlabBackend().require()
    message = str(info.value)
    assert message.startswith("containerlab is not installed here") and "\n" not in message
    assert message.count(". ") == 0


# ---------------------------------------------------------------- operations
def test_operations_go_through_the_node_agent(stand_ins: StandIns) -> None:
    stand_ins.inspect.write_text(inspect_from_068("t3", NODES_T3))
    backend = clab.ContainerlabBackend()
    record = backend.up(staged_t3({"srx4": "juniper_vsrx"}), ready_timeout=5)
    before = len(stand_ins.calls("docker"))
    assert backend.power(record, "srx1", on=False) == "clab-t3-srx1: power-off"
    backend.power(record, "srx1", on=True)
    backend.restart(record, "mx1", ["bird-trust-vr"], recover=True)
    plan = plan_t3()
    assert backend.link(record, plan, "srx2", "mx1", up=False) == [
        "clab-t3-mx1 ge-0-1-2 down", "clab-t3-srx2 ge-0-0-0 down",
        "clab-t3-mx1 ge-0-2-2 down", "clab-t3-srx2 ge-0-0-1 down",
        "clab-t3-mx1 ge-0-3-2 down", "clab-t3-srx2 ge-0-0-4 down"]  # the ICL through mx1 too
    agent = [c[4:] for c in stand_ins.calls("docker")[before:]]
    assert agent[:3] == [["lab_orchestrator.clab.agent", "power-off"], ["lab_orchestrator.clab.agent", "power-on"],
                         ["lab_orchestrator.clab.agent", "restart", "bird-trust-vr", "--recover"]]
    with pytest.raises(LabError, match="srx4 is a juniper_vsrx node"):
        backend.power(record, "srx4", on=False)
    with pytest.raises(LabError, match="no link between srx1 and srx3"):
        backend.link(record, plan, "srx1", "srx3", up=False)
    assert backend.exec_argv(record, "mx1", ["ip", "route"], instance="TRUST-VR") == [
        "docker", "exec", "clab-t3-mx1", "ip", "netns", "exec", "t3-mx1-trust-vr", "ip", "route"]
    assert backend.exec_argv(record, "srx1", ["bash"], interactive=True) == [
        "docker", "exec", "-it", "clab-t3-srx1", "bash"]
    status = backend.status(record)
    assert [n["node"] for n in status["nodes"]] == NODES_T3
    assert status["nodes"][2]["agent"]["ready"] is True and "agent" not in status["nodes"][6]


# ---------------------------------------------------------------- CLI
def test_cli_up_and_down_with_the_containerlab_backend(stand_ins: StandIns, monkeypatch: pytest.MonkeyPatch) -> None:
    from lab_orchestrator.cli import app

    stand_ins.inspect.write_text(inspect_before_068("t3", NODES_T3))
    runner = CliRunner()
    result = runner.invoke(app, ["up", "--backend", "containerlab", str(REPO / "labs" / "topology3.yml"),
                                 "--timeout", "5", "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["containers"]["mx1"] == "clab-t3-mx1"
    topo = stand_ins.state_root / "containerlab" / "t3" / "export" / "t3.clab.yml"
    assert stand_ins.calls("containerlab")[0] == ["deploy", "-t", str(topo)]
    again = runner.invoke(app, ["up", "--backend", "containerlab", str(REPO / "labs" / "topology3.yml")])
    assert again.exit_code == 1 and "already deployed with containerlab" in again.output
    result = runner.invoke(app, ["down", "--backend", "containerlab", "--lab", "t3"])
    assert result.exit_code == 0, result.output
    assert stand_ins.calls("containerlab")[-1] == ["destroy", "-t", str(topo), "--cleanup"]
    assert "lab t3 is down" in result.output


def test_cli_up_deploys_an_exported_file_in_place(stand_ins: StandIns, tmp_path: Path) -> None:
    from lab_orchestrator.cli import app

    stand_ins.inspect.write_text(inspect_from_068("t3", NODES_T3))
    out = tmp_path / "export"
    runner = CliRunner()
    assert runner.invoke(app, ["export", str(REPO / "labs" / "topology3.yml"), "--out", str(out)]).exit_code == 0
    result = runner.invoke(app, ["up", "--backend", "containerlab", str(out / "t3.clab.yml"), "--timeout", "5"])
    assert result.exit_code == 0, result.output
    assert stand_ins.calls("containerlab")[0] == ["deploy", "-t", str((out / "t3.clab.yml").resolve())]
    result = runner.invoke(app, ["down", "--backend", "containerlab", str(out / "t3.clab.yml")])
    assert result.exit_code == 0, result.output


def test_cli_without_containerlab(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lab_orchestrator.cli import app

    monkeypatch.setenv("PATH", str(tmp_path))
    result = CliRunner().invoke(app, ["up", "--backend", "containerlab", str(REPO / "labs" / "topology3.yml")])
    assert result.exit_code == 1
    assert "containerlab is not installed here" in result.output and "Traceback" not in result.output
