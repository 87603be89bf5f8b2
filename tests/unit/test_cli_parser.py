"""The SSH CLI's command grammar: abbreviations, parameters, pipes, errors, `?` help, tab completion."""

from __future__ import annotations

import pytest

from lab_orchestrator.cli_ssh import commands
from lab_orchestrator.cli_ssh.parser import ParseError, is_address, is_prefix, tokenize


@pytest.fixture(scope="module")
def mx():  # type: ignore[no-untyped-def]
    return commands.grammar("junos", "mx")


@pytest.fixture(scope="module")
def srx():  # type: ignore[no-untyped-def]
    return commands.grammar("junos", "srx")


@pytest.fixture(scope="module")
def ios():  # type: ignore[no-untyped-def]
    return commands.grammar("ios", "ios-router")


def test_tokenize_quotes_and_pipes() -> None:
    tokens = tokenize('show route|match "BGP|Direct" | count')
    assert [t.text for t in tokens] == ["show", "route", "|", "match", "BGP|Direct", "|", "count"]
    assert tokens[4].quoted and tokens[1].start == 5


@pytest.mark.parametrize("line, run", [
    ("show version", "version"),
    ("sh ver", "version"),
    ("sho int ter", "interfaces-terse"),
    ("show interfaces terse", "interfaces-terse"),
    ("show route", "route"),
    ("show route forwarding-table", "forwarding-table"),
    ("show bgp summary", "bgp-summary"),
    ("show bgp neighbor", "bgp-neighbor"),
    ("show configuration", "configuration"),
    ("show services traffic-load-balance statistics", "tlb-statistics"),
    ("show chassis high-availability information", "chassis-ha"),
    ("request system reboot", "action:reboot"),
    ("restart routing", "action:restart-routing"),
    ("request chassis routing-engine master switch", "action:gres"),
    ("request services redundancy-set id 1 switchover", "action:srd-switchover"),
    ("set cli screen-length 0", "noop"),
    ("exit", "exit"),
])
def test_every_junos_command_parses_on_mx(mx, line: str, run: str) -> None:  # type: ignore[no-untyped-def]
    parsed = mx.parse(line)
    assert parsed is not None and parsed.command.run == run


@pytest.mark.parametrize("line, run", [
    ("show security flow session", "flow-session"),
    ("show security flow session summary", "flow-summary"),
    ("sh sec fl se su", "flow-summary"),
    ("show security nat source summary", "nat-summary"),
])
def test_srx_commands(srx, mx, line: str, run: str) -> None:  # type: ignore[no-untyped-def]
    parsed = srx.parse(line)
    assert parsed is not None and parsed.command.run == run
    with pytest.raises(ParseError):  # an MX has no `show security`
        mx.parse(line)


def test_tlb_statistics_is_mx_only(srx) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ParseError):
        srx.parse("show services traffic-load-balance statistics")


def test_route_parameters(mx) -> None:  # type: ignore[no-untyped-def]
    parsed = mx.parse("show route table TRUST-VR.inet.0 0.0.0.0/0 exact protocol bgp")
    assert parsed.args == {"table": "TRUST-VR.inet.0", "destination": "0.0.0.0/0", "exact": True,
                           "protocol": "bgp"}
    assert mx.parse("sh ro 203.0.113.7").args == {"destination": "203.0.113.7"}
    assert mx.parse("show route forwarding-table destination 1.2.3.4").args == {"destination": "1.2.3.4"}


def test_interfaces_positional_and_flags(mx) -> None:  # type: ignore[no-untyped-def]
    assert mx.parse("show interfaces ge-0/0/0 terse").args == {"interface": "ge-0/0/0", "terse": True}
    assert mx.parse("show interfaces ter ge-0/0/0").command.run == "interfaces-terse"


def test_configuration_takes_a_path(mx) -> None:  # type: ignore[no-untyped-def]
    parsed = mx.parse("show configuration routing-instances TRUST-VR | display set")
    assert parsed.args["rest"] == "routing-instances TRUST-VR"
    assert [(p.name, p.args) for p in parsed.pipes] == [("display", ["set"])]


def test_pipes_chain_and_abbreviate(mx) -> None:  # type: ignore[no-untyped-def]
    parsed = mx.parse('show route | m "BGP|Static" | cou')
    assert [(p.name, p.args) for p in parsed.pipes] == [("match", ["BGP|Static"]), ("count", [])]


@pytest.mark.parametrize("line, kind, column", [
    ("foo", "unknown", 0),
    ("show foo", "syntax", 5),
    ("show", "incomplete", 5),
    ("show route table", "expecting", 17),
    ("show route 1.2.3", "syntax", 11),
    ("show route | frobnicate x", "syntax", 13),
    ("show route | match", "expecting", 19),
    ("show route |", "incomplete", 13),
])
def test_junos_errors_carry_the_column(mx, line: str, kind: str, column: int) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ParseError) as caught:
        mx.parse(line)
    assert caught.value.kind == kind
    assert caught.value.column == column


