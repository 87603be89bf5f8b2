"""YAML loading that remembers where each value came from (for located error messages)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .diagnostics import Diagnostic, TopologyInvalid, YamlPath

_MERGE_TAG = "tag:yaml.org,2002:merge"


MAX_FILE_BYTES = 128 << 10  # a topology is a few KiB; more than 128 KiB of YAML takes seconds to parse
MAX_DEPTH = 64  # nesting of mappings and lists
MAX_EXPANDED = 200_000  # nodes once every alias is expanded (what validation will walk)
MAX_MERGED = 10_000  # keys copied by '<<' merges in one file


class _Lines(dict[YamlPath, int]):
    """Line of each written path. A path under an alias is answered through the anchor's own path
    (recorded once, not once per use): `in`, `[]` and `get` see every expanded path."""

    def __init__(self, lines: dict[YamlPath, int], aliases: dict[YamlPath, YamlPath]):
        super().__init__(lines)
        self.aliases = aliases

    def _resolve(self, path: YamlPath) -> int | None:
        probe = tuple(path)
        for _ in range(MAX_DEPTH):
            if dict.__contains__(self, probe):
                return dict.__getitem__(self, probe)
            for cut in range(len(probe) - 1, -1, -1):
                target = self.aliases.get(probe[:cut])
                if target is not None:
                    probe = target + probe[cut:]
                    break
            else:
                return None
        return None

    def __contains__(self, path: object) -> bool:
        return isinstance(path, tuple) and self._resolve(path) is not None

    def __missing__(self, path: YamlPath) -> int:
        line = self._resolve(path)
        if line is None:
            raise KeyError(path)
        return line

    def get(self, path: YamlPath, default: Any = None) -> Any:
        line = self._resolve(path)
        return default if line is None else line


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


class _TooBig(Exception):
    def __init__(self, diagnostic: Diagnostic):
        super().__init__(diagnostic.message)
        self.diagnostic = diagnostic


class _Loader(yaml.SafeLoader):
    """The pure-Python loader (its parser keeps a stack of states, no recursion) with a nesting
    limit in the composer, the one recursive step: deep input stops with a located error long
    before Python's recursion limit."""

    def __init__(self, stream: str, filename: str):
        super().__init__(stream)
        self._depth = 0
        self._filename = filename

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self._depth >= MAX_DEPTH and not self.check_event(yaml.AliasEvent, yaml.ScalarEvent):
            mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
            raise _TooBig(Diagnostic(self._filename, mark.line + 1, (),
                                     f"nesting deeper than {MAX_DEPTH} levels",
                                     "a topology nests a few levels; flatten the structure"))
        self._depth += 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


