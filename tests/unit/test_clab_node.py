"""The node agent's pure parts: reading an export's node config, which interfaces it waits for and moves,
the daemon order, readiness, and its power requests with fake links and daemons. (Building a node needs root
and a container; see docs/containerlab.md.)"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from lab_orchestrator.clab import agent as clab_node
from lab_orchestrator.clab import export as clab_export
from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod

REPO = Path(__file__).resolve().parents[2]


@cache
def exported(lab: str) -> clab_export.ClabExport:
    path = REPO / "labs" / f"{lab}.yml"
    return clab_export.export(planmod.build(load_topology(path).topology, f"labs/{path.name}"))


def config_of(tmp_path: Path, lab: str, node: str) -> clab_node.NodeConfig:
    result = exported(lab)
    folder = tmp_path / node
    folder.mkdir()
    for rel, content in result.files.items():
        if rel.startswith(f"nodes/{node}/"):
            (folder / Path(rel).name).write_text(content)
    return clab_node.load_config(folder / clab_export.NODE_CONFIG_FILE)


def test_mx_interfaces_move_into_their_routing_instances(tmp_path: Path) -> None:
    config = config_of(tmp_path, "topology3", "mx1")
    assert config.master_ns == "t3-mx1" and config.node_dir == Path("/run/lab/t3/nodes/mx1")
    assert config.namespaces == ["t3-mx1", "t3-mx1-trust-vr", "t3-mx1-untrust-vr"]
    names = clab_node.interface_names(config)
    assert sorted(names) == sorted(["ge-0-0-0", "ge-0-0-1", "ge-0-1-1", "ge-0-1-2", "ge-0-1-3", "ge-0-1-4",
                                    "ge-0-2-1", "ge-0-2-2", "ge-0-2-3", "ge-0-2-4",
                                    "ge-0-3-1", "ge-0-3-2", "ge-0-3-3", "ge-0-3-4"])
    moves = dict(clab_node.moves(config))
    # every trust/untrust port lives in its instance; the SRXs' ICLs stay in the MNHA-VR (the master)
    assert set(moves) == {n for n in names if not n.startswith("ge-0-3-")}
    assert moves["ge-0-0-0"] == "t3-mx1-trust-vr" and moves["ge-0-2-4"] == "t3-mx1-untrust-vr"


def test_srx_stays_in_the_container_namespace(tmp_path: Path) -> None:
    config = config_of(tmp_path, "topology3", "srx1")
    assert clab_node.moves(config) == []
    assert sorted(clab_node.interface_names(config)) == ["ge-0-0-0", "ge-0-0-1", "ge-0-0-4"]  # ge-0/0/4: ICL to mx1
    routing, other = clab_node.ordered_daemons(config)
    assert [d.name for d in routing] == ["bird"]
    assert sorted(d.name for d in other) == ["conntrackd", "mnhad", "responder"]
    responder = next(d for d in other if d.name == "responder")
    assert responder.argv[-1] == "/run/lab/t3/nodes/srx1/responder.json"
    assert routing[0].argv[:2] == ["bird", "-f"] and routing[0].log == "/run/lab/t3/logs/srx1-bird.log"
    assert [r.file for r in config.plan.rulesets] == ["nodes/srx1/srx.nft"]


def test_lan_container_waits_for_its_switch_ports(tmp_path: Path) -> None:
    config = config_of(tmp_path, "flexvpn", "lan0")
    assert config.kind == "lan" and config.master_ns == "flexvpn-lan0"
    assert clab_node.interface_names(config) == ["p0", "p1", "p2", "p3"]
    assert clab_node.moves(config) == [] and config.plan.processes == []
    assert [b.name for b in config.plan.bridges] == ["br0"]


def test_readiness_names_what_is_missing(tmp_path: Path) -> None:
    config = config_of(tmp_path, "topology3", "gw-trust")
    assert config.wait_sessions == ["peer_mx1"]
    expected = [e.prefix for e in config.plan.expected_routes]
    assert expected, "a gateway waits for the far side's prefixes"
    sock = "/run/lab/t3/nodes/gw-trust/bird.ctl"
    routes = {"t3-gw-trust": set(expected)}
    assert clab_node.readiness(config, {sock: {"peer_mx1": "Established"}}, routes) == []
    assert clab_node.readiness(config, {sock: {"peer_mx1": "Active Socket: Connection refused"}}, routes) == [
        "gw-trust peer_mx1 Active Socket: Connection refused"]
    assert clab_node.readiness(config, {}, {}) == ["gw-trust peer_mx1 missing"] + [
        f"route {p} missing on gw-trust" for p in expected]


def test_config_format_is_checked(tmp_path: Path) -> None:
    bad = tmp_path / "clab-node.json"
    bad.write_text(json.dumps({"format": 99}))
    with pytest.raises(SystemExit, match="unknown node config format 99"):
        clab_node.load_config(bad)


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert clab_node.main([]) == 2
    config = config_of(tmp_path, "topology3", "srx1")
    path = str(config.source_dir / clab_export.NODE_CONFIG_FILE)
    assert clab_node.main(["link", "ge-0-0-0", "sideways", path]) == 2
    assert "usage:" in capsys.readouterr().err


class PowerRecorder:
    """The node agent's power requests with fake links, daemons and state file: what happened, in order,
    and the phase each save wrote. STOP_FAILS: the daemons do not stop; FORK_FAILS: that daemon cannot
    start."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, agent: clab_node.Agent, stop_fails: bool = False,
                 fork_fails: str = "") -> None:
        from lab_orchestrator.runtime import ops, supervisor

        self.done: list[tuple[str, str]] = []
        self.agent = agent
        monkeypatch.setattr(ops, "set_links", lambda ns, up, only=None: self.done.append(("up" if up else "down", ns)))
        monkeypatch.setattr(ops, "forget_node_state", lambda ns: self.done.append(("forget", ns)))
        monkeypatch.setattr(ops, "reapply", lambda plan, namespaces: None)
        monkeypatch.setattr(agent, "save", lambda: self.done.append(("saved", agent.state.phase)))

        def stop_all(kill: bool = False) -> None:
            if stop_fails:
                raise OSError("a daemon did not stop")
            self.done.append(("stop", "all"))

        def fork_exec(argv: list[str], ns: str, log: str) -> int:
            if any(d.name == fork_fails and d.argv == argv for d in agent.daemons):
                raise OSError(f"cannot exec {argv[0]}")
            self.done.append(("start", argv[0]))
            return 4000 + len(self.done)

        monkeypatch.setattr(agent, "_stop_all", stop_all)
        monkeypatch.setattr(supervisor, "fork_exec", fork_exec)


