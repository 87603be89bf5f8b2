"""`lab events run --sessions N`: which sessions are judged, the default budget, the result's JSON,
and the session tool itself on loopback (rootless)."""

from __future__ import annotations

import json
import subprocess
import sys
from ipaddress import IPv4Network
from typing import Any

import pytest
from test_eventresult import sample

from dataplane.traffic import sessionload
from lab_orchestrator.events import background, budgets
from lab_orchestrator.events.budgets import Budget
from lab_orchestrator.events.result import EventResult

PEERS = {"srx1": "srx2", "srx2": "srx1", "srx3": "srx4", "srx4": "srx3"}


def keys(n: int, third: int = 1) -> list[tuple[str, int]]:
    return [(f"100.64.64.{i + 1}", 20000 + third) for i in range(n)]


def table() -> tuple[list[tuple[str, int]], dict[tuple[str, int], str], dict[tuple[str, int], set[str]]]:
    """Six sessions: three on srx1 (two of them synced to srx2), three on srx3 (synced to srx4)."""
    opened = keys(6)
    carriers = {k: "srx1" if i < 3 else "srx3" for i, k in enumerate(opened)}
    holders = {k: {c, PEERS[c]} for k, c in carriers.items()}
    holders[opened[2]] = {"srx1"}  # its copy never reached srx2
    return opened, carriers, holders


def test_an_srx_taken_out_with_a_peer_has_its_sessions_judged_and_counted_as_failed_over() -> None:
    opened, carriers, holders = table()
    f = background.figures(6, opened, carriers, holders, PEERS, {"srx1"}, lost={opened[2]}, probe_at_s=1.2)
    assert f["carried_before"] == {"srx1": 3, "srx3": 3} and f["synced_before"] == {"srx1": 2, "srx3": 3}
    assert (f["failed_over"], f["survived"], f["lost"], f["judged"], f["expected_lost"]) == (3, 2, 1, 6, 0)
    assert f["lost_pct"] == round(100 / 6, 4) and f["lost_sessions"] == ["100.64.64.3:20001 (srx1)"]


def test_sessions_of_an_srx_taken_out_with_its_peer_or_without_one_are_expected_lost_not_judged() -> None:
    opened, carriers, holders = table()
    pair_out = background.figures(6, opened, carriers, holders, PEERS, {"srx1", "srx2"}, lost=set(opened[:3]),
                                  probe_at_s=None)
    assert (pair_out["expected_lost"], pair_out["expected_lost_passed"], pair_out["judged"], pair_out["lost"]) == \
        (3, 0, 3, 0)
    # a lab without MNHA: the failed SRX's sessions are expected lost; one that passed anyway is counted
    alone = background.figures(6, opened, carriers, {}, {}, {"srx1"}, lost=set(opened[:2]), probe_at_s=None)
    assert (alone["expected_lost"], alone["expected_lost_passed"], alone["synced_before"]) == (3, 1, {})


def test_a_session_no_srx_showed_as_carried_is_judged_all_the_same() -> None:
    opened, carriers, holders = table()
    del carriers[opened[4]]
    f = background.figures(6, opened, carriers, holders, PEERS, set(), lost={opened[4]}, probe_at_s=0.0)
    assert (f["not_seen"], f["lost"], f["judged"], f["failed_over"]) == (1, 1, 6, 0)
    assert f["lost_sessions"] == ["100.64.64.5:20001 (no carrier seen)"]


def test_the_early_sample_is_judged_as_the_whole_and_by_a_budget_of_its_own() -> None:
    """Every other session sampled (0, 2, 4 of six): two on srx1, whose peer takes them over, one on
    srx3; the one of srx1 whose copy never reached srx2 (2) is lost in the sample too."""
    opened, carriers, holders = table()
    assert background.sample_step(6) == 1 and background.sample_step(background.SAMPLE_MAX + 1) == 2
    assert background.sample_step(1_000_000) * background.SAMPLE_MAX == 1_000_000
    early = background.Early(step=2, at_s=0.8, sent_by_s=1.3, lost=frozenset({opened[2]}))
    f = background.figures(6, opened, carriers, holders, PEERS, {"srx1"}, lost={opened[2]}, probe_at_s=3.0,
                           early=early)
    assert f["early"] == {"step": 2, "sampled": 3, "at_s": 0.8, "sent_by_s": 1.3, "judged": 3, "failed_over": 2,
                          "survived": 1, "lost": 1, "lost_pct": round(100 / 3, 4), "expected_lost": 0}
    data = sample()
    data["event"] = "srx-power-off"
    result = EventResult.from_json({**data, "sessions": f})
    result.judge(budgets.with_session_defaults([]))
    assert result.budgets is not None
    assert {(b.metric, b.measured, b.ok) for b in result.budgets} == {
        ("sessions_lost_pct", round(100 / 6, 4), False), ("sessions_early_lost_pct", round(100 / 3, 4), False)}
    assert result.sessions is not None and "sample sent 0.8-1.3 s after the event: 1 of 3 judged lost" \
        in result.sessions.line()
    # a pair taken out: its sampled sessions are expected lost, not judged
    pair = background.figures(6, opened, carriers, holders, PEERS, {"srx1", "srx2"}, lost=set(opened[:3]),
                              probe_at_s=3.0, early=background.Early(2, 0.8, 1.3, frozenset(opened[:3])))
    assert (pair["early"]["judged"], pair["early"]["expected_lost"], pair["early"]["lost"]) == (1, 2, 0)