def test_ambiguous_word_lists_the_options(mx) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ParseError) as caught:
        mx.parse("show s")  # services, system
    assert caught.value.kind == "ambiguous"
    assert [w for w, _ in caught.value.options] == ["services", "system"]


def test_empty_line_is_nothing(mx) -> None:  # type: ignore[no-untyped-def]
    assert mx.parse("   ") is None


@pytest.mark.parametrize("line, run", [
    ("show running-config", "running-config"),
    ("sh run", "running-config"),
    ("show ip interface brief", "ip-interface-brief"),
    ("sh ip int br", "ip-interface-brief"),
    ("show ip route", "ip-route"),
    ("show ip bgp summary", "ip-bgp-summary"),
    ("show standby", "standby"),
    ("show crypto ikev2 cluster", "ikev2-cluster"),
    ("show crypto ikev2 sa", "ikev2-sa"),
    ("show crypto ipsec sa", "ipsec-sa"),
    ("terminal length 0", "noop"),
    ("reload", "action:reboot"),
])
def test_every_ios_command_parses(ios, line: str, run: str) -> None:  # type: ignore[no-untyped-def]
    parsed = ios.parse(line)
    assert parsed is not None and parsed.command.run == run


def test_ios_route_filters(ios) -> None:  # type: ignore[no-untyped-def]
    assert ios.parse("show ip route bgp").args == {"bgp": True}
    assert ios.parse("show ip route 10.0.0.1").args == {"address": "10.0.0.1"}
    assert ios.parse("show run interface Gi0/1").args == {"interface": "Gi0/1"}


def test_help_after_a_word(mx) -> None:  # type: ignore[no-untyped-def]
    options, complete, partial = mx.possible("show ")
    words = [w for w, _ in options]
    assert "route" in words and "bgp" in words and "version" in words
    assert not complete and partial == ""


def test_help_on_a_complete_command_offers_parameters_and_pipe(mx) -> None:  # type: ignore[no-untyped-def]
    options, complete, _ = mx.possible("show route ")
    words = [w for w, _ in options]
    assert complete
    assert {"forwarding-table", "table", "exact", "<destination>", "|"} <= set(words)


def test_help_for_a_partial_word(mx) -> None:  # type: ignore[no-untyped-def]
    options, _, partial = mx.possible("show ro")
    assert partial == "ro" and [w for w, _ in options] == ["route"]


def test_help_for_a_value(mx) -> None:  # type: ignore[no-untyped-def]
    options, _, _ = mx.possible("show route protocol ")
    assert [w for w, _ in options] == ["bgp", "direct", "local", "static"]


def test_help_after_a_pipe(mx) -> None:  # type: ignore[no-untyped-def]
    options, _, _ = mx.possible("show route | ")
    assert {"match", "count", "display", "except"} <= {w for w, _ in options}
    options, _, _ = mx.possible("show route | display ")
    assert [w for w, _ in options] == ["json", "set"]


def test_tab_completion(mx) -> None:  # type: ignore[no-untyped-def]
    assert mx.complete("sh") == ("ow ", [])
    assert mx.complete("show ver") == ("sion ", [])
    insert, options = mx.complete("show s")
    assert insert == "" and {w for w, _ in options} == {"services", "system"}
    assert mx.complete("show interfaces t")[0] == "erse "


def test_value_checks() -> None:
    assert is_address("10.0.0.1") and not is_address("10.0.0.256") and not is_address("10.0.0")
    assert is_prefix("10.0.0.0/8") and is_prefix("10.0.0.1") and not is_prefix("10.0.0.0/33")


@pytest.mark.parametrize("vendor, table", [("junos", commands.JUNOS_COMMANDS), ("ios", commands.IOS_COMMANDS)])
def test_every_command_has_an_implementation(vendor: str, table: list) -> None:  # type: ignore[type-arg]
    from lab_orchestrator.cli_ssh import actions

    for command in table:
        run = command.run
        if run.startswith("action:"):
            assert run.split(":", 1)[1] in actions.ACTIONS, command
            name = run.split(":", 1)[1]
            assert command.privileged != (name in actions.READ_ONLY_ACTIONS), command  # state changes: not read-only
        elif run not in ("noop", "exit", "configure", "enable"):
            assert commands.implementation(vendor, run) is not None, command
        assert command.help, command


@pytest.mark.parametrize("line", ["show route advertising-protocol bgp", "show route receive-protocol bgp"])
def test_a_missing_neighbor_is_a_junos_syntax_error(mx, line: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ParseError) as caught:
        mx.parse(line)
    error = caught.value
    assert (error.kind, error.expecting, error.column) == ("expecting", "<neighbor>", len(line) + 1)
    assert mx.parse(line + " 10.0.0.3").args == {"neighbor": "10.0.0.3"}