class _Builder:
    """Turns a composed YAML node tree into plain data, recording the line of every key and item.

    Problems that PyYAML would raise one at a time (duplicate keys, unknown tags) are collected,
    so the user sees all of them in one run. Each node is built once: an alias shares the value
    built for its anchor (and its lines, through `_Lines`), and the size the data would have
    with every alias expanded is bounded (MAX_EXPANDED), since validation walks that expansion.
    """

    def __init__(self, filename: str):
        self.file = filename
        self.lines: dict[YamlPath, int] = {}
        self.aliases: dict[YamlPath, YamlPath] = {}  # path where an alias is used -> anchor's path
        self.problems: list[Diagnostic] = []
        self._open: set[int] = set()  # collections being built: an alias back into one is a cycle
        self._built: dict[int, tuple[Any, YamlPath, int]] = {}  # node id -> (value, first path, expanded size)
        self._merged = 0  # keys copied by '<<' so far
        self._value_size: dict[int, int] = {}  # id of a built list or mapping (kept alive by _built) -> size
        # One constructor per load: its cache of constructed nodes must not outlive the file.
        self._constructor = yaml.constructor.SafeConstructor()

    def build(self, node: yaml.Node, path: YamlPath) -> Any:
        return self._build(node, path)[0]

    def _build(self, node: yaml.Node, path: YamlPath) -> tuple[Any, int]:
        self.lines.setdefault(path, node.start_mark.line + 1)
        if isinstance(node, yaml.ScalarNode):
            return self._scalar(node, path), 1
        known = self._built.get(id(node))
        if known is not None:
            if known[1] != path:
                self.aliases[path] = known[1]
            return known[0], known[2]
        if id(node) in self._open:
            self.problems.append(Diagnostic(self.file, node.start_mark.line + 1, path,
                                            "an alias refers to the collection that contains it"))
            return None, 1
        self._open.add(id(node))
        value: Any
        try:
            if isinstance(node, yaml.MappingNode):
                value, size = self._mapping(node, path)
            else:
                items: list[Any] = []
                size = 1
                for index, item in enumerate(node.value):
                    self.lines[path + (index,)] = item.start_mark.line + 1
                    built, item_size = self._build(item, path + (index,))
                    items.append(built)
                    size += item_size
                value = items
        finally:
            self._open.discard(id(node))
        if size > MAX_EXPANDED:
            raise _TooBig(Diagnostic(
                self.file, node.start_mark.line + 1, path,
                f"this value expands to more than {MAX_EXPANDED:,} items once its aliases are expanded",
                "aliases (*name) and merges (<<) repeat what they point to; write less repetition"))
        self._built[id(node)] = (value, path, size)
        self._value_size[id(value)] = size
        return value, size

    def _mapping(self, node: yaml.MappingNode, path: YamlPath) -> tuple[dict[Any, Any], int]:
        out: dict[Any, Any] = {}
        size = 1
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
                self.problems.append(Diagnostic(self.file, line, child, f"duplicate key '{_short(key)}'",
                                                f"first at line {first_line[key]}; each key may appear once"))
                continue
            first_line[key] = line
            self.lines[child] = line
            out[key], value_size = self._build(value_node, child)
            size += 1 + value_size
        # `<<: *anchor` (or a list of anchors): keys written here win, then the first source wins.
        for merge_line, merge in merges:
            sources = merge.value if isinstance(merge, yaml.SequenceNode) else [merge]
            for number, source in enumerate(sources):
                if not isinstance(source, yaml.MappingNode):
                    self.problems.append(Diagnostic(self.file, merge_line, path,
                                                    "'<<' merges a mapping (an alias like *name)"))
                    continue
                where = path + (f"<<{merge_line}.{number}",)  # where an inline source's own lines go
                merged, _ = self._build(source, where)
                origin = self._built[id(source)][1] if id(source) in self._built else where
                if not isinstance(merged, dict):
                    continue
                for key, value in merged.items():
                    if key in out:
                        continue
                    out[key] = value
                    child = path + (key if isinstance(key, int) else str(key),)
                    anchor = origin + (key if isinstance(key, int) else str(key),)
                    self.lines[child] = self.lines.get(anchor, merge_line)
                    self.aliases[child] = anchor
                    size += 1 + self._size_of(value)
                    self._merged += 1
                    if self._merged > MAX_MERGED:  # each merged key is work: bounded over the file
                        raise _TooBig(Diagnostic(
                            self.file, merge_line, path, f"merges ('<<') copy more than {MAX_MERGED:,} keys",
                            "chains of '<<' repeat every key they pass on; write less repetition"))
        if size > MAX_EXPANDED:
            raise _TooBig(Diagnostic(
                self.file, node.start_mark.line + 1, path,
                f"this value expands to more than {MAX_EXPANDED:,} items once its aliases and merges are expanded",
                "aliases (*name) and merges (<<) repeat what they point to; write less repetition"))
        return out, size

    def _size_of(self, value: Any) -> int:
        """Expanded size of a value already built (merged in by '<<'): looked up, not walked."""
        return self._value_size.get(id(value), 1) if isinstance(value, (dict, list)) else 1

    def _scalar(self, node: yaml.Node, path: YamlPath) -> Any:
        # The composer already resolved the tag (int, bool, str...); construct just this scalar.
        try:
            return self._constructor.construct_object(node, deep=True)
        except yaml.constructor.ConstructorError:
            self.problems.append(Diagnostic(self.file, node.start_mark.line + 1, path,
                                            f"unsupported YAML tag '{_short(node.tag)}'", "remove the tag"))
            return None
        except ValueError:
            if node.tag == "tag:yaml.org,2002:int":  # int() refuses more than 4,300 digits
                self.problems.append(Diagnostic(self.file, node.start_mark.line + 1, path,
                                                f"an integer of {len(node.value):,} characters",
                                                "numbers in a topology are short; quote it if it is text"))
                return None
            # e.g. 2024-13-45 resolves as a timestamp but is no date: keep the text, let the model judge.
            return node.value


