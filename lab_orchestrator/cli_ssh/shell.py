"""Line editing of an interactive session (with a pty): a pure state machine over typed bytes.

`feed(text)` returns events: text to echo, a finished line, `?` help or tab completion requests, end
of input, an interrupted line. Keys: printable characters, Backspace, Delete, Left/Right, Home/End
(and Ctrl-A / Ctrl-E), Ctrl-B / Ctrl-F, Ctrl-U (kill to start), Ctrl-K (kill to end), Ctrl-W (kill the
word before the cursor), Up/Down and Ctrl-P / Ctrl-N (history), Tab, `?`, Ctrl-C, Ctrl-D, Ctrl-L.
The echo is plain: backspaces and blanks, no terminal-specific sequences beyond what every VT100
understands, so it works on any terminal the OpenSSH client offers.

Bounded: a line holds at most MAX_LINE characters (a paste past it is cut, with one `notice` event
saying so), the history MAX_HISTORY lines; a run of typed or pasted characters is inserted at once,
so the echo of a paste is the paste and the redrawn rest of the line, whatever its size.
"""

from __future__ import annotations

from dataclasses import dataclass, field

BS = "\b"
MAX_LINE = 4096  # characters in one command line
MAX_HISTORY = 200
ESCAPES = {"[A": "up", "[B": "down", "[C": "right", "[D": "left", "[H": "home", "[F": "end", "OH": "home",
           "OF": "end", "[1~": "home", "[4~": "end", "[3~": "delete", "[7~": "home", "[8~": "end"}


@dataclass
class Event:
    kind: str  # echo | line | help | complete | eof | interrupt | redraw | notice
    text: str = ""


