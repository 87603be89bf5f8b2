"""What a command returns, and the pipes that filter it (`| match`, `| count`, `| display json`...).

Patterns are the user's: they run on RE2 (google-re2), whose matching time is linear in the text
whatever the pattern, so `| match "(.*)*X"` cannot hold the server (one process serves every
session of the lab). RE2 has no backreferences or lookaround; such a pattern is refused with a
message. Without the re2 module (a broken install) a pattern matches as literal text.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Protocol, cast

from . import junosconf
from .parser import Pipe


@dataclass
class Output:
    text: str = ""
    data: Any = None  # structured form for `| display json` (None: the command has none)
    config: list[junosconf.Statement] | None = None  # a Junos configuration (display set / json)
    status: int = 0  # exit status of an exec channel: 0 ok, 1 the command failed


class PipeError(Exception):
    pass


MAX_PATTERN = 512  # characters of a `| match` expression
MAX_PIPES = 16  # pipes in one command line (each one is a pass over the output)
RE2_MAX_MEM = 8 << 20  # bytes RE2 may use for one compiled pattern

try:
    import re2
except ImportError:  # pragma: no cover - google-re2 is a dependency; only a broken install lacks it
    re2 = None


class Matcher(Protocol):
    def search(self, text: str) -> object: ...


class _Literal:
    def __init__(self, pattern: str, ignore_case: bool):
        self.ignore_case = ignore_case
        self.pattern = pattern.lower() if ignore_case else pattern

    def search(self, text: str) -> bool:
        return self.pattern in (text.lower() if self.ignore_case else text)


def _regex(pattern: str, ignore_case: bool) -> Matcher:
    """A matcher whose time is linear in the text searched (RE2), never a backtracking `re`."""
    if len(pattern) > MAX_PATTERN:
        raise PipeError(f"regular expression longer than {MAX_PATTERN} characters")
    if re2 is None:
        return _Literal(pattern, ignore_case)
    options = re2.Options()
    options.case_sensitive = not ignore_case
    options.log_errors = False
    options.max_mem = RE2_MAX_MEM
    try:
        return cast(Matcher, re2.compile(pattern, options))
    except re2.error as exc:
        why = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        hint = " (backreferences and lookaround are not supported)" if re.search(r"\\[1-9]|\(\?[=!<]", pattern) \
            else ""
        raise PipeError(f"invalid regular expression '{_short(pattern)}': {why}{hint}") from None


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:60] + "..."


def _lines(text: str) -> list[str]:
    return text.splitlines()


def _join(lines: list[str]) -> str:
    return "".join(line + "\n" for line in lines)


def apply_junos(output: Output, pipes: list[Pipe]) -> Output:
    """Junos pipes, left to right. `match`/`except`/`find` take a regular expression (quote it when
    it has blanks or `|`), case-insensitive like Junos; `count` counts lines."""
    if len(pipes) > MAX_PIPES:
        raise PipeError(f"too many pipes: {len(pipes)}, at most {MAX_PIPES} in one command")
    current = output
    for pipe in pipes:
        name, args = pipe.name, pipe.args
        if name == "display":
            current = _display(current, args)
        elif name == "match":
            regex = _regex(args[0], True)
            current = Output(_join([line for line in _lines(current.text) if regex.search(line)]),
                             status=current.status)
        elif name == "except":
            regex = _regex(args[0], True)
            current = Output(_join([line for line in _lines(current.text) if not regex.search(line)]),
                             status=current.status)
        elif name == "find":
            regex = _regex(args[0], True)
            lines = _lines(current.text)
            start = next((i for i, line in enumerate(lines) if regex.search(line)), len(lines))
            current = Output(_join(lines[start:]), status=current.status)
        elif name == "count":
            current = Output(f"Count: {len(_lines(current.text))} lines\n", status=current.status)
        elif name == "last":
            count = int(args[0]) if args and args[0].isdigit() else 0
            current = Output(_join(_lines(current.text)[-count:] if count else []), status=current.status)
        elif name == "trim":
            columns = int(args[0]) if args and args[0].isdigit() else 0
            current = Output(_join([line[columns:] for line in _lines(current.text)]), status=current.status)
        elif name == "no-more":
            continue
        else:  # pragma: no cover - the grammar only lets known pipes through
            raise PipeError(f"pipe '{name}' is not supported")
    return current


def _display(output: Output, args: list[str]) -> Output:
    what = args[0] if args else ""
    if "json".startswith(what) and what:
        if output.config is not None:
            return Output(json.dumps(junosconf.to_json(output.config), indent=4) + "\n")
        if output.data is None:
            raise PipeError("display json is not supported for this command")
        return Output(json.dumps(output.data, indent=4) + "\n", status=output.status)
    if "set".startswith(what) and what:
        if output.config is None:
            raise PipeError("display set is only supported for configuration output")
        return Output(junosconf.to_set(output.config))
    raise PipeError(f"syntax error, expecting <display option>: {what or '(none)'}")


def apply_ios(output: Output, pipes: list[Pipe], rest: str) -> Output:
    """IOS: one pipe; its regular expression is the rest of the line, blanks and `|` included."""
    if not pipes:
        return output
    pipe = pipes[0]
    name = pipe.name
    lines = _lines(output.text)
    if name in ("include", "exclude", "begin", "section") and not rest:
        raise PipeError("% Incomplete command.")
    regex = _regex(rest, False) if rest else None
    if name == "include":
        assert regex is not None
        kept = [line for line in lines if regex.search(line)]
    elif name == "exclude":
        assert regex is not None
        kept = [line for line in lines if not regex.search(line)]
    elif name == "begin":
        assert regex is not None
        start = next((i for i, line in enumerate(lines) if regex.search(line)), len(lines))
        kept = lines[start:]
    elif name == "section":
        assert regex is not None
        kept = []
        keep = False
        for line in lines:
            if line and not line[0].isspace():
                keep = bool(regex.search(line))
            if keep:
                kept.append(line)
    elif name == "count":
        matched = [line for line in lines if regex is None or regex.search(line)]
        return Output(f"Number of lines which match regexp = {len(matched)}\n", status=output.status)
    else:  # pragma: no cover
        raise PipeError(f"% Invalid input detected at '{name}'")
    return Output(_join(kept), status=output.status)
