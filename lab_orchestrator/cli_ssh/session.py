"""One user's CLI on one node: runs a command line, formats errors and `?` help like the vendor.

Never raises: an unknown command is the vendor's error text, a bug in a renderer (or in `?` help
and Tab completion) is one error line (its traceback goes to the server's log), so a session never
shows a Python traceback and its channel stays open. A line longer than MAX_LINE is refused whole.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass

from ..plan.sshconfig import Node, ServerConfig, User
from . import actions, commands, gather, pipes
from .parser import Grammar, ParseError, Pipe, tokenize
from .pipes import Output
from .shell import MAX_LINE

log = logging.getLogger("lab.sshd")
NOOPS = ("noop",)


@dataclass
class Result:
    text: str
    status: int = 0
    exit: bool = False  # the user asked to leave (exit, quit, logout)


class Session:
    def __init__(self, config: ServerConfig, node: Node, user: User):
        self.config = config
        self.node = node
        self.user = user
        self.vendor = node.vendor
        self.grammar: Grammar = commands.grammar(node.vendor, node.kind)

    # ------------------------------------------------------------------ prompt and banner
    @property
    def prompt(self) -> str:
        if self.vendor == "junos":
            return f"{self.user.name}@{self.node.name}> "
        return f"{self.node.name}{'#' if self.user.may_change_state() else '>'}"

    def banner(self) -> str:
        if self.vendor == "junos":
            return (f"--- Junos 24.2R1 (emulated by lab_orchestrator): lab {self.config.lab}, node {self.node.name} "
                    f"({self.node.kind})\n")
        return ""

    # ------------------------------------------------------------------ running a line
    def run(self, line: str, ask: Callable[[str], str | None] | None = None, column: int = 0) -> Result:
        """Run one command line. COLUMN: where the line starts on the user's screen (for the caret)."""
        line = line.rstrip("\r\n")
        if len(line) > MAX_LINE:
            return Result(self.error_line(f"line too long: {len(line)} characters, at most {MAX_LINE}"), 1)
        if line.rstrip().endswith("?"):
            return Result(self.help(line.rstrip()[:-1]))
        try:
            return self._run(line, ask or (lambda prompt: None), column)
        except Exception as exc:  # noqa: BLE001 - a bug must not show a traceback to the user
            log.exception("command %r on %s failed", line[:200], self.node.name)
            return Result(self.error_line(f"internal error ({type(exc).__name__}: {exc})"), 1)

    def error_line(self, text: str) -> str:
        return f"% {text}\n" if self.vendor == "ios" else f"error: {text}\n"

    def _run(self, line: str, ask: Callable[[str], str | None], column: int) -> Result:
        command_part, ios_pipe = (line, None) if self.vendor == "junos" else _split_ios(line)
        try:
            parsed = self.grammar.parse(command_part)
        except ParseError as exc:
            return Result(self.format_error(exc, line, column), 1)
        if parsed is None:
            return Result("")
        run = parsed.command.run
        if run == "exit":
            return Result("", 0, exit=True)
        if run in NOOPS:
            return Result("")
        if run == "enable":
            return Result("" if self.user.may_change_state() else "% Access denied (read-only user)\n")
        if run == "configure":
            return Result(self.error_line("configuration mode is not available: the configuration comes "
                                           "from the topology file (edit it and `lab up` again)"), 1)
        if parsed.command.privileged and not self.user.may_change_state():
            return Result(self.error_line("permission denied" if self.vendor == "junos"
                                           else "Authorization failed"), 1)
        output = self._execute(run, parsed.args, ask)
        try:
            if self.vendor == "junos":
                output = pipes.apply_junos(output, parsed.pipes)
            elif ios_pipe is not None:
                ios_pipes, rest = self._ios_pipe(ios_pipe, line)
                output = pipes.apply_ios(output, ios_pipes, rest)
        except ParseError as exc:
            return Result(self.format_error(exc, line, column), 1)
        except pipes.PipeError as exc:
            text = str(exc)
            return Result(text + "\n" if text.startswith("%") else self.error_line(text), 1)
        return Result(output.text, output.status)

    def _execute(self, run: str, args: dict[str, object], ask: Callable[[str], str | None]) -> Output:
        if run.startswith("action:"):
            action = actions.ACTIONS[run.split(":", 1)[1]]
            return action(actions.Context(self.config, self.node, self.user, ask), dict(args))
        impl = commands.implementation(self.vendor, run)
        if impl is None:
            return Output(self.error_line(f"{run} is not available in this lab yet"), status=1)
        snap = gather.snapshot(self.config, self.node, impl.needs)
        return impl.render(snap, dict(args))

    def _ios_pipe(self, text: str, line: str) -> tuple[list[Pipe], str]:
        """IOS takes one pipe and the rest of the line, blanks and `|` included, as its expression."""
        start = len(line) - len(text)
        match = re.match(r"\s*(\S+)\s*(.*)$", text)
        if not match:
            raise ParseError("incomplete", start, expecting="<pipe>")
        word = match.group(1)
        names = [n for n in self.grammar.pipes if n.startswith(word)]
        if word in self.grammar.pipes:
            names = [word]
        column = start + text.index(word)
        if not names:
            raise ParseError("syntax", column, word)
        if len(names) > 1:
            raise ParseError("ambiguous", column, word)
        return [Pipe(names[0], [], column)], match.group(2).strip()

    # ------------------------------------------------------------------ errors and help
    def format_error(self, exc: ParseError, line: str, column: int) -> str:
        caret = " " * (column + exc.column) + "^\n"
        if self.vendor == "ios":
            if exc.kind == "ambiguous":
                return f"% Ambiguous command:  \"{line.strip()}\"\n"
            if exc.kind in ("incomplete", "expecting"):
                return "% Incomplete command.\n"
            return caret + "% Invalid input detected at '^' marker.\n"
        if exc.kind == "unknown":
            return caret + "unknown command.\n"
        if exc.kind == "ambiguous":
            options = "".join(f"  {word:<20} {help_text}\n" for word, help_text in exc.options)
            return caret + f"'{exc.word}' is ambiguous.\nPossible completions:\n{options}"
        if exc.kind in ("incomplete", "expecting"):
            return caret + f"syntax error, expecting {exc.expecting or '<command>'}.\n"
        return caret + "syntax error, expanding <command>.\n"

    def help(self, line: str) -> str:
        """What `?` shows after LINE."""
        try:
            return self._help(line[:MAX_LINE])
        except Exception as exc:  # noqa: BLE001 - a bug must not end the session
            log.exception("help for %r on %s failed", line[:200], self.node.name)
            return self.error_line(f"internal error ({type(exc).__name__})")

    def _help(self, line: str) -> str:
        options, complete, _partial = self.grammar.possible(line)
        if self.vendor == "ios":
            if not options and not complete:
                return "% Unrecognized command\n"
            out = "".join(f"  {word:<16} {text}\n" for word, text in options if word != "|")
            if complete:
                out += "  |                Output modifiers\n  <cr>\n"
            return out
        if not options and not complete:
            return "No valid completions\n"
        out = "Possible completions:\n"
        if complete:
            out += f"  {'<[Enter]>':<20} Execute this command\n"
        out += "".join(f"  {word:<20} {text}\n" for word, text in options)
        return out

    def complete(self, line: str) -> tuple[str, str]:
        """Tab: (text to insert at the cursor, text to show above a new prompt when not unique)."""
        try:
            return self._complete(line[:MAX_LINE])
        except Exception as exc:  # noqa: BLE001 - a bug must not end the session
            log.exception("completion of %r on %s failed", line[:200], self.node.name)
            return "", self.error_line(f"internal error ({type(exc).__name__})")

    def _complete(self, line: str) -> tuple[str, str]:
        if self.vendor == "ios" and "|" in line:
            return "", ""
        insert, options = self.grammar.complete(line)
        if insert or not options:
            return insert, ""
        return "", self.help(line)


def _split_ios(line: str) -> tuple[str, str | None]:
    for token in tokenize(line):
        if token.text == "|" and not token.quoted:
            return line[:token.start], line[token.start + 1:]
    return line, None
