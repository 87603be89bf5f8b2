"""`lab web`'s guards, over a real loopback socket (no lab, no root): the token, the Host and Origin
checks, the content type and the bounded body of an action, and the page's Content-Security-Policy."""

from __future__ import annotations

import http.client
import json
import threading
from collections.abc import Iterator
from http.server import ThreadingHTTPServer

import pytest

from lab_orchestrator.live import state as livestate
from lab_orchestrator.live import web as liveweb

TOKEN = "s3cret-token-of-this-run"


class StillLive(liveweb.Live):
    """liveweb.Live without a lab: one fixed state."""

    def __init__(self) -> None:  # noqa: D107 - no lab to read
        self.lab = None  # type: ignore[assignment]
        self.state, self.history, self.version = {"lab": "t", "status": "ready", "nodes": []}, [], 0
        self.changed = threading.Condition()
        self.stopping = threading.Event()


@pytest.fixture
def acted(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    """The actions that reached the lab."""
    done: list[tuple[str, str]] = []

    def act(lab: object, action: str, node: str) -> str:
        done.append((action, node))
        return f"{action} {node}"

    monkeypatch.setattr(livestate, "act", act)
    return done


def start(bind: str = "127.0.0.1", allow_actions: bool = True) -> tuple[ThreadingHTTPServer, StillLive]:
    live = StillLive()
    server = ThreadingHTTPServer(("127.0.0.1", 0), liveweb.make_handler(live, {"nodes": []}, allow_actions,
                                                                         TOKEN, bind))
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    return server, live


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    served, live = start()
    yield served
    live.stopping.set()
    served.shutdown()
    served.server_close()


def request(server: ThreadingHTTPServer, method: str, path: str, body: bytes | None = None,
            headers: dict[str, str] | None = None, host: str | None = None) -> tuple[int, dict[str, str], bytes]:
    port = server.server_address[1]
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        conn.putheader("Host", host if host is not None else f"127.0.0.1:{port}")
        for name, value in (headers or {}).items():
            conn.putheader(name, value)
        if body is not None and "Content-Length" not in (headers or {}):
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders(body)
        answer = conn.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read()
    finally:
        conn.close()


def post(server: ThreadingHTTPServer, body: bytes = b'{"action": "fail", "node": "srx2"}',
         **headers: str) -> tuple[int, bytes]:
    sent = {"Content-Type": "application/json", "X-Lab-Token": TOKEN}
    sent.update({k.replace("_", "-"): v for k, v in headers.items()})
    code, _, answer = request(server, "POST", "/action", body, {k: v for k, v in sent.items() if v is not None})
    return code, answer


def test_action_with_token_json_and_own_origin_is_done(server: ThreadingHTTPServer, acted: list) -> None:
    port = server.server_address[1]
    code, answer = post(server, Origin=f"http://127.0.0.1:{port}")
    assert (code, json.loads(answer)) == (200, {"ok": True, "done": "fail srx2"})
    assert acted == [("fail", "srx2")]


@pytest.mark.parametrize("token", ["", "wrong", TOKEN[:-1], TOKEN + "x"])
def test_action_without_the_token_is_refused(server: ThreadingHTTPServer, acted: list, token: str) -> None:
    code, answer = post(server, X_Lab_Token=token)
    assert code == 403 and "token" in json.loads(answer)["error"]
    code, _, _ = request(server, "POST", f"/action?token={TOKEN}", b'{"action": "fail", "node": "srx2"}',
                         {"Content-Type": "application/json"})
    assert code == 403  # the token of an action travels in its header, never in a URL a form could post to
    assert acted == []


@pytest.mark.parametrize("kind", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; b=x", ""])
def test_action_of_another_content_type_is_refused(server: ThreadingHTTPServer, acted: list, kind: str) -> None:
    code, answer = post(server, Content_Type=kind)
    assert code == 415, answer
    assert acted == []


def test_oversized_or_unannounced_body_is_refused(server: ThreadingHTTPServer, acted: list) -> None:
    big = json.dumps({"action": "fail", "node": "srx2", "pad": "x" * liveweb.MAX_BODY}).encode()
    assert post(server, big)[0] == 413
    # the announced length is judged before anything is read: a huge one costs the server nothing
    assert post(server, b"{}", Content_Length=str(10**12))[0] == 413
    assert post(server, b"{}", Content_Length="-5")[0] == 413
    assert post(server, b"{}", Content_Length="twelve")[0] == 400
    assert post(server, b"not json")[0] == 400
    assert post(server, b'["fail", "srx2"]')[0] == 400
    assert acted == []
    assert post(server)[0] == 200  # the server goes on


def test_wrong_host_or_foreign_origin_is_refused(server: ThreadingHTTPServer, acted: list) -> None:
    port = server.server_address[1]
    body = b'{"action": "fail", "node": "srx2"}'
    headers = {"Content-Type": "application/json", "X-Lab-Token": TOKEN}
    for host in (f"attacker.example:{port}", f"127.0.0.1:{port + 1}", "127.0.0.1", ""):
        assert request(server, "POST", "/action", body, headers, host=host)[0] == 403, host
        assert request(server, "GET", "/state.json", host=host)[0] == 403, host  # DNS rebinding reads nothing
    for origin in ("http://attacker.example", f"http://localhost:{port + 1}", "null"):
        assert post(server, Origin=origin)[0] == 403, origin
    assert acted == []
    assert request(server, "GET", "/state.json", host=f"localhost:{port}")[0] == 200


def test_read_only_server_refuses_every_action(acted: list) -> None:
    served, live = start(allow_actions=False)
    try:
        code, _, answer = request(served, "POST", "/action", b'{"action": "fail", "node": "srx2"}',
                                  {"Content-Type": "application/json", "X-Lab-Token": TOKEN})
        assert code == 403 and b"read-only" in answer
    finally:
        live.stopping.set()
        served.shutdown()
        served.server_close()
    assert acted == []


def test_page_carries_a_content_security_policy(server: ThreadingHTTPServer) -> None:
    code, headers, page = request(server, "GET", "/")
    assert code == 200
    policy = headers["Content-Security-Policy"]
    assert "default-src 'none'" in policy and "frame-ancestors 'none'" in policy and "unsafe-inline" not in policy
    nonce = policy.split("'nonce-")[1].split("'")[0]
    assert f'<script nonce="{nonce}">'.encode() in page and f'<style nonce="{nonce}">'.encode() in page
    assert b"onclick" not in page  # no inline handler: the policy would block it
    assert request(server, "GET", "/")[1]["Content-Security-Policy"] != policy  # a new nonce per load


def test_beyond_loopback_reads_need_the_token_too() -> None:
    served, live = start(bind="0.0.0.0")
    try:
        port = served.server_address[1]
        host = f"192.0.2.7:{port}"  # an address of the machine, as a remote browser would name it
        for path in ("/", "/state.json", "/layout.json", "/events"):
            assert request(served, "GET", path, host=host)[0] == 403, path
            assert request(served, "GET", f"{path}?token=wrong", host=host)[0] == 403, path
        code, _, body = request(served, "GET", f"/state.json?token={TOKEN}", host=host)
        assert code == 200 and json.loads(body)["lab"] == "t"
        assert request(served, "GET", f"/state.json?token={TOKEN}", host=f"rebound.example:{port}")[0] == 403
    finally:
        live.stopping.set()
        served.shutdown()
        served.server_close()


def test_loopback_server_reads_without_the_token() -> None:
    served, live = start()
    try:
        assert request(served, "GET", "/state.json")[0] == 200
    finally:
        live.stopping.set()
        served.shutdown()
        served.server_close()


def test_host_and_url_helpers() -> None:
    assert liveweb.host_allowed("127.0.0.1:8040", "127.0.0.1", 8040)
    assert liveweb.host_allowed("localhost:8040", "127.0.0.1", 8040)
    assert liveweb.host_allowed("[::1]:8040", "127.0.0.1", 8040)
    assert not liveweb.host_allowed("localhost.attacker.example:8040", "127.0.0.1", 8040)
    assert not liveweb.host_allowed("10.0.0.1:8040", "127.0.0.1", 8040)
    assert liveweb.host_allowed("10.0.0.1:8040", "10.0.0.1", 8040)
    assert not liveweb.host_allowed("127.0.0.1:8040", "10.0.0.1", 8040)
    assert liveweb.host_allowed("10.0.0.1:8040", "0.0.0.0", 8040)
    assert not liveweb.host_allowed("evil.example:8040", "0.0.0.0", 8040)
    assert not liveweb.host_allowed(None, "127.0.0.1", 8040)
    assert liveweb.page_url("127.0.0.1", 8040, "abc") == "http://127.0.0.1:8040/?token=abc"
    assert liveweb.new_token() != liveweb.new_token() and len(liveweb.new_token()) >= 32


