"""`lab top`: a full-screen terminal view of a running lab, refreshed twice a second (rich Live).

Per node its state (up, failed, degraded, drained), BGP sessions, roles (SRG, SRD, HSRP, CLB) and
restarts; per selector member (an SRX or a TLB real-service) whether it is alive, its bucket share and
packets per second from the MX counters. Reads the lab through livestate (the Lab API). `q` quits.
Without a terminal (a pipe, a log) it prints one line per second instead.
"""

from __future__ import annotations

import contextlib
import select
import sys
import termios
import time
import tty
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from . import livestate
from .kinds.host import KIND as _HOST
from .kinds.ios_router import KIND as _IOS
from .kinds.mx import KIND as _MX
from .kinds.srx import KIND as _SRX

MX, SRX, IOS, HOST = _MX.name, _SRX.name, _IOS.name, _HOST.name

if TYPE_CHECKING:
    from .api import Lab

REFRESH_S = 0.5
STYLE = {"up": "green", "failed": "bold red", "degraded": "yellow", "drained": "cyan"}


def roles(node: dict[str, Any]) -> str:
    parts = [f"SRG1 {node['srg1']}" if node.get("srg1") else "", f"SRD {node['srd']}" if node.get("srd") else "",
             f"HSRP {node['hsrp']}" if node.get("hsrp") else "", f"CLB {node['clb']}" if node.get("clb") else "",
             str(node.get("mode") or "")]
    return ", ".join(p for p in parts if p)


def render(state: dict[str, Any]) -> Group:
    head = Text.assemble((f"lab {state['lab']} ", "bold"),
                         (state["status"], "green" if state["ready"] else "bold red"),
                         f"  {time.strftime('%H:%M:%S', time.localtime(state['at']))}  (q quits)")
    nodes = Table("node", "kind", "state", "BGP", "roles", "restarts", expand=True)
    for n in state["nodes"]:
        bgp = f"{n['bgp_established']}/{n['bgp_sessions']}" if n["bgp_sessions"] else "-"
        nodes.add_row(n["name"], n["kind"], Text(n["state"], STYLE.get(n["state"], "")), bgp, roles(n),
                      str(n["restarts"] or ""))
    members = Table("selector member", "alive", "share", "pps", expand=True)
    for m in state["members"]:
        members.add_row(m["name"], Text("yes", "green") if m["alive"] else Text("no", "bold red"),
                        f"{100 * m['share']:.1f} %", f"{m['pps']:.0f}")
    parts: list[Any] = [head]
    parts += [Text(f"not ready: {p}", "red") for p in state["problems"]]
    parts.append(nodes)
    if state["members"]:
        parts.append(members)
    return Group(*parts)


def line(state: dict[str, Any]) -> str:
    """The one-line form (no terminal): time, status, each node's state, each member's share and pps."""
    nodes = " ".join(f"{n['name']}={n['state']}" for n in state["nodes"] if n["kind"] in (MX, SRX, IOS))
    members = " ".join(f"{m['name']}:{100 * m['share']:.0f}%/{m['pps']:.0f}pps" for m in state["members"])
    stamp = time.strftime("%H:%M:%S", time.localtime(state["at"]))
    return f"{stamp} {state['lab']} {state['status']} {nodes} {members}"


@contextlib.contextmanager
def _keys() -> Iterator[None]:
    fd = sys.stdin.fileno()
    saved = termios.tcgetattr(fd)
    try:
        tty.setcbreak(fd)
        yield
    finally:
        termios.tcsetattr(fd, termios.TCSADRAIN, saved)


def _quit_pressed(timeout: float) -> bool:
    ready, _, _ = select.select([sys.stdin], [], [], timeout)
    return bool(ready) and sys.stdin.read(1) in ("q", "Q")


def run(lab: Lab, console: Console, iterations: int | None = None) -> None:
    state = livestate.read(lab)
    count = 0
    if not (console.is_terminal and sys.stdin.isatty()):
        while iterations is None or count < iterations:
            time.sleep(1.0)
            state = livestate.read(lab, state)
            sys.stdout.write(line(state) + "\n")
            sys.stdout.flush()
            count += 1
        return
    with _keys(), Live(render(state), console=console, screen=True, auto_refresh=False) as live:
        while iterations is None or count < iterations:
            if _quit_pressed(REFRESH_S):
                return
            state = livestate.read(lab, state)
            live.update(render(state), refresh=True)
            count += 1
