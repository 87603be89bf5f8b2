"""The SSH CLI against hostile input: help and completion on very long lines, pastes, catastrophic
regular expressions, and bugs inside a session (answered with an error line, channel kept)."""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

import pytest
from test_cli_render import ios_snapshot, mx_snapshot
from test_cli_session import ADMIN, config_for

from lab_orchestrator.cli_ssh import gather, pipes, session
from lab_orchestrator.cli_ssh.parser import Pipe
from lab_orchestrator.cli_ssh.server import ChannelRequest, LabSshServer
from lab_orchestrator.cli_ssh.shell import MAX_LINE, LineEditor

FAST = 0.5  # seconds of CPU: every answer below costs less (CPU time, so a busy machine does not fail it)


@pytest.fixture
def mx(monkeypatch: pytest.MonkeyPatch) -> session.Session:
    snap = mx_snapshot()
    monkeypatch.setattr(gather, "snapshot", lambda config, node, needs: snap)
    return session.Session(config_for(snap.node), snap.node, ADMIN)


@pytest.fixture
def gw(monkeypatch: pytest.MonkeyPatch) -> session.Session:
    snap = ios_snapshot()
    monkeypatch.setattr(gather, "snapshot", lambda config, node, needs: snap)
    return session.Session(config_for(snap.node), snap.node, ADMIN)


def timed(call: Any, *args: Any) -> Any:
    # a collection of the test process's heap (thousands of tests in) is not the call's cost: none runs
    # during the call (a collection before each call instead made the fuzz test take 30 s in the suite)
    gc.disable()
    try:
        started = time.thread_time()
        value = call(*args)
        spent = time.thread_time() - started
    finally:
        gc.enable()
    assert spent < FAST, call
    return value


# ------------------------------------------------------------------------------------------ help, completion
@pytest.mark.parametrize("count", [1000, 1001, 2000])
def test_help_after_a_thousand_value_keywords(mx: session.Session, count: int) -> None:
    """The reproducer: `show route` then ~1,000 ` p` then ` ?` (was a RecursionError)."""
    line = "show route" + " p" * count
    text = timed(mx.help, line + " ")
    assert "Possible completions" in text or "No valid completions" in text
    assert timed(mx.run, line + " ?").status == 0
    timed(mx.complete, line + " ")
    timed(mx.complete, line + " pro")


def test_value_keyword_runs_alternate_keyword_and_value(mx: session.Session) -> None:
    # `protocol` asks for its value; `protocol protocol` has given it; a third asks again.
    assert "<protocol" in mx.help("show route protocol ") or "bgp" in mx.help("show route protocol ")
    assert "exact" in mx.help("show route protocol protocol ")
    assert mx.help("show route protocol protocol protocol ") == mx.help("show route protocol ")


def test_long_lines_are_refused_with_a_message(mx: session.Session, gw: session.Session) -> None:
    for cli in (mx, gw):
        result = timed(cli.run, "show " + "x" * (MAX_LINE + 10))
        assert result.status == 1 and "line too long" in result.text
        timed(cli.help, "show " + "x " * 5000)
        timed(cli.complete, "show " + "x " * 5000)


