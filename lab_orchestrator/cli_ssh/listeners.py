"""The SSH server's listening sockets: one per node, inside the node's namespace, on its mgmt address.

Light on purpose (no paramiko): the server binds every listener first thing, so a client that
connects while the rest of the server is still loading waits in the listen backlog instead of
being refused.

A node answers only while its namespace is the one the socket was opened in and its management
interface is up with carrier. `check()` (called every 0.25 s) closes the listener and every session
of a node that is gone, powered off or rebooting, and opens it again once the node is back.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import selectors
import socket
import struct
import threading
from dataclasses import dataclass, field
from typing import Any

from labkit import netnsutil

from ..plan.sshconfig import Node, ServerConfig

log = logging.getLogger("lab.sshd")
SIOCGIFFLAGS = 0x8913
IFF_UP, IFF_RUNNING = 0x1, 0x40


def link_flags(sock: socket.socket, ifname: str) -> int | None:
    """IFF_* flags of IFNAME in the namespace SOCK belongs to; None if there is no such interface."""
    try:
        reply = fcntl.ioctl(sock.fileno(), SIOCGIFFLAGS, struct.pack("16sH14x", ifname.encode()[:15], 0))
    except OSError:
        return None
    return int(struct.unpack("16sH14x", reply)[1])


@dataclass
class NodeListener:
    node: Node
    address: str
    sock: socket.socket | None = None
    probe: socket.socket | None = None  # a UDP socket in the node's namespace, for link flags
    inode: int | None = None
    sessions: set[Any] = field(default_factory=set)  # what to close when the node goes away
    lock: threading.Lock = field(default_factory=threading.Lock)
    last_problem: str = ""

    def link_up(self) -> bool:
        if self.probe is None:
            return False
        flags = link_flags(self.probe, self.node.mgmt_if)
        return flags is not None and bool(flags & IFF_UP) and bool(flags & IFF_RUNNING)

    def add(self, session: Any) -> None:
        with self.lock:
            self.sessions.add(session)

    def discard(self, session: Any) -> None:
        with self.lock:
            self.sessions.discard(session)


class Listeners:
    def __init__(self, config: ServerConfig):
        self.config = config
        self.nodes = {n.name: NodeListener(n, n.mgmt_address.split("/")[0]) for n in config.nodes}
        self.selector = selectors.DefaultSelector()

    def open_all(self) -> None:
        for listener in self.nodes.values():
            self.open(listener)

    def open(self, listener: NodeListener) -> None:
        """Enter the node's namespace, open the sockets there, come back; on any failure, try later."""
        ns = listener.node.master_ns
        try:
            inode = netnsutil.inode(ns)
            with netnsutil.entered(ns):
                probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
                sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        except OSError as exc:
            self.problem(listener, f"namespace {ns} not available ({exc.strerror or exc})")
            return
        listener.probe, listener.inode = probe, inode
        if not listener.link_up():
            self.problem(listener, f"{listener.node.mgmt_if} is down")
            self._drop_sockets(listener, sock)
            return
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((listener.address, self.config.port))
            sock.listen(128)
            sock.setblocking(False)
        except OSError as exc:
            self._drop_sockets(listener, sock)
            reason = "address not configured yet" if exc.errno == errno.EADDRNOTAVAIL else exc.strerror
            self.problem(listener, f"cannot listen on {listener.address}:{self.config.port}: {reason}")
            return
        listener.sock = sock
        listener.last_problem = ""
        self.selector.register(sock, selectors.EVENT_READ, listener)
        log.info("%s: listening on %s:%d in %s", listener.node.name, listener.address, self.config.port, ns)

    def _drop_sockets(self, listener: NodeListener, sock: socket.socket) -> None:
        sock.close()
        if listener.probe is not None:
            listener.probe.close()
        listener.probe, listener.inode = None, None

    def problem(self, listener: NodeListener, text: str) -> None:
        if text != listener.last_problem:
            log.info("%s: not answering: %s", listener.node.name, text)
            listener.last_problem = text

    def close(self, listener: NodeListener, why: str) -> None:
        """Stop answering for this node and end every session on it."""
        if listener.sock is not None:
            with contextlib.suppress(KeyError, ValueError):
                self.selector.unregister(listener.sock)
            listener.sock.close()
            listener.sock = None
        if listener.probe is not None:
            listener.probe.close()
            listener.probe = None
        with listener.lock:
            sessions = list(listener.sessions)
            listener.sessions.clear()
        for session in sessions:
            with contextlib.suppress(Exception):
                session.close()
        listener.inode = None
        self.problem(listener, why)

    def close_all(self, why: str) -> None:
        for listener in self.nodes.values():
            self.close(listener, why)

    def check(self) -> None:
        """Close what belongs to nodes that are gone or down; open what came back."""
        for listener in self.nodes.values():
            ns = listener.node.master_ns
            if listener.sock is not None:
                try:
                    alive = netnsutil.inode(ns) == listener.inode
                except OSError:
                    alive = False
                if not alive:
                    self.close(listener, f"namespace {ns} is gone")
                elif not listener.link_up():
                    self.close(listener, f"{listener.node.mgmt_if} is down (node powered off?)")
            elif netnsutil.exists(ns):
                self.open(listener)


def leave_node_namespace() -> None:
    """Run in the network namespace of the process that started us (the lab supervisor's, the host's),
    not in the node's namespace the plan lists us in. Call before any thread exists."""
    if not netnsutil.enter_parent_namespace():
        log.warning("could not leave the node namespace this server was started in")
