"""`lab web`: a local web page of a running lab, updated live (server-sent events), no network needed.

One page (templates/live.html: HTML, CSS and JavaScript in one file, nothing fetched from elsewhere) draws the
topology in the columns of `lab graph` (graph.layout) and colours it from the live state
(livestate.read, refreshed twice a second by one thread): nodes failed/degraded/drained/up, SRG and
SRD roles, HSRP states, links up or down, each selector member's bucket share and packets per second
with a sparkline. Endpoints: `/` the page, `/state.json` the live state, `/layout.json` the drawing,
`/events` the server-sent event stream; with --allow-actions also `POST /action` (fail, restore,
switchover). Bound to 127.0.0.1 unless told otherwise.

The server runs as root and can power nodes off, so it trusts no web page the operator happens to visit
(docs/security.md): every request's Host must name the served address (no DNS rebinding), an Origin, when
sent, must be the page's own; an action needs the run's secret token (printed in the URL `lab web` shows)
in an `X-Lab-Token` header, a JSON body (`application/json`, at most MAX_BODY bytes), and allow_actions.
Beyond loopback every request needs the token (`?token=` for the page, the state and the event stream).
The page carries a Content-Security-Policy: its own script and style only, nothing from elsewhere.
"""

from __future__ import annotations

import hmac
import ipaddress
import json
import secrets
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from ..kinds.host import KIND as _HOST
from ..kinds.ios_router import KIND as _IOS
from ..kinds.mx import KIND as _MX
from ..kinds.srx import KIND as _SRX
from . import state as livestate

MX, SRX, IOS, HOST = _MX.name, _SRX.name, _IOS.name, _HOST.name

if TYPE_CHECKING:
    from ..api import Lab
    from ..model.schema import Topology

REFRESH_S = 0.5
MAX_BODY = 4096  # bytes of an action's JSON body: {"action": ..., "node": ...} is far shorter
TOKEN_HEADER = "X-Lab-Token"
WILDCARDS = ("0.0.0.0", "::", "")


def new_token() -> str:
    """A secret for one run of `lab web` (192 random bits, URL-safe)."""
    return secrets.token_urlsafe(24)