def test_a_bug_in_help_or_completion_is_one_error_line(mx: session.Session, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(line: str) -> Any:
        raise RecursionError("deep")

    monkeypatch.setattr(mx.grammar, "possible", broken)
    assert mx.help("show ") == "error: internal error (RecursionError)\n"
    assert mx.run("show ?").text == "error: internal error (RecursionError)\n"
    assert mx.complete("show ") == ("", "error: internal error (RecursionError)\n")


# ------------------------------------------------------------------------------------------ line editor
def test_paste_after_ctrl_a_echoes_linearly() -> None:
    """The reproducer: a 4 KiB paste at the start of a long line (was quadratic: seconds, megabytes)."""
    editor = LineEditor()
    editor.feed("x" * 3000)
    editor.feed("\x01")  # Ctrl-A
    started = time.thread_time()
    events = editor.feed("y" * 1000)
    assert time.thread_time() - started < FAST
    echoed = sum(len(e.text) for e in events if e.kind == "echo")
    assert echoed <= 1000 + 2 * 3000  # the paste, the rest of the line redrawn, the cursor back
    assert editor.buffer == "y" * 1000 + "x" * 3000 and editor.cursor == 1000


def test_typing_key_by_key_at_the_start_of_a_full_line_stays_bounded() -> None:
    editor = LineEditor()
    editor.feed("x" * (MAX_LINE - 200))
    editor.feed("\x01")
    started = time.thread_time()
    total = 0
    for _ in range(200):
        total += sum(len(e.text) for e in editor.feed("y"))
    assert time.thread_time() - started < FAST and total <= 200 * (2 * MAX_LINE + 1)


def test_a_run_of_backspaces_in_the_middle_of_a_line_echoes_linearly() -> None:
    editor = LineEditor()
    editor.feed("a" * 2000 + "b" * 2000)
    editor.feed("\x1b[D" * 2000)  # Left x 2000: the cursor between the a's and the b's
    events = editor.feed("\x7f" * 1500)
    assert editor.buffer == "a" * 500 + "b" * 2000 and editor.cursor == 500
    assert sum(len(e.text) for e in events if e.kind == "echo") <= 3 * 1500 + 2 * 2000  # not 1500 x 2000


def test_a_huge_paste_is_cut_at_the_line_limit_with_one_notice() -> None:
    editor = LineEditor()
    started = time.thread_time()
    events = []
    for _ in range(256):  # 1 MiB, fed in 4 KiB reads like the server does
        events += editor.feed("z" * 4096)
    assert time.thread_time() - started < FAST
    assert len(editor.buffer) == MAX_LINE
    notices = [e for e in events if e.kind == "notice"]
    assert len(notices) == 1 and str(MAX_LINE) in notices[0].text
    assert sum(len(e.text) for e in events if e.kind == "echo") < 2 * MAX_LINE
    events = editor.feed("\r")
    assert [e.kind for e in events] == ["echo", "line"] and len(events[1].text) == MAX_LINE
    assert [e.kind for e in editor.feed("a" * (MAX_LINE + 1))].count("notice") == 1  # told again on a new line


def test_pasted_lines_run_one_by_one_and_history_is_bounded() -> None:
    editor = LineEditor()
    events = editor.feed("".join(f"show version {i}\r" for i in range(500)))
    assert [e.text for e in events if e.kind == "line"] == [f"show version {i}" for i in range(500)]
    assert len(editor.history) <= 200 and editor.history[-1] == "show version 499"


def test_question_mark_and_controls_inside_a_paste_keep_their_meaning() -> None:
    editor = LineEditor()
    events = editor.feed('show "a?b" ?')
    assert [e.kind for e in events] == ["echo", "help"] and events[1].text == 'show "a?b" '
    editor = LineEditor()
    editor.feed("abc\x7fd")
    assert editor.buffer == "abd"


# ------------------------------------------------------------------------------------------ pipes
BIG = pipes.Output("".join(f"ge-0/0/{i % 48}.0   up    up   inet     10.{i % 250}.0.1/31\n" for i in range(5000))
                   + "a" * 4000 + "\n")


@pytest.mark.parametrize("pattern", ["(.*)*X", "(a+)+$", "(a|aa)*c", "(x+x+)+y", "((a*)*)*b", "(.*a){20}"])
def test_catastrophic_patterns_are_linear(pattern: str) -> None:
    for name in ("match", "except", "find"):
        timed(pipes.apply_junos, BIG, [Pipe(name, [pattern], 0)])
    for name in ("include", "exclude", "begin", "section", "count"):
        timed(pipes.apply_ios, BIG, [Pipe(name, [], 0)], pattern)


def test_match_still_matches_case_insensitively_on_junos() -> None:
    out = pipes.apply_junos(BIG, [Pipe("match", ["GE-0/0/1\\.0"], 0)])
    assert out.text.count("\n") == len([i for i in range(5000) if i % 48 == 1])
    out = pipes.apply_ios(pipes.Output("Gi0/1 up\ngi0/2 down\n"), [Pipe("include", [], 0)], "Gi0")
    assert out.text == "Gi0/1 up\n"  # IOS: case-sensitive


def test_unsupported_and_oversized_patterns_are_errors() -> None:
    with pytest.raises(pipes.PipeError, match="backreferences"):
        pipes.apply_junos(BIG, [Pipe("match", ["(a)\\1"], 0)])
    with pytest.raises(pipes.PipeError, match="longer than"):
        pipes.apply_junos(BIG, [Pipe("match", ["a" * (pipes.MAX_PATTERN + 1)], 0)])


def test_hundreds_of_pipes_are_refused_at_once(mx: session.Session) -> None:
    result = timed(mx.run, "show interfaces terse" + "|m ." * 800)
    assert result.status == 1 and "too many pipes: 800, at most 16" in result.text
    assert mx.run("show interfaces terse" + " | match ." * pipes.MAX_PIPES).status == 0


def test_a_slow_pattern_in_one_session_does_not_stall_another(mx: session.Session) -> None:
    """The reproducer: `show interfaces terse | match "(.*)*X"` froze every other session."""
    done: list[float] = []

    def hostile() -> None:
        started = time.thread_time()
        for _ in range(20):
            mx.run('show interfaces terse | match "(.*)*X"')
        done.append(time.thread_time() - started)  # CPU: a busy machine's wait is not the pattern's cost

    thread = threading.Thread(target=hostile)
    thread.start()
    other = session.Session(mx.config, mx.node, ADMIN)
    assert timed(other.run, "show interfaces terse").status == 0
    thread.join(120)
    assert done and done[0] < 5 * FAST, f"20 runs of the pattern took {done} s of CPU"


# ------------------------------------------------------------------------------------------ the shell loop
class FakeChannel:
    """What run_shell needs of a paramiko channel: scripted input, captured output."""

    def __init__(self, chunks: list[bytes]):
        self.chunks = list(chunks)
        self.sent = bytearray()
        self.status: int | None = None

    def recv(self, size: int) -> bytes:
        assert size <= 65536
        return self.chunks.pop(0) if self.chunks else b""

    def sendall(self, data: bytes) -> None:
        self.sent += data

    def send_exit_status(self, status: int) -> None:
        self.status = status


def _shell(cli: session.Session, chunks: list[bytes]) -> str:
    chan = FakeChannel(chunks)
    started = time.process_time()
    LabSshServer(cli.config, None).run_shell(chan, cli, ChannelRequest(kind="shell", pty=True))  # type: ignore[arg-type]
    assert time.process_time() - started < 2 * FAST
    assert chan.status == 0  # ended by the user's end of input, not dropped
    return chan.sent.decode()


def test_shell_survives_every_reproducer(mx: session.Session) -> None:
    text = _shell(mx, [
        b"show route" + b" p" * 1000 + b" ?",
        b"\x15",  # Ctrl-U
        b'show interfaces terse | match "(.*)*X"\r',
        b"x" * 3000 + b"\x01" + b"y" * 4096,
        b"\x03",
        b"show version\r",
    ])
    assert "Possible completions" in text or "No valid completions" in text
    assert "line too long" in text and text.rstrip().endswith(mx.prompt.rstrip())
    assert "Traceback" not in text


def test_shell_answers_a_bug_with_an_error_line_and_goes_on(mx: session.Session,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    def broken(line: str) -> tuple[str, str]:
        calls.append(line)
        raise ValueError("boom")

    monkeypatch.setattr(mx, "complete", broken)
    text = _shell(mx, [b"show \t", b"\x15show version\r"])
    assert calls == ["show "] and "internal error (ValueError)" in text
    assert text.count(mx.prompt) >= 3  # banner prompt, after the error, after the command


# ------------------------------------------------------------------------------------------ fuzz
WORDS = ["show", "route", "protocol", "table", "p", "t", "exact", "interfaces", "terse", "|", "match", "count",
         "except", '"', "?", "bgp", "summary", "ip", "include", "10.0.0.0/8", "x" * 50, "display", "json"]


def test_fuzz_long_random_lines_never_raise_or_stall(mx: session.Session, gw: session.Session) -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=25, deadline=None)
    @given(st.lists(st.sampled_from(WORDS), min_size=1, max_size=1200), st.sampled_from(["mx", "gw"]))
    def check(words: list[str], which: str) -> None:
        cli = mx if which == "mx" else gw
        line = " ".join(words)
        for call in (cli.help, cli.complete, cli.run):
            result = timed(call, line)
            assert "internal error" not in str(result), (call, line[:200], result)

    check()


KEYS = ["a", "b", " ", "?", '"', "\x7f", "\b", "\x01", "\x05", "\x02", "\x06", "\x15", "\x0b", "\x17", "\x10",
        "\x0e", "\x0c", "\t", "\x03", "\x04", "\r", "\n", "\x1b[A", "\x1b[B", "\x1b[C", "\x1b[D", "\x1b[3~", "\x1b[H",
        "\x1b[F", "\x1b", "\x1b[9", "é", "x" * 700]


def test_fuzz_line_editor_keeps_its_bounds() -> None:
    from hypothesis import given, settings
    from hypothesis import strategies as st

    @settings(max_examples=100, deadline=None)
    @given(st.lists(st.lists(st.sampled_from(KEYS), max_size=60), max_size=12))
    def check(chunks: list[list[str]]) -> None:
        editor = LineEditor()
        for chunk in chunks:
            data = "".join(chunk)
            events = editor.feed(data)
            assert len(editor.buffer) <= MAX_LINE and 0 <= editor.cursor <= len(editor.buffer)
            echoed = sum(len(e.text) for e in events if e.kind == "echo")
            # one typed key inside a long line redraws the rest of it (as readline does): at most a line
            # and the way back per key; a paste (one long key) stays linear in its length
            keystrokes = sum(1 for key in chunk if len(key) == 1 and (key.isprintable() or key in "\x7f\b"))
            assert echoed <= 4 * (len(data) + MAX_LINE) + 4 * MAX_LINE * data.count("\x1b[3~") \
                + 2 * MAX_LINE * sum(data.count(k) for k in ("\x1b[A", "\x1b[B", "\x10", "\x0e", "\x1b[D", "\x1b[C")) \
                + (2 * MAX_LINE + 1) * keystrokes
            assert len(editor.history) <= 200

    check()
