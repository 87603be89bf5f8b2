"""The lab-wide SSH server: one process, one listening socket per node inside that node's namespace.

    python -m lab_orchestrator.cli_ssh STATE_DIR/ssh/sshd.json      (see __main__: binds first)

Started by the lab's supervisor (a Process of the plan, lab_orchestrator.plan.sshplan). It moves itself to
the supervisor's network namespace (so no node's power-off, which kills what runs in that node's
namespaces, takes SSH down for the whole lab), binds one socket per node inside the node's namespace
(listeners.py), makes sure the host keys exist (keys.py), writes STATE_DIR/ssh/ready and serves.
Every 0.25 s the listeners are checked: a node whose namespace is gone or whose management interface
is down (powered off, rebooting) stops answering and its sessions end; it answers again once back.

Each connection is a paramiko Transport (its own thread); each channel runs in a thread: `exec`
runs one command and sends its exit status, `shell` runs the interactive CLI (line editing with a
pty). The transport stays open across channels, so one connection can run many commands.
"""

from __future__ import annotations

import codecs
import collections
import contextlib
import logging
import os
import selectors
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import paramiko
from paramiko.common import MSG_CHANNEL_REQUEST

from ..plan.sshconfig import ServerConfig, User, check_password, read_passwords
from . import keys
from .listeners import Listeners, NodeListener
from .session import Session
from .shell import Event, LineEditor

log = logging.getLogger("lab.sshd")
CHECK_INTERVAL = 0.25
READY_FILE = "ssh/ready"  # written once every listener is open and the keys and known_hosts exist
AUTH_FAILURE_DELAY = 0.3
SERVER_VERSION = "SSH-2.0-lab_orchestrator_cli"
# paramiko has no type hints: its constants, typed here once
AUTH_SUCCESSFUL: int = paramiko.AUTH_SUCCESSFUL
AUTH_FAILED: int = paramiko.AUTH_FAILED
OPEN_SUCCEEDED: int = paramiko.OPEN_SUCCEEDED
OPEN_PROHIBITED: int = paramiko.OPEN_FAILED_ADMINISTRATIVELY_PROHIBITED


@dataclass
class ChannelRequest:
    ready: threading.Event = field(default_factory=threading.Event)
    kind: str = ""  # exec | shell
    command: str = ""
    pty: bool = False


class Authenticator(paramiko.ServerInterface):  # type: ignore[misc]
    """Credentials and channel requests of one connection to one node."""

    def __init__(self, server: LabSshServer, listener: NodeListener, peer: str):
        self.server = server
        self.listener = listener
        self.peer = peer
        self.user: User | None = None
        self.requests: dict[int, ChannelRequest] = {}

    def request(self, chanid: int) -> ChannelRequest:
        """The requests of one channel. dict.setdefault is atomic: the transport thread (exec, pty) and
        the channel's own thread may ask first, and must get the same object."""
        return self.requests.setdefault(chanid, ChannelRequest())

    def get_allowed_auths(self, username: str) -> str:
        return "publickey,password"

    def check_auth_none(self, username: str) -> int:
        return AUTH_FAILED

    def check_auth_password(self, username: str, password: str) -> int:
        user = self.server.config.user(username)
        self.server.passwords_hashed.wait()
        stored = self.server.password_hashes.get(username, "")
        if user is not None and stored and check_password(stored, password):
            self.user = user
            log.info("%s: %s logged in from %s (password)", self.listener.node.name, username, self.peer)
            return AUTH_SUCCESSFUL
        log.info("%s: password refused for %r from %s", self.listener.node.name, username, self.peer)
        time.sleep(AUTH_FAILURE_DELAY)
        return AUTH_FAILED

    def check_auth_publickey(self, username: str, key: paramiko.PKey) -> int:
        user = self.server.config.user(username)
        if user is None:
            return AUTH_FAILED
        offered = f"{key.get_name()} {key.get_base64()}"
        allowed = set(user.keys)
        if username in self.server.lab_keys:  # the key the lab made for this user, and no other
            allowed.add(self.server.lab_keys[username])
        if offered in allowed:
            self.user = user
            return AUTH_SUCCESSFUL
        return AUTH_FAILED

    def check_channel_request(self, kind: str, chanid: int) -> int:
        if kind == "session":
            self.request(chanid)
            return OPEN_SUCCEEDED
        return OPEN_PROHIBITED

    def check_channel_pty_request(self, channel: paramiko.Channel, term: bytes, width: int, height: int,
                                  pixelwidth: int, pixelheight: int, modes: bytes) -> bool:
        self.request(channel.get_id()).pty = True
        return True

    def check_channel_window_change_request(self, channel: paramiko.Channel, width: int, height: int,
                                            pixelwidth: int, pixelheight: int) -> bool:
        return True

    def check_channel_shell_request(self, channel: paramiko.Channel) -> bool:
        self.request(channel.get_id()).kind = "shell"
        return True

    def check_channel_exec_request(self, channel: paramiko.Channel, command: bytes) -> bool:
        request = self.request(channel.get_id())
        request.kind = "exec"
        request.command = command.decode("utf-8", "replace")
        return True

    def answered(self, chanid: int) -> None:
        """A request of channel CHANID was handled and answered: once it was the shell or the command,
        the channel's thread may start (see LabTransport)."""
        request = self.requests.get(chanid)
        if request is not None and request.kind:
            request.ready.set()

    def check_channel_env_request(self, channel: paramiko.Channel, name: bytes, value: bytes) -> bool:
        return True  # accepted and ignored (OpenSSH sends LANG)

    def check_channel_subsystem_request(self, channel: paramiko.Channel, name: str) -> bool:
        return False

    def check_port_forward_request(self, address: str, port: int) -> int | bool:
        return False

    def check_channel_direct_tcpip_request(self, chanid: int, origin: tuple[str, int],
                                           destination: tuple[str, int]) -> int:
        return OPEN_PROHIBITED


