"""`lab traffic start` on a dual-stack lab: IPv4 and IPv6 flows side by side from the same builder as
`lab events run` (`trafficsetup.by_family`), each process named and reported with its family, without
root (the supervisor is replaced by a recorder)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from lab_orchestrator.events import traffic
from lab_orchestrator.model.validate import load_topology
from lab_orchestrator.plan import pipeline as planmod
from lab_orchestrator.plan.trafficsetup import REVERSE_ID_OFFSET, V6_ID_OFFSET
from lab_orchestrator.runtime.state import LabState
from lab_orchestrator.runtime.supervisor import ProcessRecord

REPO = Path(__file__).resolve().parents[2]


def _plan(name: str) -> Any:
    return planmod.build(load_topology(REPO / "labs" / f"{name}.yml").topology, f"labs/{name}.yml", "/run/lab")


class Recorder:
    """A supervisor that records what it was asked to start."""

    spawned: list[tuple[str, str, list[str]]] = []
    stopped: list[str] = []

    def __init__(self, state_dir: str | Path):
        pass

    def spawn(self, node: str, name: str, ns: str, argv: list[str], log: str, **_: Any) -> ProcessRecord:
        Recorder.spawned.append((name, ns, list(argv)))
        Path(log).write_text('{"ready": true}\n')  # what a traffic process prints once it is under way
        return ProcessRecord(node, name, ns, 0, 0, log, list(argv))

    def stop(self, pids: list[int] = [], timeout: float = 2.0,  # noqa: B006 - never changed
             procs: list[tuple[str, str]] = []) -> None:  # noqa: B006
        Recorder.stopped.extend(name for _, name in procs)


@pytest.fixture
def started(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    def start(lab: str, family: str | None, flows: int = 10, reverse: bool = True) -> tuple[dict[str, Any], LabState]:
        (tmp_path / "logs").mkdir(exist_ok=True)
        state = LabState(lab, f"labs/{lab}.yml", str(tmp_path), "ready", [], "br", [], "t", "10.0.0.0/24")
        monkeypatch.setattr(traffic, "load_plan", lambda _state: _plan(lab))
        monkeypatch.setattr(traffic.supervisor, "Supervisor", Recorder)
        monkeypatch.setattr(traffic.supervisor, "alive", lambda _record: True)
        monkeypatch.setattr(traffic.time, "sleep", lambda _s: None)
        Recorder.spawned = []
        Recorder.stopped = []
        return traffic.start(state, flows, 1000.0, "imix", 30.0, reverse, family), state
    return start


def test_both_families_on_a_dual_stack_lab_side_by_side(started: Any, tmp_path: Path) -> None:
    answer, state = started("topology3-dualstack", "both")
    assert answer["families"] == [4, 6]
    names = [name for name, _, _ in Recorder.spawned]
    # every receiver before any sender, every forward sender before the reverse ones
    assert names == ["rx-forward", "rx-forward-ipv6", "rx-reverse", "rx-reverse-ipv6",
                     "tx-forward", "tx-forward-ipv6", "tx-reverse", "tx-reverse-ipv6"]
    assert answer["started"] == names and [r.name for r in state.processes] == names
    by_name = {p["name"]: p for p in answer["processes"]}
    assert {n: p["family"] for n, p in by_name.items()} == {n: 6 if n.endswith("-ipv6") else 4 for n in names}
    assert by_name["tx-forward"]["flows"] == by_name["tx-forward-ipv6"]["flows"] == 5
    assert by_name["tx-forward"]["rate_pps"] == by_name["tx-forward-ipv6"]["rate_pps"] == 500.0
    assert by_name["tx-forward-ipv6"]["flow_ids"] == [V6_ID_OFFSET, V6_ID_OFFSET + 4]
    assert by_name["rx-reverse-ipv6"]["flow_ids"] == [V6_ID_OFFSET + REVERSE_ID_OFFSET,
                                                      V6_ID_OFFSET + REVERSE_ID_OFFSET + 4]
    assert by_name["tx-forward"]["direction"] == "forward" and by_name["rx-reverse"]["direction"] == "reverse"
    # the daemons are started with what the builder set up: IPv6 flows for the IPv6 sender
    from dataplane.traffic import Sender

    sender = Sender.from_config(json.loads((tmp_path / "traffic" / "tx-forward-ipv6.json").read_text()))
    assert {f.dst for f in sender.flows} == {"2001:db8:203::a"} and len(sender.flows) == 5
    receiver = json.loads((tmp_path / "traffic" / "rx-forward-ipv6.json").read_text())
    assert receiver["family"] == 6
    assert json.loads((tmp_path / "traffic" / "rx-forward.json").read_text())["family"] == 4


def test_a_lab_with_nat64_sends_nat64_flows_beside_by_default(started: Any, tmp_path: Path) -> None:
    """The NAT64 family: IPv6 from the NAT64 source to the NAT64 address; the server hears IPv4 and
    answers the bindings (its own FIFO) from the IPv4 server address; the client hears IPv6; each
    receiver counts only its family's ids (two IPv4 receivers share the server's interface)."""
    from dataplane.traffic import Receiver, Sender
    from lab_orchestrator.plan.trafficsetup import NAT64_ID_OFFSET, NAT64_SPORT

    answer, _ = started("topology3-dualstack", None, flows=9)
    assert answer["families"] == [4, 6, 64]
    assert [p["name"] for p in answer["processes"] if p["family"] == 64] == [
        "rx-forward-nat64", "rx-reverse-nat64", "tx-forward-nat64", "tx-reverse-nat64"]
    folder = tmp_path / "traffic"

    def config(name: str) -> dict[str, Any]:
        data: dict[str, Any] = json.loads((folder / f"{name}.json").read_text())
        return data

    forward = Sender.from_config(config("tx-forward-nat64"))
    assert {(f.dst, f.sport) for f in forward.flows} == {("2001:db8:64::1", NAT64_SPORT)}
    assert [f.flow_id for f in forward.flows] == [NAT64_ID_OFFSET + i for i in range(3)]
    assert all(f.src.startswith("2001:db8:172:80::") for f in forward.flows)
    heard = Receiver.from_config(config("rx-forward-nat64"))
    assert heard.family == 4 and heard.ids == (NAT64_ID_OFFSET, REVERSE_ID_OFFSET)
    assert heard.learn_path == str(folder / "bindings-nat64.fifo") and (folder / "bindings-nat64.fifo").is_fifo()
    assert Receiver.from_config(config("rx-forward")).learn_path == str(folder / "bindings.fifo")  # NAPT44's own
    assert Receiver.from_config(config("rx-forward")).ids == (0, V6_ID_OFFSET)
    answers = Sender.from_config(config("tx-reverse-nat64"))
    assert {f.src for f in answers.flows} == {"203.0.113.64"} and answers.learn_path == heard.learn_path
    assert answers.host_stack  # the translator drops IPv4 UDP without one
    assert [f.flow_id for f in answers.flows] == [NAT64_ID_OFFSET + REVERSE_ID_OFFSET + i for i in range(3)]
    # translated into IPv6 (20 bytes more) the largest answer is a 1518-byte frame again
    from dataplane.traffic.frames import parse_sizes

    assert max(size for size, _ in parse_sizes(answers.sizes)) == 1498
    assert min(size for size, _ in parse_sizes(answers.sizes)) == 64  # IPv6's smallest (84) less 20
    back = Receiver.from_config(config("rx-reverse-nat64"))
    assert back.family == 6 and back.ids == (NAT64_ID_OFFSET + REVERSE_ID_OFFSET, 2 * REVERSE_ID_OFFSET)


def test_one_family_on_a_dual_stack_lab_takes_all_the_flows(started: Any) -> None:
    answer, _ = started("topology3-dualstack", "6", reverse=False)
    assert answer["families"] == [6] and answer["started"] == ["rx-forward-ipv6", "tx-forward-ipv6"]
    assert [p["flows"] for p in answer["processes"]] == [10, 10]
    assert {p["family"] for p in answer["processes"]} == {6}


def test_an_ipv4_lab_is_unchanged_and_refuses_ipv6(started: Any) -> None:
    from lab_orchestrator.model.diagnostics import LabError

    answer, _ = started("topology3", None)
    assert answer["families"] == [4]
    assert answer["started"] == ["rx-forward", "rx-reverse", "tx-forward", "tx-reverse"]
    with pytest.raises(LabError, match="IPv4 only"):
        started("topology3", "6")


def test_stop_reports_carry_each_process_s_family(tmp_path: Path) -> None:
    log4, log6 = tmp_path / "traffic-tx-forward.log", tmp_path / "traffic-tx-forward-ipv6.log"
    log4.write_text(json.dumps({"role": "send", "sent": 10}) + "\n")
    log6.write_text(json.dumps({"role": "send", "sent": 7}) + "\n")
    state = LabState("t3d", "x", str(tmp_path), "ready", [], "br", [], "t", "10.0.0.0/24", processes=[
        ProcessRecord(traffic.NODE, "tx-forward", "ns", 0, 0, str(log4), []),
        ProcessRecord(traffic.NODE, "tx-forward-ipv6", "ns", 0, 0, str(log6), [])])
    reports = traffic.reports(state)
    assert reports["tx-forward"]["family"] == 4 and reports["tx-forward-ipv6"]["family"] == 6
    assert reports["tx-forward-ipv6"]["sent"] == 7


def test_cli_prints_each_family_and_refuses_a_wrong_one(monkeypatch: pytest.MonkeyPatch) -> None:
    from lab_orchestrator import api
    from lab_orchestrator.api.running import Lab
    from lab_orchestrator.cli import app

    answer = {"started": ["tx-forward", "tx-forward-ipv6"], "families": [4, 6], "processes": [
        {"name": "tx-forward", "family": 4, "role": "send", "flows": 3, "rate_pps": 300.0},
        {"name": "tx-forward-ipv6", "family": 6, "role": "send", "flows": 2, "rate_pps": 200.0}]}
    asked: list[Any] = []
    monkeypatch.setattr(api, "require_root", lambda: None)
    monkeypatch.setattr(api, "pick", lambda _lab: Lab.__new__(Lab))
    monkeypatch.setattr(Lab, "traffic_start", lambda self, *a: asked.append(a) or answer)
    shown = CliRunner().invoke(app, ["traffic", "start", "--lab", "t3d", "--flows", "5", "--family", "both"])
    assert shown.exit_code == 0, shown.output
    assert "IPv4 3 flows x 300 pps per direction (tx-forward)" in shown.output
    assert "IPv6 2 flows x 200 pps per direction (tx-forward-ipv6)" in shown.output
    assert asked[-1][-1] == "both"
    as_json = CliRunner().invoke(app, ["traffic", "start", "--lab", "t3d", "--json"])
    assert json.loads(as_json.output)["processes"][1]["family"] == 6 and asked[-1][-1] is None
    wrong = CliRunner().invoke(app, ["traffic", "start", "--lab", "t3d", "--family", "5"])
    assert wrong.exit_code == 2 and "give 4, 6, 64, both or all" in wrong.output


def _topology3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, supervisor: type, dead: str) -> LabState:
    """A topology3 lab's record, its traffic started through SUPERVISOR, the process named DEAD not alive."""
    (tmp_path / "logs").mkdir()
    monkeypatch.setattr(traffic, "load_plan", lambda _state: _plan("topology3"))
    monkeypatch.setattr(traffic.supervisor, "Supervisor", supervisor)
    monkeypatch.setattr(traffic.supervisor, "alive", lambda record: record.name != dead)
    monkeypatch.setattr(traffic.time, "sleep", lambda _s: None)
    Recorder.spawned, Recorder.stopped = [], []
    return LabState("t3", "labs/topology3.yml", str(tmp_path), "ready", [], "br", [], "t", "10.0.0.0/24")


