"""The SSH server answers an exec request before the command's output, exit status and close.

A paramiko client (netmiko, Ansible, the integration tests) that receives the channel's close before
the reply to its exec takes the channel as refused ("Channel closed"). The server's transport thread
sends that reply; a command runs in the channel's own thread. Here the reply is held back on purpose
(as a busy machine may hold the transport thread), so a server that started the command before its
reply left is caught every time, not once in many runs. Loopback TCP only, no root.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import paramiko
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from paramiko.common import cMSG_CHANNEL_SUCCESS

from lab_orchestrator.cli_ssh import server as sshserver
from lab_orchestrator.cli_ssh.listeners import Listeners, NodeListener
from lab_orchestrator.plan.sshconfig import Node, ServerConfig, User

REPLY_DELAY = 0.3  # the command below runs and closes in far less than this


def ed25519_key(path: Path) -> paramiko.Ed25519Key:
    private = Ed25519PrivateKey.generate()
    path.write_bytes(private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                           serialization.NoEncryption()))
    return paramiko.Ed25519Key(filename=str(path))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[paramiko.Transport, paramiko.Ed25519Key]]:
    """A connected client transport to the lab's server code serving one Junos-like node."""
    host_key, client_key = ed25519_key(tmp_path / "host"), ed25519_key(tmp_path / "client")
    user = User(name="admin", password=False, keys=(f"{client_key.get_name()} {client_key.get_base64()}",),
                klass="super-user")
    node = Node(name="mx1", kind="mx", vendor="junos", master_ns="none", mgmt_if="fxp0",
                mgmt_address="127.0.0.1/8", instances=(), birds=(), peers=(), ports=(), loopbacks={},
                config_file=str(tmp_path / "juniper.conf"), status_dir=str(tmp_path), host_key=str(tmp_path / "host"))
    config = ServerConfig(lab="t", state_dir=str(tmp_path), source="t.yml", port=22, load_balancing="ecmp",
                          use_case="sfw", users=(user,), lab_key=False, client_key=str(tmp_path / "id"),
                          known_hosts=str(tmp_path / "known_hosts"), nodes=(node,))
    server = sshserver.LabSshServer(config, Listeners(config))
    server.host_keys[node.name] = host_key
    server.passwords_hashed.set()
    listener = NodeListener(node, "127.0.0.1")

    with socket.create_server(("127.0.0.1", 0)) as lsock:
        client_sock = socket.create_connection(lsock.getsockname())
        conn, peer = lsock.accept()
    threading.Thread(target=server.connection, args=(listener, conn, peer), daemon=True).start()
    client = paramiko.Transport(client_sock)
    client.start_client(timeout=10)
    client.auth_publickey("admin", client_key)
    try:
        yield client, host_key
    finally:
        client.close()


@pytest.fixture
def slow_replies(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server's transport sends its reply to a channel request REPLY_DELAY late."""
    send = paramiko.Transport._send_user_message

    def late(self: paramiko.Transport, data: Any) -> None:
        if self.server_mode and bytes(data.asbytes()[:1]) == cMSG_CHANNEL_SUCCESS:
            time.sleep(REPLY_DELAY)
        send(self, data)

    monkeypatch.setattr(paramiko.Transport, "_send_user_message", late)


def run(client: paramiko.Transport, command: str) -> tuple[str, int]:
    chan = client.open_session(timeout=10)
    chan.exec_command(command)  # "Channel closed" here when the close came before the reply
    chan.shutdown_write()
    out = b""
    while data := chan.recv(65536):
        out += data
    return out.decode(), chan.recv_exit_status()


def test_an_exec_gets_its_reply_before_the_output_and_close(served: Any, slow_replies: None) -> None:
    client, _ = served
    for command in ("show version", "show nothing"):
        out, status = run(client, command)
        assert "mx1" in out if command == "show version" else "syntax error" in out, out
        assert status == (0 if command == "show version" else 1)
    assert client.is_active()


def test_a_shell_gets_its_reply_before_the_prompt(served: Any, slow_replies: None) -> None:
    client, _ = served
    chan = client.open_session(timeout=10)
    chan.get_pty(width=120)
    chan.invoke_shell()
    out = b""
    deadline = time.monotonic() + 5
    while b"admin@mx1> " not in out and time.monotonic() < deadline:
        out += chan.recv(4096)
    assert b"admin@mx1> " in out
    chan.close()


def test_many_commands_on_one_connection_without_delay(served: Any) -> None:
    client, _ = served
    outputs = [run(client, "show version") for _ in range(20)]
    assert {status for _, status in outputs} == {0}
    assert len({out for out, _ in outputs}) == 1


def test_a_channel_closed_before_any_request_frees_its_thread_at_once(
        served: tuple[paramiko.Transport, paramiko.Ed25519Key]) -> None:
    """A client that opens a session channel and closes it without asking for a shell or a command
    (or a reply the server could not send) must not leave the channel's thread waiting out its 30 s
    bound: it ends as soon as the channel is closed."""
    client, _ = served
    chan = client.open_session(timeout=10)

    def channel_threads() -> list[threading.Thread]:
        return [t for t in threading.enumerate() if t.name == "ssh-mx1-ch" and t.is_alive()]

    deadline = time.monotonic() + 5
    while not channel_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert channel_threads(), "the server started a thread for the channel"
    chan.close()
    deadline = time.monotonic() + 3
    while channel_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not channel_threads(), "the channel's thread still waits for a request after the close"