class Terminal:
    """Reads and writes one channel: CRLF when a pty was requested, line events from the editor."""

    def __init__(self, chan: paramiko.Channel, pty: bool):
        self.chan = chan
        self.pty = pty
        self.editor = LineEditor()
        self.pending: collections.deque[Event] = collections.deque()
        self.decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")

    def write(self, text: str) -> None:
        if not text:
            return
        if self.pty:
            text = text.replace("\r\n", "\n").replace("\n", "\r\n")
        self.chan.sendall(text.encode("utf-8", "replace"))

    def echo(self, text: str) -> None:
        if self.pty and text:
            self.chan.sendall(text.encode("utf-8", "replace"))

    def next_event(self) -> Event:
        while not self.pending:
            data = self.chan.recv(4096)
            if not data:
                return Event("eof")
            self.pending.extend(self.editor.feed(self.decoder.decode(data)))
        return self.pending.popleft()

    def ask(self, prompt: str) -> str | None:
        """A line typed in answer to PROMPT (confirmations); None at end of input or Ctrl-C."""
        self.write(prompt)
        while True:
            event = self.next_event()
            if event.kind == "echo":
                self.echo(event.text)
            elif event.kind == "line":
                return event.text
            elif event.kind in ("eof", "interrupt"):
                return None


class QuickAckSocket:
    """The accepted socket, acknowledging at once before each read (TCP_QUICKACK).

    The OpenSSH client does not set TCP_NODELAY on a non-interactive session: when it writes two
    small packets in a row (the key exchange, the login), Nagle holds the second until the first is
    acknowledged, and Linux delays that acknowledgement by up to 40 ms. Acknowledging at once cut
    the connect + exec round trip from ~85 ms to ~25 ms here (docs/benchmarks-ssh.md)."""

    def __init__(self, sock: socket.socket):
        self._sock = sock

    def recv(self, size: int) -> bytes:
        with contextlib.suppress(OSError):
            self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
        return self._sock.recv(size)

    def __getattr__(self, name: str) -> object:
        return getattr(self._sock, name)


def _handle_request_then_start(chan: paramiko.Channel, message: paramiko.Message) -> None:
    """paramiko's handler of a channel request: it asks the Authenticator, then sends the reply the client
    asked for (want-reply). Only then may the channel's thread run the command. Started from inside the
    Authenticator's callback, the thread could send the output, the exit status and the channel's close
    before that reply left, and a paramiko client (netmiko, Ansible, the tests) takes a close that comes
    before the reply to its exec for a refused channel: "Channel closed"."""
    paramiko.Channel._handle_request(chan, message)
    server = chan.transport.server_object
    if isinstance(server, Authenticator):
        server.answered(chan.get_id())


class LabTransport(paramiko.Transport):  # type: ignore[misc]
    """A server transport whose channel requests start the channel's work after their reply."""

    _channel_handler_table = {**paramiko.Transport._channel_handler_table,
                              MSG_CHANNEL_REQUEST: _handle_request_then_start}