def is_loopback(host: str) -> bool:
    """Whether HOST (an address or a name the server binds to) is this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _ip_literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


def host_allowed(header: str | None, bind: str, port: int) -> bool:
    """Whether a request's Host header names the served address (BIND:PORT). A loopback server answers
    to localhost and the loopback addresses; one bound to every address to any IP literal and to this
    machine's own names; otherwise to BIND itself. A name a web page's DNS points elsewhere
    (rebinding) matches none of these."""
    if not header:
        return False
    name, sep, tail = header.rpartition(":")
    if not sep or not tail.isdigit() or int(tail) != port or not name:
        return False
    name = name.lower()
    if name == bind.lower() or name.strip("[]") == bind.strip("[]").lower():
        return True
    if is_loopback(bind):
        return name == "localhost" or (_ip_literal(name) and ipaddress.ip_address(name.strip("[]")).is_loopback)
    if bind in WILDCARDS:
        return _ip_literal(name) or name in {socket.gethostname().lower(), socket.getfqdn().lower(), "localhost"}
    return False


def page_url(host: str, port: int, token: str) -> str:
    """The address `lab web` prints: with the token, as Jupyter does."""
    shown = socket.gethostname() if host in WILDCARDS else (f"[{host}]" if ":" in host else host)
    return f"http://{shown}:{port}/?token={token}"


def csp(nonce: str) -> str:
    """The page's Content-Security-Policy: its own inline script and style (by nonce), requests to itself."""
    return (f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; img-src 'self' data:; "
            "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


def page_text() -> str:
    """The page (HTML, CSS and JavaScript in one file shipped in the package: nothing from a CDN)."""
    from importlib import resources

    return (resources.files("lab_orchestrator") / "templates" / "live.html").read_text()


def drawing(lab: Lab) -> dict[str, Any]:
    """Where each node goes (graph.layout of the lab's topology; a grid by kind if it cannot be read)."""
    from ..model.validate import load_topology

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
    from ..report import graph

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


class Refused(Exception):
    """A request the server will not serve: its HTTP code and why."""

    def __init__(self, code: int, reason: str):
        super().__init__(reason)
        self.code = code


def make_handler(live: Live, layout: dict[str, Any], allow_actions: bool, token: str | None = None,
                 bind: str = "127.0.0.1") -> type[BaseHTTPRequestHandler]:
    """The request handler. TOKEN: this run's secret (a new one when None); BIND: the address served."""
    secret = token or new_token()
    open_reads = is_loopback(bind)  # on loopback the page and its state are readable without the token

    class Handler(BaseHTTPRequestHandler):
        server_version = "lab-web"

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
            return

        def _send(self, code: int, body: bytes, kind: str, headers: dict[str, str] | None = None) -> None:
            self.send_response(code)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Cache-Control", "no-store")
            self.send_header("X-Content-Type-Options", "nosniff")
            self.send_header("Referrer-Policy", "no-referrer")
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(body)

        def _refuse(self, refused: Refused) -> None:
            self.close_connection = True
            self._send(refused.code, json.dumps({"ok": False, "error": str(refused)}).encode(), "application/json")

        def _query_token(self) -> str:
            query = parse_qs(urlsplit(self.path).query)
            return (query.get("token") or [""])[0]

        def _check_origin(self) -> None:
            """Host names the served address; an Origin, when sent, is this page's own."""
            port = int(self.server.server_address[1])  # type: ignore[index]
            host = self.headers.get("Host")
            if not host_allowed(host, bind, port):
                raise Refused(403, f"Host {host!r} is not the address this server serves")
            origin = self.headers.get("Origin")
            if origin is not None and origin != f"http://{host}":
                raise Refused(403, f"requests from {origin} are refused: only the page of http://{host}/")

        def _check_token(self, given: str) -> None:
            if not given or not hmac.compare_digest(given.encode(), secret.encode()):
                raise Refused(403, "missing or wrong token: open the address `lab web` printed (…/?token=…)")

        def do_GET(self) -> None:  # noqa: N802 - http.server's naming
            path = urlsplit(self.path).path
            try:
                self._check_origin()
                if not open_reads:
                    self._check_token(self._query_token())
            except Refused as refused:
                self._refuse(refused)
                return
            if path == "/":
                nonce = secrets.token_urlsafe(16)
                page = (page_text().replace("__ACTIONS__", "true" if allow_actions else "false")
                        .replace("<script>", f'<script nonce="{nonce}">')
                        .replace("<style>", f'<style nonce="{nonce}">'))
                self._send(200, page.encode(), "text/html; charset=utf-8", {
                    "Content-Security-Policy": csp(nonce), "X-Frame-Options": "DENY"})
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

        def _body(self) -> Any:
            """The action's JSON body, checked: its type, its announced length (bounded), then JSON."""
            kind = (self.headers.get("Content-Type") or "").split(";")[0].strip().lower()
            if kind != "application/json":
                raise Refused(415, f"an action is a JSON body (Content-Type: application/json), not {kind or 'none'}")
            announced = self.headers.get("Content-Length")
            if announced is None:
                raise Refused(411, "an action needs a Content-Length")
            try:
                length = int(announced)
            except ValueError:
                raise Refused(400, f"Content-Length {announced!r} is not a number") from None
            if length < 0 or length > MAX_BODY:
                raise Refused(413, f"an action's body is at most {MAX_BODY} bytes, not {length}")
            try:
                request = json.loads(self.rfile.read(length))
            except ValueError as exc:
                raise Refused(400, f"the body is not JSON: {exc}") from None
            if not isinstance(request, dict) or not isinstance(request.get("action"), str) \
                    or not isinstance(request.get("node", ""), str):
                raise Refused(400, 'an action is {"action": "fail|restore|switchover", "node": NAME}')
            return request

        def do_POST(self) -> None:  # noqa: N802
            try:
                self._check_origin()
                if urlsplit(self.path).path != "/action" or not allow_actions:
                    raise Refused(403, "read-only: start `lab web --allow-actions` for actions")
                self._check_token(self.headers.get(TOKEN_HEADER, ""))
                request = self._body()
            except Refused as refused:
                self._refuse(refused)
                return
            try:
                done = livestate.act(live.lab, request["action"], request.get("node", ""))
                self._send(200, json.dumps({"ok": True, "done": done}).encode(), "application/json")
            except Exception as exc:  # noqa: BLE001 - said to the page, the server goes on
                self._send(400, json.dumps({"ok": False, "error": str(exc)}).encode(), "application/json")

    return Handler


def serve(lab: Lab, host: str = "127.0.0.1", port: int = 8040, allow_actions: bool = False,
          ready: threading.Event | None = None, token: str | None = None) -> None:
    live = Live(lab)
    server = ThreadingHTTPServer((host, port), make_handler(live, drawing(lab), allow_actions, token, host))
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
