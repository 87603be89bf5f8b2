"""Pipes of the SSH CLI (Junos and IOS) and the Junos configuration converter behind display set/json."""

from __future__ import annotations

import json

import pytest

from lab_orchestrator.cli_ssh import junosconf
from lab_orchestrator.cli_ssh.parser import Pipe
from lab_orchestrator.cli_ssh.pipes import Output, PipeError, apply_ios, apply_junos

TEXT = "inet.0: 3 destinations\n0.0.0.0/0 *[BGP/170]\n10.0.0.0/31 *[Direct/0]\n10.0.0.1/32 *[Local/0]\n"
CONFIG = """## Last commit: rendered by lab_orchestrator
version "emulated-24.2";
system {
    host-name mx1;
    services {
        ssh;
    }
}
interfaces {
    ge-0/0/0 {
        description "to srx1 ge-0/0/0";
        unit 0 {
            family inet {
                address 10.0.0.0/31;
            }
        }
    }
}
services {
    traffic-load-balance {
        instance tlb {
            group g {
                real-services [ srx1 srx2 ];
            }
        }
    }
}
routing-instances {
    TRUST-VR {
        instance-type virtual-router;
        interface ge-0/0/0.0;
        interface lo0.1;
        protocols {
            bgp {
                group SRX-TRUST {
                    neighbor 10.0.0.1 {
                        peer-as 65001;
                    }
                }
            }
        }
    }
}
"""


def pipe(name: str, *args: str) -> Pipe:
    return Pipe(name, list(args), 0)


def test_match_is_case_insensitive_and_chains_with_count() -> None:
    out = apply_junos(Output(TEXT), [pipe("match", "direct|local")])
    assert out.text == "10.0.0.0/31 *[Direct/0]\n10.0.0.1/32 *[Local/0]\n"
    assert apply_junos(Output(TEXT), [pipe("match", "/3"), pipe("count")]).text == "Count: 2 lines\n"


def test_except_find_last_trim() -> None:
    assert apply_junos(Output(TEXT), [pipe("except", "/")]).text == "inet.0: 3 destinations\n"
    assert apply_junos(Output(TEXT), [pipe("find", "Direct")]).text.startswith("10.0.0.0/31")
    assert apply_junos(Output(TEXT), [pipe("last", "1")]).text == "10.0.0.1/32 *[Local/0]\n"
    assert apply_junos(Output("abcdef\n"), [pipe("trim", "2")]).text == "cdef\n"
    assert apply_junos(Output(TEXT), [pipe("no-more")]).text == TEXT


def test_bad_regex_is_an_error_not_a_traceback() -> None:
    with pytest.raises(PipeError, match="invalid regular expression"):
        apply_junos(Output(TEXT), [pipe("match", "(")])


def test_display_json_of_an_operational_command() -> None:
    out = apply_junos(Output("text\n", data={"a": [1, 2]}), [pipe("display", "json")])
    assert json.loads(out.text) == {"a": [1, 2]}
    with pytest.raises(PipeError, match="not supported"):
        apply_junos(Output("text\n"), [pipe("display", "json")])


def test_display_set_needs_a_configuration() -> None:
    with pytest.raises(PipeError, match="only supported for configuration"):
        apply_junos(Output("text\n", data={}), [pipe("display", "set")])
    statements = junosconf.parse(CONFIG)
    out = apply_junos(Output(CONFIG, config=statements), [pipe("display", "set"), pipe("match", "peer-as")])
    assert out.text == ("set routing-instances TRUST-VR protocols bgp group SRX-TRUST neighbor 10.0.0.1 "
                        "peer-as 65001\n")