class LabSshServer:
    def __init__(self, config: ServerConfig, listeners: Listeners):
        self.config = config
        self.listeners = listeners
        self.stopping = False
        self.lab_keys: dict[str, str] = {}
        self.password_hashes: dict[str, str] = {}
        self.passwords_hashed = threading.Event()  # a password login waits for the hashes
        self.host_keys: dict[str, paramiko.PKey] = {}

    def prepare(self) -> None:
        """Host keys (made on the lab's first start, kept for its life), known_hosts, the users' keys,
        and each password hashed once (a random salt, PBKDF2_ITERATIONS rounds): only the hash is kept.
        The hashing (a third of a second of CPU per password) runs beside the serving, which is ready
        before it ends: a password login waits for it, a key login does not."""
        keys.prepare(self.config)
        self.lab_keys = keys.lab_client_keys(self.config)
        threading.Thread(target=self.hash_passwords, name="password-hashes", daemon=True).start()
        for node in self.config.nodes:
            self.host_keys[node.name] = paramiko.Ed25519Key(filename=node.host_key)
        ready = Path(self.config.state_dir) / READY_FILE
        ready.write_text(f"{os.getpid()}\n")  # written already by __main__ before paramiko loaded

    def hash_passwords(self) -> None:
        try:
            self.password_hashes = read_passwords(self.config)
        finally:
            self.passwords_hashed.set()

    def lab_gone(self) -> bool:
        return not (Path(self.config.state_dir) / "state.json").exists()

    # ------------------------------------------------------------------ serving
    def serve_forever(self) -> None:
        last_check = time.monotonic()
        while not self.stopping:
            for key, _ in self.listeners.selector.select(timeout=CHECK_INTERVAL):
                listener = key.data
                if listener is None:  # the signal wake-up: SIGTERM, stop at once
                    with contextlib.suppress(OSError):
                        key.fileobj.recv(64)  # type: ignore[union-attr]
                    continue
                assert isinstance(listener, NodeListener)
                try:
                    conn, peer = key.fileobj.accept()  # type: ignore[union-attr]
                except (BlockingIOError, InterruptedError):
                    continue
                except OSError as exc:
                    log.warning("%s: accept failed: %s", listener.node.name, exc)
                    continue
                if not listener.link_up():  # went down since the last check: do not answer
                    conn.close()
                    continue
                threading.Thread(target=self.connection, args=(listener, conn, peer),
                                 name=f"ssh-{listener.node.name}", daemon=True).start()
            if time.monotonic() - last_check >= CHECK_INTERVAL:
                last_check = time.monotonic()
                self.listeners.check()
                if self.lab_gone():
                    log.info("the lab's state is gone: exiting")
                    break
        self.listeners.close_all("server stopping")

    def connection(self, listener: NodeListener, conn: socket.socket, peer: tuple[str, int]) -> None:
        conn.setblocking(True)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        transport = LabTransport(QuickAckSocket(conn))
        transport.local_version = SERVER_VERSION
        transport.handshake_timeout = 15
        transport.auth_timeout = 30
        transport.banner_timeout = 15
        transport.add_server_key(self.host_keys[listener.node.name])
        auth = Authenticator(self, listener, f"{peer[0]}:{peer[1]}")
        listener.add(transport)
        try:
            transport.start_server(server=auth)
            while transport.is_active():
                chan = transport.accept(timeout=1.0)
                if chan is None:
                    continue
                threading.Thread(target=self.channel, args=(listener, auth, chan),
                                 name=f"ssh-{listener.node.name}-ch", daemon=True).start()
        except (paramiko.SSHException, EOFError, OSError) as exc:
            log.info("%s: connection from %s ended: %s", listener.node.name, auth.peer, exc)
        except Exception:  # noqa: BLE001 - a bug: logged, and only this connection ends
            log.exception("%s: connection from %s failed", listener.node.name, auth.peer)
        finally:
            listener.discard(transport)
            transport.close()

    def channel(self, listener: NodeListener, auth: Authenticator, chan: paramiko.Channel) -> None:
        request = auth.request(chan.get_id())
        try:
            if not self._wait_ready(chan, request) or auth.user is None:
                log.info("%s: channel %d from %s asked for neither a shell nor a command", listener.node.name,
                         chan.get_id(), auth.peer)
                return
            session = Session(self.config, listener.node, auth.user)
            if request.kind == "exec":
                self.run_exec(chan, session, request)
            else:
                self.run_shell(chan, session, request)
        except (OSError, EOFError, paramiko.SSHException) as exc:
            log.info("%s: channel closed: %s", listener.node.name, exc)
        except Exception:  # noqa: BLE001 - a bug: logged, and only this channel ends
            log.exception("%s: channel %d failed", listener.node.name, chan.get_id())
        finally:
            with contextlib.suppress(Exception):
                chan.close()
            auth.requests.pop(chan.get_id(), None)

    @staticmethod
    def _wait_ready(chan: paramiko.Channel, request: ChannelRequest, timeout: float = 30.0) -> bool:
        """Wait until the channel's shell or command request has been answered; give up at once when
        the channel or its connection closes first (a client that went away, or a reply that could
        not be sent), not only after TIMEOUT."""
        deadline = time.monotonic() + timeout
        while not request.ready.wait(0.2):
            if chan.closed or not chan.get_transport().is_active() or time.monotonic() >= deadline:
                return request.ready.is_set()
        return True

    def run_exec(self, chan: paramiko.Channel, session: Session, request: ChannelRequest) -> None:
        terminal = Terminal(chan, request.pty)
        log.info("%s: %s ran %r", session.node.name, session.user.name, request.command)
        result = session.run(request.command, ask=terminal.ask)
        terminal.write(result.text)
        chan.send_exit_status(result.status)

    def run_shell(self, chan: paramiko.Channel, session: Session, request: ChannelRequest) -> None:
        terminal = Terminal(chan, request.pty)
        prompt = session.prompt
        terminal.write(session.banner() + ("\n" if session.vendor == "junos" else "") + prompt)
        while True:
            event = terminal.next_event()
            try:
                if self.shell_event(chan, session, terminal, request, event):
                    return
            except (OSError, EOFError, paramiko.SSHException):
                raise  # the channel itself is gone
            except Exception as exc:  # noqa: BLE001 - a bug answers one error line; the session goes on
                log.exception("%s: %s: %s event failed", session.node.name, session.user.name, event.kind)
                terminal.write(f"\n{session.error_line(f'internal error ({type(exc).__name__})')}{prompt}")

    def shell_event(self, chan: paramiko.Channel, session: Session, terminal: Terminal, request: ChannelRequest,
                    event: Event) -> bool:
        """Carry out one event of the line editor; True when the session ends."""
        prompt = session.prompt
        editor = terminal.editor
        if event.kind == "echo":
            terminal.echo(event.text)
        elif event.kind == "line":
            if not request.pty:
                terminal.write("\n")
            if event.text.strip():
                log.info("%s: %s typed %r", session.node.name, session.user.name, event.text[:200])
            result = session.run(event.text, ask=terminal.ask, column=len(prompt))
            terminal.write(result.text)
            if result.exit:
                chan.send_exit_status(0)
                return True
            terminal.write(prompt)
        elif event.kind == "help":
            terminal.write(session.help(event.text) + prompt)
            terminal.echo(editor.buffer + "\b" * (len(editor.buffer) - editor.cursor))
        elif event.kind == "complete":
            insert, listing = session.complete(event.text)
            if insert:
                for echo in editor.insert(insert):
                    if echo.kind == "echo":
                        terminal.echo(echo.text)
            elif listing:
                terminal.write("\n" + listing + prompt)
                terminal.echo(editor.buffer + "\b" * (len(editor.buffer) - editor.cursor))
        elif event.kind == "interrupt":
            terminal.write(prompt)
        elif event.kind in ("redraw", "notice"):
            terminal.write("\n" + (session.error_line(event.text) if event.kind == "notice" else "") + prompt)
            terminal.echo(editor.buffer + "\b" * (len(editor.buffer) - editor.cursor))
        elif event.kind == "eof":
            chan.send_exit_status(0)
            return True
        return False


def serve(config: ServerConfig, listeners: Listeners) -> int:
    server = LabSshServer(config, listeners)
    server.prepare()

    def on_term(signum: int, frame: object) -> None:
        server.stopping = True

    signal.signal(signal.SIGTERM, on_term)
    signal.signal(signal.SIGINT, on_term)
    wake_r, wake_w = socket.socketpair()  # `lab down` waits for us: leave the select at once on SIGTERM
    wake_r.setblocking(False)
    wake_w.setblocking(False)
    signal.set_wakeup_fd(wake_w.fileno(), warn_on_full_buffer=False)
    listeners.selector.register(wake_r, selectors.EVENT_READ, None)
    log.info("lab %s: SSH for %d nodes on port %d", config.lab, len(config.nodes), config.port)
    try:
        server.serve_forever()
    finally:
        (Path(config.state_dir) / READY_FILE).unlink(missing_ok=True)
    return 0