def test_a_process_that_never_gets_ready_stops_every_one_started(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """The reverse sender of a family dies at its start: nothing is left running or recorded, and the
    error names it."""
    class Dying(Recorder):
        def spawn(self, node: str, name: str, ns: str, argv: list[str], log: str, **_: Any) -> ProcessRecord:
            record = super().spawn(node, name, ns, argv, log)
            if name == "tx-reverse":
                Path(log).write_text("OSError: [Errno 19] No such device\n")
            return record

    state = _topology3(tmp_path, monkeypatch, Dying, dead="tx-reverse")
    with pytest.raises(traffic.LabError, match="tx-reverse ended before it was ready: OSError"):
        traffic.start(state, 4, 100.0, "imix", 5.0, True)
    assert [name for name, _, _ in Recorder.spawned] == ["rx-forward", "rx-reverse", "tx-forward", "tx-reverse"]
    assert Recorder.stopped == ["rx-forward", "rx-reverse", "tx-forward", "tx-reverse"]  # by name: every one tried
    # what the supervisor could not stop (alive here) stays on record for `lab traffic stop`; the dead one goes
    assert [r.name for r in state.processes if r.node == traffic.NODE] == ["rx-forward", "rx-reverse", "tx-forward"]
    assert [r.name for r in LabState.load(tmp_path).processes if r.node == traffic.NODE] == [
        "rx-forward", "rx-reverse", "tx-forward"]


def test_a_start_slower_than_the_receivers_margin_is_refused(started: Any, monkeypatch: pytest.MonkeyPatch,
                                                             tmp_path: Path) -> None:
    """Receivers are bound to --duration + 3 s + START_MARGIN_S: a start that took longer (a busy
    machine) would have them stop before the senders' last packets, which would count as lost."""
    clock = iter(range(0, 1000, 4))  # every reading of the clock 4 s later than the one before
    monkeypatch.setattr(traffic.time, "monotonic", lambda: float(next(clock)))
    with pytest.raises(traffic.LabError, match=r"took \d+\.\d s to start .*what it started is stopped"):
        started("topology3", None, flows=4)
    assert len(Recorder.stopped) == 4


def test_a_process_stopped_while_the_traffic_starts_stops_the_start(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`lab traffic stop` during a start (or a receiver that ended): the next step is not started."""
    state = _topology3(tmp_path, monkeypatch, Recorder, dead="rx-reverse")
    with pytest.raises(traffic.LabError, match="rx-reverse ended while the traffic was starting"):
        traffic.start(state, 4, 100.0, "imix", 5.0, True)
    assert [name for name, _, _ in Recorder.spawned] == ["rx-forward", "rx-reverse"]


def test_without_reverse_traffic_the_start_does_not_wait_for_it(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "logs").mkdir()
    monkeypatch.setattr(traffic, "load_plan", lambda _state: _plan("topology3"))
    monkeypatch.setattr(traffic.supervisor, "Supervisor", Recorder)
    monkeypatch.setattr(traffic.supervisor, "alive", lambda _record: True)
    pauses: list[float] = []
    monkeypatch.setattr(traffic.time, "sleep", pauses.append)
    for reverse, leads in ((False, 0), (True, 1)):
        state = LabState("t3", "labs/topology3.yml", str(tmp_path), "ready", [], "br", [], "t", "10.0.0.0/24")
        pauses.clear()
        traffic.start(state, 4, 100.0, "imix", 5.0, reverse)
        assert pauses.count(traffic.FORWARD_LEAD_S) == leads, (reverse, pauses)
