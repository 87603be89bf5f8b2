"""YAML loading that remembers where each value came from (for located error messages)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import yaml

from .diagnostics import Diagnostic, TopologyInvalid, YamlPath


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


def _construct(node: yaml.Node, path: YamlPath, lines: dict[YamlPath, int], src: str) -> Any:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = _scalar(key_node)
            if key in out:
                raise TopologyInvalid([Diagnostic(src, key_node.start_mark.line + 1, path + (str(key),),
                                                  "duplicate key", "each key may appear once")])
            child = path + (str(key) if not isinstance(key, int) else key,)
            lines[child] = key_node.start_mark.line + 1
            out[key] = _construct(value_node, child, lines, src)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for index, item in enumerate(node.value):
            lines[path + (index,)] = item.start_mark.line + 1
            items.append(_construct(item, path + (index,), lines, src))
        return items
    return _scalar(node)


_SCALARS = yaml.constructor.SafeConstructor()


def _scalar(node: yaml.Node) -> Any:
    # The composer already resolved the tag (int, bool, str...); construct just this scalar.
    return _SCALARS.construct_object(node, deep=True)


def load(text: str, filename: str) -> tuple[Any, SourceMap]:
    """Parse YAML text; syntax errors become a located Diagnostic rather than a traceback."""
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        line = mark.line + 1 if mark else 1
        raise TopologyInvalid([Diagnostic(filename, line, (), f"YAML syntax error: {exc.problem}",
                                          "check indentation and quoting")]) from None
    lines: dict[YamlPath, int] = {}
    if root is None:
        return {}, SourceMap(filename, {(): 1})
    data = _construct(root, (), lines, filename)
    return data, SourceMap(filename, lines)
