"""A CLI session: vendor error texts, help, privileges, pipes and exit status (state is faked)."""

from __future__ import annotations

from typing import Any

import pytest
from test_cli_render import ios_snapshot, mx_snapshot

from lab_orchestrator.cli_ssh import gather, session
from lab_orchestrator.cli_ssh.pipes import Output
from lab_orchestrator.plan.sshconfig import ServerConfig, User

ADMIN = User("admin", "", (), "super-user")
VIEWER = User("viewer", "", (), "read-only")


def config_for(node: Any) -> ServerConfig:
    return ServerConfig("t", "/nonexistent", "t.yml", 22, "ecmp-chash", "sfw", (ADMIN, VIEWER), True,
                        "/x/id", "/x/known_hosts", (node,))


@pytest.fixture
def snapshots(monkeypatch: pytest.MonkeyPatch) -> dict[str, gather.Snapshot]:
    """The state each node shows, by node name (instead of reading a running lab)."""
    snaps: dict[str, gather.Snapshot] = {}
    monkeypatch.setattr(gather, "snapshot", lambda config, node, needs: snaps[node.name])
    return snaps


@pytest.fixture
def mx(snapshots: dict[str, gather.Snapshot]) -> session.Session:
    snap = mx_snapshot()
    snap.config_text = "system {\n    host-name mx1;\n}\n"
    snapshots["mx1"] = snap
    return session.Session(config_for(snap.node), snap.node, ADMIN)


@pytest.fixture
def gw(snapshots: dict[str, gather.Snapshot]) -> session.Session:
    snap = ios_snapshot()
    snap.config_text = "hostname gw\n!\ninterface GigabitEthernet0/0\n ip address 1.1.1.1 255.255.255.0\n!\nend\n"
    snapshots["gw"] = snap
    return session.Session(config_for(snap.node), snap.node, ADMIN)


def test_prompts(mx: session.Session, gw: session.Session) -> None:
    assert mx.prompt == "admin@mx1> "
    assert gw.prompt == "gw#"
    assert session.Session(gw.config, gw.node, VIEWER).prompt == "gw>"


def test_junos_errors(mx: session.Session) -> None:
    prompt = len(mx.prompt)
    result = mx.run("show foo", column=prompt)
    assert result.status == 1
    assert result.text == " " * (prompt + 5) + "^\nsyntax error, expanding <command>.\n"
    assert mx.run("frobnicate").text == "^\nunknown command.\n"
    assert mx.run("show").text == "     ^\nsyntax error, expecting <command>.\n"
    ambiguous = mx.run("show s").text
    assert "'s' is ambiguous.\nPossible completions:\n" in ambiguous and "  services " in ambiguous


def test_ios_errors(gw: session.Session) -> None:
    assert gw.run("show foo", column=3).text == "        ^\n% Invalid input detected at '^' marker.\n"
    assert gw.run("show").text == "% Incomplete command.\n"
    assert gw.run("show ip route | bogus x").status == 1


def test_commands_and_pipes(mx: session.Session, gw: session.Session) -> None:
    result = mx.run("show route table TRUST-VR.inet.0 | match Local | count")
    # 3 Local routes with their "Local via" line, and 3 "localpref" lines: `match` ignores case, as Junos
    assert result.status == 0 and result.text == "Count: 9 lines\n"
    assert mx.run("show configuration | display set").text == "set system host-name mx1\n"
    assert '"host-name": "mx1"' in mx.run("show configuration | display json").text
    assert mx.run("show route | display set").text == "error: display set is only supported for configuration output\n"
    assert gw.run("show running-config | include ip address").text == " ip address 1.1.1.1 255.255.255.0\n"
    assert gw.run("sh ip ro | i Gateway|B\\*").text.splitlines()[0].startswith("Gateway of last resort")


def test_question_mark_in_exec_is_help(mx: session.Session, gw: session.Session) -> None:
    assert mx.run("show bgp ?").text.startswith("Possible completions:\n  neighbor ")
    assert "<[Enter]>" in mx.run("show version ?").text
    assert mx.run("show foo ?").text == "No valid completions\n"
    assert gw.run("show foo ?").text == "% Unrecognized command\n"
    ios_help = gw.run("show ip ?").text
    assert "  route " in ios_help and "<cr>" not in ios_help


def test_completion(mx: session.Session) -> None:
    assert mx.complete("show rou") == ("te ", "")
    insert, listing = mx.complete("show s")
    assert insert == "" and listing.startswith("Possible completions:")


def test_exit_noop_configure(mx: session.Session) -> None:
    assert mx.run("exit").exit and mx.run("quit").exit
    assert mx.run("set cli screen-length 0") == session.Result("")
    result = mx.run("configure")
    assert result.status == 1 and "configuration mode is not available" in result.text


def test_read_only_users_cannot_change_state(mx: session.Session) -> None:
    viewer = session.Session(mx.config, mx.node, VIEWER)
    assert viewer.run("restart routing").text == "error: permission denied\n"
    assert viewer.run("request system reboot").status == 1


def test_a_renderer_bug_is_one_error_line(mx: session.Session, monkeypatch: pytest.MonkeyPatch) -> None:
    from lab_orchestrator.cli_ssh import commands, junos

    def broken(snap: Any, args: Any) -> Output:
        raise ZeroDivisionError("boom")

    monkeypatch.setitem(commands.JUNOS_IMPLS, "version", commands.Impl(gather.Needs(), broken))
    result = mx.run("show version")
    assert result.status == 1
    assert result.text == "error: internal error (ZeroDivisionError: boom)\n"
    assert "Traceback" not in result.text
    assert junos.show_version  # untouched


def test_reboot_is_refused_where_no_event_exists(gw: session.Session, monkeypatch: pytest.MonkeyPatch) -> None:
    from lab_orchestrator.cli_ssh import actions

    monkeypatch.setattr(actions, "_plan", lambda config: {"nodes": [{"kind": "ios-router"}], "processes": []})
    result = gw.run("reload")
    assert result.status == 1 and "not available in this lab yet" in result.text


def test_reboot_asks_and_runs_the_event(mx: session.Session, monkeypatch: pytest.MonkeyPatch) -> None:
    from lab_orchestrator.cli_ssh import actions

    plan = {"nodes": [{"kind": "mx"}, {"kind": "srx"}], "processes": []}
    monkeypatch.setattr(actions, "_plan", lambda config: plan)
    started = []
    monkeypatch.setattr(actions, "node_event", lambda config, node, event, background=False:
                        started.append((node.name, event, background)) or actions.EventRun(event, 4242))
    assert mx.run("request system reboot", ask=lambda prompt: "no").text == ""
    assert started == []
    asked = []
    result = mx.run("request system reboot", ask=lambda prompt: asked.append(prompt) or "yes")
    assert asked == ["Reboot the system ? [yes,no] (no) "]
    assert result.text == "\nShutdown NOW!\n[pid 4242]\n"
    assert started == [("mx1", "mx-reboot", True)]


def test_srd_switchover_without_srd(mx: session.Session) -> None:
    result = mx.run("request services redundancy-set id 1 switchover")
    assert result.status == 1 and result.text == "error: redundancy-set 1 is not configured\n"
