"""Junos configuration text (curly braces) -> statements -> `set` commands or Junos-shaped JSON."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# Statements whose first word names an element of a list (`neighbor 10.0.0.1 { ... }`), and blocks
# whose one-word children are elements of a list (`interfaces { ge-0/0/0 { ... } }`): how Junos's
# JSON shows them ({"interface": [{"name": "ge-0/0/0", ...}]}).
KEYED = frozenset({"address", "group", "instance", "interface", "neighbor", "policy-statement", "pool",
                   "real-service", "route", "rule", "rule-set", "security-zone", "term", "unit",
                   "virtual-service"})
LIST_BLOCKS = {"interfaces": "interface", "routing-instances": "instance"}

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\];]|[^\s{}\[\];"]+')


@dataclass
class Statement:
    words: list[str]
    children: list[Statement] | None = None  # None: a leaf ending in ';'
    values: list[str] = field(default_factory=list)  # `[ a b c ]` of a leaf


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    lines = []
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("#"):
            continue
        lines.append(line)
    return "\n".join(lines)


class ConfigError(ValueError):
    pass


def parse(text: str) -> list[Statement]:
    tokens = _TOKEN.findall(_strip_comments(text))
    statements, index = _block(tokens, 0, top=True)
    return statements


def _block(tokens: list[str], index: int, top: bool = False) -> tuple[list[Statement], int]:
    out: list[Statement] = []
    words: list[str] = []
    values: list[str] = []
    in_list = False
    while index < len(tokens):
        token = tokens[index]
        index += 1
        if in_list:
            if token == "]":
                in_list = False
            else:
                values.append(token)
            continue
        if token == "[":
            in_list = True
        elif token == ";":
            if words:
                out.append(Statement(words, None, values))
            words, values = [], []
        elif token == "{":
            children, index = _block(tokens, index)
            out.append(Statement(words, children))
            words, values = [], []
        elif token == "}":
            if top:
                raise ConfigError("unbalanced '}'")
            return out, index
        else:
            words.append(token)
    if not top:
        raise ConfigError("missing '}'")
    return out, index


def locate(statements: list[Statement], path: list[str]) -> tuple[list[Statement], list[list[str]]] | None:
    """The statements under PATH (`interfaces ge-0/0/0`) and the blocks above them (their words), or
    None when PATH names nothing. A path that ends inside statements (`system host-name`,
    `routing-instances TRUST-VR interface`) gives those statements."""
    current = statements
    remaining = list(path)
    above: list[list[str]] = []
    while remaining:
        found = next((s for s in current if s.words == remaining[:len(s.words)]), None)
        if found is None:
            partial = [s for s in current if s.words[:len(remaining)] == remaining]
            return (partial, above) if partial else None
        remaining = remaining[len(found.words):]
        if found.children is None:
            return ([found], above) if not remaining else None
        above.append(found.words)
        current = found.children
    return current, above


def subtree(statements: list[Statement], path: list[str]) -> list[Statement] | None:
    found = locate(statements, path)
    return found[0] if found else None


def render(statements: list[Statement], indent: int = 0) -> str:
    out = []
    pad = "    " * indent
    for statement in statements:
        head = " ".join(statement.words)
        if statement.children is None:
            listed = f" [ {' '.join(statement.values)} ]" if statement.values else ""
            out.append(f"{pad}{head}{listed};\n")
        else:
            out.append(f"{pad}{head} {{\n{render(statement.children, indent + 1)}{pad}}}\n")
    return "".join(out)


def to_set(statements: list[Statement], prefix: tuple[str, ...] = ()) -> str:
    out = []
    for statement in statements:
        path = prefix + tuple(statement.words)
        if statement.children is None:
            if statement.values:
                out += [f"set {' '.join(path)} {value}\n" for value in statement.values]
            else:
                out.append(f"set {' '.join(path)}\n")
        elif statement.children:
            out.append(to_set(statement.children, path))
        else:
            out.append(f"set {' '.join(path)}\n")
    return "".join(out)


def _unquote(word: str) -> str:
    return word[1:-1] if len(word) >= 2 and word[0] == word[-1] == '"' else word


def _value(word: str) -> Any:
    word = _unquote(word)
    return int(word) if word.isdigit() else word


def _put(target: dict[str, Any], key: str, value: Any, keyed: bool) -> None:
    if keyed:
        target.setdefault(key, []).append(value)
    elif key in target:
        existing = target[key]
        target[key] = (existing if isinstance(existing, list) else [existing]) + [value]
    else:
        target[key] = value


def _object(statements: list[Statement], list_name: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for statement in statements:
        words = statement.words
        if list_name is not None and len(words) == 1 and statement.children is not None:
            element = {"name": _value(words[0]), **_object(statement.children)}
            _put(out, list_name, element, True)
            continue
        key = words[0]
        if statement.children is not None:
            body = _object(statement.children, LIST_BLOCKS.get(key) if len(words) == 1 else None)
            if len(words) == 1:
                _put(out, key, body, False)
            elif key in KEYED:
                element = {"name": _value(" ".join(words[1:])), **body}
                _put(out, key, element, True)
            else:  # `family inet { ... }`: {"family": {"inet": {...}}}
                for word in reversed(words[1:]):
                    body = {_unquote(word): body}
                _put(out, key, body, False)
        elif statement.values:
            _put(out, key, [_value(v) for v in statement.values], False)
        elif len(words) == 1:
            _put(out, key, [None], False)
        elif key in KEYED:
            _put(out, key, {"name": _value(" ".join(words[1:]))}, True)
        else:
            _put(out, key, _value(" ".join(words[1:])), False)
    return out


def to_json(statements: list[Statement]) -> dict[str, Any]:
    return {"configuration": _object(statements)}