def test_the_events_that_take_srxs_out() -> None:
    class Plan:
        mnha = [["srx1", "srx2"], ["srx3", "srx4"]]

    plan: Any = Plan()
    assert background.taken_out(plan, "srx-power-off", "srx3") == {"srx3"}
    assert background.taken_out(plan, "srx-link-failure", "srx1") == {"srx1"}
    assert background.taken_out(plan, "mnha-pair-power-off", "srx3") == {"srx3", "srx4"}
    assert background.taken_out(plan, "nexthop-delete", "srx2") == {"srx1", "srx2"}
    assert background.taken_out(plan, "mx-reboot", "mx1") == set()


def test_each_second_opens_its_own_block_of_ports() -> None:
    source = background.sources("100.64.0.0/16")
    assert str(source) == "100.64.64.0/18"  # the flows use its first addresses, TCP its upper half
    one = background.port_base(1000, source, now=1000.0)
    assert background.port_base(1000, source, now=1001.0) == one + 1
    many = 1_000_000  # 62 ports of 16382 addresses each
    need = sessionload.ports_needed(many, source)
    assert need == 62
    bases = {background.port_base(many, source, now=t) for t in range(60)}
    assert len(bases) == 60 and all(b >= 20000 and b + need <= 65536 for b in bases)


def test_the_default_session_budget_holds_for_the_events_that_take_srxs_out() -> None:
    held = budgets.with_session_defaults([])
    assert {(b.metric, b.event, b.limit) for b in held} == {
        (m, e, 0.01) for e in budgets.SESSION_GOAL_EVENTS for m in ("sessions_lost_pct", "sessions_early_lost_pct")}
    # a budget the user gives replaces the default of that metric
    mine = budgets.with_session_defaults([Budget("sessions_lost_pct", 1.0)])
    assert [b for b in mine if b.metric == "sessions_lost_pct"] == [Budget("sessions_lost_pct", 1.0)]


def figures_json(lost: int = 0) -> dict[str, Any]:
    opened, carriers, holders = table()
    return background.figures(6, opened, carriers, holders, PEERS, {"srx1"}, lost=set(opened[:lost]),
                              probe_at_s=1.0)


def test_an_event_result_carries_its_sessions_and_the_budget_judges_them() -> None:
    assert "sessions" not in EventResult.from_json(sample()).to_json()
    data = sample()
    data["event"] = "srx-power-off"
    result = EventResult.from_json({**data, "sessions": figures_json(lost=1)})
    result.judge(budgets.with_session_defaults([]))
    assert result.budgets is not None and [(b.metric, b.ok) for b in result.budgets] == [("sessions_lost_pct", False)]
    assert result.status == "failed"
    back = EventResult.from_json(result.to_json())
    assert back.sessions == result.sessions and "1 of 6 judged lost" in back.sessions.line()
    # without --sessions the session budgets do not apply
    plain = EventResult.from_json(data)
    plain.judge(budgets.with_session_defaults([]))
    assert plain.budgets == []