def test_configuration_to_set_commands() -> None:
    lines = junosconf.to_set(junosconf.parse(CONFIG)).splitlines()
    assert 'set version "emulated-24.2"' in lines
    assert "set system services ssh" in lines
    assert 'set interfaces ge-0/0/0 description "to srx1 ge-0/0/0"' in lines
    assert "set interfaces ge-0/0/0 unit 0 family inet address 10.0.0.0/31" in lines
    assert "set services traffic-load-balance instance tlb group g real-services srx1" in lines
    assert "set services traffic-load-balance instance tlb group g real-services srx2" in lines
    assert "set routing-instances TRUST-VR interface lo0.1" in lines
    assert not any("##" in line for line in lines)


def test_configuration_to_junos_shaped_json() -> None:
    data = junosconf.to_json(junosconf.parse(CONFIG))["configuration"]
    assert data["version"] == "emulated-24.2"
    assert data["system"] == {"host-name": "mx1", "services": {"ssh": [None]}}
    interface = data["interfaces"]["interface"][0]
    assert interface["name"] == "ge-0/0/0"
    assert interface["unit"][0] == {"name": 0, "family": {"inet": {"address": [{"name": "10.0.0.0/31"}]}}}
    instance = data["routing-instances"]["instance"][0]
    assert instance["name"] == "TRUST-VR"
    assert instance["interface"] == [{"name": "ge-0/0/0.0"}, {"name": "lo0.1"}]
    group = instance["protocols"]["bgp"]["group"][0]
    assert group["neighbor"] == [{"name": "10.0.0.1", "peer-as": 65001}]
    assert data["services"]["traffic-load-balance"]["instance"][0]["group"][0]["real-services"] == ["srx1", "srx2"]


def test_configuration_subtree_and_render() -> None:
    statements = junosconf.parse(CONFIG)
    sub = junosconf.subtree(statements, ["interfaces", "ge-0/0/0", "unit", "0"])
    assert sub is not None
    assert junosconf.render(sub) == "family inet {\n    address 10.0.0.0/31;\n}\n"
    assert junosconf.subtree(statements, ["interfaces", "ge-9/9/9"]) is None
    leaf = junosconf.subtree(statements, ["system", "host-name"])
    assert leaf is not None and junosconf.render(leaf) == "host-name mx1;\n"


def test_unbalanced_configuration_is_reported() -> None:
    with pytest.raises(junosconf.ConfigError):
        junosconf.parse("system { host-name x;")
    with pytest.raises(junosconf.ConfigError):
        junosconf.parse("}")


IOS_TEXT = ("interface Gi0/0\n ip address 10.0.0.1 255.255.255.254\n!\ninterface Gi0/1\n"
            " ip address 10.0.0.3 255.255.255.254\n shutdown\n!\nrouter bgp 65010\n neighbor 10.0.0.0\n")


def test_ios_include_takes_the_rest_of_the_line_as_regex() -> None:
    out = apply_ios(Output(IOS_TEXT), [pipe("include")], "Gi0/0|router")
    assert out.text == "interface Gi0/0\nrouter bgp 65010\n"
    out = apply_ios(Output(IOS_TEXT), [pipe("include")], "ip address 10.0.0.3")
    assert out.text == " ip address 10.0.0.3 255.255.255.254\n"


def test_ios_exclude_begin_section_count() -> None:
    assert "!" not in apply_ios(Output(IOS_TEXT), [pipe("exclude")], "!").text
    assert apply_ios(Output(IOS_TEXT), [pipe("begin")], "router").text == "router bgp 65010\n neighbor 10.0.0.0\n"
    section = apply_ios(Output(IOS_TEXT), [pipe("section")], "Gi0/1").text
    assert section == "interface Gi0/1\n ip address 10.0.0.3 255.255.255.254\n shutdown\n"
    assert apply_ios(Output(IOS_TEXT), [pipe("count")], "interface").text == \
        "Number of lines which match regexp = 2\n"


def test_ios_include_without_regex_is_incomplete() -> None:
    with pytest.raises(PipeError, match="Incomplete"):
        apply_ios(Output(IOS_TEXT), [pipe("include")], "")
