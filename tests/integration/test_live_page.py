"""The `lab web` page in headless Chromium against a made-up live state (no lab, no root): every node of
topology3 drawn and coloured, tables filled, and a pushed state (server-sent events) applied in place."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from headless import Chromium, chromium_problem

from lab_orchestrator.live import state as livestate
from lab_orchestrator.live import web as liveweb
from lab_orchestrator.model.validate import load_topology

REPO = Path(__file__).resolve().parents[2]
TOPOLOGY = load_topology(REPO / "labs" / "topology3.yml").topology


def raw_state(at: float, down: list[str], events: list[dict[str, Any]]) -> dict[str, Any]:
    """What livestate.collect would read from a running topology3, made up."""
    daemon = {"name": "bird", "running": True, "state": "running", "restarts": 0}
    nodes = [{"name": name, "kind": node.kind, "daemons": [] if name in down else [daemon],
              "bgp": [] if name in down else [{"info": "Established"}]} for name, node in TOPOLOGY.nodes.items()]
    members = [{"name": m, "alive": "srx2" not in down or m != "MNHA_SRX1", "buckets": 128,
                "counters": {"trust": {"packets": int(at * 1000)}}} for m in ("MNHA_SRX1", "MNHA_SRX3")]
    return {"at": at, "lab": "t3", "down_nodes": down, "down_links": [],
            "status": {"status": "ready", "ready": True, "problems": [], "nodes": nodes},
            "links": [["mx1", "srx2", "trust"], ["mx1", "srx1", "trust"]],
            "redundancy": {"mnha": {"srx1": {"srg1": {"role": "active"}}, "srx2": {"srg1": {"role": "backup"}}},
                           "srd": {}},
            "selectors": {"mx1": {"mode": "tlb", "buckets": 256, "members": members}}, "hsrp": {}, "clb": {},
            "events": events}


class FakeLive(liveweb.Live):
    """liveweb.Live without a lab: the test pushes each state."""

    def __init__(self, state: dict[str, Any]):  # noqa: D107 - no lab to read
        self.state, self.history, self.version = state, [], 0
        self.changed = threading.Condition()
        self.stopping = threading.Event()

    def push(self, state: dict[str, Any]) -> None:
        with self.changed:
            self.state = state
            self.version += 1
            self.changed.notify_all()


@pytest.fixture
def page() -> Iterator[tuple[str, FakeLive]]:
    with serving(allow_actions=False) as served:
        yield served


@contextlib.contextmanager
def serving(allow_actions: bool) -> Iterator[tuple[str, FakeLive]]:
    reason = chromium_problem()
    if reason:
        pytest.skip(reason)
    first = livestate.picture(raw_state(10.0, [], []))
    live = FakeLive(first)
    server = ThreadingHTTPServer(("127.0.0.1", 0),
                                 liveweb.make_handler(live, liveweb.layout_of(TOPOLOGY), allow_actions))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/", live
    finally:
        live.stopping.set()
        with live.changed:
            live.changed.notify_all()
        server.shutdown()
        server.server_close()


STATE = "document.querySelector('g.node[data-node=\"{}\"]').dataset.state"


def test_page_draws_every_node_and_applies_pushed_states(page: tuple[str, FakeLive]) -> None:
    url, live = page
    with Chromium() as browser:
        browser.open(url)
        drawn, _ = browser.wait_for("Array.from(document.querySelectorAll('g.node[data-state]'))"
                                    ".map(g => g.dataset.node)", timeout=20)
        assert sorted(set(drawn)) == sorted(TOPOLOGY.nodes)
        assert browser.evaluate(STATE.format("srx2")) == "up"
        assert browser.evaluate("document.querySelector('g.node[data-node=\"srx1\"] text.role').textContent") \
            == "SRG1 active"
        assert browser.evaluate("document.querySelectorAll('#members tbody tr').length") == 2
        assert browser.evaluate("document.querySelectorAll('#events tbody tr').length") == 0
        assert browser.evaluate("document.querySelectorAll('button').length") == 0  # read-only page
        run = {"id": "1", "event": "srx-power-off", "target": "srx2", "started": 11.0, "finished": None,
               "verdict": "running", "detail": "under <traffic>"}
        live.push(livestate.picture(raw_state(11.0, ["srx2"], [run]), live.state))
        browser.wait_for(STATE.format("srx2") + " === 'failed'", timeout=10)
        assert browser.evaluate(STATE.format("srx1")) == "up"
        assert browser.evaluate("document.querySelectorAll('line.link.down').length") >= 1
        assert browser.evaluate("document.querySelector('#events tbody td.running').textContent") == "running"
        # the detail is text, not markup
        assert browser.evaluate("document.querySelector('#events tbody tr').lastElementChild.textContent") \
            == "under <traffic>"
        assert browser.evaluate("performance.getEntriesByType('navigation').length") == 1
        judged = {**run, "verdict": "passed", "finished": 14.0, "detail": "convergence 120 ms"}
        live.push(livestate.picture(raw_state(12.0, [], [judged]), live.state))
        browser.wait_for(STATE.format("srx2") + " === 'up'", timeout=10)
        browser.wait_for("document.querySelector('#events tbody td.passed') !== null", timeout=10)
        assert browser.evaluate("document.querySelectorAll('line.link.down').length") == 0


def test_page_with_actions_offers_them_per_node() -> None:
    with serving(allow_actions=True) as (url, _), Chromium() as browser:
        browser.open(url)
        browser.wait_for("document.querySelectorAll('#nodes tbody tr').length > 0", timeout=20)
        buttons = browser.evaluate("Object.fromEntries(Array.from(document.querySelectorAll('#nodes tbody tr'))"
                                   ".map(r => [r.id.slice(4), Array.from(r.querySelectorAll('button'))"
                                   ".map(b => b.textContent)]))")
        assert buttons["srx2"] == ["fail", "restore"] and buttons["mx1"] == ["fail", "restore"]
        assert buttons["client"] == [] and buttons["gw-trust"] == []


ATTACK = """<!doctype html><html><body><iframe name="sink"></iframe>
<form id="f" method="POST" action="TARGET/action" enctype="text/plain" target="sink">
<input name='{"action":"fail","node":"srx2","x":"' value='"}'></form>
<script>
const target = "TARGET", body = JSON.stringify({action: "fail", node: "srx2"}), results = {};
async function attempt(name, run) {
  try { const r = await run(); results[name] = r.type + " " + r.status; } catch (e) { results[name] = "blocked"; }
}
(async () => {
  await attempt("no-cors text/plain", () => fetch(target + "/action", {method: "POST", mode: "no-cors",
    headers: {"Content-Type": "text/plain"}, body}));
  await attempt("json with guessed token", () => fetch(target + "/action", {method: "POST",
    headers: {"Content-Type": "application/json", "X-Lab-Token": "guess"}, body}));
  await attempt("read state", () => fetch(target + "/state.json"));
  const frame = document.querySelector("iframe");
  await new Promise(done => { frame.onload = done; document.getElementById("f").submit(); });
  results["form"] = "submitted";
  window.done = results;
})();
</script></body></html>"""


def test_cross_origin_page_cannot_act_and_the_token_holding_page_can(monkeypatch: pytest.MonkeyPatch) -> None:
    """A page of another origin (another port of this machine: what a web site the operator visits
    could do) tries a no-cors text/plain POST, a JSON POST with a guessed token (the browser's preflight
    finds no CORS permission), a read of the state, and a text/plain form posted into a frame: the
    server refuses what reaches it and no action is done. The page opened with the token of the run acts."""
    reason = chromium_problem()
    if reason:
        pytest.skip(reason)
    acted: list[tuple[str, str]] = []
    monkeypatch.setattr(livestate, "act", lambda lab, action, node: acted.append((action, node)) or "done")
    token = liveweb.new_token()
    live = FakeLive(livestate.picture(raw_state(10.0, [], [])))
    live.lab = None  # type: ignore[assignment]  # livestate.act is replaced: no lab is needed
    refused: list[tuple[int, str, str | None]] = []
    base = liveweb.make_handler(live, liveweb.layout_of(TOPOLOGY), True, token)

    class Recording(base):  # type: ignore[valid-type, misc]
        def _refuse(self, why: liveweb.Refused) -> None:
            refused.append((why.code, self.command, self.headers.get("Origin")))
            super()._refuse(why)

    lab_server = ThreadingHTTPServer(("127.0.0.1", 0), Recording)
    target = f"http://127.0.0.1:{lab_server.server_address[1]}"
    attack = ATTACK.replace("TARGET", target).encode()

    class Hostile(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return

        def do_GET(self) -> None:  # noqa: N802
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(attack)))
            self.end_headers()
            self.wfile.write(attack)

    hostile = ThreadingHTTPServer(("127.0.0.1", 0), Hostile)
    servers = (lab_server, hostile)
    for server in servers:
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    try:
        with Chromium() as browser:
            browser.open(f"http://localhost:{hostile.server_address[1]}/")
            results, _ = browser.wait_for("window.done", timeout=20)
            assert results["json with guessed token"] == "blocked"  # no CORS answer to its preflight
            assert results["read state"] == "blocked"
            assert acted == []
            posts = [r for r in refused if r[1] == "POST"]
            assert posts and all(code == 403 and origin and "localhost" in origin for code, _, origin in posts), refused
            assert len(posts) == 2  # the no-cors fetch and the form reached the server, which refused both

            browser.open(f"{target}/?token={token}")
            browser.wait_for("document.querySelectorAll('#nodes tbody button.fail').length > 0", timeout=20)
            browser.evaluate("window.confirm = () => true; window.alert = m => { window.said = m; }; "
                             "document.querySelector('#row-srx2 button.fail').click(); true")
            said, _ = browser.wait_for("window.said", timeout=10)
            assert said == "done" and acted == [("fail", "srx2")]
    finally:
        live.stopping.set()
        with live.changed:
            live.changed.notify_all()
        for server in servers:
            server.shutdown()
            server.server_close()
