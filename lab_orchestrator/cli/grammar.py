"""Old option spellings, still accepted for one release: each is rewritten to the current one before
the command line is parsed, with a note on stderr. The current grammar (tests/unit/test_cli_grammar.py
checks it over every command): the lab is `--lab/-l NAME` (or a lone positional name), `--json` is a
flag that prints JSON, files written go through `--out/-o` or `--KIND-out`, and a short flag means the
same long option in every command."""

from __future__ import annotations

# (command, old spelling) -> current spelling
RENAMED: dict[tuple[str, str], str] = {
    ("down", "--name"): "--lab",
    ("down", "-n"): "--lab",
    ("report", "-p"): "--plan",
    ("events run", "--junit"): "--junit-out",
    ("events run", "--plot"): "--plot-out",
}
# `lab events run --json FILE` wrote the report to FILE; `--json` is now the flag of every command.
JSON_FILE_COMMANDS = ("events run",)


def command_of(args: list[str]) -> str:
    """The command words at the front of ARGS ("down", "events run"), before any option."""
    from .common import app

    words: list[str] = []
    groups = {g.name for g in app.registered_groups}
    for arg in args:
        if arg.startswith("-"):
            break
        words.append(arg)
        if len(words) == 1 and arg not in groups:
            break
        if len(words) == 2:
            break
    return " ".join(words)


def _output_file(word: str) -> bool:
    """Whether the word after `--json` was its file (old spelling) rather than the topology argument (a
    topology file or shipped lab exists; a report file is named .json, or is yet to be written)."""
    from pathlib import Path

    from ..model.shipped import shipped_path

    if word.startswith("-"):
        return False
    return word.endswith(".json") or not (Path(word).exists() or shipped_path(word))


def rewrite_deprecated(args: list[str]) -> tuple[list[str], list[str]]:
    """ARGS with every old spelling replaced by the current one, and one note per replacement. Words
    after `--` (a command for a node) are never touched."""
    end = args.index("--") if "--" in args else len(args)
    command = command_of(args[:end])
    out: list[str] = []
    notes: list[str] = []
    index = 0
    while index < end:
        arg = args[index]
        name, eq, value = arg.partition("=") if arg.startswith("--") else (arg, "", "")
        new = RENAMED.get((command, name))
        if new is not None:
            out.append(new + eq + value)
            notes.append(f"`lab {command} {name}` is now `{new}`; the old spelling goes in the next release")
        elif command in JSON_FILE_COMMANDS and name == "--json" and (
                eq or (index + 1 < end and _output_file(args[index + 1]))):
            target = value if eq else args[index + 1]
            out += ["--json-out", target]
            index += 0 if eq else 1
            notes.append(f"`lab {command} --json FILE` is now `--json-out FILE` (`--json` prints the report "
                         "on stdout); the old spelling goes in the next release")
        else:
            out.append(arg)
        index += 1
    return out + args[end:], notes
