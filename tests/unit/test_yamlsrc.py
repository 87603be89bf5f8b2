"""YAML loading with a source map: the line of every key and list item, and located YAML errors."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from lab_orchestrator.model.diagnostics import TopologyInvalid
from lab_orchestrator.model.validate import _normalise, load_topology
from lab_orchestrator.model.yamlsrc import SourceMap, load

NESTED = textwrap.dedent("""\
    # comment on line 1
    name: t
    nodes:
      mx1:
        kind: mx
        bgp:
          trust_as: 65100
          untrust_as: 65200
      h1: {kind: host, prefixes: [10.0.0.0/24,
                                  10.0.1.0/24]}
    links:
      - endpoints:
          - mx1:ge-0/0/0
          - h1:eth1
        zone: trust
      -
        endpoints: [mx1:ge-0/0/1, h1:eth2]
    """)


def _errors(text: str) -> list[tuple[int, str, str]]:
    with pytest.raises(TopologyInvalid) as info:
        load(text, "f.yml")
    return [(d.line, d.message, d.hint) for d in info.value.diagnostics]


def test_data_is_plain_python() -> None:
    data, _ = load(NESTED, "f.yml")
    assert data["nodes"]["mx1"] == {"kind": "mx", "bgp": {"trust_as": 65100, "untrust_as": 65200}}
    assert data["nodes"]["h1"]["prefixes"] == ["10.0.0.0/24", "10.0.1.0/24"]
    assert data["links"][1] == {"endpoints": ["mx1:ge-0/0/1", "h1:eth2"]}


@pytest.mark.parametrize(("path", "line"), [
    ((), 2),
    (("name",), 2),
    (("nodes",), 3),
    (("nodes", "mx1"), 4),
    (("nodes", "mx1", "kind"), 5),
    (("nodes", "mx1", "bgp"), 6),
    (("nodes", "mx1", "bgp", "trust_as"), 7),
    (("nodes", "mx1", "bgp", "untrust_as"), 8),
    (("nodes", "h1"), 9),
    (("nodes", "h1", "prefixes"), 9),
    (("nodes", "h1", "prefixes", 0), 9),
    (("nodes", "h1", "prefixes", 1), 10),  # a flow list continued on the next line
    (("links",), 11),
    (("links", 0), 12),
    (("links", 0, "endpoints"), 12),
    (("links", 0, "endpoints", 0), 13),
    (("links", 0, "endpoints", 1), 14),
    (("links", 0, "zone"), 15),
    (("links", 1), 17),  # an item whose content starts on the line after the dash
    (("links", 1, "endpoints", 1), 17),
])
def test_lines_of_nested_maps_and_lists(path: tuple[str | int, ...], line: int) -> None:
    _, source = load(NESTED, "f.yml")
    assert source.lines[path] == line
    assert source.line_of(path) == line


def test_unknown_path_walks_up_to_its_nearest_ancestor() -> None:
    _, source = load(NESTED, "f.yml")
    assert source.line_of(("nodes", "mx1", "bgp", "as")) == 6  # missing key: its parent mapping
    assert source.line_of(("links", 0, "addresses", 3)) == 12
    assert source.line_of(("nope",)) == 2  # the top mapping
    assert SourceMap("f.yml", {}).line_of(("x",)) == 1


def test_diag_carries_file_line_and_path() -> None:
    _, source = load(NESTED, "dir/f.yml")
    diag = source.diag(("nodes", "mx1", "kind"), "bad", "hint")
    assert diag.render() == "dir/f.yml:5: nodes.mx1.kind: bad (hint)"


def test_empty_document() -> None:
    assert load("", "f.yml") == ({}, SourceMap("f.yml", {(): 1}))
    assert load("# only a comment\n", "f.yml")[0] == {}


def test_integer_keys_keep_their_type_in_paths() -> None:
    data, source = load("a:\n  1: x\n  b: y\n", "f.yml")
    assert data == {"a": {1: "x", "b": "y"}}
    assert source.lines[("a", 1)] == 2 and source.lines[("a", "b")] == 3


# --- the short link form ----------------------------------------------------------------------

SHORT = textwrap.dedent("""\
    name: t
    nodes:
      a: {kind: host}
      b: {kind: host}
      c: {kind: host}
    links:
      - [a:eth1, b:eth1]
      - - a:eth2
        - c:eth1
      - {endpoints: [b:eth2, c:eth2]}
    """)


def test_short_link_form_becomes_endpoints_and_keeps_lines() -> None:
    data, source = load(SHORT, "f.yml")
    data = _normalise(data, source)
    assert data["links"][0] == {"endpoints": ["a:eth1", "b:eth1"]}
    assert data["links"][1] == {"endpoints": ["a:eth2", "c:eth1"]}
    assert data["links"][2] == {"endpoints": ["b:eth2", "c:eth2"]}
    assert source.line_of(("links", 0, "endpoints")) == 7
    assert source.line_of(("links", 0, "endpoints", 1)) == 7
    assert source.line_of(("links", 1, "endpoints")) == 8
    assert source.line_of(("links", 1, "endpoints", 0)) == 8
    assert source.line_of(("links", 1, "endpoints", 1)) == 9  # block style: its own line
    assert source.line_of(("links", 2, "endpoints", 0)) == 10


def test_short_link_form_errors_point_at_the_endpoint_line(tmp_path: Path) -> None:
    path = tmp_path / "short.yml"
    path.write_text(SHORT.replace("- c:eth1", "- z:eth1"))
    with pytest.raises(TopologyInvalid) as info:
        load_topology(path)
    [diag] = info.value.diagnostics
    assert (diag.line, diag.path) == (9, ("links", 1, "endpoints", 1))
    assert "'z', which is not defined" in diag.message


def test_short_link_with_one_endpoint_is_a_located_field_error(tmp_path: Path) -> None:
    path = tmp_path / "one.yml"
    path.write_text("name: t\nnodes:\n  a: {kind: host}\nlinks:\n  - [a:eth1]\n")
    with pytest.raises(TopologyInvalid) as info:
        load_topology(path)
    assert [(d.line, d.message) for d in info.value.diagnostics] == [(5, "must have at least 2 items, not 1")]


def test_normalise_leaves_other_shapes_alone() -> None:
    for data in ([1, 2], {"links": "x"}, {"name": "t"}):
        assert _normalise(data, SourceMap("f.yml", {})) == data


# --- located YAML errors, all at once ---------------------------------------------------------


def test_syntax_error_is_located_with_its_context() -> None:
    assert _errors("a: 1\nb: {c: 1\nd: 2\n") == [
        (3, "YAML syntax error: expected ',' or '}', but got ':'",
         "while parsing a flow mapping started at line 2; check indentation and quoting"),
    ]


def test_tab_indentation() -> None:
    [(line, message, _)] = _errors("a:\n\tb: 1\n")
    assert line == 2 and message.startswith("YAML syntax error: found character '\\t'")


def test_every_duplicate_key_is_reported() -> None:
    text = "a: 1\nb:\n  x: 1\n  x: 2\na: 3\nc: [1]\n"
    assert _errors(text) == [
        (4, "duplicate key 'x'", "first at line 3; each key may appear once"),
        (5, "duplicate key 'a'", "first at line 1; each key may appear once"),
    ]


def test_control_character_is_located_not_a_traceback() -> None:
    assert _errors("a: 1\nb: 2\nc: \x07\n") == [
        (3, "character #x0007 is not allowed in YAML", "remove control characters from the file"),
    ]


def test_unknown_tag_is_located() -> None:
    assert _errors("a: 1\nb: !!python/name:os.system x\n") == [
        (2, "unsupported YAML tag 'tag:yaml.org,2002:python/name:os.system'", "remove the tag"),
    ]


def test_impossible_timestamp_stays_text_for_the_model_to_judge() -> None:
    data, _ = load("a: 2024-13-45\nb: 2024-01-02\n", "f.yml")
    assert data["a"] == "2024-13-45"
    assert str(data["b"]) == "2024-01-02"


def test_merge_keys_are_supported_and_explicit_keys_win() -> None:
    text = "base: &b {kind: host, prefixes: [10.0.0.0/8]}\nn:\n  <<: *b\n  kind: srx\n"
    data, source = load(text, "f.yml")
    assert data["n"] == {"kind": "srx", "prefixes": ["10.0.0.0/8"]}
    assert source.lines[("n", "kind")] == 4  # the explicit key, not the anchor's
    assert source.lines[("n", "prefixes")] == 1  # merged: where it was written


def test_merge_of_a_scalar_is_an_error() -> None:
    assert _errors("a: &x 1\nb:\n  <<: *x\n")[0][:2] == (3, "'<<' merges a mapping (an alias like *name)")


def test_alias_cycle_is_an_error_not_a_recursion() -> None:
    assert _errors("a: &x [1, *x]\n") == [(1, "an alias refers to the collection that contains it", "")]


def test_complex_key_is_an_error() -> None:
    assert _errors("? [a, b]\n: 1\n") == [
        (1, "a key must be a plain name or number", "lists and mappings cannot be keys"),
    ]


def test_file_errors_through_load_topology_are_relative_when_the_path_is(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    Path("x.yml").write_text("name: t\nnodes: {a: {kind: host}, a: {kind: host}}\n")
    with pytest.raises(TopologyInvalid) as info:
        load_topology("x.yml")
    assert [d.render() for d in info.value.diagnostics] == [
        "x.yml:2: nodes.a: duplicate key 'a' (first at line 2; each key may appear once)",
    ]
