"""YAML loading that remembers where each value came from (for located error messages)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from .diagnostics import Diagnostic, TopologyInvalid, YamlPath

_MERGE_TAG = "tag:yaml.org,2002:merge"


@dataclass
class SourceMap:
    """Maps a YAML path to the 1-based line where that key or item starts."""

    file: str
    lines: dict[YamlPath, int]

    def line_of(self, path: YamlPath) -> int:
        # Walk up until a known ancestor: a missing key is reported at its parent mapping.
        probe = tuple(path)
        while probe:
            if probe in self.lines:
                return self.lines[probe]
            probe = probe[:-1]
        return self.lines.get((), 1)

    def diag(self, path: YamlPath, message: str, hint: str = "") -> Diagnostic:
        return Diagnostic(self.file, self.line_of(path), tuple(path), message, hint)


class _Builder:
    """Turns a composed YAML node tree into plain data, recording the line of every key and item.

    Problems that PyYAML would raise one at a time (duplicate keys, unknown tags) are collected,
    so the user sees all of them in one run.
    """

    def __init__(self, filename: str):
        self.file = filename
        self.lines: dict[YamlPath, int] = {}
        self.problems: list[Diagnostic] = []
        self._open: set[int] = set()  # collections being built: an alias back into one is a cycle
        # One constructor per load: its cache of constructed nodes must not outlive the file.
        self._constructor = yaml.constructor.SafeConstructor()

    def build(self, node: yaml.Node, path: YamlPath) -> Any:
        self.lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, path)
        if id(node) in self._open:
            self.problems.append(Diagnostic(self.file, node.start_mark.line + 1, path,
                                            "an alias refers to the collection that contains it"))
            return None
        self._open.add(id(node))
        try:
            if isinstance(node, yaml.MappingNode):
                return self._mapping(node, path)
            items = []
            for index, item in enumerate(node.value):
                self.lines[path + (index,)] = item.start_mark.line + 1
                items.append(self.build(item, path + (index,)))
            return items
        finally:
            self._open.discard(id(node))

    def _mapping(self, node: yaml.MappingNode, path: YamlPath) -> dict[Any, Any]:
        out: dict[Any, Any] = {}
        first_line: dict[Any, int] = {}
        merges: list[tuple[int, yaml.Node]] = []  # (line of the '<<' key, what it merges)
        for key_node, value_node in node.value:
            line = key_node.start_mark.line + 1
            if key_node.tag == _MERGE_TAG:
                merges.append((line, value_node))
                continue
            if not isinstance(key_node, yaml.ScalarNode):
                self.problems.append(Diagnostic(self.file, line, path, "a key must be a plain name or number",
                                                "lists and mappings cannot be keys"))
                continue
            key = self._scalar(key_node, path)
            child = path + (key if isinstance(key, int) else str(key),)
            if key in first_line:
                self.problems.append(Diagnostic(self.file, line, child, f"duplicate key '{key}'",
                                                f"first at line {first_line[key]}; each key may appear once"))
                continue
            first_line[key] = line
            self.lines[child] = line
            out[key] = self.build(value_node, child)
        # `<<: *anchor` (or a list of anchors): keys written here win, then the first source wins.
        for merge_line, merge in merges:
            sources = merge.value if isinstance(merge, yaml.SequenceNode) else [merge]
            for source in sources:
                if not isinstance(source, yaml.MappingNode):
                    self.problems.append(Diagnostic(self.file, merge_line, path,
                                                    "'<<' merges a mapping (an alias like *name)"))
                    continue
                saved, self.lines = self.lines, {}
                merged = self._mapping(source, path)
                merged_lines, self.lines = self.lines, saved
                for key, value in merged.items():
                    if key in out:
                        continue
                    out[key] = value
                    child = path + (key if isinstance(key, int) else str(key),)
                    for sub, line in merged_lines.items():
                        if sub[:len(child)] == child:
                            self.lines.setdefault(sub, line)
        return out

    def _scalar(self, node: yaml.Node, path: YamlPath) -> Any:
        # The composer already resolved the tag (int, bool, str...); construct just this scalar.
        try:
            return self._constructor.construct_object(node, deep=True)
        except yaml.constructor.ConstructorError:
            self.problems.append(Diagnostic(self.file, node.start_mark.line + 1, path,
                                            f"unsupported YAML tag '{node.tag}'", "remove the tag"))
            return None
        except ValueError:
            # e.g. 2024-13-45 resolves as a timestamp but is no date: keep the text, let the model judge.
            return node.value


def _syntax_error(exc: yaml.YAMLError, text: str, filename: str) -> Diagnostic:
    if isinstance(exc, yaml.reader.ReaderError):
        line = text.count("\n", 0, max(exc.position, 0)) + 1
        return Diagnostic(filename, line, (), f"character #x{exc.character:04x} is not allowed in YAML",
                          "remove control characters from the file")
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else 1
        hint = "check indentation and quoting"
        context = exc.context_mark
        if exc.context and context is not None and context.line + 1 != line:
            hint = f"{exc.context} started at line {context.line + 1}; {hint}"
        return Diagnostic(filename, line, (), f"YAML syntax error: {exc.problem or exc.context}", hint)
    return Diagnostic(filename, 1, (), f"YAML error: {exc}")


def load(text: str, filename: str) -> tuple[Any, SourceMap]:
    """Parse YAML text; syntax errors become a located Diagnostic rather than a traceback."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        raise TopologyInvalid([_syntax_error(exc, text, filename)]) from None
    if root is None:
        return {}, SourceMap(filename, {(): 1})
    builder = _Builder(filename)
    data = builder.build(root, ())
    if builder.problems:
        raise TopologyInvalid(builder.problems)
    return data, SourceMap(filename, builder.lines)
