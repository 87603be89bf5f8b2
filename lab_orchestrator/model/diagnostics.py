"""Located error messages: every problem in a topology file names its file, line and YAML path."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

YamlPath = tuple[str | int, ...]


def dotted(path: YamlPath) -> str:
    """Render a YAML path the way netlab users read it: nodes.srx1.bgp.as, links[3].endpoints[0]."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + part
    return out or "(top)"


@dataclass(frozen=True)
class Diagnostic:
    # Every field takes part in equality: two different problems on one line are two diagnostics.
    file: str
    line: int
    path: YamlPath
    message: str
    hint: str = ""

    def render(self) -> str:
        text = f"{self.file}:{self.line}: {dotted(self.path)}: {self.message}"
        return f"{text} ({self.hint})" if self.hint else text

    def to_json(self) -> dict[str, object]:
        return {
            "file": self.file,
            "line": self.line,
            "path": dotted(self.path),
            "message": self.message,
            "hint": self.hint,
        }


def did_you_mean(word: str, known: Iterable[str]) -> str:
    """" (did you mean 'x'?)" for the one known name closest to a misspelt WORD; "" when none is close, or
    when two are equally close (srx3 among srx1 and srx2: a guess would mislead)."""
    import difflib

    scores = sorted(((difflib.SequenceMatcher(None, word, name).ratio(), name) for name in set(known)), reverse=True)
    if not scores or scores[0][0] < 0.6 or (len(scores) > 1 and scores[1][0] == scores[0][0]):
        return ""
    return f" (did you mean '{scores[0][1]}'?)"


class LabError(Exception):
    """An error the user can act on; the CLI prints it as one sentence, never a traceback."""

    exit_code = 1


class NotJudged(LabError):
    """The command ran but could not give a verdict: a precondition of a test failed (the lab was not
    ready, or the machine could not carry the traffic asked for): exit 3."""

    exit_code = 3


class BadInput(LabError):
    """A wrong argument the user can fix (an existing file where a folder goes, an unknown node): exit 2."""

    exit_code = 2


class TopologyInvalid(LabError):
    """A topology file has one or more problems; all of them are carried at once."""

    exit_code = 2

    def __init__(self, diagnostics: Iterable[Diagnostic]):
        # Exact repeats collapse; the order is total (no dependence on set iteration order).
        unique = dict.fromkeys(diagnostics)
        self.diagnostics = sorted(unique, key=lambda d: (d.file, d.line, dotted(d.path), d.message, d.hint))
        super().__init__("\n".join(d.render() for d in self.diagnostics))