def test_power_off_drops_carrier_on_every_namespace_before_any_daemon_dies(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As the netns backend's power off: the neighbours see carrier loss, not a BGP session closed by a
    dying BIRD; and the node is recorded powered off once its links are down."""
    agent = clab_node.Agent(config_of(tmp_path, "topology3", "mx1"))
    agent.state.phase = "ready"
    recorder = PowerRecorder(monkeypatch, agent)
    assert agent._do({"op": "power-off"}) == "mx1 powered off"
    assert recorder.done == [("down", "t3-mx1"), ("down", "t3-mx1-trust-vr"), ("down", "t3-mx1-untrust-vr"),
                             ("stop", "all"), ("saved", "powered-off")]
    # at power-on it boots empty: its tables forgotten while its links are still down
    recorder.done.clear()
    agent._do({"op": "power-on"})
    assert recorder.done[:6] == [("forget", "t3-mx1"), ("forget", "t3-mx1-trust-vr"), ("forget", "t3-mx1-untrust-vr"),
                                 ("up", "t3-mx1"), ("up", "t3-mx1-trust-vr"), ("up", "t3-mx1-untrust-vr")]


def test_a_power_off_that_fails_after_the_links_went_down_is_recorded_powered_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    agent = clab_node.Agent(config_of(tmp_path, "topology3", "srx1"))
    agent.state.phase = "ready"
    recorder = PowerRecorder(monkeypatch, agent, stop_fails=True)
    with pytest.raises(OSError, match="did not stop"):
        agent._do({"op": "power-off"})
    assert recorder.done == [("down", "t3-srx1"), ("saved", "powered-off")]
    assert agent._do({"op": "power-on"}) == "srx1 powered on"  # the restore powers it on again


def test_a_power_on_whose_daemon_cannot_start_keeps_the_started_ones_and_is_not_powered_off(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The daemons that run are in the state file; the node is no longer `powered-off` (a second
    power-on would start them twice), and a power-off then stops what runs."""
    agent = clab_node.Agent(config_of(tmp_path, "topology3", "srx1"))
    agent.state.phase = "powered-off"
    routing, other = clab_node.ordered_daemons(agent.config)
    recorder = PowerRecorder(monkeypatch, agent, fork_fails=other[1].name)
    agent.daemons = routing + other  # what fork_exec looks the failing daemon up in (power-on makes its own)
    with pytest.raises(OSError, match="cannot exec"):
        agent._do({"op": "power-on"})
    started = [d for d in agent.daemons if d.pid]
    assert [d.name for d in started] == [routing[0].name, other[0].name]
    assert recorder.done[-2:] == [("saved", "powered-off"), ("saved", "failed")]  # _start's save, then the phase
    assert agent.state.error.startswith("power-on: OSError")
    with pytest.raises(RuntimeError, match="not powered off"):
        agent._do({"op": "power-on"})
    assert agent._do({"op": "power-off"}) == "srx1 powered off"


def test_an_mnha_node_powers_on_with_its_boot_role_before_its_daemons_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """As the netns backend's power on: BIRD starts with the role include that draws no traffic until
    the node's MNHA daemon has its peer's sessions, not with the one it had at the power-off."""
    from lab_orchestrator.plan.features import mnha
    from lab_orchestrator.runtime import supervisor

    config = config_of(tmp_path, "topology3", "srx1")
    config.state_dir = config.plan.state_dir = str(tmp_path / "state")
    clab_node.copy_config(config)
    role = Path(config.plan.state_dir, mnha.role_file(config.plan, "srx1"))
    role.write_text("# the role at the power-off\n")
    agent = clab_node.Agent(config)
    agent.state.phase = "powered-off"
    PowerRecorder(monkeypatch, agent)
    roles_at_start: list[str] = []
    monkeypatch.setattr(supervisor, "fork_exec", lambda argv, ns, log: roles_at_start.append(role.read_text()) or 1)
    assert agent._do({"op": "power-on"}) == "srx1 powered on"
    boot = mnha.boot_role(config.plan, "srx1")
    assert boot is not None and roles_at_start and set(roles_at_start) == {boot}
