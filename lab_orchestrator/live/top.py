"""`lab top`: a full-screen terminal view of a running lab, refreshed twice a second (rich Live).

Per node its state (up, failed, degraded, drained), BGP sessions, roles (SRG, SRD, HSRP, CLB) and
restarts; per selector member (an SRX or a TLB real-service) whether it is alive, its bucket share and
packets per second from the MX counters. Reads the lab through livestate (the Lab API). `q` quits.
Without a terminal (a pipe, a log) it prints one line per second instead.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys
import termios
import threading
import time
import tty
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ..kinds.host import KIND as _HOST
from ..kinds.ios_router import KIND as _IOS
from ..kinds.mx import KIND as _MX
from ..kinds.srx import KIND as _SRX
from . import state as livestate

MX, SRX, IOS, HOST = _MX.name, _SRX.name, _IOS.name, _HOST.name

if TYPE_CHECKING:
    from ..api import Lab

REFRESH_S = 0.5
VERDICT_STYLE = {"passed": "green", "failed": "bold red", "error": "bold red", "running": "bold yellow"}
STYLE = {"up": "green", "failed": "bold red", "degraded": "yellow", "drained": "cyan"}


def render(state: dict[str, Any], prompt: str = "q quits") -> Group:
    head = Text.assemble((f"lab {state['lab']} ", "bold"),
                         (state["status"], "green" if state["ready"] else "bold red"),
                         f"  {time.strftime('%H:%M:%S', time.localtime(state['at']))}  ", (prompt, "bold cyan"))
    nodes = Table("node", "kind", "state", "BGP", "sessions", "roles", "restarts", expand=True)
    for n in state["nodes"]:
        bgp = f"{n['bgp_established']}/{n['bgp_sessions']}" if n["bgp_sessions"] else "-"
        nodes.add_row(n["name"], n["kind"], Text(n["state"], STYLE.get(n["state"], "")), bgp,
                      "" if n.get("sessions") is None else str(n["sessions"]), n.get("roles", ""),
                      str(n["restarts"] or ""))
    members = Table("selector member", "alive", "share", "pps", expand=True)
    for m in state["members"]:
        members.add_row(m["name"], Text("yes", "green") if m["alive"] else Text("no", "bold red"),
                        f"{100 * m['share']:.1f} %", f"{m['pps']:.0f}")
    events = Table("event", "target", "at", "verdict", "", expand=True)
    for e in state.get("events", []):
        at = time.strftime("%H:%M:%S", time.localtime(e["started"])) if e.get("started") else ""
        events.add_row(e["event"], e["target"], at, Text(e["verdict"], VERDICT_STYLE.get(e["verdict"], "")),
                       e.get("detail") or "")
    parts: list[Any] = [head]
    parts += [Text(f"not ready: {p}", "red") for p in state["problems"]]
    parts.append(nodes)
    if state["members"]:
        parts.append(members)
    if state.get("events"):
        parts.append(events)
    return Group(*parts)


def line(state: dict[str, Any]) -> str:
    """The one-line form (no terminal): time, status, each node's state, each member's share and pps."""
    nodes = " ".join(f"{n['name']}={n['state']}" for n in state["nodes"] if n["kind"] in (MX, SRX, IOS))
    members = " ".join(f"{m['name']}:{100 * m['share']:.0f}%/{m['pps']:.0f}pps" for m in state["members"])
    stamp = time.strftime("%H:%M:%S", time.localtime(state["at"]))
    return f"{stamp} {state['lab']} {state['status']} {nodes} {members}"


class Keys:
    """The keys of `lab top` (pure): `q` quits, `l` goes to the next running lab; `f` / `r` ask for a node
    name (typed, Enter), then for a confirmation (`y`), and only then hand out the action. Esc (or any key but
    `y` at the question) cancels."""

    def __init__(self, nodes: list[str]):
        self.nodes = nodes
        self.mode = ""  # "" | "fail" | "restore" (typing a node) | "confirm"
        self.action = ""
        self.typed = ""
        self.message = "f fail  r restore  l next lab  q quit"

    def feed(self, key: str) -> tuple[str, str] | None:
        """One key; returns ("quit", "") or (action, node) when confirmed, else None."""
        if self.mode == "":
            if key in ("q", "Q"):
                return ("quit", "")
            if key == "l":
                return ("next-lab", "")
            if key in ("f", "r"):
                self.mode = self.action = "fail" if key == "f" else "restore"
                self.typed = ""
            return None
        if key == "\x1b":  # Esc
            self.mode, self.message = "", "cancelled"
            return None
        if self.mode == "confirm":
            self.mode = ""
            if key in ("y", "Y"):
                self.message = f"{self.action} {self.typed}: running..."
                return (self.action, self.typed)
            self.message = "cancelled"
            return None
        if key in ("\r", "\n"):
            if self.typed in self.nodes:
                self.mode = "confirm"
            else:
                self.mode, self.message = "", f"no node {self.typed!r}"
        elif key in ("\x7f", "\b"):
            self.typed = self.typed[:-1]
        elif key == "\t":  # complete a unique prefix
            matches = [n for n in self.nodes if n.startswith(self.typed)]
            if len(matches) == 1:
                self.typed = matches[0]
        elif key.isprintable():
            self.typed += key
        return None

    def prompt(self) -> str:
        if self.mode in ("fail", "restore"):
            return f"{self.mode} which node? {self.typed}_  (Enter, Tab completes, Esc cancels)"
        if self.mode == "confirm":
            what = "power off" if self.action == "fail" else "restore"
            return f"{what} {self.typed}? y/N"
        return self.message


@contextlib.contextmanager
def _keys() -> Iterator[None]:
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _key(timeout: float) -> str | None:
    """One key pressed within TIMEOUT seconds (None: none)."""
    ready, _, _ = select.select([sys.stdin], [], [], timeout)
    if not ready:
        return None
    return os.read(sys.stdin.fileno(), 1).decode(errors="replace") or None


def run(lab: Lab, console: Console, iterations: int | None = None,
        labs: Callable[[], list[Lab]] | None = None) -> None:
    """The view of LAB until `q` (ITERATIONS reads at most); LABS lists the running labs for `l`."""
    state = livestate.read(lab)
    count = 0
    ticker = livestate.Ticker(lab, REFRESH_S)
    if not (console.is_terminal and sys.stdin.isatty()):
        ticker.period = 1.0

        def nap(seconds: float) -> bool:
            time.sleep(seconds)
            return False

        while (iterations is None or count < iterations) and ticker.wait(nap):
            state = livestate.read(lab, state)
            sys.stdout.write(line(state) + "\n")
            sys.stdout.flush()
            count += 1
        return
    screen = _Screen(lab, state, labs or (lambda: [lab]))
    with _keys(), Live(screen.render(), console=console, screen=True, auto_refresh=False) as live:
        screen.live = live
        while iterations is None or count < iterations:
            if not screen.ticker.wait(screen.stop):
                if screen.quit:
                    return
                screen.switch()
            screen.refresh()
            count += 1


class _Screen:
    """The full-screen view: one lab at a time, its keys, the results of actions done in the background."""

    def __init__(self, lab: Lab, state: dict[str, Any], labs: Callable[[], list[Lab]]):
        self.labs, self.lab, self.state = labs, lab, state
        self.ticker = livestate.Ticker(lab, REFRESH_S)
        self.keys = Keys([n["name"] for n in state["nodes"]])
        self.pending: list[str] = []
        self.quit = False
        self.live: Live | None = None

    def render(self) -> Group:
        return render(self.state, self.keys.prompt())

    def refresh(self) -> None:
        while self.pending:
            self.keys.message = self.pending.pop(0)
        self.state = livestate.read(self.lab, self.state)
        if self.live is not None:
            self.live.update(self.render(), refresh=True)

    def switch(self) -> None:
        """To the next running lab (in name order, around)."""
        names = sorted(((other.name, other) for other in self.labs()), key=lambda p: p[0])
        if not names:
            self.keys.message = "no lab is running"
            return
        later = [other for name, other in names if name > self.lab.name]
        self.lab = later[0] if later else names[0][1]
        self.state = livestate.read(self.lab)
        self.ticker = livestate.Ticker(self.lab, REFRESH_S)
        self.keys = Keys([n["name"] for n in self.state["nodes"]])
        self.keys.message = f"lab {self.lab.name} ({len(names)} running; l: next)"

    def perform(self, action: str, node: str) -> None:
        try:
            self.pending.append(f"{action} {node}: {livestate.act(self.lab, action, node)}")
        except Exception as exc:  # noqa: BLE001 - shown on the screen, the view goes on
            self.pending.append(f"{action} {node} failed: {exc}")

    def stop(self, timeout: float) -> bool:
        """Wait for a key up to TIMEOUT; True when the view stops waiting (quit, or another lab)."""
        key = _key(timeout)
        if key is None:
            return False
        chosen = self.keys.feed(key)
        if chosen == ("quit", ""):
            self.quit = True
            return True
        if chosen == ("next-lab", ""):
            return True
        if chosen is not None:
            threading.Thread(target=self.perform, args=chosen, daemon=True).start()
        if self.live is not None:
            self.live.update(self.render(), refresh=True)
        return False
