"""Line editing of the interactive SSH CLI: what the user sees (echo) and what is run (lines)."""

from __future__ import annotations

from lab_orchestrator.cli_ssh.shell import Event, LineEditor

UP, DOWN, LEFT, RIGHT, DELETE = "\x1b[A", "\x1b[B", "\x1b[D", "\x1b[C", "\x1b[3~"


def screen(events: list[Event]) -> str:
    """Replay the echo on a one-line terminal (backspace moves left, characters overwrite)."""
    line: list[str] = []
    col = 0
    for event in events:
        if event.kind != "echo":
            continue
        for ch in event.text:
            if ch == "\b":
                col = max(0, col - 1)
            elif ch in "\r\n\a":
                continue
            else:
                if col < len(line):
                    line[col] = ch
                else:
                    line.append(ch)
                col += 1
    return "".join(line).rstrip()


def lines(events: list[Event]) -> list[str]:
    return [e.text for e in events if e.kind == "line"]


def test_typing_and_enter() -> None:
    editor = LineEditor()
    events = editor.feed("show route\r")
    assert screen(events) == "show route"
    assert lines(events) == ["show route"]
    assert editor.buffer == "" and editor.history == ["show route"]


def test_crlf_is_one_enter() -> None:
    editor = LineEditor()
    assert lines(editor.feed("a\r\nb\n")) == ["a", "b"]


def test_backspace_and_insert_in_the_middle() -> None:
    editor = LineEditor()
    events = editor.feed("show rute")
    events += editor.feed(LEFT * 3 + "o")
    assert editor.buffer == "show route" and editor.cursor == 7
    events += editor.feed("\x7f")
    assert editor.buffer == "show rute"
    events += editor.feed("o")
    assert screen(events) == "show route"
    assert lines(editor.feed("\r")) == ["show route"]


def test_home_end_delete_kill() -> None:
    editor = LineEditor()
    editor.feed("xshow version")
    editor.feed("\x01" + DELETE)  # Ctrl-A, Delete
    assert editor.buffer == "show version" and editor.cursor == 0
    editor.feed("\x05")  # Ctrl-E
    assert editor.cursor == len("show version")
    events = editor.feed("\x17")  # Ctrl-W: the word before the cursor
    assert editor.buffer == "show "
    events += editor.feed("\x15")  # Ctrl-U: to the start
    assert editor.buffer == "" and screen(events) == ""
    editor.feed("show route")
    editor.feed("\x01" + RIGHT * 4 + "\x0b")  # Ctrl-K: to the end
    assert editor.buffer == "show"


def test_history() -> None:
    editor = LineEditor()
    editor.feed("show version\rshow route\r")
    editor.feed("partial")
    events = editor.feed(UP)
    assert editor.buffer == "show route"
    events += editor.feed(UP)
    assert editor.buffer == "show version"
    events += editor.feed(DOWN + DOWN)
    assert editor.buffer == "partial"
    events += editor.feed(UP + "\r")
    assert lines(events) == ["show route"]


def test_help_tab_interrupt_eof() -> None:
    editor = LineEditor()
    events = editor.feed("show ?")
    assert events == [Event("echo", "show ?\r\n"), Event("help", "show ")]
    assert editor.buffer == "show "  # `?` is not part of the line
    assert editor.feed("r\t")[-1] == Event("complete", "show r")
    interrupted = editor.feed("\x03")
    assert interrupted[-1].kind == "interrupt" and editor.buffer == ""
    assert editor.feed("\x04") == [Event("eof")]


def test_question_mark_inside_quotes_is_text() -> None:
    editor = LineEditor()
    events = editor.feed('show route | match "a?"')
    assert not any(e.kind == "help" for e in events) and editor.buffer == 'show route | match "a?"'


def test_escape_sequences_split_across_reads() -> None:
    editor = LineEditor()
    editor.feed("ab")
    editor.feed("\x1b")
    editor.feed("[")
    editor.feed("D")
    assert editor.cursor == 1
    editor.feed("\x1b[Z")  # unknown: ignored
    assert editor.buffer == "ab"
