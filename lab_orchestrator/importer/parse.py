"""Configuration parsers: Junos (hierarchical braces or `set` lines) and IOS (indented or flat).

Every parser returns the configuration as flat statements, one per leaf of the hierarchy, each the
full path of words from the top (what Junos `show configuration | display set` prints, without
`set`) with the file and line it came from. The importer matches on these paths; the report lists
every one of them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from ..model.diagnostics import BadInput

Syntax = Literal["junos", "junos-set", "ios"]


class ParseError(BadInput):
    """A configuration the parser cannot read, located as FILE:LINE."""

    def __init__(self, file: str, line: int, message: str) -> None:
        super().__init__(f"{file}:{line}: {message}")
        self.file = file
        self.line = line
        self.message = message


@dataclass
class Statement:
    """One configuration statement: its path of words from the top of the hierarchy."""

    path: tuple[str, ...]
    file: str
    line: int
    text: str  # the source line, stripped
    inactive: bool = False  # Junos `inactive:` (or deactivate): configured but not in effect
    # what the importer did with it: set once, by the first code that uses or dismisses it
    status: str = ""  # emulated | approximated | ignored | unsupported
    note: str = ""
    tags: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    def at(self, *prefix: str) -> tuple[str, ...] | None:
        """The words after PREFIX when the path starts with it ("*" matches any one word), else None."""
        if len(self.path) < len(prefix):
            return None
        for want, word in zip(prefix, self.path, strict=False):
            if want != "*" and want != word:
                return None
        return self.path[len(prefix):]

    def mark(self, status: str, note: str) -> None:
        if not self.status:
            self.status, self.note = status, note


# ---------------------------------------------------------------------------------------------- Junos

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{};\[\]]|[^\s{};\[\]"]+')


def _junos_tokens(text: str, file: str) -> list[tuple[str, int]]:
    """Words, strings and punctuation with their line numbers; comments (#, ##, /* */) removed."""
    out: list[tuple[str, int]] = []
    in_comment = False
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw
        if in_comment:
            end = line.find("*/")
            if end < 0:
                continue
            line, in_comment = line[end + 2:], False
        while "/*" in line:
            start = line.find("/*")
            end = line.find("*/", start + 2)
            if end < 0:
                line, in_comment = line[:start], True
                break
            line = line[:start] + " " + line[end + 2:]
        stripped = line.lstrip()
        if stripped.startswith("#"):
            continue
        for match in _TOKEN.finditer(line):
            word = match.group(0)
            if word.startswith("#") and not word.startswith('"'):
                break  # a trailing comment
            out.append((word, number))
    if in_comment:
        raise ParseError(file, len(text.splitlines()), "unterminated /* comment")
    return out


def _unquote(word: str) -> str:
    return word[1:-1].replace('\\"', '"') if len(word) >= 2 and word[0] == word[-1] == '"' else word


def parse_junos(text: str, file: str) -> list[Statement]:
    """A hierarchical Junos configuration (braces and semicolons)."""
    lines = text.splitlines()
    tokens = _junos_tokens(text, file)
    out: list[Statement] = []
    stack: list[tuple[tuple[str, ...], bool, int]] = []  # (path, inactive, line of the opening brace)
    words: list[str] = []
    first_line = 0
    in_list = False
    for token, number in tokens:
        if in_list:
            if token == "]":
                in_list = False
            elif token in "{};[":
                raise ParseError(file, number, f"'{token}' inside a [ ] list")
            else:
                words.append(_unquote(token))
            continue
        if token == "[":
            in_list = True
            if not words:
                raise ParseError(file, number, "a [ ] list with no statement before it")
            continue
        if token in "{;":
            if not words:
                if token == ";":
                    continue
                raise ParseError(file, number, "'{' with no statement before it")
            inactive = bool(stack and stack[-1][1])
            if words[0] in ("inactive:", "protect:"):
                inactive = inactive or words[0] == "inactive:"
                words = words[1:]
            base = stack[-1][0] if stack else ()
            path = base + tuple(words)
            if token == "{":
                stack.append((path, inactive, first_line))
                out.append(Statement(path, file, first_line, lines[first_line - 1].strip(), inactive, tags=["{"]))
            else:
                out.append(Statement(path, file, first_line, lines[first_line - 1].strip(), inactive))
            words = []
            continue
        if token == "}":
            if words:
                raise ParseError(file, first_line, f"missing ';' after '{' '.join(words)}'")
            if not stack:
                raise ParseError(file, number, "'}' without a matching '{'")
            stack.pop()
            continue
        if token == "]":
            raise ParseError(file, number, "']' without a matching '['")
        if not words:
            first_line = number
        words.append(_unquote(token))
    if in_list:
        raise ParseError(file, len(lines), "unterminated [ ] list")
    if words:
        raise ParseError(file, first_line, f"missing ';' after '{' '.join(words)}'")
    if stack:
        raise ParseError(file, stack[-1][2], f"'{{' of '{' '.join(stack[-1][0][-3:])}' is never closed")
    # a container with children is not a statement of its own: keep only leaves and empty containers
    has_child: set[int] = set()
    open_index: dict[tuple[str, ...], list[int]] = {}
    for index, stmt in enumerate(out):
        for cut in range(1, len(stmt.path)):
            for owner in open_index.get(stmt.path[:cut], []):
                has_child.add(owner)
        if "{" in stmt.tags:
            open_index.setdefault(stmt.path, []).append(index)
    return [s for i, s in enumerate(out) if i not in has_child]


def parse_junos_set(text: str, file: str) -> list[Statement]:
    """Junos `set` lines (`show configuration | display set`); `deactivate` marks a path inactive."""
    out: list[Statement] = []
    inactive: list[tuple[str, ...]] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        words = [_unquote(m.group(0)) for m in _TOKEN.finditer(line) if m.group(0) not in "[]"]
        verb, rest = words[0], tuple(words[1:])
        if verb == "set" and rest:
            out.append(Statement(rest, file, number, line))
        elif verb == "deactivate" and rest:
            inactive.append(rest)
        elif verb in ("version",) or verb.startswith("##"):
            continue
        else:
            raise ParseError(file, number, f"not a set statement: {line[:60]!r}")
    for stmt in out:
        if any(stmt.path[:len(p)] == p for p in inactive):
            stmt.inactive = True
    return out


# ---------------------------------------------------------------------------------------------- IOS

# commands that open a configuration mode (their following unindented lines belong to them in a flat
# listing); the longest match wins
_IOS_MODES = (
    "interface", "router", "crypto ikev2 cluster", "crypto ikev2 profile", "crypto ikev2 proposal",
    "crypto ikev2 policy", "crypto ikev2 keyring", "crypto ikev2 authorization policy",
    "crypto ikev2 client flexvpn", "crypto ipsec profile", "crypto ipsec transform-set", "crypto pki trustpoint",
    "crypto pki certificate map", "line", "ip access-list", "route-map", "vrf definition", "aaa group",
    "class-map", "policy-map", "key chain", "ipv6 router", "address-family",
)
# commands that are always global (end the mode of a flat listing)
_IOS_GLOBAL = (
    "hostname", "ip route", "ip local pool", "crypto ikev2 redirect", "crypto ikev2 dpd", "ip domain",
    "ip name-server", "ntp", "logging", "snmp-server", "username", "enable", "service", "version", "end",
    "aaa new-model", "aaa authorization network", "aaa authorization exec",
    "aaa authentication", "ip cef", "ip routing", "boot", "banner",
)
_PROMPT = re.compile(r"^[A-Za-z][\w.-]*(\([\w-]+\))?#\s*")


def _starts(words: list[str], phrases: tuple[str, ...]) -> bool:
    return any(words[:len(p.split())] == p.split() for p in phrases)


def parse_ios(text: str, file: str) -> list[Statement]:
    """An IOS configuration: indented (`show running-config`) or flat (indentation lost), with or
    without `!` comment lines and `Router(config)#` prompts."""
    lines = text.splitlines()
    indented = any(raw[:1] == " " and raw.strip() and not raw.strip().startswith("!") for raw in lines)
    out: list[Statement] = []
    mode: tuple[str, ...] | None = None
    sub: tuple[str, ...] | None = None  # a mode inside a mode (router bgp ... address-family)
    mode_stmt: Statement | None = None
    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped or stripped.startswith("!"):
            if stripped.startswith("!") and indented and not line.startswith(" "):
                mode = sub = None
            continue
        prompt = _PROMPT.match(stripped)
        if prompt:
            stripped = stripped[prompt.end():]
            if not stripped or stripped.startswith(("show ", "do ", "sh ")):
                continue
        words = stripped.split()
        if words[0] in ("exit", "exit-address-family"):
            if sub is not None:
                sub = None
            else:
                mode = None
            continue
        if words[0] == "end":
            mode = sub = None
            continue
        child = line.startswith(" ") if indented else (
            mode is not None and not _starts(words, _IOS_MODES) and not _starts(words, _IOS_GLOBAL))
        if indented and mode is not None and child and _starts(words, ("address-family",)):
            sub = mode + tuple(words)
            stmt = Statement(sub, file, number, stripped, tags=["mode"])
            out.append(stmt)
            continue
        if child and mode is not None:
            base = sub if (sub is not None and (not indented or len(line) - len(line.lstrip()) > 1)) else mode
            out.append(Statement(base + tuple(words), file, number, stripped))
            if mode_stmt is not None:
                mode_stmt.tags.append("has-children")
            continue
        sub = None
        if _starts(words, _IOS_MODES):
            mode = tuple(words)
            mode_stmt = Statement(mode, file, number, stripped, tags=["mode"])
            out.append(mode_stmt)
        else:
            mode = None
            mode_stmt = None
            out.append(Statement(tuple(words), file, number, stripped))
    # a mode line with children is shown through its children; without, it is a statement itself
    return [s for s in out if "has-children" not in s.tags]


def detect(text: str) -> Syntax:
    """Junos braces, Junos set lines, or IOS, from the text itself."""
    meaningful = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.strip().startswith(("#", "!", "/*"))]
    if not meaningful:
        return "ios"
    if sum(ln.startswith(("set ", "deactivate ")) for ln in meaningful) * 2 > len(meaningful):
        return "junos-set"
    if any(ln.endswith("{") for ln in meaningful) or sum(ln.endswith(";") for ln in meaningful) * 2 > len(meaningful):
        return "junos"
    return "ios"


def parse_file(path: Path, label: str | None = None) -> tuple[Syntax, list[Statement]]:
    """Read and parse one configuration file; LABEL is the name used in locations (default: the path)."""
    name = label or str(path)
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ParseError(name, 1, f"not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start})") \
            from None
    syntax = detect(text)
    if syntax == "junos":
        return syntax, parse_junos(text, name)
    if syntax == "junos-set":
        return syntax, parse_junos_set(text, name)
    return syntax, parse_ios(text, name)