@dataclass
class LineEditor:
    history: list[str] = field(default_factory=list)
    buffer: str = ""
    cursor: int = 0
    _escape: str | None = None
    _last_cr: bool = False
    _recall: int | None = None  # index into history while browsing it
    _saved: str = ""  # the line being typed before browsing history
    _cut: bool = False  # this line was cut at MAX_LINE (told once)

    def feed(self, data: str) -> list[Event]:
        events: list[Event] = []
        i, n = 0, len(data)
        while i < n:
            j = i
            if self._escape is None:
                while j < n and _plain(data[j]):
                    j += 1
            if j > i:  # a run of ordinary characters (typed fast, or pasted): one insertion
                self._last_cr = False
                events += self.insert(data[i:j])
                i = j
                continue
            if self._escape is None and data[i] in ("\x7f", "\b"):  # a run of Backspaces: one deletion
                while j < n and data[j] in ("\x7f", "\b"):
                    j += 1
                self._last_cr = False
                events += self._backspace(j - i)
                i = j
                continue
            events += self._key(data[i])
            i += 1
        return _merge(events)

    # ------------------------------------------------------------------ keys
    def _key(self, ch: str) -> list[Event]:
        if self._escape is not None:
            return self._escape_key(ch)
        if ch == "\n" and self._last_cr:  # CR LF from one Enter
            self._last_cr = False
            return []
        self._last_cr = ch == "\r"
        if ch in ("\r", "\n"):
            line = self.buffer
            self.buffer, self.cursor = "", 0
            self._recall = None
            self._cut = False
            if line.strip() and (not self.history or self.history[-1] != line):
                self.history.append(line)
                del self.history[:-MAX_HISTORY]
            return [Event("echo", "\r\n"), Event("line", line)]
        if ch == "\x1b":
            self._escape = ""
            return []
        if ch in ("\x7f", "\b"):
            return self._backspace()
        if ch == "\x03":  # Ctrl-C: abandon the line
            self.buffer, self.cursor, self._cut = "", 0, False
            return [Event("echo", "^C\r\n"), Event("interrupt")]
        if ch == "\x04":  # Ctrl-D: end of input on an empty line, else delete
            if not self.buffer:
                return [Event("eof")]
            return self._delete()
        if ch == "\x01":
            return self._home()
        if ch == "\x05":
            return self._end()
        if ch == "\x02":
            return self._left()
        if ch == "\x06":
            return self._right()
        if ch == "\x15":  # Ctrl-U
            return self._kill(0, self.cursor)
        if ch == "\x0b":  # Ctrl-K
            return self._kill(self.cursor, len(self.buffer))
        if ch == "\x17":  # Ctrl-W
            start = self.cursor
            while start > 0 and self.buffer[start - 1] == " ":
                start -= 1
            while start > 0 and self.buffer[start - 1] != " ":
                start -= 1
            return self._kill(start, self.cursor)
        if ch == "\x10":
            return self._history(-1)
        if ch == "\x0e":
            return self._history(1)
        if ch == "\x0c":
            return [Event("redraw")]
        if ch == "\t":
            return [Event("complete", self.buffer[:self.cursor])]
        if ch == "?" and self.buffer[:self.cursor].count('"') % 2 == 0:
            return [Event("echo", "?\r\n"), Event("help", self.buffer[:self.cursor])]
        if ch < " ":
            return []
        return self.insert(ch)

    def _escape_key(self, ch: str) -> list[Event]:
        assert self._escape is not None
        self._escape += ch
        if self._escape in ESCAPES:
            name = ESCAPES[self._escape]
            self._escape = None
            return {"up": lambda: self._history(-1), "down": lambda: self._history(1), "left": self._left,
                    "right": self._right, "home": self._home, "end": self._end, "delete": self._delete}[name]()
        if any(key.startswith(self._escape) for key in ESCAPES):
            return []
        self._escape = None  # unknown sequence: ignored
        return []

    # ------------------------------------------------------------------ editing
    def insert(self, text: str) -> list[Event]:
        room = MAX_LINE - len(self.buffer)
        notice: list[Event] = []
        if len(text) > room:
            text = text[:max(0, room)]
            if not self._cut:
                self._cut = True
                notice = [Event("notice", f"line too long: at most {MAX_LINE} characters, the rest was dropped")]
            else:
                notice = [Event("echo", "\a")]
        if not text:
            return notice
        rest = self.buffer[self.cursor:]
        self.buffer = self.buffer[:self.cursor] + text + rest
        self.cursor += len(text)
        return [Event("echo", text + rest + BS * len(rest)), *notice]

    def _backspace(self, count: int = 1) -> list[Event]:
        if self.cursor == 0:
            return [Event("echo", "\a")]
        return self._kill(max(0, self.cursor - count), self.cursor)

    def _delete(self) -> list[Event]:
        if self.cursor >= len(self.buffer):
            return []
        rest = self.buffer[self.cursor + 1:]
        self.buffer = self.buffer[:self.cursor] + rest
        return [Event("echo", rest + " " + BS * (len(rest) + 1))]

    def _kill(self, start: int, end: int) -> list[Event]:
        if start >= end:
            return []
        rest = self.buffer[end:]
        removed = end - start
        echo = BS * (self.cursor - start) + rest + " " * removed + BS * (len(rest) + removed)
        self.buffer = self.buffer[:start] + rest
        self.cursor = start
        return [Event("echo", echo)]

    def _left(self) -> list[Event]:
        if self.cursor == 0:
            return []
        self.cursor -= 1
        return [Event("echo", BS)]

    def _right(self) -> list[Event]:
        if self.cursor >= len(self.buffer):
            return []
        self.cursor += 1
        return [Event("echo", self.buffer[self.cursor - 1])]

    def _home(self) -> list[Event]:
        moved, self.cursor = self.cursor, 0
        return [Event("echo", BS * moved)] if moved else []

    def _end(self) -> list[Event]:
        tail = self.buffer[self.cursor:]
        self.cursor = len(self.buffer)
        return [Event("echo", tail)] if tail else []

    def replace(self, text: str) -> list[Event]:
        """Show TEXT instead of the current line (history recall)."""
        old = len(self.buffer)
        echo = BS * self.cursor + text + " " * max(0, old - len(text)) + BS * max(0, old - len(text))
        self.buffer, self.cursor = text, len(text)
        return [Event("echo", echo)]

    def _history(self, step: int) -> list[Event]:
        if not self.history:
            return []
        if self._recall is None:
            if step > 0:
                return []
            self._saved = self.buffer
            self._recall = len(self.history)
        index = self._recall + step
        if index < 0:
            return [Event("echo", "\a")]
        if index >= len(self.history):
            self._recall = None
            return self.replace(self._saved)
        self._recall = index
        return self.replace(self.history[index])


def _plain(ch: str) -> bool:
    """A character that is only inserted (not a key with a meaning of its own)."""
    return ch >= " " and ch not in ("\x7f", "?")


def _merge(events: list[Event]) -> list[Event]:
    """Consecutive echoes as one write (joined once: linear in their total size)."""
    out: list[Event] = []
    run: list[str] = []
    for event in events:
        if event.kind == "echo":
            run.append(event.text)
            continue
        if run:
            out.append(Event("echo", "".join(run)))
            run = []
        out.append(event)
    if run:
        out.append(Event("echo", "".join(run)))
    return out