def _short(value: object, limit: int = 60) -> str:
    text = str(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters)"


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


def read(path: str | Path) -> str:
    """The text of a topology file: at most MAX_FILE_BYTES, UTF-8 (a BOM is dropped); anything else
    is a located TopologyInvalid (the line of the first byte that is not UTF-8)."""
    file = Path(path)
    try:
        with file.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise TopologyInvalid([Diagnostic(str(file), 0, (), f"cannot read file: {exc.strerror or exc}")]) from None
    if len(raw) > MAX_FILE_BYTES:
        raise TopologyInvalid([Diagnostic(str(file), 0, (), f"file larger than {MAX_FILE_BYTES >> 10} KiB",
                                          "a topology file is a few KiB: is this the right file?")])
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise TopologyInvalid([Diagnostic(str(file), line, (), f"not UTF-8 text (byte 0x{raw[exc.start]:02x} "
                                          f"at offset {exc.start})", "save the file as UTF-8")]) from None


def load(text: str, filename: str) -> tuple[Any, SourceMap]:
    """Parse YAML text; syntax errors become a located Diagnostic rather than a traceback. Time and
    memory stay linear in the text: nesting depth and the expanded size of aliases are bounded."""
    data, source, problems = load_checked(text, filename)
    if problems:
        raise TopologyInvalid(problems)
    return data, source


def load_checked(text: str, filename: str) -> tuple[Any, SourceMap, list[Diagnostic]]:
    """Like `load`, but problems that leave the rest of the file readable (a duplicate key, whose
    first value is kept; an unknown tag) are returned with the data, for the checks that follow to
    add theirs in the same run. Only text that cannot be parsed at all still raises."""
    if len(text) > MAX_FILE_BYTES:
        raise TopologyInvalid([Diagnostic(filename, 0, (), f"text larger than {MAX_FILE_BYTES >> 10} KiB")])
    try:
        loader = _Loader(text, filename)
        try:
            root = loader.get_single_node()
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise TopologyInvalid([_syntax_error(exc, text, filename)]) from None
    except _TooBig as exc:
        raise TopologyInvalid([exc.diagnostic]) from None
    if root is None:
        return {}, SourceMap(filename, {(): 1}), []
    builder = _Builder(filename)
    try:
        data = builder.build(root, ())
    except _TooBig as exc:
        raise TopologyInvalid([exc.diagnostic]) from None
    return data, SourceMap(filename, _Lines(builder.lines, builder.aliases)), builder.problems


def peek_name(path: str | Path) -> str | None:
    """The `name:` of a topology file, before it is validated (None when it cannot be read): the
    same bounded reader and loader, every failure left to the validation that follows."""
    try:
        data, _ = load(read(path), str(path))
    except TopologyInvalid:
        return None
    name = data.get("name") if isinstance(data, dict) else None
    # Only a name the model would accept: it becomes a folder and namespace prefix.
    return name if isinstance(name, str) and re.fullmatch(r"[a-z][a-z0-9-]{0,9}", name) else None
