"""`lab web`: a local web page of a running lab, updated live (server-sent events), no network needed.

One page (templates/live.html: HTML, CSS and JavaScript in one file, nothing fetched from elsewhere) draws the
topology in the columns of `lab graph` (graph.layout) and colours it from the live state
(livestate.read, refreshed twice a second by one thread): nodes failed/degraded/drained/up, SRG and
SRD roles, HSRP states, links up or down, each selector member's bucket share and packets per second
with a sparkline. Endpoints: `/` the page, `/state.json` the live state, `/layout.json` the drawing,
`/events` the server-sent event stream; with --allow-actions also `POST /action` (fail, restore,
switchover). Bound to 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from . import livestate
from .kinds.host import KIND as _HOST
from .kinds.ios_router import KIND as _IOS
from .kinds.mx import KIND as _MX
from .kinds.srx import KIND as _SRX

MX, SRX, IOS, HOST = _MX.name, _SRX.name, _IOS.name, _HOST.name

if TYPE_CHECKING:
    from .api import Lab
    from .model import Topology

REFRESH_S = 0.5


def page_text() -> str:
    """The page (HTML, CSS and JavaScript in one file shipped in the package: nothing from a CDN)."""
    from importlib import resources

    return (resources.files("lab_orchestrator") / "templates" / "live.html").read_text()


def drawing(lab: Lab) -> dict[str, Any]:
    """Where each node goes (graph.layout of the lab's topology; a grid by kind if it cannot be read)."""
    from .validate import load_topology

    try:
        topo = load_topology(lab.state.source).topology
    except Exception:  # noqa: BLE001 - the source file moved or changed: draw from the plan
        plan = lab.plan()
        order = {HOST: 0, IOS: 1, MX: 2, SRX: 3}
        nodes = [{"id": n.name, "node": n.name, "label": n.name, "column": order.get(n.kind, 4), "kind": n.kind}
                 for n in plan.nodes]
        edges = [{"a": v.a.node, "b": v.b.node, "zone": v.a.zone or ""} for v in plan.veths if v.a.node != v.b.node]
        return {"nodes": nodes, "edges": edges, "boxes": {}}
    return layout_of(topo)


def layout_of(topo: Topology) -> dict[str, Any]:
    """The page's drawing of a topology (pure): `lab graph`'s columns, edges and pair boxes."""
    from . import graph

    layout = graph.layout(topo)
    nodes = [{"id": ident, "node": ident.split("__")[0], "label": _short(label, kind), "column": column,
              "kind": kind} for ident, (label, column, kind) in layout.nodes.items()]
    edges = [{"a": a, "b": b, "zone": zone, "tip": tip} for a, b, zone, tip in layout.edges]
    return {"nodes": nodes, "edges": edges, "boxes": layout.boxes}


def _short(label: str, kind: str) -> str:
    """`lab graph`'s label on one line, without the kind (the page shows it as the node's tooltip)."""
    lines = label.split("\n")
    return " ".join(lines[:-1] if len(lines) > 1 and lines[-1] == kind else lines)


class Live:
    """The latest live state, refreshed by one thread; readers wait for the next one."""

    def __init__(self, lab: Lab):
        self.lab = lab
        self.state: dict[str, Any] = livestate.read(lab)
        self.history: list[dict[str, Any]] = []  # (at, pps per member) for the sparklines
        self.version = 0
        self.changed = threading.Condition()
        self.stopping = threading.Event()

    def run(self) -> None:
        ticker = livestate.Ticker(self.lab, REFRESH_S)
        while ticker.wait(self.stopping.wait):
            try:
                state = livestate.read(self.lab, self.state)
            except Exception as exc:  # noqa: BLE001 - the lab went down: say so on the page
                state = {**self.state, "status": f"unreadable ({type(exc).__name__}: {exc})", "ready": False}
            self.history = (self.history + [{"at": state["at"], "pps": {m["name"]: m["pps"]
                                                                         for m in state.get("members", [])}}])[-60:]
            with self.changed:
                self.state = {**state, "history": self.history}
                self.version += 1
                self.changed.notify_all()

    def wait(self, version: int, timeout: float = 5.0) -> tuple[int, dict[str, Any]]:
        with self.changed:
            self.changed.wait_for(lambda: self.version != version or self.stopping.is_set(), timeout)
            return self.version, self.state


def make_handler(live: Live, layout: dict[str, Any], allow_actions: bool) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "lab-web"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            return

        def _send(self, code: int, body: bytes, kind: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            path = self.path.split("?")[0]
            if path == "/":
                page = page_text().replace("__ACTIONS__", "true" if allow_actions else "false")
                self._send(200, page.encode(), "text/html; charset=utf-8")
            elif path == "/state.json":
                self._send(200, json.dumps(live.state).encode(), "application/json")
            elif path == "/layout.json":
                self._send(200, json.dumps(layout).encode(), "application/json")
            elif path == "/events":
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                version = -1
                try:
                    while not live.stopping.is_set():
                        version, state = live.wait(version)
                        self.wfile.write(b"data: " + json.dumps(state).encode() + b"\n\n")
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError):
                    return
            else:
                self._send(404, b"not found\n", "text/plain")

        def do_POST(self) -> None:  # noqa: N802
            if self.path != "/action" or not allow_actions:
                self._send(403, b"read-only: start `lab web --allow-actions` for actions\n", "text/plain")
                return
            length = int(self.headers.get("Content-Length") or 0)
            try:
                request = json.loads(self.rfile.read(length))
                done = livestate.act(live.lab, str(request["action"]), str(request.get("node", "")))
                self._send(200, json.dumps({"ok": True, "done": done}).encode(), "application/json")
            except Exception as exc:  # noqa: BLE001 - said to the page, the server goes on
                self._send(400, json.dumps({"ok": False, "error": str(exc)}).encode(), "application/json")

    return Handler


def serve(lab: Lab, host: str = "127.0.0.1", port: int = 8040, allow_actions: bool = False,
          ready: threading.Event | None = None) -> None:
    live = Live(lab)
    server = ThreadingHTTPServer((host, port), make_handler(live, drawing(lab), allow_actions))
    server.daemon_threads = True
    threading.Thread(target=live.run, name="live", daemon=True).start()
    if ready is not None:
        ready.set()
    try:
        server.serve_forever(poll_interval=0.2)
    finally:
        live.stopping.set()
        with live.changed:
            live.changed.notify_all()
        server.server_close()
