"""A small client for BIRD's control socket (what birdc speaks), without spawning birdc."""

from __future__ import annotations

import socket
from dataclasses import dataclass


class BirdError(Exception):
    pass


@dataclass(frozen=True)
class Protocol:
    name: str
    proto: str
    table: str
    state: str
    since: str
    info: str


def command(sock_path: str, cmd: str, timeout: float = 2.0) -> list[str]:
    """Send one command; return the reply's text lines (codes stripped)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(timeout)
        try:
            sock.connect(sock_path)
        except OSError as exc:
            raise BirdError(f"cannot reach BIRD at {sock_path}: {exc.strerror}") from None
        reader = sock.makefile("r", encoding="utf-8", errors="replace")
        _read_reply(reader)  # greeting: 0001 BIRD x.y ready.
        sock.sendall(cmd.encode() + b"\n")
        return _read_reply(reader)


def _read_reply(reader: object) -> list[str]:
    lines: list[str] = []
    for raw in reader:  # type: ignore[attr-defined]
        line = raw.rstrip("\n")
        if len(line) >= 5 and line[:4].isdigit() and line[4] in " -":
            code, text = line[:4], line[5:]
            if code[0] in "89":
                raise BirdError(text)
            if line[4] == " ":
                if text:
                    lines.append(text)
                return lines
            lines.append(text)
        elif line.startswith(" "):
            lines.append(line[1:])
        else:
            lines.append(line)
    raise BirdError("BIRD closed the control connection")


def protocols(sock_path: str) -> list[Protocol]:
    out = []
    for line in command(sock_path, "show protocols"):
        parts = line.split(None, 5)
        if len(parts) < 5 or parts[0] == "Name":
            continue
        out.append(Protocol(parts[0], parts[1], parts[2], parts[3], parts[4], parts[5] if len(parts) > 5 else ""))
    return out
