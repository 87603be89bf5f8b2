"""Health-check responders of every SRX in one process: what the MX's TLB probes.

    python -m dataplane.daemons.responder /run/lab/LAB/responder.json

The JVD's TCP profile connects to port 8088, the SRX's web-management (J-Web over HTTP). One
process for the whole lab opens, in each SRX's namespace, a listening TCP socket per configured
port (8088 always; any port a lab's TCP or HTTP check names) and a UDP socket per UDP check port,
then serves them all from one select loop: a TCP connection is accepted and closed (an HTTP port
answers `HTTP/1.0 200 OK` first), a UDP datagram is echoed. A socket stays bound to the namespace it
was opened in, so one process serves every node (~13 MB in all, instead of a Python process per
SRX); it moves itself out of the node namespace it was started in, so that no SRX's power-off kills it.
ICMP needs no responder: the SRX's kernel answers echo requests.
"""

from __future__ import annotations

import contextlib
import select
import socket
import sys
from pathlib import Path

from labkit.configs import ResponderConfig
from labkit.contracts import RESPONDER_READY

from .daemonkit import StopFlag, exit_now

HTTP_OK = b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n"


def open_sockets(config: ResponderConfig) -> dict[socket.socket, tuple[str, str, int]]:
    """(kind, node, port) of each socket: kind tcp | http | udp."""
    from labkit import netnsutil

    out: dict[socket.socket, tuple[str, str, int]] = {}
    for node in config.nodes:
        with netnsutil.entered(node.ns):
            for kind, ports in (("tcp", node.tcp), ("http", node.http), ("udp", node.udp)):
                for port in ports:
                    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM if kind == "udp" else socket.SOCK_STREAM)
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                    sock.bind(("0.0.0.0", int(port)))
                    if kind != "udp":
                        sock.listen(64)
                    sock.setblocking(False)
                    out[sock] = (kind, node.name, int(port))
    return out


def serve_one(sock: socket.socket, kind: str) -> None:
    if kind == "udp":
        try:
            data, source = sock.recvfrom(2048)
            sock.sendto(data, source)
        except OSError:
            pass
        return
    try:
        conn, _ = sock.accept()
    except OSError:
        return
    try:
        if kind == "http":
            conn.settimeout(0.2)
            with contextlib.suppress(OSError):
                conn.recv(1024)
            conn.sendall(HTTP_OK)
    except OSError:
        pass
    finally:
        conn.close()


def leave_node_namespace() -> None:
    """Run in the namespace of the process that started us (the lab supervisor's), not in the SRX's."""
    from labkit import netnsutil

    netnsutil.enter_parent_namespace()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m dataplane.daemons.responder CONFIG.json", file=sys.stderr)
        return 2
    leave_node_namespace()
    ready_file = Path(argv[1]).parent / RESPONDER_READY
    ready_file.unlink(missing_ok=True)  # a restarted responder: not listening yet
    config = ResponderConfig.read(argv[1])
    sockets = open_sockets(config)
    ready_file.write_text(f"{len(sockets)} sockets\n")  # every socket listens: the TLB probes can pass
    summary = sorted({f"{kind}/{port}" for kind, _, port in sockets.values()})
    print(f"responder: {len(config.nodes)} SRX, {', '.join(summary)}", flush=True)
    stopping = StopFlag()
    wake = stopping.wakeup()
    while not stopping:
        try:
            ready, _, _ = select.select([*sockets, wake], [], [], 1.0)
        except InterruptedError:
            continue
        for sock in ready:
            if sock is not wake:
                serve_one(sock, sockets[sock][0])
    return 0


if __name__ == "__main__":
    exit_now(main(sys.argv))