def test_the_session_tool_opens_and_probes_every_session_on_loopback() -> None:
    assert sessionload.session_of(16383, IPv4Network("100.64.64.0/18"), 20000) == ("100.64.64.2", 20001)
    cmd = [sys.executable, "-m", "dataplane.traffic.sessionload"]
    server = subprocess.Popen([*cmd, "serve", "--bind", "127.0.0.1", "--port", "0", "--seconds", "30"],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    client = None
    try:
        assert server.stdout is not None and server.stdin is not None
        port = int(json.loads(server.stdout.readline())["serving"].rsplit(":", 1)[1])
        client = subprocess.Popen([*cmd, "hold", "--sources", "127.0.8.0/29", "--count", "20", "--to",
                                   f"127.0.0.1:{port}", "--port-base", "41000", "--seconds", "30"],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        assert client.stdout is not None and client.stdin is not None

        def ask(proc: subprocess.Popen[str], line: str) -> dict[str, Any]:
            assert proc.stdin is not None and proc.stdout is not None
            proc.stdin.write(line + "\n")
            proc.stdin.flush()
            answer: dict[str, Any] = json.loads(proc.stdout.readline())
            return answer

        assert json.loads(client.stdout.readline()) == {"holding": 20, "ports": 4}  # 6 addresses a port
        assert ask(client, "open 1000 5")["answered"] == 20
        assert ask(server, "report") == {"sessions": 20, "echoed": 20}
        ask(client, "expect")
        assert ask(server, "probe 1000")["probed"] == 20
        got = ask(client, "count 5 1")
        assert got["received"] == 20 and got["missing_indexes"] == []
        # a sample: every 7th session (0, 7, 14), prepared before the probe that sends to it alone
        assert ask(server, "sample 7") == {"sampled": 3}
        ask(client, "expect")
        assert ask(server, "probe 1000 sample")["probed"] == 3
        got = ask(client, "count 5 1 7")
        assert got["received"] == 3 and got["missing_count"] == 0 and got["missing_indexes"] == []
        # the sessions left out of the sample got nothing: counted whole, they are the missing ones
        whole = ask(client, "count 0.2 0.1")
        assert whole["missing_count"] == 17 and 0 not in whole["missing_indexes"] and 1 in whole["missing_indexes"]
        assert "error" in ask(server, "frobnicate")
    finally:
        for proc in (client, server):
            if proc is not None:
                proc.kill()
                proc.wait(5)


def test_the_server_queue_holds_seconds_of_opening_beyond_rmem_max() -> None:
    """A socket's queue past net.core.rmem_max as root (SO_RCVBUFFORCE), capped by it otherwise; the
    server's holds seconds of sessions opening at the runner's rate (~1 KiB of queue a datagram)."""
    import os
    import socket
    from pathlib import Path

    from dataplane.traffic import netio

    rmem_max = int(Path("/proc/sys/net/core/rmem_max").read_text())
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        netio.grow_rcvbuf(sock, rmem_max * 4)
        granted = sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF)
    assert granted == (rmem_max * 8 if os.geteuid() == 0 else rmem_max * 2)  # the kernel doubles it
    assert sessionload.SERVER_RCVBUF * 2 / 1024 / background.OPEN_RATE >= 5


def test_a_table_dump_is_given_time_by_the_table_size() -> None:
    from lab_orchestrator.events import sessions

    assert sessions.read_timeout(0) == 10.0
    assert sessions.read_timeout(-5) == 10.0
    assert sessions.read_timeout(500_000) == 60.0
    assert sessions.read_timeout(1_000_000) > sessions.read_timeout(500_000)


def test_a_table_dump_is_timed_by_the_namespace_s_session_count(monkeypatch: pytest.MonkeyPatch) -> None:
    from lab_orchestrator.events import sessions
    from lab_orchestrator.runtime import netns

    dumps: list[float] = []

    def run(argv: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        dumps.append(kwargs["timeout"])
        return subprocess.CompletedProcess(argv, 0, "", "")

    monkeypatch.setattr(netns, "session_count", lambda ns: 500_000)
    monkeypatch.setattr(sessions.subprocess, "run", run)
    assert sessions.read_table("l-srx1") == [] and dumps == [60.0]


def test_the_session_processes_live_as_long_as_their_work_takes_at_scale() -> None:
    """At a million sessions the opening, two probe rounds and the table reads alone last longer
    than a fixed bound of 600 s: the bound follows the count."""
    assert background.work_s(0) == 2 * 10.0  # two table reads of an empty table
    assert background.work_s(1_000_000) > 600
    assert background.work_s(2_000_000) > background.work_s(1_000_000)


def test_telling_a_session_process_that_has_ended_is_a_case_error_not_a_crash() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "pass"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.wait(10)
    load = object.__new__(background.SessionLoad)  # its processes only: no lab
    load.client, load.server = proc, None
    with pytest.raises(background.Ended, match="ended before 'probe' .exit status 0"):
        background.SessionLoad._tell(proc, "probe 5000")  # short: it stays in stdin's buffer, unsent
    load.close()  # the command left unsent in its stdin does not raise again
    assert proc.stdin is not None and proc.stdin.closed
