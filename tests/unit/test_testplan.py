"""Test plans: the JVD plan's cases, located errors, filters (pure, no root)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lab_orchestrator.events import catalog as eventsmod
from lab_orchestrator.model.diagnostics import TopologyInvalid
from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod
from lab_orchestrator.report import testplan

REPO = Path(__file__).resolve().parents[2]


def _write(tmp: Path, text: str) -> Path:
    path = tmp / "plan.yml"
    path.write_text(text)
    return path


def _applicable(file: Path) -> list[str]:
    topo = load_topology(file).topology
    return [a.event.name for a in eventsmod.applicable(json.loads(planmod.build(topo).to_json()))
            if a.applicable and a.event.name not in testplan.NOT_IN_JVD]


def test_jvd_plan_runs_every_applicable_event_of_every_shipped_topology() -> None:
    loaded = testplan.load_plan(testplan.DEFAULT_PLAN)
    cases = testplan.expand(loaded)
    # SFW and CGNAT of each topology (the SRG1 variants are MNHA modes the JVD does not run its events on),
    # and topology 3 dual stack as the JVD's test bed runs (IPv4, IPv6 and NAT64 flows, SFW and NAT side by side)
    files = [REPO / f"labs/topology{n}{suffix}.yml" for n in range(1, 5) for suffix in ("", "-cgnat")]
    files.append(REPO / "labs/topology3-dualstack.yml")
    for file in files:
        lab = load_topology(file).topology.name
        assert [c.event for c in cases if c.lab == lab] == _applicable(file), lab
    assert {c.use_case for c in cases} == {"sfw", "cgnat", "mixed"}
    assert len({c.lab for c in cases}) == len(files)
    assert "daemon-crash" not in {c.event for c in cases}, "not in the JVD's list: run only when named"
    assert [c.index for c in cases] == list(range(len(cases)))
    # grouped by lab: a lab is brought up once
    labs = [c.lab for c in cases]
    assert labs == sorted(labs, key=labs.index)


def test_filters_pick_topologies_labs_and_events() -> None:
    loaded = testplan.load_plan(testplan.DEFAULT_PLAN)
    three = testplan.expand(loaded, topologies=["3"], events=["srx-power-off", "gres"])
    assert [(c.lab, c.event) for c in three] == [("t3", "srx-power-off"), ("t3", "gres"),
                                                  ("t3-nat", "srx-power-off"), ("t3-nat", "gres"),
                                                  ("t3d", "srx-power-off"), ("t3d", "gres")]
    only = testplan.expand(loaded, labs=["t2-nat"], events=["srd-switchover"])
    assert [(c.lab, c.event) for c in only] == [("t2-nat", "srd-switchover")]
    assert testplan.expand(loaded, topologies=["topology4-cgnat.yml"], events=["gres"])[0].lab == "t4-nat"
    with pytest.raises(testplan.FilterError, match="no lab named 'nope'"):
        testplan.expand(loaded, labs=["nope"])
    with pytest.raises(testplan.FilterError, match="--event power-cycle: unknown event"):
        testplan.expand(loaded, events=["power-cycle"])


def test_every_problem_is_located(tmp_path: Path) -> None:
    path = _write(tmp_path, f"""name: mine
traffic:
  flows: 0
  sizes: 12
  colour: red
labs:
  - topology: {REPO}/labs/topology1.yml
    events: [srx-power-off, power-cycle, srx-power-off]
    targets: {{reboot-all: srx1}}
  - topology: missing.yml
""")
    with pytest.raises(TopologyInvalid) as info:
        testplan.load_plan(path)
    text = str(info.value)
    # pydantic's pass stops before the cross-checks: field errors first
    assert f"{path}:3: traffic.flows:" in text
    assert f"{path}:5: traffic.colour: unknown key 'colour'" in text
    fixed = path.read_text().replace("  flows: 0\n", "").replace("  colour: red\n", "")
    path.write_text(fixed)
    with pytest.raises(TopologyInvalid) as info:
        testplan.load_plan(path)
    lines = [d.render() for d in info.value.diagnostics]
    assert any(line.startswith(f"{path}:3: traffic.sizes: frame size 12 is below 64") for line in lines), lines
    assert any(f"{path}:6: labs[0].events[1]: unknown event 'power-cycle'" in line for line in lines), lines
    assert any(f"{path}:6: labs[0].events[2]: event 'srx-power-off' is listed twice" in line for line in lines)
    assert any(f"{path}:7: labs[0].targets.reboot-all: unknown event" in line for line in lines), lines
    assert any(f"{path}:8: labs[1].topology: no such topology file" in line for line in lines), lines
    assert info.value.exit_code == 2


def test_an_event_the_lab_cannot_run_and_an_unknown_target_are_located(tmp_path: Path) -> None:
    path = _write(tmp_path, f"""labs:
  - topology: {REPO}/labs/topology1.yml
    events: [srx-power-off, mnha-pair-power-off]
    targets:
      srx-power-off: srx9
""")
    loaded = testplan.load_plan(path)
    with pytest.raises(TopologyInvalid) as info:
        testplan.expand(loaded)
    lines = [d.render() for d in info.value.diagnostics]
    assert f"{path}:3: labs[0].events[1]: mnha-pair-power-off does not apply to lab t1: this lab has no mnha" \
        in lines, lines
    assert any(line.startswith(f"{path}:5: labs[0].targets.srx-power-off: lab t1 has no node 'srx9'")
               for line in lines), lines


def test_defaults_give_a_5_ms_resolution(tmp_path: Path) -> None:
    path = _write(tmp_path, f"labs:\n  - topology: {REPO}/labs/topology1.yml\n    events: [gres]\n")
    plan = testplan.load_plan(path).plan
    assert plan.traffic.resolution_ms <= 5.0
    assert plan.traffic.rate == plan.traffic.flows * plan.traffic.rate_per_flow
    assert [c.event for c in testplan.expand(testplan.load_plan(path))] == ["gres"]


def test_not_a_mapping_and_no_labs(tmp_path: Path) -> None:
    with pytest.raises(TopologyInvalid, match="a plan must be a mapping"):
        testplan.load_plan(_write(tmp_path, "- a\n- b\n"))
    with pytest.raises(TopologyInvalid, match="labs"):
        testplan.load_plan(_write(tmp_path, "name: x\nlabs: []\n"))
