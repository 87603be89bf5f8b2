"""Command lines: words with unique-prefix abbreviation, parameters, pipes, `?` help, tab completion.

A vendor's commands are `Command`s (words, parameters, help). They form a tree of words; a line is
walked down the tree (`sh int ter` is `show interfaces terse`); what follows the last word are the
command's parameters: keywords (`exact`), keywords with a value (`table NAME`) and positional values
(`<destination>`). After an unquoted `|` come pipes (`| match RE | count`). Errors carry the column
of the offending word so the vendor layer can draw its caret.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .. import kinds

SSH_KINDS = kinds.names(lambda k: k.ssh_vendor is not None)  # the kinds with an SSH CLI


@dataclass(frozen=True)
class Param:
    name: str  # the keyword ("table"), or for a positional value its placeholder ("destination")
    help: str
    kind: str = "flag"  # flag | value | positional
    value_help: str = ""  # "<table-name>"
    check: Callable[[str], bool] | None = None  # positional: does this word fit?
    choices: tuple[str, ...] = ()  # values offered by tab completion
    required: bool = False  # positional: the command needs it (`expecting <neighbor>` without it)


@dataclass(frozen=True)
class Command:
    words: tuple[str, ...]
    help: str
    run: str  # key of the implementation in the vendor's command table
    params: tuple[Param, ...] = ()
    kinds: frozenset[str] = SSH_KINDS
    privileged: bool = False  # changes state: not for read-only users
    hidden: bool = False  # accepted, not offered by `?` (e.g. `set cli screen-length 0`)
    rest: bool = False  # the remaining words are one free-text argument ("rest")


@dataclass
class Token:
    text: str
    start: int
    quoted: bool = False


@dataclass
class ParseError(Exception):
    kind: str  # unknown | syntax | ambiguous | incomplete | expecting | invalid
    column: int
    word: str = ""
    expecting: str = ""
    options: list[tuple[str, str]] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.kind} at {self.column}: {self.word or self.expecting}"


@dataclass
class Pipe:
    name: str
    args: list[str]
    column: int


@dataclass
class Parsed:
    command: Command
    args: dict[str, Any]
    pipes: list[Pipe]


@dataclass
class Node:
    word: str = ""
    help: str = ""
    children: dict[str, Node] = field(default_factory=dict)
    command: Command | None = None


def tokenize(line: str) -> list[Token]:
    """Split on blanks; "double quotes" group words; a `|` outside quotes is a token of its own."""
    tokens: list[Token] = []
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch.isspace():
            i += 1
            continue
        if ch == "|":
            tokens.append(Token("|", i))
            i += 1
            continue
        start = i
        if ch == '"':
            end = line.find('"', i + 1)
            if end < 0:
                end = n
            tokens.append(Token(line[i + 1:end], start, quoted=True))
            i = end + 1
            continue
        while i < n and not line[i].isspace() and line[i] != "|":
            i += 1
        tokens.append(Token(line[start:i], start))
    return tokens


class Grammar:
    """The command tree of one vendor for one kind of node."""

    def __init__(self, commands: list[Command], word_help: dict[tuple[str, ...], str],
                 pipes: dict[str, tuple[str, int]]):
        self.root = Node()
        self.pipes = pipes  # pipe name -> (help, number of arguments: 0, 1, or -1 = rest of line)
        for command in commands:
            node = self.root
            for depth, word in enumerate(command.words):
                if word not in node.children:
                    path = command.words[:depth + 1]
                    node.children[word] = Node(word, word_help.get(path, command.help if path == command.words
                                                                     else ""))
                node = node.children[word]
            node.command = command

    # ------------------------------------------------------------------ parsing
    def parse(self, line: str) -> Parsed | None:
        """None for an empty line; ParseError for anything that is not a command."""
        tokens = tokenize(line)
        if not tokens:
            return None
        words, pipe_tokens = _split_pipes(tokens)
        node, used = self._walk(words)
        command = node.command
        if command is None:
            if used < len(words):
                word = words[used]
                raise ParseError("unknown" if used == 0 else "syntax", word.start, word.text)
            end = words[-1].start + len(words[-1].text) + 1 if words else 0
            raise ParseError("incomplete", end, expecting="<command>")
        args = self._params(command, words[used:])
        missing = next((p for p in command.params if p.required and p.name not in args), None)
        if missing is not None:
            end = words[-1].start + len(words[-1].text) + 1
            raise ParseError("expecting", end, expecting=missing.value_help or f"<{missing.name}>")
        return Parsed(command, args, self._pipes(pipe_tokens))

    def _walk(self, words: list[Token]) -> tuple[Node, int]:
        node = self.root
        used = 0
        for token in words:
            if token.quoted:
                break
            child = self._child(node, token)
            if child is None:
                break
            node = child
            used += 1
        return node, used

    def _child(self, node: Node, token: Token) -> Node | None:
        word = token.text
        if word in node.children:
            return node.children[word]
        matches = [w for w in node.children if w.startswith(word) and not _hidden(node.children[w])]
        if not matches:
            matches = [w for w in node.children if w.startswith(word)]
        if len(matches) == 1:
            if node.command is not None and any(p.kind != "positional" and p.name.startswith(word)
                                                and p.name != matches[0] for p in node.command.params):
                raise ParseError("ambiguous", token.start, word, options=self._options_for(node, word))
            return node.children[matches[0]]
        if len(matches) > 1:
            raise ParseError("ambiguous", token.start, word, options=self._options_for(node, word))
        return None

    def _options_for(self, node: Node, prefix: str) -> list[tuple[str, str]]:
        out = [(w, c.help) for w, c in sorted(node.children.items()) if w.startswith(prefix) and not _hidden(c)]
        if node.command is not None:
            out += [(p.name, p.help) for p in node.command.params if p.kind != "positional" and
                    p.name.startswith(prefix)]
        return sorted(out)

    def _params(self, command: Command, tokens: list[Token]) -> dict[str, Any]:
        args: dict[str, Any] = {}
        if command.rest:
            if tokens:
                args["rest"] = " ".join(t.text for t in tokens)
                args["rest_column"] = tokens[0].start
            return args
        keywords = [p for p in command.params if p.kind != "positional"]
        positionals = [p for p in command.params if p.kind == "positional"]
        i = 0
        while i < len(tokens):
            token = tokens[i]
            param = None if token.quoted else _keyword(keywords, token)
            if param is not None:
                if param.kind == "value":
                    if i + 1 >= len(tokens):
                        raise ParseError("expecting", token.start + len(token.text) + 1,
                                         expecting=param.value_help or f"<{param.name}>")
                    args[param.name] = tokens[i + 1].text
                    i += 2
                else:
                    args[param.name] = True
                    i += 1
                continue
            slot = next((p for p in positionals if p.name not in args), None)
            if slot is None or (slot.check is not None and not slot.check(token.text)):
                raise ParseError("syntax", token.start, token.text)
            args[slot.name] = token.text
            i += 1
        return args

    def _pipes(self, tokens: list[Token]) -> list[Pipe]:
        pipes: list[Pipe] = []
        i = 0
        while i < len(tokens):
            bar = tokens[i]
            assert bar.text == "|"
            j = i + 1
            while j < len(tokens) and tokens[j].text != "|":
                j += 1
            body = tokens[i + 1:j]
            if not body:
                raise ParseError("incomplete", bar.start + 2, expecting="<pipe>")
            name_token = body[0]
            names = [n for n in self.pipes if n.startswith(name_token.text)]
            if name_token.text in self.pipes:
                names = [name_token.text]
            if not names:
                raise ParseError("syntax", name_token.start, name_token.text)
            if len(names) > 1:
                raise ParseError("ambiguous", name_token.start, name_token.text,
                                 options=[(n, self.pipes[n][0]) for n in sorted(names)])
            name = names[0]
            arity = self.pipes[name][1]
            args = [t.text for t in body[1:]]
            if arity >= 0 and len(args) < arity:
                raise ParseError("expecting", body[-1].start + len(body[-1].text) + 1, expecting="<pattern>")
            if arity >= 0 and len(args) > arity and name != "display":
                raise ParseError("syntax", body[arity + 1].start, body[arity + 1].text)
            pipes.append(Pipe(name, args, name_token.start))
            i = j
        return pipes

    # ------------------------------------------------------------------ help and completion
    def possible(self, line: str) -> tuple[list[tuple[str, str]], bool, str]:
        """What may come at the end of LINE: [(word, help)], whether Enter runs a command there, and
        the partial word being typed ("" after a blank)."""
        partial = ""
        if line and not line[-1].isspace():
            tokens = tokenize(line)
            partial = tokens[-1].text if tokens and tokens[-1].text != "|" else ""
            line = line[:len(line) - len(partial)]
        tokens = tokenize(line)
        words, pipe_tokens = _split_pipes(tokens)
        if pipe_tokens:
            return self._pipe_options(pipe_tokens, partial)
        try:
            node, used = self._walk(words)
        except ParseError:
            return [], False, partial
        command = node.command
        rest = words[used:]
        if command is None:
            if rest:
                return [], False, partial
            options = [(w, c.help) for w, c in sorted(node.children.items()) if not _hidden(c)]
            return [(w, h) for w, h in options if w.startswith(partial)], False, partial
        if _awaiting_value(command, rest):
            param = _keyword([p for p in command.params if p.kind != "positional"], rest[-1])
            assert param is not None
            values = [(v, "") for v in param.choices if v.startswith(partial)]
            return values or [(param.value_help or f"<{param.name}>", param.help)], False, partial
        try:
            given = self._params(command, rest)
        except ParseError:
            return [], False, partial
        options = [] if rest else [(w, c.help) for w, c in sorted(node.children.items()) if not _hidden(c)]
        seen = {w for w, _ in options}
        options += [(w, h) for w, h in self._param_options(command, list(given)) if w not in seen]
        options = [(w, h) for w, h in options if w.startswith(partial) or w.startswith("<")]
        if not partial:
            options.append(("|", "Pipe through a command"))
        return options, not partial, partial

    def _param_options(self, command: Command, given: list[str]) -> list[tuple[str, str]]:
        out = []
        for param in command.params:
            if param.name in given:
                continue
            if param.kind == "positional":
                out.append((f"<{param.name}>", param.help))
            else:
                out.append((param.name, param.help))
        return out

    def _pipe_options(self, pipe_tokens: list[Token], partial: str) -> tuple[list[tuple[str, str]], bool, str]:
        last = len(pipe_tokens) - 1 - [t.text for t in pipe_tokens][::-1].index("|")
        body = pipe_tokens[last + 1:]
        if not body:
            return [(n, h) for n, (h, _) in sorted(self.pipes.items()) if n.startswith(partial)], False, partial
        if body[0].text == "display" and len(body) == 1:
            return [(v, h) for v, h in (("json", "Show output in JSON format"),
                                        ("set", "Show configuration as 'set' commands"))
                    if v.startswith(partial)], False, partial
        return [("<pattern>", "Regular expression")], True, partial

    def complete(self, line: str) -> tuple[str, list[tuple[str, str]]]:
        """Tab: (text to insert, options to list when it is not unique)."""
        options, _complete, partial = self.possible(line)
        words = [w for w, _ in options if not w.startswith("<") and w != "|"]
        if not words:
            return "", options
        if len(words) == 1:
            return words[0][len(partial):] + " ", []
        common = _common_prefix(words)
        if len(common) > len(partial):
            return common[len(partial):], []
        return "", options


def _hidden(node: Node) -> bool:
    return node.command is not None and node.command.hidden and not node.children


def _keyword(keywords: list[Param], token: Token) -> Param | None:
    exact = [p for p in keywords if p.name == token.text]
    if exact:
        return exact[0]
    matches = [p for p in keywords if p.name.startswith(token.text)]
    return matches[0] if len(matches) == 1 else None


def _awaiting_value(command: Command, tokens: list[Token]) -> bool:
    """Does the last token ask for a value? A run of value keywords alternates keyword, value,
    keyword... ("table table"): the last one asks when the run is odd. Counted, not recursed, so
    a line of a thousand keywords costs a thousand steps."""
    keywords = [p for p in command.params if p.kind != "positional"]
    run = 0
    for token in reversed(tokens):
        param = _keyword(keywords, token)
        if param is None or param.kind != "value":
            break
        run += 1
    return run % 2 == 1


def _split_pipes(tokens: list[Token]) -> tuple[list[Token], list[Token]]:
    for i, token in enumerate(tokens):
        if token.text == "|" and not token.quoted:
            return tokens[:i], tokens[i:]
    return tokens, []


def _common_prefix(words: list[str]) -> str:
    first, last = min(words), max(words)
    i = 0
    while i < len(first) and i < len(last) and first[i] == last[i]:
        i += 1
    return first[:i]


# ---------------------------------------------------------------------- value checks
_IPV4 = re.compile(r"^(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})$")


def is_address(text: str) -> bool:
    match = _IPV4.match(text)
    return match is not None and all(int(part) <= 255 for part in match.groups())


def is_prefix(text: str) -> bool:
    """An address or address/length (Junos and IOS accept both where a destination is asked)."""
    address, _, length = text.partition("/")
    if not is_address(address):
        return False
    return not length or (length.isdigit() and int(length) <= 32)


def is_address46(text: str) -> bool:
    """An IPv4 or IPv6 address (a BGP peer of a dual-stack lab, a Junos route destination)."""
    if is_address(text):
        return True
    try:
        return ":" in text and ipaddress.IPv6Address(text) is not None
    except ValueError:
        return False


def is_prefix46(text: str) -> bool:
    """An IPv4 or IPv6 address or address/length."""
    if is_prefix(text):
        return True
    address, _, length = text.partition("/")
    return ":" in address and is_address46(address) and (not length or (length.isdigit() and int(length) <= 128))


def is_number(text: str) -> bool:
    return text.isdigit()


def is_word(text: str) -> bool:
    return bool(text) and text != "|"
